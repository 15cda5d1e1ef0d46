//! Scenarios of Pulsar's `ActiveManagedCursorContainerTest` (ported in our own words), the two tail
//! moves Pulsar miscounts, and a model test against a plain sorted list.

use ledgercache::broker::cursors::active::ActiveCursorContainer;
use ledgercache::Position;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

type Container = ActiveCursorContainer<u32>;

fn p(l: i64, e: i64) -> Option<Position> {
    Some(Position::new(l, e))
}

/// Cursors 1..=n added in shuffled order at `position(i)`.
fn shuffled(n: u32, position: impl Fn(u32) -> Option<Position>, rng: &mut StdRng) -> Container {
    let mut ids: Vec<u32> = (1..=n).collect();
    ids.shuffle(rng);
    let mut c = Container::new();
    for i in ids {
        c.add(i, position(i));
    }
    c
}

/// ActiveManagedCursorContainerTest.testAddingInReverseOrder
#[test]
fn adding_in_reverse_order() {
    let mut c = Container::new();
    for i in (1..=3).rev() {
        c.add(i, p(0, i as i64));
    }
    for i in 1..=3 {
        assert_eq!(c.count_at_or_before(&i), i);
    }
}

/// ActiveManagedCursorContainerTest.testAddingMultipleWithSamePosition
#[test]
fn a_thousand_cursors_in_pairs() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut c = shuffled(1000, |i| p(0, (i / 2) as i64), &mut rng);
    for i in 1..=1000u32 {
        let expected = if i == 1 || i == 1000 {
            i
        } else {
            i + (i + 1) % 2
        };
        assert_eq!(c.count_at_or_before(&i), expected, "cursor {i}");
    }
    c.check_invariants().unwrap();
}

/// ActiveManagedCursorContainerTest.testCountNumberOfCursorsAtSamePositionOrBefore
#[test]
fn counts_after_a_seek() {
    let mut rng = StdRng::seed_from_u64(2);
    let mut c = shuffled(1000, |i| p(0, i as i64), &mut rng);
    for i in 1..=1000 {
        assert_eq!(c.count_at_or_before(&i), i);
    }
    c.update(&500, p(0, 1001));
    assert_eq!(c.count_at_or_before(&500), 1000);
    for i in (1..=1000).filter(|i| *i != 500) {
        assert_eq!(c.count_at_or_before(&i), if i < 500 { i } else { i - 1 });
    }
}

/// ActiveManagedCursorContainerTest.testCountNumberOfCursorsAtSamePositionOrBefore_SamePosition
#[test]
fn nine_hundred_ninety_six_cursors_at_one_position() {
    let mut c = Container::new();
    c.add(1, p(0, 1));
    c.add(2, p(0, 2));
    for i in 3..=998 {
        c.add(i, p(0, 3));
    }
    c.add(999, p(0, 4));
    c.add(1000, p(0, 5));
    assert_eq!(c.count_at_or_before(&4), 998);
    assert_eq!(c.count_at_or_before(&999), 999);
    assert_eq!(c.slowest_position(), p(0, 1));
}

/// ActiveManagedCursorContainerTest.testRandomSeekingForward
#[test]
fn ten_thousand_random_forward_seeks_checked_after_each() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut c = shuffled(1000, |i| p(0, i as i64), &mut rng);
    c.check_invariants().unwrap();
    for _ in 0..10_000 {
        let i = rng.random_range(1..1000);
        let cur = c.position_of(&i).unwrap();
        c.update(&i, p(0, cur.entry_id + rng.random_range(1..100)));
        c.check_invariants().unwrap();
    }
    for i in 1..=1000 {
        c.update(&i, p(0, i as i64));
        c.check_invariants().unwrap();
    }
    for i in 1..=1000 {
        assert_eq!(c.count_at_or_before(&i), i);
    }
}

/// ActiveManagedCursorContainerTest.testRandomSeeking
#[test]
fn random_seeks_both_ways_across_ledgers() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut c = shuffled(1000, |i| p(1, i as i64), &mut rng);
    for _ in 0..3_000 {
        let i = rng.random_range(1..1000);
        let cur = c.position_of(&i).unwrap();
        c.update(
            &i,
            p(1, (cur.entry_id + rng.random_range(1..100) - 25).max(1)),
        );
        c.check_invariants().unwrap();
    }
    for _ in 0..1_000 {
        let i = rng.random_range(1..1000);
        let back = c.position_of(&i);
        c.update(&i, p(0, 1));
        c.check_invariants().unwrap();
        c.update(&i, p(2, i64::MAX));
        c.check_invariants().unwrap();
        c.update(&i, back);
        c.check_invariants().unwrap();
    }
    for _ in 0..10 {
        for i in 1..=1000 {
            c.update(&i, p(0, rng.random_range(1..10)));
        }
        c.check_invariants().unwrap();
    }
    for i in 1..=1000 {
        c.update(&i, p(0, i as i64));
    }
    for i in 1..=1000 {
        assert_eq!(c.count_at_or_before(&i), i);
    }
}

