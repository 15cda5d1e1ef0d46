//! Sorted map from positions to slot numbers, in chunks of 16 consecutive entry ids.
//!
//! Entries of a ledger are cached mostly in runs (publishes, read batches), so a chunk holds up to 16
//! neighbours: lookups and removals in a run hit the same chunk, which is remembered, and only a new
//! chunk costs a tree operation. This is what keeps map removal out of the eviction hot loop.

use crate::position::Position;
use std::cell::Cell;
use std::collections::BTreeMap;

const SHIFT: u32 = 4;
const LANES: usize = 1 << SHIFT;

type ChunkKey = (i64, i64);

#[derive(Clone, Copy)]
struct Chunk {
    slots: [u32; LANES],
    occupied: u16,
}

/// The end of the chunk free list.
const NO_CHUNK: u32 = u32::MAX;

/// Position -> slot number, ordered by position.
pub struct PositionIndex {
    chunks: Vec<Chunk>,
    /// Head of the list of unused chunks, threaded through their first lane, so that a sweep (which
    /// runs inside eviction passes) allocates nothing per chunk (only the few nodes of one tree
    /// split).
    free_chunk_head: u32,
    by_key: BTreeMap<ChunkKey, u32>,
    /// Chunks looked up lately, by the low bits of their key ([`recent_way`]): runs of
    /// neighbouring positions, and lookups that move among a few places (readers at different
    /// positions of a ledger, its tail where entries are added), skip the tree lookup.
    recent: [Cell<Option<(ChunkKey, u32)>>; RECENT],
    len: usize,
    /// Chunks left in the tree with no entries. Removing them one by one would put a tree removal
    /// in the eviction loop every 16 entries; they are swept in bulk instead (see `sweep`).
    empty_chunks: usize,
    /// Sweeps that walked the whole tree: tests check that eviction order needs none.
    #[cfg(test)]
    whole_tree_sweeps: usize,
}

impl Default for PositionIndex {
    fn default() -> Self {
        PositionIndex {
            chunks: Vec::new(),
            free_chunk_head: NO_CHUNK,
            by_key: BTreeMap::new(),
            recent: Default::default(),
            len: 0,
            empty_chunks: 0,
            #[cfg(test)]
            whole_tree_sweeps: 0,
        }
    }
}

/// Puts unused chunk `c` on the free list headed by `head`.
fn free_chunk(chunks: &mut [Chunk], head: &mut u32, c: u32) {
    chunks[c as usize].slots[0] = *head;
    *head = c;
}

/// Ways of the cache of recent chunks.
const RECENT: usize = 8;

/// The way of [`PositionIndex::recent`] that chunk `key` goes to: consecutive chunks of a ledger
/// go to different ones.
fn recent_way((ledger_id, chunk_no): ChunkKey) -> usize {
    (chunk_no ^ ledger_id) as usize & (RECENT - 1)
}

fn split(p: Position) -> (ChunkKey, usize) {
    (
        (p.ledger_id, p.entry_id >> SHIFT),
        (p.entry_id & (LANES as i64 - 1)) as usize,
    )
}

impl PositionIndex {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn chunk_of(&self, key: ChunkKey) -> Option<u32> {
        let way = &self.recent[recent_way(key)];
        if let Some((k, c)) = way.get() {
            if k == key {
                return Some(c);
            }
        }
        let c = *self.by_key.get(&key)?;
        way.set(Some((key, c)));
        Some(c)
    }

    /// Forgets the chunks looked up lately (their numbers may go to other keys).
    fn forget_recent(&self) {
        for way in &self.recent {
            way.set(None);
        }
    }

    /// The lane of `p` within its chunk (with the chunk, it is the position's place in the index).
    pub fn lane_of(p: Position) -> u8 {
        split(p).1 as u8
    }

    pub fn get(&self, p: Position) -> Option<u32> {
        let (key, lane) = split(p);
        let chunk = &self.chunks[self.chunk_of(key)? as usize];
        (chunk.occupied & (1 << lane) != 0).then(|| chunk.slots[lane])
    }

