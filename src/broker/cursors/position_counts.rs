//! A multiset of positions that answers "how many are at or before `p`" in O(log n): the sorted
//! positions are cut into short chunks of fixed capacity ([`Chunk`]), and each chunk carries the
//! count of everything in the chunks before it. A move costs a search in the chunk it leaves (found
//! through a hint), a few steps to the chunk it enters, a shift inside each and an update of the
//! chunk bases it passes, all in contiguous memory, so the cost hardly depends on how many positions
//! there are.
//!
//! Chunks live in one array and keep their index (their id) from the split that makes them to the
//! move that empties them; their order is kept apart, in `order`. A cursor's hint names the chunk
//! that held its position, so it stays good while other chunks split and empty before it (which
//! shifts the ranks of all the chunks after): a move searches that one chunk, and a chunk that
//! split or emptied since costs a search of them all.

use super::chunk::Chunk;
use super::position_key::PositionKey;
use crate::cache::position::Position;

/// How full a rebuild packs the chunks, leaving room for inserts before the first split.
const CHUNK_FILL: usize = 24;

/// Chunks per block in the search for a position's chunk ([`PositionCounts::rank_of`]): 16 firsts
/// are four cache lines.
const RANK_BLOCK: usize = 16;

/// Where a position was when last seen: its chunk's id and its index there. The chunk is a guess,
/// checked by a search of that chunk, that saves the search for it; the index is used only where it
/// is known to be exact (right after the move that returned it, [`PositionCounts::count_at_hint`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Hint {
    chunk: u32,
    index: u32,
}

impl Hint {
    /// Not in the counts: for a holder of a hint to say so without a flag of its own.
    pub const NOWHERE: Hint = Hint {
        chunk: u32::MAX,
        index: 0,
    };
    /// In the counts, at a place not known: no chunk, so a search finds it.
    pub const UNKNOWN: Hint = Hint {
        chunk: u32::MAX - 1,
        index: 0,
    };