/// ActiveManagedCursorContainerTest.testRandomSeekingWithLazyUpdates
#[test]
fn a_hundred_thousand_lazy_seeks_then_one_query() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut c = shuffled(1000, |i| p(0, i as i64), &mut rng);
    c.slowest_position();
    let mut model: Vec<i64> = (0..=1000).collect();
    for _ in 0..100_000 {
        let i = rng.random_range(1..=1000u32);
        model[i as usize] += rng.random_range(1..100);
        c.update(&i, p(0, model[i as usize]));
    }
    assert!(
        c.pending_len() <= 1000,
        "one pending change per cursor, not per seek"
    );
    for i in 1..=1000u32 {
        let expected = (1..=1000)
            .filter(|&j| model[j] <= model[i as usize])
            .count() as u32;
        assert_eq!(c.count_at_or_before(&i), expected);
    }
    c.check_invariants().unwrap();
}

#[derive(Debug, Clone)]
enum Op {
    Add(u8, Option<i64>),
    Update(u8, Option<i64>),
    Remove(u8),
    Count(u8),
    Slowest,
}

/// `names` cursors over `positions` positions: few of both make ties, tail moves and re-adds common;
/// many make the list span several blocks, so splits and walks across blocks happen.
fn op_with(names: u8, positions: i64) -> impl Strategy<Value = Op> {
    let name = 0u8..names;
    let pos = prop::option::weighted(0.85, 0i64..positions);
    prop_oneof![
        3 => (name.clone(), pos.clone()).prop_map(|(n, p)| Op::Add(n, p)),
        6 => (name.clone(), pos).prop_map(|(n, p)| Op::Update(n, p)),
        2 => name.clone().prop_map(Op::Remove),
        4 => name.prop_map(Op::Count),
        1 => Just(Op::Slowest),
    ]
}

fn check_against_model(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut c = ActiveCursorContainer::<u8>::new();
    let mut model: std::collections::BTreeMap<u8, Option<i64>> = Default::default();
    for op in ops {
        match op {
            // Before any query (changes not yet applied) and after one, a cursor's position is
            // its last move.
            Op::Add(n, e) => {
                c.add(n, e.map(|e| Position::new(0, e)));
                model.insert(n, e);
                prop_assert_eq!(c.position_of(&n), e.map(|e| Position::new(0, e)));
            }
            Op::Update(n, e) => {
                let known = model.contains_key(&n);
                prop_assert_eq!(c.update(&n, e.map(|e| Position::new(0, e))), known);
                if known {
                    model.insert(n, e);
                    prop_assert_eq!(c.position_of(&n), e.map(|e| Position::new(0, e)));
                }
            }
            Op::Remove(n) => {
                prop_assert_eq!(c.remove(&n), model.remove(&n).is_some());
                prop_assert_eq!(c.position_of(&n), None);
            }
            Op::Count(n) => {
                let expected = match model.get(&n) {
                    Some(Some(e)) => model.values().flatten().filter(|x| *x <= e).count() as u32,
                    _ => 0,
                };
                prop_assert_eq!(c.count_at_or_before(&n), expected);
                let last_move = model
                    .get(&n)
                    .copied()
                    .flatten()
                    .map(|e| Position::new(0, e));
                prop_assert_eq!(c.position_of(&n), last_move);
            }
            Op::Slowest => {
                let expected = model.values().flatten().min().map(|e| Position::new(0, *e));
                prop_assert_eq!(c.slowest_position(), expected);
            }
        }
        prop_assert_eq!(c.len(), model.len());
    }
    if let Err(e) = c.check_invariants() {
        prop_assert!(false, "{}", e);
    }
    // Slots held: live cursors plus at most one per cursor removed since the last flush.
    prop_assert!(c.retained_slots() <= model.len() + 256);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn matches_a_sorted_list_model(ops in prop::collection::vec(op_with(12, 15), 1..200)) {
        check_against_model(ops)?;
    }

    #[test]
    fn matches_a_sorted_list_model_across_blocks(ops in prop::collection::vec(op_with(120, 400), 1..1500)) {
        check_against_model(ops)?;
    }
}
