//! Sorted map from positions to slot numbers, in chunks of 16 consecutive entry ids.
//!
//! Entries of a ledger are cached mostly in runs (publishes, read batches), so a chunk holds up to 16
//! neighbours: lookups and removals in a run hit the same chunk, which is remembered.
//!
//! A ledger's entry ids are consecutive, so its chunks are found in a window: an array by chunk
//! number, from the lowest cached to the highest. Adding a chunk at either end, or dropping the
//! one a removal empties, costs no tree operation: eviction empties chunks from the front, where
//! the window just moves up. A chunk far from its ledger's window (the window would grow out of
//! proportion to the chunks it holds) goes to a sorted tree instead, and a window left mostly
//! empty by removals gives its chunks to the tree, so that memory follows the chunks held, not
//! the values of the positions.

use crate::cache::position::Position;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};

const SHIFT: u32 = 4;
const LANES: usize = 1 << SHIFT;

/// (ledger id, chunk number): a chunk's place in the order of positions.
type ChunkKey = (i64, i64);

/// Sixteen lanes and where the chunk is kept. In C order so that what a removal reads
/// (`occupied`) and what it reads when the chunk empties (`window`, `key`) are together, after the
/// slots, in 24 bytes that the evictor prefetches (see [`PositionIndex::chunk_addr`]): kept apart,
/// the chunk's place was a cache miss of its own at every emptied chunk, with topics interleaved.
#[derive(Clone, Copy)]
#[repr(C)]
struct Chunk {
    slots: [u32; LANES],
    occupied: u16,
    /// The window holding the chunk, or [`IN_TREE`]; in an unused chunk, the next unused one.
    window: u32,
    key: ChunkKey,
}

const _: () = assert!(std::mem::size_of::<Chunk>() == 88);

/// A chunk kept in the tree, not a window.
const IN_TREE: u32 = u32::MAX;

/// The end of the chunk free list, and an empty place in a window.
const NO_CHUNK: u32 = u32::MAX;

/// One ledger's chunks by chunk number.
#[derive(Default)]
struct Window {
    ledger_id: i64,
    /// The chunk number of `chunks[0]`.
    first: i64,
    /// Chunk numbers from `first` on, [`NO_CHUNK`] where none is held; never [`NO_CHUNK`] at
    /// either end. Empty when the ledger has no chunk left: the window stays, so that a ledger
    /// whose every entry is removed as soon as it is added (a cache of a consumer that keeps up)
    /// does not make and drop a window at each entry.
    chunks: VecDeque<u32>,
    /// How many places hold a chunk.
    held: usize,
}

impl Window {
    /// The place of chunk number `chunk_no`, if the window spans it.
    fn place(&self, chunk_no: i64) -> Option<usize> {
        let at = usize::try_from(chunk_no.checked_sub(self.first)?).ok()?;
        (at < self.chunks.len()).then_some(at)
    }

    /// The last chunk number spanned (`first - 1` for an empty window).
    fn last(&self) -> i64 {
        self.first + (self.chunks.len() as i64 - 1)
    }
}

/// Whether a window spanning `from` places and holding `held` chunks may grow to span `len`: in
/// proportion to what it holds, with room for the gaps that reads out of order leave for a while,
/// and by at most 64 places at once. Without that step, a chunk added up to a window's length past
/// its end, then removed, would grow the window by that much and trim it back each time: work in
/// proportion to the ledger, not the entry. Such a chunk goes to the tree, and into the window once
/// the window has grown near it.
fn may_grow(from: usize, len: usize, held: usize) -> bool {
    len - from <= 64 && len <= 2 * held + 64
}

/// Whether a window spanning `len` places with `held` chunks is too sparse to keep (looser than
/// [`may_grow`], so that a window does not go back and forth between the two).
fn too_sparse(len: usize, held: usize) -> bool {
    len > 4 * held + 128
}

