//! A multiset of positions that answers "how many are at or before `p`" in O(log n): the sorted
//! positions are cut into short contiguous chunks, and each chunk carries the count of everything in
//! the chunks before it. A move costs two binary searches, a shift inside one chunk and an update of
//! the chunk bases it passes, all in contiguous memory: no node is reached through a pointer, so the
//! cost hardly depends on how many positions there are.

use crate::position::Position;

/// Distinct positions a chunk holds before it splits in two. Big enough that the chunk bases a move
/// touches are few, small enough that shifting a chunk and summing its counts stay in a few cache lines.
const CHUNK_MAX: usize = 32;
/// How full a rebuild packs the chunks, leaving room for inserts before the first split.
const CHUNK_FILL: usize = 24;

/// A distinct position and how many elements sit there, side by side so that finding a position
/// brings its count into the cache with it.
#[derive(Debug, Clone, Copy)]
struct Slot {
    position: Position,
    count: u32,
}

/// Distinct positions in increasing order.
type Chunk = Vec<Slot>;

/// Where a position was when last seen: a guess, checked before use, that saves the searches when
/// nothing moved it since.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Hint {
    chunk: u32,
    index: u32,
}

impl Hint {
    fn at(chunk: usize, index: usize) -> Self {
        // Chunks and indices are bounded by the number of cursors (u32); a wrong guess is only slower.
        Hint {
            chunk: chunk as u32,
            index: index as u32,
        }
    }
}

/// What an insert did to the chunk it went into.
enum Shift {
    None,
    Inserted,
    Split,
}

/// What removing an emptied position took away.
enum Dropped {
    Nothing,
    Entry,
    Chunk,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct PositionCounts {
    /// `firsts[k]` is the lowest position of chunk `k`: what searches read, kept apart from the
    /// chunks so that a search stays in one small array.
    firsts: Vec<Position>,
    /// `bases[k]` counts the elements of chunks `0..k`.
    bases: Vec<u32>,
    chunks: Vec<Chunk>,
    total: u32,
}

impl PositionCounts {
    /// Elements counted (with multiplicity).
    pub fn total(&self) -> u32 {
        self.total
    }

    pub fn first(&self) -> Option<Position> {
        self.firsts.first().copied()
    }

    /// The chunk that holds `p` or would: the last one starting at or before it.
    fn chunk_of(&self, p: Position) -> Option<usize> {
        self.firsts.partition_point(|f| *f <= p).checked_sub(1)
    }

    /// Elements at or before `p` (present or not).
    pub fn count_at_or_before(&self, p: Position) -> u32 {
        let Some(k) = self.chunk_of(p) else {
            return 0;
        };
        let chunk = &self.chunks[k];
        let upto = chunk.partition_point(|s| s.position <= p);
        self.bases[k] + sum(&chunk[..upto])
    }

    /// [`Self::count_at_or_before`] for a present position, found through its hint.
    pub fn count_at(&self, p: Position, hint: Hint) -> u32 {
        match self.find(p, hint) {
            Some((k, i)) => self.bases[k] + sum(&self.chunks[k][..=i]),
            None => self.count_at_or_before(p),
        }
    }

    /// Chunk and index of a present position: where the hint says if it is still there, else searched.
    fn find(&self, p: Position, hint: Hint) -> Option<(usize, usize)> {
        let (k, i) = (hint.chunk as usize, hint.index as usize);
        if let Some(chunk) = self.chunks.get(k) {
            // A short move of another cursor shifts the entries it passes by one.
            for i in [i, i.wrapping_sub(1), i + 1] {
                if chunk.get(i).is_some_and(|s| s.position == p) {
                    return Some((k, i));
                }
            }
            if self.firsts[k] <= p && self.firsts.get(k + 1).is_none_or(|next| p < *next) {
                return search(chunk, p).ok().map(|i| (k, i));
            }
        }
        let k = self.chunk_of(p)?;
        search(&self.chunks[k], p).ok().map(|i| (k, i))
    }

    /// Adds one element at `p`; returns where it is.
    pub fn insert(&mut self, p: Position) -> Hint {
        if self.chunks.is_empty() {
            self.firsts.push(p);
            self.bases.push(0);
            self.chunks.push(Chunk::default());
        }
        let k = self.chunk_of(p).unwrap_or(0);
        self.bases[k + 1..].iter_mut().for_each(|b| *b += 1);
        self.total += 1;
        let (k, i, _) = self.add_in_chunk(k, p);
        Hint::at(k, i)
    }

