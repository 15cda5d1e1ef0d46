//! How a read that missed the cache uses the storage reads already under way on its ledger
//! (`PendingReadsManager.readEntries` / `findPendingRead`, the same in branch-4.0 and master), so
//! that concurrent readers of the same entries do not read them from storage twice.
//!
//! A read of `first..=last` waits for a read under way of exactly that range, else for the first
//! one (in the map's order) that includes it. Otherwise it takes one that overlaps it and reads the
//! rest of its range, left and right of that one, as reads of their own, each going through the
//! same rule; it prefers an overlap that leaves only a right remainder, then one that leaves only
//! a left one, then one that leaves both, and of several of one kind the last one found. A range
//! that overlaps nothing under way becomes a storage read, under way until it completes.
//!
//! Reads the rule creates never overlap one under way, so the reads under way on a ledger are
//! disjoint and the outcome does not depend on which of several candidates is taken: the read
//! waits for every read under way that shares an entry with it and reads each run of the rest
//! itself. Where they can overlap (the library's reads that complete at once join nothing that
//! completes later), the callers give the candidates in the order they were issued, for Java's
//! `ConcurrentHashMap` order of the `PendingReadKey` records.

/// A range of entry ids of one ledger, first and last included.
pub type EntryRange = (i64, i64);

/// What a read does about the storage reads under way on its ledger.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StorageReadPlan<K> {
    /// The reads under way it waits for, each with the part of its range that read serves.
    pub joined: Vec<(K, EntryRange)>,
    /// The ranges it reads from storage itself, in the order they are issued.
    pub issued: Vec<EntryRange>,
}

/// How a read of `wanted` is served, given the reads under way on its ledger (`under_way`: a key
/// naming each and its range, in the order they are looked at).
///
/// Work is O(n + m log m) for n reads under way of which m share entries with `wanted`, when
/// those m are disjoint (always, but for the library's reads that complete at once); else the
/// rule's own recursion, O(m²).
pub fn plan_storage_reads<K, I>(under_way: I, wanted: EntryRange) -> StorageReadPlan<K>
where
    K: Copy,
    I: IntoIterator<Item = (K, EntryRange)>,
{
    let meeting: Vec<(K, EntryRange)> = under_way
        .into_iter()
        .filter(|&(_, r)| r.0 <= wanted.1 && wanted.0 <= r.1)
        .collect();
    let disjoint_in_order = |v: &[(K, EntryRange)]| v.windows(2).all(|w| w[0].1 .1 < w[1].1 .0);
    // The lab gives them in order of their first entry already.
    if disjoint_in_order(&meeting) {
        return disjoint_plan(&meeting, wanted);
    }
    let mut by_start = meeting.clone();
    by_start.sort_by_key(|&(_, r)| r);
    if disjoint_in_order(&by_start) {
        disjoint_plan(&by_start, wanted)
    } else {
        recursive_plan(&meeting, wanted)
    }
}

/// What the rule's recursion comes to when the reads met are disjoint, whichever it takes first:
/// each remainder lies wholly left or right of the read taken, so every read met is joined for
/// its entries in `wanted`, and each run between them is a storage read of its own.
fn disjoint_plan<K: Copy>(by_start: &[(K, EntryRange)], wanted: EntryRange) -> StorageReadPlan<K> {
    let mut plan = StorageReadPlan {
        joined: Vec::with_capacity(by_start.len()),
        issued: Vec::new(),
    };
    let mut next = wanted.0;
    for &(k, r) in by_start {
        if r.0 > next {
            plan.issued.push((next, r.0 - 1));
        }
        plan.joined
            .push((k, (r.0.max(wanted.0), r.1.min(wanted.1))));
        match r.1.checked_add(1) {
            Some(after) => next = after,
            // It reaches the last id there is: nothing is left after it.
            None => return plan,
        }
    }
    if next <= wanted.1 {
        plan.issued.push((next, wanted.1));
    }
    plan
}

/// `readEntries` as Pulsar runs it: take the best candidate, then the remainders left and right of
/// it, each by the same rule.
fn recursive_plan<K: Copy>(meeting: &[(K, EntryRange)], wanted: EntryRange) -> StorageReadPlan<K> {
    let mut plan = StorageReadPlan {
        joined: Vec::new(),
        issued: Vec::new(),
    };
    // Pulsar reads the left remainder (and all it leads to) before the right one.
    let mut todo = vec![wanted];
    while let Some(key) = todo.pop() {
        match best_candidate(meeting, key) {
            None => plan.issued.push(key),
            Some(Candidate {
                key: joined,
                served,
                left,
                right,
            }) => {
                plan.joined.push((joined, served));
                todo.extend(right);
                todo.extend(left);
            }
        }
    }
    plan
}

struct Candidate<K> {
    key: K,
    served: EntryRange,
    left: Option<EntryRange>,
    right: Option<EntryRange>,
}