    /// Maps `p` to `slot`; returns the number of the chunk that holds it (with [`Self::lane_of`],
    /// where a removal finds it without a tree lookup), or `None` (and no change) if `p` is
    /// already present.
    pub fn insert(&mut self, p: Position, slot: u32) -> Option<u32> {
        let (key, lane) = split(p);
        let c = match self.chunk_of(key) {
            Some(c) => c,
            None => {
                let empty = Chunk {
                    slots: [0; LANES],
                    occupied: 0,
                };
                let c = match self.free_chunk_head {
                    NO_CHUNK => {
                        self.chunks.push(empty);
                        (self.chunks.len() - 1) as u32
                    }
                    c => {
                        self.free_chunk_head = self.chunks[c as usize].slots[0];
                        self.chunks[c as usize] = empty;
                        c
                    }
                };
                self.by_key.insert(key, c);
                self.recent[recent_way(key)].set(Some((key, c)));
                self.empty_chunks += 1;
                c
            }
        };
        let chunk = &mut self.chunks[c as usize];
        if chunk.occupied & (1 << lane) != 0 {
            return None;
        }
        if chunk.occupied == 0 {
            self.empty_chunks -= 1;
        }
        chunk.occupied |= 1 << lane;
        chunk.slots[lane] = slot;
        self.len += 1;
        Some(c)
    }

    pub fn remove(&mut self, p: Position) -> Option<u32> {
        let (key, lane) = split(p);
        let c = self.chunk_of(key)?;
        self.remove_lane(c, lane as u8)
    }

    /// Removes the position at `lane` of chunk `c` (as returned by `insert` and `lane_of`),
    /// skipping the tree lookup: what eviction does per entry, so it is inline and its rare
    /// part (a chunk left empty) is not.
    #[inline]
    pub(crate) fn remove_lane(&mut self, c: u32, lane: u8) -> Option<u32> {
        let lane = lane as usize;
        debug_assert!(
            lane < LANES,
            "lanes are the low {SHIFT} bits of an entry id"
        );
        let chunk = &mut self.chunks[c as usize];
        if chunk.occupied & (1 << lane) == 0 {
            return None;
        }
        chunk.occupied &= !(1 << lane);
        let slot = chunk.slots[lane];
        self.len -= 1;
        if chunk.occupied == 0 {
            self.chunk_emptied();
        }
        Some(slot)
    }

    /// Counts a chunk left with no entries, and sweeps if they are too many. Out of line: where
    /// entries are cached in runs (the common case) one removal in 16 comes here.
    #[cold]
    #[inline(never)]
    fn chunk_emptied(&mut self) {
        self.empty_chunks += 1;
        if self.too_many_empty() {
            self.sweep();
        }
    }

    /// Whether the empty chunks left in the tree are many enough to drop: more than 64, and more
    /// than half of it.
    fn too_many_empty(&self) -> bool {
        self.empty_chunks > 64 && self.empty_chunks > self.by_key.len() / 2
    }

    /// Drops empty chunks from the tree until no more than 64, or half of it, are left: those at
    /// its low end first, then, if the rest are still too many, all of them.
    fn sweep(&mut self) {
        self.drop_empty_front();
        if self.too_many_empty() {
            self.drop_all_empty();
        }
        self.forget_recent();
    }

    /// Drops the run of empty chunks at the low end of the tree, in time proportional to it (plus
    /// one split). Eviction empties a ledger from its oldest entries up, so that is where its
    /// empty chunks are; they go in one split, and the tree frees them a node at a time, where
    /// removing them one by one would rebalance it at each.
    fn drop_empty_front(&mut self) {
        let mut empty_front = 0;
        let mut first_occupied = None;
        for (&key, &c) in &self.by_key {
            if self.chunks[c as usize].occupied != 0 {
                first_occupied = Some(key);
                break;
            }
            empty_front += 1;
        }
        if empty_front == 0 {
            return;
        }
        let occupied = match first_occupied {
            Some(key) => self.by_key.split_off(&key),
            None => BTreeMap::new(),
        };
        for c in std::mem::replace(&mut self.by_key, occupied).into_values() {
            free_chunk(&mut self.chunks, &mut self.free_chunk_head, c);
        }
        self.empty_chunks -= empty_front;
    }