    /// Removes one element at `p`, which must be present.
    pub fn remove(&mut self, p: Position, hint: Hint) {
        let (k, i) = self.find(p, hint).expect("the position is present");
        self.chunks[k][i].count -= 1;
        self.bases[k + 1..].iter_mut().for_each(|b| *b -= 1);
        self.drop_if_empty(k, i);
        self.total -= 1;
    }

    /// Moves one element from `from` (which must be present) to `to`; returns where it is now.
    pub fn move_one(&mut self, from: Position, to: Position, hint: Hint) -> Hint {
        if from == to {
            let (k, i) = self.find(from, hint).expect("`from` is present");
            return Hint::at(k, i);
        }
        // The old slot is emptied first but left in place, so that the chunk indices found below
        // stay valid and a split of the destination chunk sums counts that are already right.
        let (k_from, i_from) = self.find(from, hint).expect("`from` is present");
        self.chunks[k_from][i_from].count -= 1;
        let k_to = self.chunk_near(k_from, to);
        if k_to == k_from {
            if let Some(i_to) = self.replace_in_chunk(k_from, i_from, to) {
                return Hint::at(k_from, i_to);
            }
        }
        // Chunks between the two change how many elements lie before them.
        if k_from < k_to {
            self.bases[k_from + 1..=k_to]
                .iter_mut()
                .for_each(|b| *b -= 1);
        } else if k_to < k_from {
            self.bases[k_to + 1..=k_from]
                .iter_mut()
                .for_each(|b| *b += 1);
        }
        let (k_to, i_to, shifted) = self.add_in_chunk(k_to, to);
        // Where `from` is now: an insert before it in its chunk moved it one up; a split, anywhere.
        let from_now = match shifted {
            Shift::None => Hint::at(k_from, i_from),
            Shift::Inserted if k_to == k_from && i_to <= i_from => Hint::at(k_from, i_from + 1),
            Shift::Inserted => Hint::at(k_from, i_from),
            Shift::Split => Hint::default(),
        };
        let (k_from, i_from) = self.find(from, from_now).expect("`from` is still present");
        // Dropping `from` moves `to` down one if it sat after it in the chunk, or its chunk down one.
        match self.drop_if_empty(k_from, i_from) {
            Dropped::Entry if k_from == k_to && i_from < i_to => Hint::at(k_to, i_to - 1),
            Dropped::Chunk if k_from < k_to => Hint::at(k_to - 1, i_to),
            _ => Hint::at(k_to, i_to),
        }
    }

    /// [`Self::chunk_of`] for a position near chunk `k`: cursors mostly move a little, so a few steps
    /// through `firsts` from where they were beat a search of all of it.
    fn chunk_near(&self, k: usize, p: Position) -> usize {
        const STEPS: usize = 4;
        let mut k = k;
        for _ in 0..STEPS {
            if p < self.firsts[k] {
                if k == 0 {
                    return 0;
                }
                k -= 1;
            } else if k + 1 < self.firsts.len() && self.firsts[k + 1] <= p {
                k += 1;
            } else {
                return k;
            }
        }
        self.chunk_of(p).unwrap_or(0)
    }

    /// The common short move: `from` (entry `i_from` of chunk `k`, its count already taken) emptied
    /// and `to` is new in the same chunk, so the entries between shift by one and nothing else
    /// changes. Returns `to`'s index, or `None` (nothing done) if the move is not of that kind.
    fn replace_in_chunk(&mut self, k: usize, i_from: usize, to: Position) -> Option<usize> {
        let chunk = &mut self.chunks[k];
        if chunk[i_from].count > 0 {
            return None;
        }
        let j = search_from(chunk, i_from, to).err()?;
        let i_to = if j > i_from {
            chunk[i_from..j].rotate_left(1);
            j - 1
        } else {
            chunk[j..=i_from].rotate_right(1);
            j
        };
        chunk[i_to] = Slot {
            position: to,
            count: 1,
        };
        self.firsts[k] = chunk[0].position;
        Some(i_to)
    }

    /// Removes entry `i` of chunk `k` if its count is zero, and the chunk if that empties it (an
    /// empty chunk counts nothing, so no base changes).
    fn drop_if_empty(&mut self, k: usize, i: usize) -> Dropped {
        let chunk = &mut self.chunks[k];
        if chunk[i].count > 0 {
            return Dropped::Nothing;
        }
        chunk.remove(i);
        match chunk.first().map(|s| s.position) {
            None => {
                self.firsts.remove(k);
                self.bases.remove(k);
                self.chunks.remove(k);
                Dropped::Chunk
            }
            Some(first) => {
                self.firsts[k] = first;
                Dropped::Entry
            }
        }
    }

