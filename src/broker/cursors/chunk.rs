//! One chunk of [`super::position_counts::PositionCounts`]: up to [`CHUNK_MAX`] distinct positions in
//! increasing order with how many elements sit at each, in fixed-size arrays. The chunks of a
//! container then lie side by side in one allocation (reaching one is an index, not a pointer to
//! follow), and splitting or emptying one allocates or frees nothing.
//!
//! A chunk stores its positions as 32-bit offsets from a base key: a search compares the offsets of
//! all the slots at once (a few vector instructions, no branch, where a binary search over 128-bit
//! keys waits at each step for the last load), and shifting entries moves a quarter of the bytes. So
//! a chunk only holds positions less than 2^32 apart (entries of one ledger, in practice); the
//! container gives a position that does not fit a chunk of its own.

use super::position_key::PositionKey;

/// Distinct positions a chunk holds; a full chunk splits in two before it takes another. Big enough
/// that the chunk bases a move touches are few, small enough that shifting a chunk and summing its
/// counts stay in a few cache lines.
pub(super) const CHUNK_MAX: usize = 32;

/// The offset of a slot past the end: above every offset searched for, so that a search can count
/// over all the slots.
const UNUSED: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub(super) struct Chunk {
    /// <= every key held; keys are `base.plus(offsets[i])`.
    base: PositionKey,
    len: u32,
    /// Where the chunk is in position order (its index in the container's per-rank arrays); kept
    /// by the container, read here with the keys to save a lookup.
    pub rank: u32,
    /// Increasing; `UNUSED` from `len` on.
    offsets: [u32; CHUNK_MAX],
    /// 0 from `len` on.
    counts: [u32; CHUNK_MAX],
}

impl Default for Chunk {
    fn default() -> Self {
        Chunk {
            base: PositionKey::default(),
            len: 0,
            rank: 0,
            offsets: [UNUSED; CHUNK_MAX],
            counts: [0; CHUNK_MAX],
        }
    }
}

impl Chunk {
    /// A chunk holding `count` elements at `p`.
    pub fn with(p: PositionKey, count: u32) -> Self {
        let mut chunk = Chunk {
            base: p,
            ..Chunk::default()
        };
        chunk.push(p, count);
        chunk
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len() == CHUNK_MAX
    }

    pub fn key(&self, i: usize) -> PositionKey {
        self.base.plus(self.offsets[..self.len()][i])
    }

    pub fn counts(&self) -> &[u32] {
        &self.counts[..self.len()]
    }