    fn at(chunk: usize, index: usize) -> Self {
        // Chunk ids and indices are bounded by the number of cursors (u32), and chunk ids stay
        // below `UNKNOWN` and `NOWHERE` (as many chunks would take a terabyte); a wrong guess
        // is only slower.
        Hint {
            chunk: chunk as u32,
            index: index as u32,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct PositionCounts {
    /// Indexed by chunk id; unused ids are empty and listed in `free`.
    chunks: Vec<Chunk>,
    free: Vec<u32>,
    /// The ids of the chunks in use, by rank (increasing positions).
    order: Vec<u32>,
    /// `firsts[r]` is the lowest position of the chunk of rank `r`: what searches read, kept in one
    /// small array.
    firsts: Vec<PositionKey>,
    /// `bases[r]` counts the elements of the chunks of ranks `0..r`.
    bases: Vec<u32>,
    total: u32,
}

impl PositionCounts {
    /// Elements counted (with multiplicity).
    pub fn total(&self) -> u32 {
        self.total
    }

    pub fn first(&self) -> Option<Position> {
        self.firsts.first().map(|k| k.position())
    }

    /// The rank of the chunk that holds `p` or would: the last one starting at or before it.
    ///
    /// Two steps: a binary search over the first chunk of each block of [`RANK_BLOCK`], then a count
    /// over that block's firsts, which are side by side in memory and compared independently, where
    /// the last steps of a plain binary search would each wait for the load before.
    fn rank_of(&self, p: PositionKey) -> Option<usize> {
        let firsts = &self.firsts;
        // The last block starting at or before `p` (block 0 if none does)...
        let (mut block, mut n) = (0, firsts.len().div_ceil(RANK_BLOCK));
        while n > 1 {
            let half = n / 2;
            if firsts[(block + half) * RANK_BLOCK] <= p {
                block += half;
            }
            n -= half;
        }
        // ...then how many of its chunks start at or before `p`.
        let start = block * RANK_BLOCK;
        let end = firsts.len().min(start + RANK_BLOCK);
        let within: usize = firsts[start..end]
            .iter()
            .map(|f| usize::from(*f <= p))
            .sum();
        (start + within).checked_sub(1)
    }

    fn chunk_at(&self, rank: usize) -> &Chunk {
        &self.chunks[self.order[rank] as usize]
    }

    /// Elements at or before `p` (present or not).
    pub fn count_at_or_before(&self, p: Position) -> u32 {
        let p = PositionKey::of(p);
        let Some(r) = self.rank_of(p) else {
            return 0;
        };
        let chunk = self.chunk_at(r);
        self.bases[r] + chunk.sum_to(chunk.rank_of(p))
    }

    /// [`Self::count_at_or_before`] for a present position, found through its hint.
    pub fn count_at(&self, p: Position, hint: Hint) -> u32 {
        match self.find(PositionKey::of(p), hint) {
            Some((id, i)) => self.count_through(id, i),
            None => self.count_at_or_before(p),
        }
    }

    /// Elements up to and including entry `i` of chunk `id`.
    fn count_through(&self, id: usize, i: usize) -> u32 {
        let chunk = &self.chunks[id];
        self.bases[chunk.rank as usize] + chunk.sum_to(i + 1)
    }

    /// [`Self::count_at`] where `hint` is known to be where the position is (it was just returned
    /// and nothing moved since).
    pub fn count_at_hint(&self, p: Position, hint: Hint) -> u32 {
        let (id, i) = (hint.chunk as usize, hint.index as usize);
        debug_assert!(
            self.chunks[id].is_at(i, PositionKey::of(p)),
            "the hint is exact"
        );
        self.count_through(id, i)
    }

    /// Chunk id and index of a present position: searched in the hinted chunk (which holds it
    /// unless the chunk split or emptied since: a position is in one chunk only), else searched
    /// everywhere. The hinted index is not tried first: other cursors' moves through the chunk
    /// shift it so often that checking it was a mispredicted branch more than a saved search.
    fn find(&self, p: PositionKey, hint: Hint) -> Option<(usize, usize)> {
        let id = hint.chunk as usize;
        if let Some(chunk) = self.chunks.get(id) {
            if let Ok(i) = chunk.search(p) {
                return Some((id, i));
            }
        }
        let id = self.order[self.rank_of(p)?] as usize;
        self.chunks[id].search(p).ok().map(|i| (id, i))
    }

    /// Adds one element at `p`; returns where it is.
    pub fn insert(&mut self, p: Position) -> Hint {
        let p = PositionKey::of(p);
        self.total += 1;
        if self.order.is_empty() {
            return Hint::at(self.attach(0, Chunk::with(p, 1), 0), 0);
        }
        let r = self.rank_of(p).unwrap_or(0);
        self.bases[r + 1..].iter_mut().for_each(|b| *b += 1);
        self.add_at(r, p)
    }

    /// Removes one element at `p`, which must be present.
    pub fn remove(&mut self, p: Position, hint: Hint) {
        let (id, i) = self
            .find(PositionKey::of(p), hint)
            .expect("the position is present");
        let r = self.chunks[id].rank as usize;
        self.bases[r + 1..].iter_mut().for_each(|b| *b -= 1);
        self.take_one(id, i);
        self.total -= 1;
    }

    /// Moves one element from `from` (which must be present) to `to`; returns where it is now.
    pub fn move_one(&mut self, from: Position, to: Position, hint: Hint) -> Hint {
        let (from, to) = (PositionKey::of(from), PositionKey::of(to));
        let (id, i) = self.find(from, hint).expect("`from` is present");
        if from == to {
            return Hint::at(id, i);
        }
        let r_from = self.chunks[id].rank as usize;
        let r_to = self.rank_near(r_from, to);
        if r_to == r_from {
            return self.move_in_chunk(r_from, id, i, to);
        }
        // Chunks between the two change how many elements lie before them.
        if r_from < r_to {
            add_to_each(&mut self.bases[r_from + 1..], r_to - r_from, u32::MAX);
        } else {
            add_to_each(&mut self.bases[r_to + 1..], r_from - r_to, 1);
        }
        // Taking `from` out first leaves the counts right for a split of the destination chunk; if it
        // empties its chunk, the chunks after move down a rank (`to`'s chunk is unaffected: `from`
        // was not its lowest position).
        let dropped = self.take_one(id, i);
        let r_to = if dropped && r_to > r_from {
            r_to - 1
        } else {
            r_to
        };
        self.add_at(r_to, to)
    }

    /// [`Self::rank_of`] for a position near the chunk of rank `r`: cursors mostly move a little, so
    /// counting the chunks within a few ranks that start at or before `p` (independent comparisons,
    /// no branch on each) beats a search of all of `firsts`.
    fn rank_near(&self, r: usize, p: PositionKey) -> usize {
        const WINDOW: usize = 8;
        if self.firsts[r] <= p {
            let ahead = &self.firsts[r + 1..self.firsts.len().min(r + 1 + WINDOW)];
            let n: usize = ahead.iter().map(|f| usize::from(*f <= p)).sum();
            if n < WINDOW {
                return r + n;
            }
        } else {
            let behind = &self.firsts[r.saturating_sub(WINDOW)..r];
            let above: usize = behind.iter().map(|f| usize::from(*f > p)).sum();
            if above < behind.len() {
                return r - above - 1;
            }
            if behind.len() == r {
                // Below every chunk.
                return 0;
            }
        }
        self.rank_of(p).unwrap_or(0)
    }

    /// A move inside the chunk of rank `r` (id `id`) from entry `i` to `to`: the chunk's total and so
    /// every base stay as they are.
    fn move_in_chunk(&mut self, r: usize, id: usize, i: usize, to: PositionKey) -> Hint {
        let chunk = &mut self.chunks[id];
        if chunk.counts()[i] == 1 && chunk.move_in_place(i, to) {
            if i == 0 {
                self.firsts[r] = to;
            }
            return Hint::at(id, i);
        }
        match chunk.search(to) {
            Ok(j) => {
                *chunk.count_mut(j) += 1;
                *chunk.count_mut(i) -= 1;
                if *chunk.count_mut(i) > 0 {
                    return Hint::at(id, j);
                }
                // `to` is there too, so the chunk does not empty.
                chunk.remove(i);
                self.firsts[r] = chunk.first();
                Hint::at(id, if j > i { j - 1 } else { j })
            }
            Err(j) => {
                // The common short move: `from` empties and `to` is new, so only the entries between
                // shift by one.
                if chunk.counts()[i] == 1 {
                    if let Some(at) = chunk.replace(i, j, to) {
                        self.firsts[r] = chunk.first();
                        return Hint::at(id, at);
                    }
                }
                // Others stay at `from`, or `to` is beyond the chunk's offsets: `from` goes, then
                // `to` comes as any add (the chunk keeps its total, so the bases are right).
                *chunk.count_mut(i) -= 1;
                if chunk.counts()[i] == 0 {
                    if chunk.len() == 1 {
                        // Its only entry: the chunk takes `to` instead.
                        let rank = chunk.rank;
                        *chunk = Chunk::with(to, 1);
                        chunk.rank = rank;
                        self.firsts[r] = to;
                        return Hint::at(id, 0);
                    }
                    chunk.remove(i);
                    if i == 0 {
                        self.firsts[r] = chunk.first();
                    }
                }
                self.add_at(r, to)
            }
        }
    }

    /// Takes one element from entry `i` of chunk `id`, removing the entry if that empties it and the
    /// chunk if that empties it (an empty chunk counts nothing, so no base changes). Returns whether
    /// the chunk went.
    fn take_one(&mut self, id: usize, i: usize) -> bool {
        let chunk = &mut self.chunks[id];
        *chunk.count_mut(i) -= 1;
        if chunk.counts()[i] > 0 {
            return false;
        }
        chunk.remove(i);
        let r = chunk.rank as usize;
        if chunk.is_empty() {
            self.detach(r);
            return true;
        }
        if i == 0 {
            self.firsts[r] = chunk.first();
        }
        false
    }

    /// Adds one at `p` in the chunk of rank `r` (or, if `p` is below every chunk, `r` = 0); returns
    /// where `p` is. The caller has made the bases right for `p` counted in that chunk; new chunks
    /// get theirs here.
    fn add_at(&mut self, r: usize, p: PositionKey) -> Hint {
        let id = self.order[r] as usize;
        let chunk = &mut self.chunks[id];
        let i = match chunk.search(p) {
            Ok(i) => {
                *chunk.count_mut(i) += 1;
                return Hint::at(id, i);
            }
            Err(i) => i,
        };
        if !chunk.is_full() && chunk.can_hold(p) {
            chunk.insert(i, p, 1);
            if i == 0 {
                self.firsts[r] = p;
            }
            return Hint::at(id, i);
        }
        let before = self.order.len();
        let hint = self.add_with_new_chunks(r, i, p);
        for k in r..r + (self.order.len() - before) {
            self.bases[k + 1] = self.bases[k] + self.chunk_at(k).sum();
        }
        hint
    }

    /// [`Self::add_at`] where `p` (to be entry `i` of the chunk of rank `r`) needs one or two new
    /// chunks: the chunk is full, or `p` is 2^32 or more away from its keys. The new chunks come at
    /// ranks `r..`; the caller sets the bases after rank `r`.
    fn add_with_new_chunks(&mut self, r: usize, i: usize, p: PositionKey) -> Hint {
        let (mut r, mut i) = (r, i);
        // The base of rank `r`: right for a chunk put there, a placeholder for those put after.
        let base = self.bases[r];
        if self.chunk_at(r).is_full() {
            let id = self.order[r] as usize;
            let half = self.chunks[id].len() / 2;
            let upper = self.chunks[id].split_off(half);
            self.attach(r + 1, upper, base);
            if i > half {
                (r, i) = (r + 1, i - half);
            }
        }
        let id = self.order[r] as usize;
        let chunk = &mut self.chunks[id];
        if chunk.can_hold(p) {
            chunk.insert(i, p, 1);
            if i == 0 {
                self.firsts[r] = p;
            }
            return Hint::at(id, i);
        }
        // `p` is out of reach of the chunk's keys, so it is not between two of them (it would be in
        // reach): it is below them all (only in the first chunk) or above. It takes a chunk of its
        // own before or after (before, that chunk takes rank `r` and its base).
        let at = if i == 0 { r } else { r + 1 };
        Hint::at(self.attach(at, Chunk::with(p, 1), base), 0)
    }

    /// Puts `chunk` (not empty) in use at rank `r` with base `base`; returns its id.
    fn attach(&mut self, r: usize, chunk: Chunk, base: u32) -> usize {
        let first = chunk.first();
        let id = match self.free.pop() {
            Some(id) => {
                self.chunks[id as usize] = chunk;
                id as usize
            }
            None => {
                self.chunks.push(chunk);
                self.chunks.len() - 1
            }
        };
        // Ids are bounded by the number of positions, itself bounded by the u32 total.
        self.order.insert(r, id as u32);
        self.firsts.insert(r, first);
        self.bases.insert(r, base);
        self.renumber(r);
        id
    }

    /// Takes the (empty) chunk of rank `r` out of use.
    fn detach(&mut self, r: usize) {
        let id = self.order.remove(r);
        self.firsts.remove(r);
        self.bases.remove(r);
        self.free.push(id);
        self.renumber(r);
    }

    /// Sets the rank of the chunks of ranks `r..`, after a chunk came or went at `r`.
    fn renumber(&mut self, r: usize) {
        for (rank, &id) in self.order.iter().enumerate().skip(r) {
            self.chunks[id as usize].rank = rank as u32;
        }
    }

    /// Replaces the contents with `runs`: (position, count) in increasing position order, counts > 0.
    pub fn rebuild(&mut self, runs: impl IntoIterator<Item = (Position, u32)>) {
        *self = PositionCounts::default();
        // The chunk being filled, and its base.
        let mut open: Option<(Chunk, u32)> = None;
        for (p, n) in runs {
            let p = PositionKey::of(p);
            match &mut open {
                Some((chunk, _)) if chunk.len() < CHUNK_FILL && chunk.can_hold(p) => {
                    chunk.push(p, n)
                }
                _ => {
                    if let Some((chunk, base)) = open.replace((Chunk::with(p, n), self.total)) {
                        self.attach(self.order.len(), chunk, base);
                    }
                }
            }
            self.total += n;
        }
        if let Some((chunk, base)) = open {
            self.attach(self.order.len(), chunk, base);
        }
    }

    /// (position, count) of every distinct position, in order.
    pub fn iter(&self) -> impl Iterator<Item = (Position, u32)> + '_ {
        self.order.iter().flat_map(|&id| {
            let chunk = &self.chunks[id as usize];
            chunk.entries().map(|(k, n)| (k.position(), n))
        })
    }

    /// Checks the chunks against each other; for tests.
    pub fn check(&self) -> Result<(), String> {
        if self.firsts.len() != self.order.len() || self.bases.len() != self.order.len() {
            return Err("rank arrays differ in length".into());
        }
        if self.order.len() + self.free.len() != self.chunks.len() {
            return Err("chunks neither in use nor free".into());
        }
        if let Some(&id) = self
            .free
            .iter()
            .find(|&&id| !self.chunks[id as usize].is_empty())
        {
            return Err(format!("free chunk {id} is not empty"));
        }
        let mut seen = 0u32;
        let mut last: Option<PositionKey> = None;
        for (r, &id) in self.order.iter().enumerate() {
            let chunk = &self.chunks[id as usize];
            if chunk.is_empty() || chunk.rank as usize != r {
                return Err(format!("chunk {id} of rank {r} says {}", chunk.rank));
            }
            if self.firsts[r] != chunk.first() {
                return Err(format!("chunk {r} starts at {}", chunk.first().position()));
            }
            if self.bases[r] != seen {
                return Err(format!("chunk {r} base {} != {seen}", self.bases[r]));
            }
            chunk.check().map_err(|e| format!("chunk {r}: {e}"))?;
            for (p, n) in chunk.entries() {
                if last.is_some_and(|l| l >= p) {
                    return Err(format!("positions out of order at {}", p.position()));
                }
                if n == 0 {
                    return Err(format!("zero count at {}", p.position()));
                }
                last = Some(p);
                seen += n;
            }
        }
        if seen != self.total {
            return Err(format!("total {} != {seen}", self.total));
        }
        Ok(())
    }
}

/// Adds `delta` (wrapping: `u32::MAX` takes one) to the first `n` of `values`. A move passes a
/// chunk or two, a number that changes from one move to the next: a loop of `n` steps would end at
/// a mispredicted branch each time, so a short run is one fixed window of masked adds.
#[inline]
fn add_to_each(values: &mut [u32], n: usize, delta: u32) {
    const WINDOW: usize = 8;
    match values.first_chunk_mut::<WINDOW>() {
        Some(window) if n <= WINDOW => {
            for (k, v) in window.iter_mut().enumerate() {
                *v = v.wrapping_add(delta & if k < n { u32::MAX } else { 0 });
            }
        }
        _ => values[..n]
            .iter_mut()
            .for_each(|v| *v = v.wrapping_add(delta)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random moves (and some removes, re-inserts and a rebuild) of 1000 elements at positions drawn
    /// by `draw`, the counts checked against the plain list of positions.
    fn exercise(draw: impl Fn(u64) -> Position) {
        let mut x = 7u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 11
        };
        let mut c = PositionCounts::default();
        let mut model: Vec<(Position, Hint)> = Vec::new();
        for _ in 0..1000 {
            let p = draw(next());
            model.push((p, c.insert(p)));
        }
        c.check().unwrap();
        for step in 0..5000 {
            let i = next() as usize % model.len();
            let to = draw(next());
            let hint = match step % 10 {
                0 => {
                    c.remove(model[i].0, model[i].1);
                    c.insert(to)
                }
                _ => c.move_one(model[i].0, to, model[i].1),
            };
            model[i] = (to, hint);
            c.check().unwrap();
            assert_eq!(
                c.find(PositionKey::of(to), hint),
                Some((hint.chunk as usize, hint.index as usize))
            );
            if step == 2500 {
                let mut sorted: Vec<Position> = model.iter().map(|m| m.0).collect();
                sorted.sort_unstable();
                c.rebuild(
                    sorted
                        .chunk_by(|a, b| a == b)
                        .map(|r| (r[0], r.len() as u32)),
                );
                c.check().unwrap();
            }
        }
        let below = |p: Position| model.iter().filter(|m| m.0 <= p).count() as u32;
        for &(m, hint) in &model {
            assert_eq!(c.count_at(m, hint), below(m), "at {m}");
            for probe in [m.entry_id.checked_sub(1), m.entry_id.checked_add(1)] {
                let probe = Position::new(m.ledger_id, probe.unwrap_or(m.entry_id));
                assert_eq!(c.count_at_or_before(probe), below(probe), "at {probe}");
            }
        }
        for (m, hint) in model.drain(..) {
            c.remove(m, hint);
        }
        c.check().unwrap();
        assert_eq!((c.total(), c.first()), (0, None));
    }

    /// The windowed add does what a loop over the first `n` values does, near the end too.
    #[test]
    fn adding_to_the_first_values_is_the_loop() {
        for len in 0..20 {
            for n in 0..=len {
                for delta in [1, u32::MAX] {
                    let mut values: Vec<u32> = (0..len as u32).map(|k| k * 3 + 5).collect();
                    let mut expected = values.clone();
                    expected[..n]
                        .iter_mut()
                        .for_each(|v| *v = v.wrapping_add(delta));
                    add_to_each(&mut values, n, delta);
                    assert_eq!(values, expected, "{n} of {len}, {delta}");
                }
            }
        }
    }

    #[test]
    fn moves_across_many_chunks_keep_every_count() {
        exercise(|x| Position::new(0, (x % 1500) as i64));
    }

    #[test]
    fn a_position_out_of_reach_of_its_chunk_gets_one_of_its_own() {
        let at = |e: i64| Position::new(0, e);
        let (near, far, end) = (at(1 << 35), at(1 << 40), Position::new(5, 0));
        let mut c = PositionCounts::default();
        let hint = c.insert(at(0));
        c.insert(end);
        // The only position of its chunk moves 2^40 up, still before the next chunk.
        let far_hint = c.move_one(at(0), far, hint);
        c.check().unwrap();
        assert_eq!(c.count_at(far, far_hint), 1);
        // Below every chunk and out of reach of the first: a chunk of its own before it.
        let hint = c.insert(at(0));
        c.insert(at(0));
        c.check().unwrap();
        // One of two leaves for a position out of reach of its chunk: a new chunk after it.
        let near_hint = c.move_one(at(0), near, hint);
        c.check().unwrap();
        let hint = c.find(PositionKey::of(at(0)), Hint::default()).unwrap();
        let hint = c.move_one(at(0), at(7), Hint::at(hint.0, hint.1));
        c.check().unwrap();
        assert_eq!(c.count_at(at(7), hint), 1);
        assert_eq!(c.count_at(near, near_hint), 2);
        assert_eq!(c.count_at(far, far_hint), 3);
        assert_eq!(c.count_at_or_before(end), 4);
        assert_eq!(c.first(), Some(at(7)));
    }

    /// Positions 2^31 and more apart, across ledgers and at the ends of the range: chunks only hold
    /// positions less than 2^32 apart, so many hold one or two.
    #[test]
    fn far_apart_positions_keep_every_count() {
        exercise(|x| {
            let entry = match x % 16 {
                0 => i64::MIN,
                1 => i64::MAX,
                2 => -1,
                k => (k as i64 - 8) * (1 << 31) + ((x >> 4) % 8) as i64,
            };
            Position::new(((x >> 8) % 3) as i64 - 1, entry)
        });
    }
}