    /// Adds one at `p` inside chunk `k` (the caller keeps the bases right), splitting a full chunk;
    /// returns where `p` is and what moved.
    fn add_in_chunk(&mut self, k: usize, p: Position) -> (usize, usize, Shift) {
        let chunk = &mut self.chunks[k];
        let i = match search(chunk, p) {
            Ok(i) => {
                chunk[i].count += 1;
                return (k, i, Shift::None);
            }
            Err(i) => i,
        };
        chunk.insert(
            i,
            Slot {
                position: p,
                count: 1,
            },
        );
        if i == 0 {
            self.firsts[k] = p;
        }
        if chunk.len() <= CHUNK_MAX {
            return (k, i, Shift::Inserted);
        }
        let half = self.split(k);
        if i < half {
            (k, i, Shift::Split)
        } else {
            (k + 1, i - half, Shift::Split)
        }
    }

    /// Moves the upper half of chunk `k` into a new chunk after it; returns how many stayed.
    fn split(&mut self, k: usize) -> usize {
        let chunk = &mut self.chunks[k];
        let half = chunk.len() / 2;
        let mut upper = Vec::with_capacity(CHUNK_MAX + 1);
        upper.extend(chunk.drain(half..));
        let base = self.bases[k] + sum(chunk);
        self.firsts.insert(k + 1, upper[0].position);
        self.bases.insert(k + 1, base);
        self.chunks.insert(k + 1, upper);
        half
    }

    /// Replaces the contents with `runs`: (position, count) in increasing position order, counts > 0.
    pub fn rebuild(&mut self, runs: impl IntoIterator<Item = (Position, u32)>) {
        *self = PositionCounts::default();
        for (p, n) in runs {
            if self.chunks.last().is_none_or(|c| c.len() >= CHUNK_FILL) {
                self.firsts.push(p);
                self.bases.push(self.total);
                self.chunks.push(Vec::with_capacity(CHUNK_MAX + 1));
            }
            let chunk = self.chunks.last_mut().expect("pushed above");
            chunk.push(Slot {
                position: p,
                count: n,
            });
            self.total += n;
        }
    }

    /// (position, count) of every distinct position, in order.
    pub fn iter(&self) -> impl Iterator<Item = (Position, u32)> + '_ {
        self.chunks
            .iter()
            .flat_map(|c| c.iter().map(|s| (s.position, s.count)))
    }

    /// Checks the chunks against each other; for tests.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = 0u32;
        let mut last: Option<Position> = None;
        if self.firsts.len() != self.chunks.len() || self.bases.len() != self.chunks.len() {
            return Err("chunk arrays differ in length".into());
        }
        for (k, chunk) in self.chunks.iter().enumerate() {
            if chunk.is_empty() || chunk.len() > CHUNK_MAX {
                return Err(format!("chunk {k} holds {}", chunk.len()));
            }
            if self.firsts[k] != chunk[0].position {
                return Err(format!("chunk {k} starts at {}", chunk[0].position));
            }
            if self.bases[k] != seen {
                return Err(format!("chunk {k} base {} != {seen}", self.bases[k]));
            }
            for &Slot {
                position: p,
                count: n,
            } in chunk
            {
                if last.is_some_and(|l| l >= p) {
                    return Err(format!("positions out of order at {p}"));
                }
                if n == 0 {
                    return Err(format!("zero count at {p}"));
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

fn search(chunk: &[Slot], p: Position) -> Result<usize, usize> {
    chunk.binary_search_by(|s| s.position.cmp(&p))
}

/// [`search`] for a position near entry `i`: a short linear walk (cursors mostly move a little),
/// then a binary search of the rest.
fn search_from(chunk: &[Slot], i: usize, p: Position) -> Result<usize, usize> {
    const STEPS: usize = 8;
    if chunk[i].position < p {
        let end = chunk.len().min(i + 1 + STEPS);
        for (j, s) in chunk.iter().enumerate().take(end).skip(i + 1) {
            if s.position >= p {
                return if s.position == p { Ok(j) } else { Err(j) };
            }
        }
        if end == chunk.len() {
            return Err(end);
        }
        search(&chunk[end..], p)
            .map(|j| j + end)
            .map_err(|j| j + end)
    } else {
        search(chunk, p)
    }
}

fn sum(slots: &[Slot]) -> u32 {
    slots.iter().map(|s| s.count).sum()
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
                c.find(at(to), hint),
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
