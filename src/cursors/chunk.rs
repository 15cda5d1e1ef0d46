//! One chunk of [`super::position_counts::PositionCounts`]: up to [`CHUNK_MAX`] distinct positions in
//! increasing order with how many elements sit at each, in fixed-size arrays. The chunks of a
//! container then lie side by side in one allocation (reaching one is an index, not a pointer to
//! follow), splitting or emptying one allocates or frees nothing, and the counts are a contiguous
//! array that sums in a few vector instructions.

use super::position_key::PositionKey;

/// Distinct positions a chunk holds; a full chunk splits in two before it takes another. Big enough
/// that the chunk bases a move touches are few, small enough that shifting a chunk and summing its
/// counts stay in a few cache lines.
pub(super) const CHUNK_MAX: usize = 32;

#[derive(Debug, Clone)]
pub(super) struct Chunk {
    keys: [PositionKey; CHUNK_MAX],
    counts: [u32; CHUNK_MAX],
    len: u32,
    /// Where the chunk is in position order (its index in the container's per-rank arrays); kept
    /// by the container, read here with the keys to save a lookup.
    pub rank: u32,
}

impl Default for Chunk {
    fn default() -> Self {
        Chunk {
            keys: [PositionKey::default(); CHUNK_MAX],
            counts: [0; CHUNK_MAX],
            len: 0,
            rank: 0,
        }
    }
}

impl Chunk {
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len() == CHUNK_MAX
    }

    pub fn keys(&self) -> &[PositionKey] {
        &self.keys[..self.len()]
    }

    pub fn counts(&self) -> &[u32] {
        &self.counts[..self.len()]
    }

    /// The lowest key; the chunk must not be empty.
    pub fn first(&self) -> PositionKey {
        self.keys()[0]
    }

    /// Whether `p` lies between the chunk's lowest and highest keys (so that, keys being distinct
    /// across chunks, this is the only chunk that can hold it).
    pub fn spans(&self, p: PositionKey) -> bool {
        match self.keys() {
            [first, .., last] => *first <= p && p <= *last,
            [only] => *only == p,
            [] => false,
        }
    }

    /// Where `p` is (`Ok`) or would go (`Err`). Counts the keys below `p` rather than bisecting: the
    /// comparisons are independent, so they overlap, where each step of a binary search waits for the
    /// load of the last.
    pub fn search(&self, p: PositionKey) -> Result<usize, usize> {
        let i = self.keys().iter().map(|k| usize::from(*k < p)).sum();
        if self.keys().get(i) == Some(&p) {
            Ok(i)
        } else {
            Err(i)
        }
    }

    /// How many keys are <= `p`.
    pub fn rank_of(&self, p: PositionKey) -> usize {
        self.keys().iter().map(|k| usize::from(*k <= p)).sum()
    }

    /// The elements of entries `0..n`.
    pub fn sum_to(&self, n: usize) -> u32 {
        self.counts[..n].iter().sum()
    }

    pub fn sum(&self) -> u32 {
        self.sum_to(self.len())
    }

    pub fn count_mut(&mut self, i: usize) -> &mut u32 {
        &mut self.counts[..self.len as usize][i]
    }

    /// Inserts `p` with `count` at entry `i`; the chunk must not be full, `i` must keep the order.
    pub fn insert(&mut self, i: usize, p: PositionKey, count: u32) {
        let len = self.len();
        assert!(len < CHUNK_MAX && i <= len, "insert into a full chunk");
        self.keys.copy_within(i..len, i + 1);
        self.counts.copy_within(i..len, i + 1);
        self.keys[i] = p;
        self.counts[i] = count;
        self.len += 1;
    }

    /// Appends `p` with `count`; `p` must be above every key, the chunk not full.
    pub fn push(&mut self, p: PositionKey, count: u32) {
        self.insert(self.len(), p, count);
    }

    pub fn remove(&mut self, i: usize) {
        let len = self.len();
        self.keys.copy_within(i + 1..len, i);
        self.counts.copy_within(i + 1..len, i);
        self.len -= 1;
    }

    /// Entry `i` becomes `p` with a count of one, moved to where `p` belongs: `j` is the insertion
    /// point of `p` (absent) among the current keys. Shifts only the entries in between; returns
    /// `p`'s index.
    pub fn replace(&mut self, i: usize, j: usize, p: PositionKey) -> usize {
        let at = if j > i {
            self.keys.copy_within(i + 1..j, i);
            self.counts.copy_within(i + 1..j, i);
            j - 1
        } else {
            self.keys.copy_within(j..i, j + 1);
            self.counts.copy_within(j..i, j + 1);
            j
        };
        self.keys[at] = p;
        self.counts[at] = 1;
        at
    }

    /// Moves the upper half of the entries into a new chunk, returned.
    pub fn split_off(&mut self) -> Chunk {
        let half = self.len() / 2;
        let mut upper = Chunk::default();
        for i in half..self.len() {
            upper.push(self.keys[i], self.counts[i]);
        }
        self.len = half as u32;
        upper
    }
}