    /// (key, count) of every entry, in order.
    pub fn entries(&self) -> impl Iterator<Item = (PositionKey, u32)> + '_ {
        (0..self.len()).map(|i| (self.key(i), self.counts[i]))
    }

    /// The lowest key; the chunk must not be empty.
    pub fn first(&self) -> PositionKey {
        self.key(0)
    }

    /// Whether entry `i` is `p`.
    pub fn is_at(&self, i: usize, p: PositionKey) -> bool {
        i < self.len() && p.offset_from(self.base) == Some(self.offsets[i])
    }

    /// Where `p` is (`Ok`) or would go (`Err`).
    pub fn search(&self, p: PositionKey) -> Result<usize, usize> {
        if p < self.base {
            return Err(0);
        }
        let Some(d) = p.offset_from(self.base) else {
            return Err(self.len());
        };
        // Over every slot, used or not (unused ones are never below `d`): a fixed count that the
        // compiler turns into vector compares.
        let i = self.offsets.iter().map(|&o| usize::from(o < d)).sum();
        if i < self.len() && self.offsets[i] == d {
            Ok(i)
        } else {
            Err(i)
        }
    }

    /// How many keys are <= `p`.
    pub fn rank_of(&self, p: PositionKey) -> usize {
        match self.search(p) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    /// The elements of entries `0..n`; `n` must be at most the length.
    #[inline]
    pub fn sum_to(&self, n: usize) -> u32 {
        debug_assert!(n <= self.len(), "sum of {n} entries of {}", self.len());
        // Over every slot, those from `n` on masked out: a fixed count of vector adds, where a
        // loop of `n` steps ends at a branch the processor mispredicts as often as `n` changes.
        // Signed 32-bit lanes (`n` <= CHUNK_MAX): the compare that SSE2 has.
        let n = n as i32;
        let mut lanes = [0u32; CHUNK_MAX];
        for (k, lane) in lanes.iter_mut().enumerate() {
            *lane = self.counts[k] & if (k as i32) < n { u32::MAX } else { 0 };
        }
        lanes.iter().fold(0, |sum, &c| sum.wrapping_add(c))
    }

    pub fn sum(&self) -> u32 {
        self.sum_to(self.len())
    }

    pub fn count_mut(&mut self, i: usize) -> &mut u32 {
        &mut self.counts[..self.len as usize][i]
    }

    /// Whether the keys with `p` among them would all be less than 2^32 apart.
    pub fn can_hold(&self, p: PositionKey) -> bool {
        if self.is_empty() {
            return true;
        }
        let (first, last) = (self.first(), self.key(self.len() - 1));
        p.max(last).offset_from(p.min(first)).is_some()
    }

    /// Inserts `p` with `count` at entry `i`; the chunk must not be full, `i` must keep the order and
    /// the chunk must hold `p` ([`Self::can_hold`]).
    pub fn insert(&mut self, i: usize, p: PositionKey, count: u32) {
        let len = self.len();
        assert!(len < CHUNK_MAX && i <= len, "insert into a full chunk");
        let d = match p.offset_from(self.base) {
            Some(d) => d,
            None => {
                self.rebase(if len == 0 { p } else { p.min(self.first()) });
                p.offset_from(self.base).expect("the chunk holds `p`")
            }
        };
        shift_up(&mut self.offsets, i, len);
        shift_up(&mut self.counts, i, len);
        self.offsets[i] = d;
        self.counts[i] = count;
        self.len += 1;
    }

    /// Makes `base` (<= every key, and less than 2^32 below the highest) the base.
    fn rebase(&mut self, base: PositionKey) {
        let old = self.base;
        for o in &mut self.offsets[..self.len as usize] {
            *o = old
                .plus(*o)
                .offset_from(base)
                .expect("the new base is in reach of every key");
        }
        self.base = base;
    }

    /// Appends `p` with `count`; `p` must be above every key, the chunk not full and able to hold `p`.
    pub fn push(&mut self, p: PositionKey, count: u32) {
        self.insert(self.len(), p, count);
    }

    /// Removes entry `i`, which must exist.
    pub fn remove(&mut self, i: usize) {
        let len = self.len();
        // The shift does not check its range as `copy_within` did.
        assert!(i < len, "remove entry {i} of {len}");
        shift_down(&mut self.offsets, i, len - 1);
        shift_down(&mut self.counts, i, len - 1);
        self.offsets[len - 1] = UNUSED;
        self.counts[len - 1] = 0;
        self.len -= 1;
    }

    /// Entry `i` (holding one element) becomes `p` where it is, if `p` lies between its neighbours
    /// and at or above the base; returns whether it did. Cursors mostly move a short way, past no
    /// other cursor, and this answers that case with two comparisons against the neighbours (whose
    /// branches the processor predicts), without a search of the chunk or a shift.
    pub fn move_in_place(&mut self, i: usize, p: PositionKey) -> bool {
        let Some(d) = p.offset_from(self.base) else {
            return false;
        };
        // The slot after the last is `UNUSED`, above any `d` but `UNUSED` itself (left to the
        // general path).
        let below_next = self.offsets.get(i + 1).is_none_or(|&o| d < o);
        let above_previous = i == 0 || self.offsets[i - 1] < d;
        if below_next && above_previous {
            self.offsets[i] = d;
            true
        } else {
            false
        }
    }

    /// Entry `i` becomes `p` with a count of one, moved to where `p` belongs: `j` is the insertion
    /// point of `p` (absent) among the current keys, and the chunk must hold `p`. Shifts only the
    /// entries in between; returns `p`'s index.
    pub fn replace(&mut self, i: usize, j: usize, p: PositionKey) -> Option<usize> {
        // A key below the base needs a rebase: left to the general path.
        let d = p.offset_from(self.base)?;
        let at = if j > i {
            shift_down(&mut self.offsets, i, j - 1);
            shift_down(&mut self.counts, i, j - 1);
            j - 1
        } else {
            shift_up(&mut self.offsets, j, i);
            shift_up(&mut self.counts, j, i);
            j
        };
        self.offsets[at] = d;
        self.counts[at] = 1;
        Some(at)
    }

    /// Moves entries `i..` into a new chunk, returned (based at its first key).
    pub fn split_off(&mut self, i: usize) -> Chunk {
        let mut upper = Chunk {
            base: self.key(i),
            ..Chunk::default()
        };
        for j in i..self.len() {
            upper.push(self.key(j), self.counts[j]);
            self.offsets[j] = UNUSED;
            self.counts[j] = 0;
        }
        self.len = i as u32;
        upper
    }

    /// Checks the slots against the length; for tests.
    pub fn check(&self) -> Result<(), String> {
        let (used, unused) = self.offsets.split_at(self.len());
        if used.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("offsets out of order: {used:?}"));
        }
        if unused.iter().any(|&o| o != UNUSED) || self.counts[self.len()..].iter().any(|&n| n != 0)
        {
            return Err("a slot past the end is in use".into());
        }
        Ok(())
    }
}