/// `findPendingRead`'s choice for `key`, or `None` when it creates a read of its own.
fn best_candidate<K: Copy>(under_way: &[(K, EntryRange)], key: EntryRange) -> Option<Candidate<K>> {
    #[cfg(test)]
    tests::LOOKED_AT.with(|n| n.set(n.get() + under_way.len()));
    let whole = |k| Candidate {
        key: k,
        served: key,
        left: None,
        right: None,
    };
    if let Some(&(k, _)) = under_way.iter().find(|&&(_, r)| r == key) {
        return Some(whole(k));
    }
    let (mut only_right, mut only_left, mut both) = (None, None, None);
    for &(k, r) in under_way {
        if r.0 <= key.0 && key.1 <= r.1 {
            return Some(whole(k));
        }
        let overlaps = (key.0 <= r.0 && r.0 <= key.1) || (key.0 <= r.1 && r.1 <= key.1);
        if !overlaps {
            continue;
        }
        // `PendingReadKey.reminderOnLeft` / `reminderOnRight`.
        let left = (r.0 <= key.1 && r.0 > key.0).then(|| (key.0, r.0 - 1));
        let right = (key.0 <= r.1 && r.1 < key.1).then(|| (r.1 + 1, key.1));
        let found = Candidate {
            key: k,
            served: (key.0.max(r.0), key.1.min(r.1)),
            left,
            right,
        };
        match (left, right) {
            (Some(_), Some(_)) => both = Some(found),
            (None, Some(_)) => only_right = Some(found),
            (Some(_), None) => only_left = Some(found),
            // Not reachable: a range overlapping `key` that leaves no remainder includes it.
            (None, None) => return Some(found),
        }
    }
    only_right.or(only_left).or(both)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Reads under way the recursion looked at, for the tests of the work a plan takes.
        pub(super) static LOOKED_AT: Cell<usize> = const { Cell::new(0) };
    }

    fn plan(under_way: &[EntryRange], wanted: EntryRange) -> StorageReadPlan<usize> {
        plan_storage_reads(under_way.iter().copied().enumerate(), wanted)
    }

    #[test]
    fn nothing_under_way_reads_the_whole_range() {
        let p = plan(&[(0, 9)], (20, 29));
        assert_eq!((p.joined, p.issued), (vec![], vec![(20, 29)]));
    }

    #[test]
    fn an_exact_or_including_read_is_joined_whole() {
        assert_eq!(plan(&[(0, 9), (5, 7)], (5, 7)).joined, vec![(1, (5, 7))]);
        let p = plan(&[(0, 3), (0, 9), (2, 8)], (2, 7));
        assert_eq!(p.joined, vec![(1, (2, 7))], "the first that includes it");
        assert!(p.issued.is_empty());
    }

    #[test]
    fn a_partial_overlap_is_joined_and_the_rest_read_apart() {
        // Under way 0..=9: a read of 5..=14 waits for 5..=9 and reads 10..=14.
        let p = plan(&[(0, 9)], (5, 14));
        assert_eq!((p.joined, p.issued), (vec![(0, (5, 9))], vec![(10, 14)]));
        // Of 0..=7 under way 5..=9: reads 0..=4.
        let p = plan(&[(5, 9)], (0, 7));
        assert_eq!((p.joined, p.issued), (vec![(0, (5, 7))], vec![(0, 4)]));
        // Inside: both sides, the left one first.
        let p = plan(&[(5, 9)], (0, 14));
        assert_eq!(
            (p.joined, p.issued),
            (vec![(0, (5, 9))], vec![(0, 4), (10, 14)])
        );
    }

    #[test]
    fn a_read_under_way_up_to_the_last_id_leaves_nothing_after_it() {
        let max = i64::MAX;
        let p = plan(&[(max - 1, max)], (max, max));
        assert_eq!((p.joined, p.issued), (vec![(0, (max, max))], vec![]));
        let p = plan(&[(max - 1, max)], (max - 5, max));
        assert_eq!(p.issued, vec![(max - 5, max - 2)]);
        let p = plan(&[(i64::MIN, i64::MIN + 2)], (i64::MIN, i64::MIN + 4));
        assert_eq!(p.issued, vec![(i64::MIN + 3, i64::MIN + 4)]);
    }

    #[test]
    fn the_rest_goes_through_the_rule_again() {
        let p = plan(&[(10, 19), (30, 39), (22, 24)], (15, 34));
        assert_eq!(p.issued, vec![(20, 21), (25, 29)]);
        let mut joined = p.joined.clone();
        joined.sort();
        assert_eq!(joined, vec![(0, (15, 19)), (1, (30, 34)), (2, (22, 24))]);
    }

    #[test]
    fn an_overlap_leaving_only_a_right_remainder_is_preferred_then_the_last_found() {
        let recursive = |under_way: &[EntryRange], wanted| {
            let keyed: Vec<(usize, EntryRange)> = under_way.iter().copied().enumerate().collect();
            recursive_plan(&keyed, wanted)
        };
        // 0..=9 leaves a right remainder, 12..=30 a left one, 11..=11 both.
        let p = recursive(&[(11, 11), (12, 30), (0, 9)], (5, 20));
        assert_eq!(p.joined[0], (2, (5, 9)));
        // Only a left one and both: the left one.
        let p = recursive(&[(8, 8), (12, 30)], (5, 20));
        assert_eq!(p.joined[0], (1, (12, 20)));
        // Two leaving a right remainder (these overlap each other): the last one found.
        let p = plan(&[(0, 9), (3, 12)], (5, 20));
        assert_eq!(p.joined[0], (1, (5, 12)));
        assert_eq!(p.issued, vec![(13, 20)]);
        let p = plan(&[(3, 12), (0, 9)], (5, 20));
        assert_eq!(p.joined, vec![(1, (5, 9)), (0, (10, 12))]);
    }

    #[test]
    fn work_is_bounded_by_the_reads_under_way() {
        // Every other entry under way: the rest is read entry by entry, without the recursion's
        // look at every read under way for each part.
        let under_way: Vec<EntryRange> = (0..20_000).map(|i| (2 * i, 2 * i)).collect();
        LOOKED_AT.with(|n| n.set(0));
        let p = plan(&under_way, (0, 39_999));
        assert_eq!(p.joined.len(), 20_000);
        assert_eq!(p.issued.len(), 20_000);
        assert!(p.issued.windows(2).all(|w| w[0].1 < w[1].0), "in order");
        assert_eq!(LOOKED_AT.with(Cell::get), 0);
        // Overlapping ones take the recursion, which looks only at those the read meets.
        let mut under_way = vec![(0, 9), (5, 14)];
        under_way.extend((0..1_000).map(|i| (100 + i, 100 + i)));
        LOOKED_AT.with(|n| n.set(0));
        let p = plan(&under_way, (3, 12));
        assert_eq!(p.joined.len(), 2);
        assert!(
            LOOKED_AT.with(Cell::get) <= 2 * 3,
            "{}",
            LOOKED_AT.with(Cell::get)
        );
    }

    fn covered(plan: &StorageReadPlan<usize>) -> Vec<EntryRange> {
        let mut parts: Vec<EntryRange> = plan.joined.iter().map(|&(_, r)| r).collect();
        parts.extend(&plan.issued);
        parts.sort();
        parts
    }

    proptest::proptest! {
        /// Whatever is under way: the parts a read waits for and the ones it reads tile its range.
        #[test]
        fn the_parts_tile_the_wanted_range(
            under_way in proptest::collection::vec((0i64..60, 0i64..12), 0..12),
            first in 0i64..60,
            len in 0i64..40,
            at_the_end in proptest::bool::ANY,
        ) {
            // Near the last id there is, or near 0.
            let shift = if at_the_end { i64::MAX - 70 } else { 0 };
            let under_way: Vec<EntryRange> =
                under_way.iter().map(|&(a, n)| (shift + a, shift + a + n)).collect();
            let wanted = (shift + first, (shift + first).saturating_add(len));
            let plan = plan(&under_way, wanted);
            let parts = covered(&plan);
            proptest::prop_assert_eq!(parts[0].0, wanted.0);
            proptest::prop_assert_eq!(parts[parts.len() - 1].1, wanted.1);
            for w in parts.windows(2) {
                proptest::prop_assert_eq!(w[0].1.checked_add(1), Some(w[1].0), "{:?}", parts);
            }
            for &(k, served) in &plan.joined {
                let r = under_way[k];
                proptest::prop_assert!(r.0 <= served.0 && served.1 <= r.1);
            }
        }

        /// Reads under way that do not overlap (all the rule makes): the read waits for each one
        /// sharing an entry with it, what it reads itself shares none with any, and the shortcut
        /// comes to what the rule's recursion does.
        #[test]
        fn with_disjoint_reads_under_way_it_joins_all_it_meets(
            starts in proptest::collection::btree_set(0i64..100, 0..10),
            first in 0i64..100,
            len in 0i64..50,
            at_the_end in proptest::bool::ANY,
        ) {
            // Near the last id there is (the last read may reach it), or near 0.
            let shift = if at_the_end { i64::MAX - 102 } else { 0 };
            let starts: Vec<i64> = starts.into_iter().map(|a| shift + a).collect();
            let under_way: Vec<EntryRange> = starts
                .iter()
                .enumerate()
                .map(|(i, &a)| (a, starts.get(i + 1).map_or(a + 3, |&b| (a + 3).min(b - 1))))
                .collect();
            let wanted = (shift + first, (shift + first).saturating_add(len));
            let plan = plan(&under_way, wanted);
            let meets = |r: &EntryRange| r.0 <= wanted.1 && wanted.0 <= r.1;
            let mut joined: Vec<usize> = plan.joined.iter().map(|&(k, _)| k).collect();
            joined.sort();
            let expected: Vec<usize> = (0..under_way.len()).filter(|&i| meets(&under_way[i])).collect();
            proptest::prop_assert_eq!(joined, expected);
            for issued in &plan.issued {
                proptest::prop_assert!(under_way.iter().all(|r| r.1 < issued.0 || issued.1 < r.0));
            }
            let keyed: Vec<(usize, EntryRange)> = under_way.iter().copied().enumerate().collect();
            let mut recursive = recursive_plan(&keyed, wanted);
            recursive.joined.sort();
            let mut shortcut = plan;
            shortcut.joined.sort();
            proptest::prop_assert_eq!(shortcut, recursive);
        }
    }
}