/// Position -> slot number, ordered by position.
pub struct PositionIndex {
    chunks: Vec<Chunk>,
    /// Head of the list of unused chunks, threaded through their `window` field: in the line that
    /// a removal reads (and the evictor prefetches), so that freeing the chunk a removal empties
    /// writes no other line. Through the first lane, the later passes of benches/eviction.rs'
    /// scenario, whose removals empty a chunk each, took 2-3% longer.
    free_chunk_head: u32,
    windows: Vec<Window>,
    /// Windows not in use (their number goes to the next ledger).
    free_windows: Vec<u32>,
    /// Ledger id -> its window.
    window_of: BTreeMap<i64, u32>,
    /// Windows left empty (see [`Window::chunks`]): dropped together once they are many.
    empty_windows: usize,
    /// Chunks that are in no window.
    tree: BTreeMap<ChunkKey, u32>,
    /// Chunks looked up lately, by the low bits of their key ([`recent_way`]): runs of
    /// neighbouring positions, and lookups that move among a few places (readers at different
    /// positions of a ledger, its tail where entries are added), skip the window's lookup.
    recent: [Cell<Option<(ChunkKey, u32)>>; RECENT],
    len: usize,
}

impl Default for PositionIndex {
    fn default() -> Self {
        PositionIndex {
            chunks: Vec::new(),
            free_chunk_head: NO_CHUNK,
            windows: Vec::new(),
            free_windows: Vec::new(),
            window_of: BTreeMap::new(),
            empty_windows: 0,
            tree: BTreeMap::new(),
            recent: Default::default(),
            len: 0,
        }
    }
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
        let c = self.find(key)?;
        way.set(Some((key, c)));
        Some(c)
    }

    /// The chunk of `key`, from its ledger's window or the tree.
    fn find(&self, (ledger_id, chunk_no): ChunkKey) -> Option<u32> {
        if let Some(&w) = self.window_of.get(&ledger_id) {
            let window = &self.windows[w as usize];
            if let Some(at) = window.place(chunk_no) {
                // A window's span holds no chunk of the tree.
                return Some(window.chunks[at]).filter(|&c| c != NO_CHUNK);
            }
        }
        self.tree.get(&(ledger_id, chunk_no)).copied()
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
    /// where a removal finds it without a lookup), or `None` (and no change) if `p` is already
    /// present.
    pub fn insert(&mut self, p: Position, slot: u32) -> Option<u32> {
        let (key, lane) = split(p);
        let c = match self.chunk_of(key) {
            Some(c) => c,
            None => self.add_chunk(key),
        };
        let chunk = &mut self.chunks[c as usize];
        if chunk.occupied & (1 << lane) != 0 {
            return None;
        }
        chunk.occupied |= 1 << lane;
        chunk.slots[lane] = slot;
        self.len += 1;
        Some(c)
    }

    /// A new, empty chunk for `key`, placed in its ledger's window or the tree.
    fn add_chunk(&mut self, key: ChunkKey) -> u32 {
        let empty = Chunk {
            slots: [0; LANES],
            occupied: 0,
            window: IN_TREE,
            key,
        };
        let c = match self.free_chunk_head {
            NO_CHUNK => {
                self.chunks.push(empty);
                (self.chunks.len() - 1) as u32
            }
            c => {
                self.free_chunk_head = self.chunks[c as usize].window;
                self.chunks[c as usize] = empty;
                c
            }
        };
        self.place_chunk(c, key);
        self.recent[recent_way(key)].set(Some((key, c)));
        c
    }

    /// Puts chunk `c` of `key` (in neither a window nor the tree) where lookups find it.
    fn place_chunk(&mut self, c: u32, (ledger_id, chunk_no): ChunkKey) {
        let Some(&w) = self.window_of.get(&ledger_id) else {
            let w = self.new_window(ledger_id, chunk_no);
            self.put_in_window(w, c, 0);
            return;
        };
        let window = &mut self.windows[w as usize];
        if window.chunks.is_empty() {
            window.first = chunk_no;
            window.chunks.push_back(NO_CHUNK);
            self.empty_windows -= 1;
        }
        if let Some(at) = window.place(chunk_no) {
            self.put_in_window(w, c, at);
            return;
        }
        let (first, last) = (window.first.min(chunk_no), window.last().max(chunk_no));
        // The span as a count of places, if it is one at all (positions span all of i64).
        let span = last
            .checked_sub(first)
            .and_then(|d| usize::try_from(d).ok())
            .and_then(|d| d.checked_add(1));
        match span {
            Some(len) if may_grow(window.chunks.len(), len, window.held + 1) => {
                self.grow_window(w, first, last);
                let at = self.windows[w as usize]
                    .place(chunk_no)
                    .expect("the window was grown to span it");
                self.put_in_window(w, c, at);
            }
            _ => {
                self.tree.insert((ledger_id, chunk_no), c);
            }
        }
    }

    fn new_window(&mut self, ledger_id: i64, first: i64) -> u32 {
        let window = Window {
            ledger_id,
            first,
            chunks: VecDeque::from([NO_CHUNK]),
            held: 0,
        };
        let w = match self.free_windows.pop() {
            Some(w) => {
                self.windows[w as usize] = window;
                w
            }
            None => {
                self.windows.push(window);
                (self.windows.len() - 1) as u32
            }
        };
        self.window_of.insert(ledger_id, w);
        w
    }

    fn put_in_window(&mut self, w: u32, c: u32, at: usize) {
        let window = &mut self.windows[w as usize];
        debug_assert_eq!(window.chunks[at], NO_CHUNK);
        window.chunks[at] = c;
        window.held += 1;
        self.chunks[c as usize].window = w;
    }

    /// Makes non-empty window `w` span `[first, last]` (which covers its span), taking in the
    /// chunks of the tree there, so that no chunk of the tree is ever within a window's span.
    fn grow_window(&mut self, w: u32, first: i64, last: i64) {
        let window = &mut self.windows[w as usize];
        let ledger_id = window.ledger_id;
        let (old_first, old_last) = (window.first, window.last());
        // Both differences are within the span, which fits a usize.
        let before = (old_first - first) as usize;
        let after = (last - old_last) as usize;
        window.chunks.reserve(before + after);
        for _ in 0..before {
            window.chunks.push_front(NO_CHUNK);
        }
        window.chunks.extend(std::iter::repeat_n(NO_CHUNK, after));
        window.first = first;
        let mut taken = Vec::new();
        if before > 0 {
            taken.extend(
                self.tree
                    .range((ledger_id, first)..(ledger_id, old_first))
                    .map(|(&k, &c)| (k, c)),
            );
        }
        if after > 0 {
            taken.extend(
                self.tree
                    .range((ledger_id, old_last + 1)..=(ledger_id, last))
                    .map(|(&k, &c)| (k, c)),
            );
        }
        for (key, c) in taken {
            self.tree.remove(&key);
            let at = self.windows[w as usize]
                .place(key.1)
                .expect("taken from within the span");
            self.put_in_window(w, c, at);
        }
    }

    pub fn remove(&mut self, p: Position) -> Option<u32> {
        let (key, lane) = split(p);
        let c = self.chunk_of(key)?;
        self.remove_lane(c, lane as u8)
    }

    /// The position at `lane` of chunk `c` (as returned by `insert` and `lane_of`).
    pub(crate) fn position_at(&self, c: u32, lane: u8) -> Position {
        let (ledger_id, chunk_no) = self.chunks[c as usize].key;
        Position::new(ledger_id, (chunk_no << SHIFT) | i64::from(lane))
    }

    /// Removes the position at `lane` of chunk `c` (as returned by `insert` and `lane_of`),
    /// skipping the lookup: what eviction does per entry, so it is inline and its rare part (a
    /// chunk left empty) is not.
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
            self.chunk_emptied(c);
        }
        Some(slot)
    }

    /// Points the position at `lane` of chunk `c` (as returned by `insert` and `lane_of`) to
    /// `slot`: its entry moved there.
    #[inline]
    pub(crate) fn set_slot(&mut self, c: u32, lane: u8, slot: u32) {
        let chunk = &mut self.chunks[c as usize];
        debug_assert!(
            chunk.occupied & (1 << lane) != 0,
            "moving a position not held"
        );
        chunk.slots[lane as usize] = slot;
    }

    /// Frees chunk `c`, left with no entries, from its window or the tree. Out of line: where
    /// entries are cached in runs (the common case) one removal in 16 comes here.
    #[cold]
    #[inline(never)]
    fn chunk_emptied(&mut self, c: u32) {
        let Chunk { key, window: w, .. } = self.chunks[c as usize];
        let way = &self.recent[recent_way(key)];
        if way.get().is_some_and(|(k, _)| k == key) {
            way.set(None);
        }
        self.chunks[c as usize].window = self.free_chunk_head;
        self.free_chunk_head = c;
        if w == IN_TREE {
            self.tree.remove(&key);
            return;
        }
        let window = &mut self.windows[w as usize];
        let at = window.place(key.1).expect("a chunk is within its window");
        window.chunks[at] = NO_CHUNK;
        window.held -= 1;
        // Eviction empties a ledger from its oldest entries up: the window moves up.
        while window.chunks.front() == Some(&NO_CHUNK) {
            window.chunks.pop_front();
            window.first += 1;
        }
        while window.chunks.back() == Some(&NO_CHUNK) {
            window.chunks.pop_back();
        }
        if window.held > 0 && too_sparse(window.chunks.len(), window.held) {
            self.window_to_tree(w);
            return;
        }
        if window.chunks.capacity() > 4 * window.chunks.len() + 64 {
            // A trimmed array keeps its capacity: a ledger that held many chunks, of which eviction
            // left a few (or none: an empty window is kept for the ledger's next chunk), would keep
            // the memory of all of them. Paid for by the trims before.
            window.chunks.shrink_to(2 * window.chunks.len());
        }
        if window.held == 0 {
            self.empty_windows += 1;
            if self.empty_windows > 8 && self.empty_windows > self.window_of.len() / 2 {
                self.drop_empty_windows();
            }
        }
    }

    /// Drops every empty window: as many as the ones kept, so the walk costs no more than
    /// the removals that emptied them.
    fn drop_empty_windows(&mut self) {
        let (windows, free) = (&mut self.windows, &mut self.free_windows);
        self.window_of.retain(|_, &mut w| {
            let keep = windows[w as usize].held > 0;
            if !keep {
                windows[w as usize] = Window::default();
                free.push(w);
            }
            keep
        });
        self.empty_windows = 0;
    }

    fn drop_window(&mut self, w: u32) {
        let window = std::mem::take(&mut self.windows[w as usize]);
        self.window_of.remove(&window.ledger_id);
        self.free_windows.push(w);
    }

    /// Moves the chunks of window `w`, mostly empty places, to the tree. Its span was at most
    /// what [`may_grow`] allows when it last grew and has lost at least half its chunks since, so
    /// this costs no more than the removals that emptied them.
    fn window_to_tree(&mut self, w: u32) {
        let ledger_id = self.windows[w as usize].ledger_id;
        let first = self.windows[w as usize].first;
        let held: Vec<(i64, u32)> = self.windows[w as usize]
            .chunks
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c != NO_CHUNK)
            .map(|(at, &c)| (first + at as i64, c))
            .collect();
        for (chunk_no, c) in held {
            self.tree.insert((ledger_id, chunk_no), c);
            self.chunks[c as usize].window = IN_TREE;
        }
        self.drop_window(w);
    }

    /// Address of what removing from chunk `c` reads, for prefetching.
    pub fn chunk_addr(&self, c: u32) -> *const u8 {
        (self.chunks.as_ptr().wrapping_add(c as usize).cast::<u8>())
            .wrapping_add(std::mem::offset_of!(Chunk, occupied))
    }

    /// The chunks with keys in `[lo, hi]`, in key order.
    fn chunks_in(&self, lo: ChunkKey, hi: ChunkKey) -> Vec<(ChunkKey, u32)> {
        let mut found = Vec::new();
        for (&ledger_id, &w) in self.window_of.range(lo.0..=hi.0) {
            let window = &self.windows[w as usize];
            let from = if ledger_id == lo.0 { lo.1 } else { i64::MIN };
            let to = if ledger_id == hi.0 { hi.1 } else { i64::MAX };
            let (from, to) = (from.max(window.first), to.min(window.last()));
            if from > to {
                continue;
            }
            // Both are within the span, which fits a usize.
            let (a, b) = ((from - window.first) as usize, (to - window.first) as usize);
            found.extend(
                window
                    .chunks
                    .range(a..=b)
                    .enumerate()
                    .filter(|&(_, &c)| c != NO_CHUNK)
                    .map(|(i, &c)| ((ledger_id, from + i as i64), c)),
            );
        }
        let from_windows = found.len();
        found.extend(self.tree.range(lo..=hi).map(|(&k, &c)| (k, c)));
        if found.len() > from_windows {
            // Two sorted runs: the stable sort finds them and merges them in one walk.
            found.sort_by_key(|&(key, _)| key);
        }
        found
    }

    /// Present positions in `[first, last]`, in order, with their slots.
    pub fn range(&self, first: Position, last: Position) -> Vec<(Position, u32)> {
        let mut out = Vec::new();
        if first > last {
            return out;
        }
        let (lo, _) = split(first);
        let (hi, _) = split(last);
        for ((ledger_id, chunk_no), c) in self.chunks_in(lo, hi) {
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
        let windows: usize = self
            .windows
            .iter()
            .map(|w| w.chunks.capacity() * std::mem::size_of::<u32>())
            .sum();
        self.chunks.capacity() * std::mem::size_of::<Chunk>()
            + self.windows.capacity() * std::mem::size_of::<Window>()
            + windows
            // a B-tree node holds up to 11 (key, value) pairs plus a header
            + self.tree.len() * (std::mem::size_of::<(ChunkKey, u32)>() + 8)
            + self.window_of.len() * (std::mem::size_of::<(i64, u32)>() + 8)
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

    /// Checks what the index keeps besides its answers: every chunk held is occupied and found
    /// from its home, windows are trimmed, as dense as they must be, and hold no tree chunk in
    /// their span; the free list holds the rest.
    fn check(ix: &PositionIndex) {
        let mut held = 0;
        let mut occupied = 0;
        let mut empty_windows = 0;
        for (&ledger_id, &w) in &ix.window_of {
            let window = &ix.windows[w as usize];
            assert_eq!(window.ledger_id, ledger_id);
            assert_ne!(
                window.chunks.front(),
                Some(&NO_CHUNK),
                "trimmed at the front"
            );
            assert_ne!(window.chunks.back(), Some(&NO_CHUNK), "trimmed at the back");
            let in_window: Vec<_> = window
                .chunks
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c != NO_CHUNK)
                .collect();
            assert_eq!(window.held, in_window.len());
            assert!(
                !too_sparse(window.chunks.len(), window.held),
                "{} places for {} chunks",
                window.chunks.len(),
                window.held
            );
            for (at, &c) in in_window {
                let home = &ix.chunks[c as usize];
                assert_eq!(home.window, w);
                assert_eq!(home.key, (ledger_id, window.first + at as i64));
                occupied += ix.chunks[c as usize].occupied.count_ones() as usize;
                assert_ne!(ix.chunks[c as usize].occupied, 0, "an empty chunk is freed");
            }
            held += window.held;
            if window.held == 0 {
                assert!(window.chunks.is_empty());
                empty_windows += 1;
                continue;
            }
            assert_eq!(
                ix.tree
                    .range((ledger_id, window.first)..=(ledger_id, window.last()))
                    .count(),
                0,
                "a tree chunk within a window's span"
            );
        }
        assert_eq!(empty_windows, ix.empty_windows);
        for (&key, &c) in &ix.tree {
            let home = &ix.chunks[c as usize];
            assert_eq!((home.key, home.window), (key, IN_TREE));
            assert_ne!(ix.chunks[c as usize].occupied, 0, "an empty chunk is freed");
            occupied += ix.chunks[c as usize].occupied.count_ones() as usize;
        }
        held += ix.tree.len();
        assert_eq!(occupied, ix.len());
        let mut free = 0;
        let mut c = ix.free_chunk_head;
        while c != NO_CHUNK {
            free += 1;
            c = ix.chunks[c as usize].window;
        }
        assert_eq!(held + free, ix.chunks.len(), "every chunk is held or free");
    }

    /// Removes in `order`, checking the index whenever a removal empties a chunk. The position
    /// just removed then goes back in and out again: its chunk is on the free list now, and the
    /// index must not write into it.
    fn remove_all_checked(ix: &mut PositionIndex, model: &mut Model<Position, u32>, order: &[i64]) {
        for &e in order {
            let p = Position::new(1, e);
            let free_before = ix.free_chunk_head;
            let value = model.remove(&p);
            assert_eq!(ix.remove(p), value, "remove {e}");
            if ix.free_chunk_head == free_before {
                continue;
            }
            check(ix);
            let value = value.expect("present");
            assert!(ix.insert(p, value).is_some(), "re-insert {e}");
            assert_eq!(ix.range(p, p), [(p, value)], "re-inserted {e}");
            assert_eq!(ix.remove(p), Some(value), "remove {e} again");
        }
        let all = ix.range(Position::new(1, i64::MIN), Position::new(1, i64::MAX));
        assert_eq!(all, model.iter().map(|(&p, &v)| (p, v)).collect::<Vec<_>>());
    }

    /// Chunks emptied in any order are freed at once and reused, so refilling takes no new ones;
    /// eviction's order (front to back) and its usual variations never touch the tree.
    #[test]
    fn emptied_chunks_are_freed_and_reused_and_eviction_needs_no_tree() {
        const N: i64 = 16 * 1000;
        let evens_then_odds = |n: i64| (0..n).step_by(2).chain((1..n).step_by(2)).collect();
        let scattered_chunks_first = |n: i64| {
            let scattered = |e: &i64| (e >> SHIFT) % 7 == 3;
            let (first, rest): (Vec<i64>, Vec<i64>) = (0..n).partition(scattered);
            first.into_iter().chain(rest).collect()
        };
        // Each order, and whether the tree stays unused (the last one leaves one chunk at the
        // front while the rest empty: the window gives its chunks to the tree when too sparse).
        let orders: [(&str, Vec<i64>, bool); 5] = [
            ("front to back", (0..N).collect(), true),
            ("back to front", (0..N).rev().collect(), true),
            ("evens then odds", evens_then_odds(N), true),
            ("scattered chunks first", scattered_chunks_first(N), true),
            (
                "all but the lowest chunk first",
                (16..N).chain(0..16).collect(),
                false,
            ),
        ];
        for (name, order, no_tree) in orders {
            let mut ix = PositionIndex::default();
            let mut model = Model::new();
            let n = order.len() as i64;
            let mut tree_used = false;
            for round in 0..2u32 {
                for e in 0..n {
                    assert!(ix.insert(Position::new(1, e), e as u32 ^ round).is_some());
                    model.insert(Position::new(1, e), e as u32 ^ round);
                }
                check(&ix);
                assert!(ix.tree.is_empty(), "{name}: appends go to the window");
                let chunks = ix.chunks.len();
                assert_eq!(chunks as i64, n / 16, "{name}: refilled from the free list");
                for &e in &order {
                    let p = Position::new(1, e);
                    assert_eq!(ix.remove(p), model.remove(&p), "{name}: remove {e}");
                    tree_used |= !ix.tree.is_empty();
                }
                check(&ix);
                assert!(ix.is_empty() && model.is_empty(), "{name}");
                assert!(ix.windows.iter().all(|w| w.held == 0), "{name}");
                assert!(ix.tree.is_empty(), "{name}");
            }
            assert_eq!(tree_used, !no_tree, "{name}: whether the tree was used");
            let mut ix = PositionIndex::default();
            for e in 0..n {
                ix.insert(Position::new(1, e), e as u32);
                model.insert(Position::new(1, e), e as u32);
            }
            remove_all_checked(&mut ix, &mut model, &order);
        }
    }

    /// A ledger whose every entry is removed as soon as it is added (a consumer that keeps up)
    /// keeps its window, and ledgers that roll over leave no windows behind.
    #[test]
    fn emptied_ledgers_keep_their_window_until_many_are_empty() {
        let mut ix = PositionIndex::default();
        for e in 0..1000 {
            ix.insert(Position::new(1, e), 0);
            ix.remove(Position::new(1, e));
            assert_eq!((ix.windows.len(), ix.window_of.len()), (1, 1));
        }
        for ledger_id in 2..1000 {
            for e in 0..40 {
                ix.insert(Position::new(ledger_id, e), 0);
                ix.remove(Position::new(ledger_id, e));
            }
            check(&ix);
            assert!(
                ix.window_of.len() <= 2 * 9 + 1,
                "{} windows",
                ix.window_of.len()
            );
            assert!(
                ix.windows.len() <= 2 * 9 + 1,
                "{} windows",
                ix.windows.len()
            );
        }
    }

    /// A chunk added far past a window's end (a reader ahead of the others), then removed, over
    /// and over, neither grows the window to it nor trims it back each time: it goes to the tree,
    /// and into the window once the window has grown near it.
    #[test]
    fn a_chunk_far_past_a_window_waits_in_the_tree_until_the_window_is_near() {
        let mut ix = PositionIndex::default();
        for e in 0..16 * 1000 {
            ix.insert(Position::new(1, e), 0);
        }
        let span = |ix: &PositionIndex| ix.windows[ix.window_of[&1] as usize].chunks.len();
        let chunk_at = |k: i64| Position::new(1, 16 * k);
        for _ in 0..3 {
            let c = ix.insert(chunk_at(1100), 1).unwrap();
            assert_eq!((span(&ix), ix.tree.len()), (1000, 1));
            assert_eq!(
                ix.remove_lane(c, PositionIndex::lane_of(chunk_at(1100))),
                Some(1)
            );
            check(&ix);
        }
        ix.insert(chunk_at(1100), 1).unwrap();
        ix.insert(chunk_at(1060), 2).unwrap();
        assert_eq!((span(&ix), ix.tree.len()), (1061, 1));
        ix.insert(chunk_at(1101), 3).unwrap();
        assert_eq!(
            (span(&ix), ix.tree.len()),
            (1102, 0),
            "taken into the window"
        );
        check(&ix);
        assert_eq!(ix.get(chunk_at(1100)), Some(1));
    }

    /// A ledger that held many chunks, of which removals leave a few, gives back its window's
    /// memory: many such ledgers take memory for the chunks they hold, not those they held.
    #[test]
    fn a_trimmed_window_gives_back_its_memory() {
        let mut ix = PositionIndex::default();
        for l in 0..20 {
            for e in 0..16 * 5000 {
                ix.insert(Position::new(l, e), 0);
            }
            for e in 0..16 * 4999 {
                ix.remove(Position::new(l, e));
            }
        }
        check(&ix);
        let window_bytes: usize = ix.windows.iter().map(|w| w.chunks.capacity() * 4).sum();
        // One chunk left in each: a few bytes of window each, not the 20 KB of 5,000 chunks.
        assert!(window_bytes < 20 * 1024, "{window_bytes} bytes");
    }

    /// Memory follows the chunks held, not the positions' values: far-apart chunks of a ledger go
    /// to the tree, and a window that removals leave sparse (one old entry stays while the ledger
    /// moves on) gives its chunks to the tree instead of spanning the whole gap.
    #[test]
    fn memory_follows_the_chunks_held_not_the_positions() {
        let mut ix = PositionIndex::default();
        for e in [i64::MIN, -1 << 40, 0, 1 << 40, i64::MAX] {
            assert!(ix.insert(Position::new(7, e), 1).is_some());
        }
        check(&ix);
        assert!(ix.heap_bytes() < 4096, "{} bytes", ix.heap_bytes());
        assert_eq!(
            ix.range(Position::new(7, i64::MIN), Position::new(7, i64::MAX))
                .len(),
            5
        );

        let mut ix = PositionIndex::default();
        ix.insert(Position::new(1, 0), 0);
        let mut biggest = 0;
        for e in 16..16 * 100_000 {
            ix.insert(Position::new(1, e), 0);
            if e >= 16 * 21 {
                ix.remove(Position::new(1, e - 16 * 20));
            }
            biggest = biggest.max(ix.heap_bytes());
        }
        check(&ix);
        // 21 chunks held at most: a few KiB, not the 400 KiB a window over 100,000 chunks takes.
        assert!(biggest < 16 * 1024, "{biggest} bytes at most");
        assert_eq!(ix.get(Position::new(1, 0)), Some(0));
    }

    /// Entry ids mostly in a small range (chunks that fill, share windows and empty), some far
    /// apart (chunks in the tree, windows that must not span them, or grow to them step by step),
    /// and at and near the extremes.
    fn entry_id() -> impl Strategy<Value = i64> {
        prop_oneof![
            6 => -40i64..80,
            2 => (-3i64..3).prop_map(|k| k * 4096 + 7),
            1 => (-40i64..40).prop_map(|k| k * 16 * 70),
            1 => any::<i64>(),
            1 => (0i64..32).prop_map(|k| i64::MIN + k),
            1 => (0i64..32).prop_map(|k| i64::MAX - k),
        ]
    }

    fn ledger_id() -> impl Strategy<Value = i64> {
        prop_oneof![6 => 0i64..3, 1 => Just(i64::MIN), 1 => Just(i64::MAX), 1 => Just(-1i64)]
    }

    proptest! {
        /// Against a sorted map, through every way in: inserts, removals by position and by the
        /// chunk an insert returned (as the range cache removes), lookups, ranges with any bounds,
        /// clears. After every op the index's own state is checked, each chunk number handed out
        /// still holds its position, and no recent lookup names a chunk that is not the key's.
        #[test]
        fn behaves_like_a_sorted_map(
            ops in prop::collection::vec(
                (0u8..9, (ledger_id(), entry_id()), any::<u32>(), (ledger_id(), entry_id())),
                1..500,
            )
        ) {
            let mut ix = PositionIndex::default();
            let mut model = Model::new();
            let mut chunk_of: Model<Position, u32> = Model::new();
            for (op, (l, e), v, (l2, e2)) in ops {
                let p = Position::new(l, e);
                match op {
                    0..=2 => {
                        let fresh = !model.contains_key(&p);
                        let got = ix.insert(p, v);
                        prop_assert_eq!(got.is_some(), fresh);
                        if let Some(c) = got {
                            chunk_of.insert(p, c);
                            model.insert(p, v);
                        }
                    }
                    3 => {
                        prop_assert_eq!(ix.remove(p), model.remove(&p));
                        chunk_of.remove(&p);
                    }
                    4 | 5 => {
                        let held = chunk_of.range(p..).next().or_else(|| chunk_of.iter().next());
                        if let Some((&q, &c)) = held {
                            prop_assert_eq!(ix.remove_lane(c, PositionIndex::lane_of(q)), model.remove(&q));
                            chunk_of.remove(&q);
                        }
                    }
                    6 => prop_assert_eq!(ix.get(p), model.get(&p).copied()),
                    7 => {
                        let q = Position::new(l2, e2);
                        let expected: Vec<_> = if p <= q {
                            model.range(p..=q).map(|(&a, &b)| (a, b)).collect()
                        } else {
                            Vec::new()
                        };
                        prop_assert_eq!(ix.range(p, q), expected);
                    }
                    _ => {
                        if v % 16 == 0 {
                            ix.clear();
                            model.clear();
                            chunk_of.clear();
                        }
                    }
                }
                prop_assert_eq!(ix.len(), model.len());
                check(&ix);
                for (&q, &c) in &chunk_of {
                    prop_assert_eq!(ix.find(split(q).0), Some(c), "the chunk handed out for {}", q);
                }
                for way in &ix.recent {
                    if let Some((key, c)) = way.get() {
                        prop_assert_eq!(ix.find(key), Some(c), "a recent lookup of {:?}", key);
                    }
                }
            }
            let all = ix.range(Position::new(i64::MIN, i64::MIN), Position::new(i64::MAX, i64::MAX));
            let expected: Vec<_> = model.into_iter().collect();
            prop_assert_eq!(all, expected);
        }
    }
}
