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
//! shifts the ranks of all the chunks after), and a stale hint costs a search of one chunk.

use super::chunk::Chunk;
use super::position_key::PositionKey;
use crate::position::Position;

/// How full a rebuild packs the chunks, leaving room for inserts before the first split.
const CHUNK_FILL: usize = 24;

/// Where a position was when last seen: its chunk's id and its index there. A guess, checked
/// before use, that saves the searches when nothing moved it since.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Hint {
    chunk: u32,
    index: u32,
}

impl Hint {
    fn at(chunk: usize, index: usize) -> Self {
        // Chunk ids and indices are bounded by the number of cursors (u32); a wrong guess is only
        // slower.
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
    fn rank_of(&self, p: PositionKey) -> Option<usize> {
        self.firsts.partition_point(|f| *f <= p).checked_sub(1)
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
            Some((id, i)) => {
                let chunk = &self.chunks[id];
                self.bases[chunk.rank as usize] + chunk.sum_to(i + 1)
            }
            None => self.count_at_or_before(p),
        }
    }

    /// Chunk id and index of a present position: where the hint says if it is still there, else
    /// searched in the hinted chunk if it spans the position, else searched everywhere.
    fn find(&self, p: PositionKey, hint: Hint) -> Option<(usize, usize)> {
        let id = hint.chunk as usize;
        if let Some(chunk) = self.chunks.get(id) {
            if chunk.keys().get(hint.index as usize) == Some(&p) {
                return Some((id, hint.index as usize));
            }
            if chunk.spans(p) {
                return chunk.search(p).ok().map(|i| (id, i));
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
            let mut chunk = Chunk::default();
            chunk.push(p, 1);
            return Hint::at(self.attach(0, chunk, 0), 0);
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
            self.bases[r_from + 1..=r_to]
                .iter_mut()
                .for_each(|b| *b -= 1);
        } else {
            self.bases[r_to + 1..=r_from]
                .iter_mut()
                .for_each(|b| *b += 1);
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
    /// a few steps through `firsts` from where they were beat a search of all of it.
    fn rank_near(&self, r: usize, p: PositionKey) -> usize {
        const STEPS: usize = 4;
        let mut r = r;
        for _ in 0..STEPS {
            if p < self.firsts[r] {
                if r == 0 {
                    return 0;
                }
                r -= 1;
            } else if r + 1 < self.firsts.len() && self.firsts[r + 1] <= p {
                r += 1;
            } else {
                return r;
            }
        }
        self.rank_of(p).unwrap_or(0)
    }

    /// A move inside the chunk of rank `r` (id `id`) from entry `i` to `to`: the chunk's total and so
    /// every base stay as they are.
    fn move_in_chunk(&mut self, r: usize, id: usize, i: usize, to: PositionKey) -> Hint {
        let chunk = &mut self.chunks[id];
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
            // The common short move: `from` empties and `to` is new, so only the entries between
            // shift by one.
            Err(j) if chunk.counts()[i] == 1 => {
                let at = chunk.replace(i, j, to);
                self.firsts[r] = chunk.first();
                Hint::at(id, at)
            }
            Err(_) => {
                *chunk.count_mut(i) -= 1;
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

    /// Adds one at `p` in the chunk of rank `r`, splitting it if full; returns where `p` is. The
    /// caller has made the bases right for `p` counted in that chunk (a split sets the base of the
    /// new upper half).
    fn add_at(&mut self, r: usize, p: PositionKey) -> Hint {
        let id = self.order[r] as usize;
        let i = match self.chunks[id].search(p) {
            Ok(i) => {
                *self.chunks[id].count_mut(i) += 1;
                return Hint::at(id, i);
            }
            Err(i) => i,
        };
        if !self.chunks[id].is_full() {
            self.chunks[id].insert(i, p, 1);
            if i == 0 {
                self.firsts[r] = p;
            }
            return Hint::at(id, i);
        }
        let upper = self.chunks[id].split_off();
        let half = self.chunks[id].len();
        let upper_id = self.attach(r + 1, upper, 0);
        let hint = if i <= half {
            self.chunks[id].insert(i, p, 1);
            if i == 0 {
                self.firsts[r] = p;
            }
            Hint::at(id, i)
        } else {
            // Not the upper half's first entry: that one was above `p`'s neighbour below.
            self.chunks[upper_id].insert(i - half, p, 1);
            Hint::at(upper_id, i - half)
        };
        self.bases[r + 1] = self.bases[r] + self.chunks[id].sum();
        hint
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
        let mut chunk = Chunk::default();
        let mut base = 0;
        for (p, n) in runs {
            if chunk.len() == CHUNK_FILL {
                let rank = self.order.len();
                self.attach(rank, std::mem::take(&mut chunk), base);
                base = self.total;
            }
            chunk.push(PositionKey::of(p), n);
            self.total += n;
        }
        if !chunk.is_empty() {
            self.attach(self.order.len(), chunk, base);
        }
    }

    /// (position, count) of every distinct position, in order.
    pub fn iter(&self) -> impl Iterator<Item = (Position, u32)> + '_ {
        self.order.iter().flat_map(|&id| {
            let chunk = &self.chunks[id as usize];
            chunk
                .keys()
                .iter()
                .zip(chunk.counts())
                .map(|(k, &n)| (k.position(), n))
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
            for (&p, &n) in chunk.keys().iter().zip(chunk.counts()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(e: i64) -> Position {
        Position::new(0, e)
    }

    #[test]
    fn moves_across_many_chunks_keep_every_count() {
        let mut c = PositionCounts::default();
        let mut model: Vec<(i64, Hint)> = Vec::new();
        for i in 0..1000 {
            model.push((i * 3 % 1001, c.insert(at(i * 3 % 1001))));
        }
        let mut x = 7u64;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (x >> 33) as usize % model.len();
            let to = ((x >> 13) % 1500) as i64;
            let hint = c.move_one(at(model[i].0), at(to), model[i].1);
            model[i] = (to, hint);
            c.check().unwrap();
            assert_eq!(
                c.find(PositionKey::of(at(to)), hint),
                Some((hint.chunk as usize, hint.index as usize))
            );
        }
        for probe in -1..1501 {
            let expected = model.iter().filter(|m| m.0 <= probe).count() as u32;
            assert_eq!(c.count_at_or_before(at(probe)), expected, "at {probe}");
        }
        for &(m, hint) in &model {
            let expected = model.iter().filter(|o| o.0 <= m).count() as u32;
            assert_eq!(c.count_at(at(m), hint), expected, "at {m}");
        }
        for (m, hint) in model.drain(..) {
            c.remove(at(m), hint);
        }
        c.check().unwrap();
        assert_eq!((c.total(), c.first()), (0, None));
    }
}
