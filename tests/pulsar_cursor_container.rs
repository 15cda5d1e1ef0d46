//! Pulsar's cursor container as the lab runs it (`PulsarCursorList`), checked against the answers
//! of Pulsar's own `ActiveManagedCursorContainerImpl`, compiled and run on op sequences, and its
//! hash-map order against Java's `ConcurrentHashMap` (the fixtures in `tests/data/pulsar-container/`,
//! written by the programs in its `oracle/` directory); then properties no sequence may break.

use ledgercache::broker::cursors::java_hash_map::{java_string_hash, Flavor, JavaHashOrder};
use ledgercache::broker::cursors::pulsar_list::PulsarCursorList;
use ledgercache::Position;
use proptest::prelude::*;
use std::collections::HashMap;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "data",
        "pulsar-container",
        name,
    ]
    .iter()
    .collect();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fixture's lines that are ops: (line number, op words, the answer after `=>`).
fn ops(text: &str) -> impl Iterator<Item = (usize, Vec<&str>, Option<&str>)> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let (op, answer) = match line.split_once("=>") {
            Some((op, answer)) => (op, Some(answer.trim())),
            None => (line, None),
        };
        Some((i + 1, op.split_whitespace().collect(), answer))
    })
}

fn position(s: &str) -> Option<Position> {
    if s == "null" {
        return None;
    }
    let (l, e) = s.split_once(':').expect("a position is L:E");
    Some(Position::new(l.parse().unwrap(), e.parse().unwrap()))
}

fn show(p: Option<Position>) -> String {
    p.map_or("null".into(), |p| format!("{}:{}", p.ledger_id, p.entry_id))
}

/// Runs a container fixture; returns (queries, answers that differ from the exact count).
fn check_against_pulsar(name: &str) -> (usize, usize) {
    let text = fixture(name);
    let mut c = PulsarCursorList::new();
    let mut ids: HashMap<String, u32> = HashMap::new();
    // The exact counts, to see that the fixture reaches the defects.
    let mut at: HashMap<u32, Position> = HashMap::new();
    let (mut queries, mut wrong) = (0, 0);
    for (line, words, answer) in ops(&text) {
        let next = ids.len() as u32;
        let mut id = |n: &str| *ids.entry(n.to_string()).or_insert(next);
        let real = |s: &str| {
            position(s).unwrap_or_else(|| {
                panic!("{name}:{line}: the managed ledger never passes a null position")
            })
        };
        match words.as_slice() {
            ["add", n, p] => {
                let (cursor, p) = (id(n), real(p));
                c.add(cursor, java_string_hash(n), p);
                at.insert(cursor, p);
            }
            ["update", n, p] => {
                let (cursor, p) = (id(n), real(p));
                if c.update(cursor, p) {
                    at.insert(cursor, p);
                }
            }
            ["remove", n] => {
                let cursor = id(n);
                c.remove(cursor);
                at.remove(&cursor);
            }
            ["count", n] => {
                let cursor = id(n);
                let got = c.count_at_or_before(cursor);
                let want: i32 = answer.unwrap().parse().unwrap();
                assert_eq!(got, want, "{name}:{line}: count {n}");
                let exact = at
                    .get(&cursor)
                    .map_or(0, |p| at.values().filter(|q| *q <= p).count());
                queries += 1;
                wrong += usize::from(exact as i32 != got);
            }
            ["slowest"] => {
                assert_eq!(show(c.slowest_position()), answer.unwrap(), "{name}:{line}");
            }
            ["size"] => {
                assert_eq!(c.len().to_string(), answer.unwrap(), "{name}:{line}");
            }
            other => panic!("{name}:{line}: unknown op {other:?}"),
        }
    }
    (queries, wrong)
}

#[test]
fn small_sequences_with_many_ties_count_as_pulsars_class() {
    let (queries, wrong) = check_against_pulsar("random-small.txt");
    assert!(
        queries > 500 && wrong > 0,
        "{queries} queries, {wrong} wrong"
    );
}