    /// Drops every empty chunk, in one walk over the whole tree.
    fn drop_all_empty(&mut self) {
        #[cfg(test)]
        {
            self.whole_tree_sweeps += 1;
        }
        let (chunks, head) = (&mut self.chunks, &mut self.free_chunk_head);
        self.by_key.retain(|_, &mut c| {
            let keep = chunks[c as usize].occupied != 0;
            if !keep {
                free_chunk(chunks, head, c);
            }
            keep
        });
        self.empty_chunks = 0;
    }

    /// Address of what removing from chunk `c` reads, for prefetching.
    pub fn chunk_addr(&self, c: u32) -> *const u8 {
        (self.chunks.as_ptr().wrapping_add(c as usize) as *const u8)
            .wrapping_add(std::mem::offset_of!(Chunk, occupied))
    }

    /// Present positions in `[first, last]`, in order, with their slots.
    pub fn range(&self, first: Position, last: Position) -> Vec<(Position, u32)> {
        let mut out = Vec::new();
        if first > last {
            return out;
        }
        let (lo, _) = split(first);
        let (hi, _) = split(last);
        for (&(ledger_id, chunk_no), &c) in self.by_key.range(lo..=hi) {
            let chunk = &self.chunks[c as usize];
            let mut bits = chunk.occupied;
            while bits != 0 {
                let lane = bits.trailing_zeros() as i64;
                bits &= bits - 1;
                let p = Position::new(ledger_id, (chunk_no << SHIFT) | lane);
                if p >= first && p <= last {
                    out.push((p, chunk.slots[lane as usize]));
                }
            }
        }
        out
    }

    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Bytes held by the index itself, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Chunk>()
            // a B-tree node holds up to 11 (key, value) pairs plus a header
            + self.by_key.len() * (std::mem::size_of::<(ChunkKey, u32)>() + 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap as Model;

    #[test]
    fn insert_get_remove_across_chunks_and_negative_ids() {
        let mut ix = PositionIndex::default();
        for e in -20..40 {
            assert!(ix.insert(Position::new(1, e), (e + 100) as u32).is_some());
        }
        assert!(ix.insert(Position::new(1, 3), 0).is_none());
        assert_eq!(ix.get(Position::new(1, -17)), Some(83));
        assert_eq!(ix.len(), 60);
        let r = ix.range(Position::new(1, -2), Position::new(1, 17));
        assert_eq!(r.len(), 20);
        assert_eq!(r[0].0, Position::new(1, -2));
        assert_eq!(ix.remove(Position::new(1, 0)), Some(100));
        assert_eq!(ix.remove(Position::new(1, 0)), None);
        assert!(ix
            .range(Position::new(2, 0), Position::new(1, 0))
            .is_empty());
    }

    /// Empty chunks left in the tree, counted by looking (not the index's own count).
    fn empty_in_tree(ix: &PositionIndex) -> usize {
        ix.by_key
            .values()
            .filter(|&&c| ix.chunks[c as usize].occupied == 0)
            .count()
    }

    /// Removes in `order`, checking what the sweeps keep whenever a removal empties a chunk (or
    /// sweeps): the count of empty chunks, and that no more than 64, or half of the tree, are
    /// empty. After a sweep, the position just removed goes back in and out again: its chunk may
    /// be on the free list now, and the index must not write into it.
    fn remove_all_checked(ix: &mut PositionIndex, model: &mut Model<Position, u32>, order: &[i64]) {
        for &e in order {
            let p = Position::new(1, e);
            let before = (ix.by_key.len(), ix.empty_chunks);
            let value = model.remove(&p);
            assert_eq!(ix.remove(p), value, "remove {e}");
            if (ix.by_key.len(), ix.empty_chunks) == before {
                continue;
            }
            let empty = empty_in_tree(ix);
            assert_eq!(empty, ix.empty_chunks, "after removing {e}");
            assert!(
                empty <= 64 || empty <= ix.by_key.len() / 2,
                "{empty} of {} chunks empty after removing {e}",
                ix.by_key.len()
            );
            if ix.by_key.len() < before.0 {
                let value = value.expect("present");
                assert!(ix.insert(p, value).is_some(), "re-insert {e}");
                assert_eq!(ix.range(p, p), [(p, value)], "re-inserted {e}");
                assert_eq!(ix.remove(p), Some(value), "remove {e} again");
            }
        }
        let all = ix.range(Position::new(1, i64::MIN), Position::new(1, i64::MAX));
        assert_eq!(all, model.iter().map(|(&p, &v)| (p, v)).collect::<Vec<_>>());
    }

    /// Eviction empties chunks from the lowest keys (the sweep cuts them off), with or without
    /// chunks emptied elsewhere before (it walks the tree for those only when they are too many);
    /// freed chunks are reused, so refilling takes no new ones.
    #[test]
    fn sweeps_keep_the_map_and_reuse_the_chunks_they_free() {
        const N: i64 = 16 * 1000;
        let evens_then_odds = |n: i64| (0..n).step_by(2).chain((1..n).step_by(2)).collect();
        let scattered_chunks_first = |n: i64| {
            let scattered = |e: &i64| (e >> SHIFT) % 7 == 3;
            let (first, rest): (Vec<i64>, Vec<i64>) = (0..n).partition(scattered);
            first.into_iter().chain(rest).collect()
        };
        // Each order, and whether its sweeps must get by without walking the whole tree. With 65
        // chunks, the first sweep comes when every chunk is empty.
        let orders: [(&str, Vec<i64>, bool); 6] = [
            ("front to back", (0..N).collect(), true),
            ("front to back, 65 chunks", (0..16 * 65).collect(), true),
            ("back to front", (0..N).rev().collect(), false),
            ("evens then odds", evens_then_odds(N), true),
            ("scattered chunks first", scattered_chunks_first(N), true),
            (
                "all but the lowest chunk first",
                (16..N).chain(0..16).collect(),
                false,
            ),
        ];
        for (name, order, no_whole_walk) in orders {
            let mut ix = PositionIndex::default();
            let mut model = Model::new();
            let n = order.len() as i64;
            for round in 0..2u32 {
                for e in 0..n {
                    assert!(ix.insert(Position::new(1, e), e as u32 ^ round).is_some());
                    model.insert(Position::new(1, e), e as u32 ^ round);
                }
                let chunks = ix.chunks.len();
                assert_eq!(chunks as i64, n / 16, "{name}: refilled from the free list");
                remove_all_checked(&mut ix, &mut model, &order);
                assert!(ix.is_empty() && model.is_empty(), "{name}");
            }
            if no_whole_walk {
                assert_eq!(ix.whole_tree_sweeps, 0, "{name}");
            } else {
                assert!(
                    ix.whole_tree_sweeps > 0,
                    "{name}: the test reaches the walk"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn behaves_like_a_sorted_map(ops in prop::collection::vec((0u8..3, 0i64..3, -40i64..80, any::<u32>()), 1..400)) {
            let mut ix = PositionIndex::default();
            let mut model = Model::new();
            for (op, l, e, v) in ops {
                let p = Position::new(l, e);
                match op {
                    0 => {
                        let fresh = !model.contains_key(&p);
                        prop_assert_eq!(ix.insert(p, v).is_some(), fresh);
                        model.entry(p).or_insert(v);
                    }
                    1 => prop_assert_eq!(ix.remove(p), model.remove(&p)),
                    _ => prop_assert_eq!(ix.get(p), model.get(&p).copied()),
                }
                prop_assert_eq!(ix.len(), model.len());
            }
            let all = ix.range(Position::new(i64::MIN, i64::MIN), Position::new(i64::MAX, i64::MAX));
            let expected: Vec<_> = model.into_iter().collect();
            prop_assert_eq!(all, expected);
        }
    }
}