/// `a[from..to]` moves up one slot, to `a[from + 1..=to]`; `from <= to < CHUNK_MAX`. Every slot
/// is written (those outside the range with themselves), a fixed count of independent selects the
/// compiler vectorizes: a shift of a few slots through `copy_within` is a call into `memmove` that
/// costs more than the whole chunk in vector registers.
#[inline(always)]
fn shift_up(a: &mut [u32; CHUNK_MAX], from: usize, to: usize) {
    debug_assert!(from <= to && to < CHUNK_MAX, "shift up {from}..{to}");
    let old = *a;
    // Slot k takes its lower neighbour when k - from - 1 < to - from (wrapping: one compare).
    let (lo, n) = (from as u32 + 1, (to - from) as u32);
    for k in 1..CHUNK_MAX {
        let take = 0u32.wrapping_sub(u32::from((k as u32).wrapping_sub(lo) < n));
        a[k] = old[k] ^ ((old[k] ^ old[k - 1]) & take);
    }
}

/// `a[from + 1..=to]` moves down one slot, to `a[from..to]` (as [`shift_up`], branch-free);
/// `from <= to < CHUNK_MAX`.
#[inline(always)]
fn shift_down(a: &mut [u32; CHUNK_MAX], from: usize, to: usize) {
    debug_assert!(from <= to && to < CHUNK_MAX, "shift down {from}..{to}");
    let old = *a;
    let (lo, n) = (from as u32, (to - from) as u32);
    for k in 0..CHUNK_MAX - 1 {
        let take = 0u32.wrapping_sub(u32::from((k as u32).wrapping_sub(lo) < n));
        a[k] = old[k] ^ ((old[k] ^ old[k + 1]) & take);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::position::Position;

    fn key(e: i64) -> PositionKey {
        PositionKey::of(Position::new(0, e))
    }

    fn chunk(entries: &[i64]) -> Chunk {
        let mut c = Chunk::with(key(entries[0]), 1);
        for &e in &entries[1..] {
            c.push(key(e), 1);
        }
        c
    }

    /// The branch-free shifts and sum do what `copy_within` and a slice sum do, for every range.
    #[test]
    fn shifts_and_sums_are_the_slice_operations() {
        let values: [u32; CHUNK_MAX] = std::array::from_fn(|k| (k as u32 + 1) * 7919);
        for from in 0..CHUNK_MAX {
            for to in from..CHUNK_MAX {
                let (mut shifted, mut expected) = (values, values);
                shift_up(&mut shifted, from, to);
                expected.copy_within(from..to, from + 1);
                assert_eq!(shifted, expected, "up {from}..{to}");
                let (mut shifted, mut expected) = (values, values);
                shift_down(&mut shifted, from, to);
                expected.copy_within(from + 1..=to, from);
                assert_eq!(shifted, expected, "down {from}..{to}");
            }
        }
        let mut c = chunk(&(0..CHUNK_MAX as i64).collect::<Vec<_>>());
        c.counts = std::array::from_fn(|k| k as u32 + 1);
        for n in 0..=CHUNK_MAX {
            assert_eq!(c.sum_to(n), c.counts[..n].iter().sum::<u32>(), "sum to {n}");
        }
    }

    #[test]
    fn moves_in_place_only_between_its_neighbours() {
        let mut c = chunk(&[10, 20, 30]);
        // Onto a neighbour or past one: refused, the chunk unchanged.
        for (i, to) in [(1, 10), (1, 30), (1, 35), (0, 20), (2, 20)] {
            assert!(!c.move_in_place(i, key(to)), "{i} -> {to}");
            assert_eq!(
                c.entries().map(|e| e.0).collect::<Vec<_>>(),
                [key(10), key(20), key(30)]
            );
        }
        // Below the base: refused (the chunk would need a rebase).
        assert!(!c.move_in_place(0, key(5)));
        assert!(c.move_in_place(1, key(29)));
        assert!(c.move_in_place(0, key(11)));
        // The last entry may go anywhere above its neighbour that fits in an offset.
        assert!(c.move_in_place(2, key(10 + u32::MAX as i64 - 1)));
        assert!(!c.move_in_place(2, key(10 + u32::MAX as i64)));
        c.check().unwrap();
        assert_eq!(
            c.entries().map(|e| e.0).collect::<Vec<_>>(),
            [key(11), key(29), key(10 + u32::MAX as i64 - 1)]
        );
    }
}