#[test]
fn tailing_readers_count_as_pulsars_class() {
    let (queries, wrong) = check_against_pulsar("random-tailing.txt");
    assert!(
        queries > 500 && wrong > 0,
        "{queries} queries, {wrong} wrong"
    );
}

#[test]
fn many_cursors_across_ledgers_count_as_pulsars_class() {
    let (queries, wrong) = check_against_pulsar("random-large.txt");
    assert!(queries > 500, "{queries} queries, {wrong} wrong");
}

#[test]
fn the_hash_map_order_is_javas() {
    let text = fixture("chm-order.txt");
    let mut m = JavaHashOrder::new(Flavor::Concurrent);
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut names: Vec<String> = Vec::new();
    let mut orders = 0;
    for (line, words, answer) in ops(&text) {
        match words.as_slice() {
            ["put", k] => {
                let next = ids.len() as u32;
                let id = *ids.entry(k.to_string()).or_insert_with(|| {
                    names.push(k.to_string());
                    next
                });
                m.insert(id, java_string_hash(k));
            }
            ["remove", k] => {
                if let Some(&id) = ids.get(*k) {
                    m.remove(id);
                }
            }
            ["order"] => {
                let got: Vec<&str> = m.iter().map(|id| names[id as usize].as_str()).collect();
                let want: Vec<&str> = answer.unwrap_or("").split_whitespace().collect();
                assert_eq!(got, want, "chm-order.txt:{line}");
                orders += 1;
            }
            other => panic!("chm-order.txt:{line}: unknown op {other:?}"),
        }
    }
    assert!(orders > 20, "{orders} orders checked");
}

#[derive(Debug, Clone)]
enum Op {
    Add(u8, i64),
    Update(u8, i64),
    Remove(u8),
    Count(u8),
    Slowest,
}

fn op(names: u8, positions: i64) -> impl Strategy<Value = Op> {
    let name = 0u8..names;
    prop_oneof![
        3 => (name.clone(), 0..positions).prop_map(|(n, p)| Op::Add(n, p)),
        6 => (name.clone(), 0..positions).prop_map(|(n, p)| Op::Update(n, p)),
        2 => name.clone().prop_map(Op::Remove),
        4 => name.prop_map(Op::Count),
        1 => Just(Op::Slowest),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the sequence: no panic, the size and slowest position are right (a rebuild or a
    /// move never loses or misplaces a cursor, only its counter), memory follows the cursors and
    /// the moves still waiting, and a query right after a rebuild is exact.
    #[test]
    fn any_sequence_keeps_the_list_and_its_memory_in_bounds(
        ops in prop::collection::vec(op(10, 12), 1..400)
    ) {
        let mut c = PulsarCursorList::new();
        let mut model: HashMap<u8, i64> = HashMap::new();
        for op in ops {
            match op {
                Op::Add(n, p) => {
                    c.add(n.into(), i32::from(n) * 7919, Position::new(0, p));
                    model.insert(n, p);
                }
                Op::Update(n, p) => {
                    prop_assert_eq!(c.update(n.into(), Position::new(0, p)), model.contains_key(&n));
                    if let Some(at) = model.get_mut(&n) {
                        *at = p;
                    }
                }
                Op::Remove(n) => prop_assert_eq!(c.remove(n.into()), model.remove(&n).is_some()),
                Op::Count(n) => {
                    let rebuilds = c.next_query_rebuilds();
                    let got = c.count_at_or_before(n.into());
                    if let Some(p) = model.get(&n) {
                        let exact = model.values().filter(|q| *q <= p).count() as i32;
                        if rebuilds {
                            prop_assert_eq!(got, exact);
                        }
                    } else {
                        prop_assert_eq!(got, 0);
                    }
                }
                Op::Slowest => {
                    let want = model.values().min().map(|p| Position::new(0, *p));
                    prop_assert_eq!(c.slowest_position(), want);
                }
            }
            prop_assert_eq!(c.len(), model.len());
            prop_assert!(c.retained_nodes() <= model.len() + c.pending_len() + 10);
        }
    }
}
