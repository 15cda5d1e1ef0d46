//! Numbers for the values of a plain (not dictionary-encoded) string column, within one batch:
//! every row of a value gets the number its first row was given (the id its name decodes to, or
//! its key among the batch's distinct values), so the decoder hashes and compares a name against
//! the interned names once per batch, not once per row.
//!
//! A trace's rows come in runs (one cursor's reads of one topic; a broker's stretch of reads), so
//! most rows repeat the previous row's value: a row is compared with the value looked up last,
//! and the rows after it a block at a time (their lengths, then their bytes against the row before
//! each, as one comparison). A row with another value goes to a small direct-mapped table indexed
//! by a hash of the whole value (names such as `persistent://public/default/topic-7-partition-1`
//! differ in the middle, so no part of a name alone tells them apart), then to a map of the
//! batch's distinct values.

use crate::cache::fast_hash::FastMap;
use arrow_array::{Array, StringArray};
use arrow_buffer::BooleanBuffer;

const SLOTS: usize = 64;

/// A value seen in the batch, with what its lookups compare first, and its number.
#[derive(Clone, Copy)]
struct Seen<'a> {
    value: &'a [u8],
    tail: u64,
    number: u32,
}

pub(super) struct PlainKeys<'a> {
    /// A recent value by [`slot`] of its hash; `None` until used.
    recent: [Option<(Seen<'a>, u64)>; SLOTS],
    /// Every distinct value of the batch so far and its number (bounded by the batch's rows).
    all: FastMap<&'a [u8], u32>,
}

/// The value's last (up to) 8 bytes as a word: for a value of 8 bytes or fewer, all of its bytes
/// (the loads overlap), so equal lengths and tails mean equal values.
#[inline]
fn tail(b: &[u8]) -> u64 {
    let n = b.len();
    // Fixed-size loads only (a copy of a variable length would be a call per row).
    if n >= 8 {
        word(b, n - 8)
    } else if n >= 4 {
        let half = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        u64::from(half(0)) << 32 | u64::from(half(n - 4))
    } else if n > 0 {
        u64::from(b[0]) << 16 | u64::from(b[n / 2]) << 8 | u64::from(b[n - 1])
    } else {
        0
    }
}

#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[inline(always)]
fn chunk(b: &[u8], at: usize) -> u128 {
    u128::from_le_bytes(b[at..at + 16].try_into().expect("16 bytes"))
}

/// A hash of the whole value: its length, tail and every 16 bytes before the tail, each chunk
/// multiplied on its own (a chain of multiplies, one per word, cost more than the lookup).
#[inline]
fn hash(b: &[u8], tail: u64) -> u64 {
    let fold = |x: u64, y: u64| {
        let p = u128::from(x) * u128::from(y);
        (p >> 64) as u64 ^ p as u64
    };
    let n = b.len();
    let mut h = fold(
        tail ^ 0x9E37_79B9_7F4A_7C15,
        n as u64 ^ 0xD6E8_FEB8_6659_FD93,
    );
    if n > 8 {
        // Chunks covering the bytes before the tail (the last one moved back to end with the
        // value, overlapping the one before it); a value under 16 bytes has one word there.
        let last = n.saturating_sub(16);
        let chunk_at = |at: usize| {
            if n >= 16 {
                chunk(b, at.min(last))
            } else {
                u128::from(word(b, 0))
            }
        };
        for at in (0..n - 8).step_by(16) {
            let c = chunk_at(at);
            h = h.wrapping_add(fold(
                c as u64 ^ 0xA076_1D64_78BD_642F,
                (c >> 64) as u64 ^ 0xE703_7ED1_A0B4_28DB ^ at as u64,
            ));
        }
    }
    fold(h, 0x9E37_79B9_7F4A_7C15)
}

/// The recent-table slot of a hash (its top bits, the best mixed).
#[inline]
fn slot(hash: u64) -> usize {
    (hash >> (64 - SLOTS.trailing_zeros())) as usize
}

/// Whether `seen` holds `b` (whose tail is `t`): lengths, then tails, then the rest (see
/// [`first_difference`]).
#[inline]
fn holds(seen: &Seen<'_>, b: &[u8], t: u64) -> bool {
    let a = seen.value;
    let n = b.len();
    a.len() == n
        && seen.tail == t
        && match n {
            // The tail holds every byte.
            0..=8 => true,
            9..=16 => word(a, 0) == word(b, 0),
            _ => first_difference(a, b).is_none(),
        }
}

/// How many rows [`repeats_after`] checks at once, first and at most: the blocks double while the
/// run goes on, so a short run (a topic's few rows) costs a few rows' checks and a long one (an
/// op's hundreds) a few blocks.
const FIRST_BLOCK: usize = 4;
/// See [`FIRST_BLOCK`].
const MAX_BLOCK: usize = 256;

/// How many rows from `from` on (below `end`) repeat row `from - 1`, whose length is `n`: once the
/// lengths say a row has that length, it is compared with the row before it, which ends where it
/// starts, so a block of rows of one length is one comparison of two overlapping byte ranges, the
/// second `n` bytes after the first.
fn repeats_after(offsets: &[i32], data: &[u8], from: usize, end: usize, n: usize) -> usize {
    let at = |r: usize| offsets[r] as usize;
    let (mut same, mut block) = (0, FIRST_BLOCK);
    while from + same < end {
        let next = from + same;
        block = block.min(end - next);
        let of_length = (next..next + block)
            .take_while(|&r| at(r + 1) - at(r) == n)
            .count();
        let s = at(next);
        let len = of_length * n;
        match first_difference(&data[s..s + len], &data[s - n..s - n + len]) {
            Some(byte) => return same + byte / n,
            None => same += of_length,
        }
        if of_length < block {
            break;
        }
        block = (block * 2).min(MAX_BLOCK);
    }
    same
}

/// The index of the first byte where `a` and `b` (of equal length) differ, compared 16 bytes at
/// a time, inline (a `memcmp` call costs more than a short value's comparison); the last chunk
/// is moved back to end with the slices, over bytes already found equal.
#[inline]
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    let n = a.len();
    debug_assert_eq!(n, b.len());
    if n < 16 {
        return (0..n).find(|&i| a[i] != b[i]);
    }
    let differs_at = |at: usize| {
        let (x, y) = (chunk(a, at), chunk(b, at));
        (x != y).then(|| at + ((x ^ y).trailing_zeros() / 8) as usize)
    };
    let last = n - 16;
    (0..n).step_by(16).find_map(|at| differs_at(at.min(last)))
}

/// The first row from `from` on whose validity bit is not `valid` (or the bits' end), a word of
/// bits at a time.
fn run_end(bits: &BooleanBuffer, from: usize, valid: bool) -> usize {
    let (bytes, offset, len) = (bits.values(), bits.offset(), bits.len());
    let mut row = from;
    while row < len {
        let bit = offset + row;
        let byte = bit / 8;
        let mut word = [0u8; 8];
        let available = (bytes.len() - byte).min(8);
        word[..available].copy_from_slice(&bytes[byte..byte + available]);
        let mut w = u64::from_le_bytes(word) >> (bit % 8);
        if !valid {
            w = !w;
        }
        let usable = (64 - bit % 8).min(len - row);
        let run = w.trailing_ones() as usize;
        if run < usable {
            return row + run;
        }
        row += usable;
    }
    len
}

impl<'a> PlainKeys<'a> {
    pub(super) fn new() -> Self {
        PlainKeys {
            recent: [None; SLOTS],
            all: FastMap::default(),
        }
    }

    /// Every row's value as a number in `out` (cleared first), `null` for a null row: for a value
    /// not seen before in the batch, `first(row)` gives it, and the value's other rows repeat it.
    ///
    /// Rows come in runs, so the rows after a row that repeats the value looked up last are checked
    /// as a run (see [`repeats_after`]), and a run of nulls is found a word of the validity bits at
    /// a time; only a row with another value is looked up on its own.
    pub(super) fn map(
        &mut self,
        values: &'a StringArray,
        null: u32,
        out: &mut Vec<u32>,
        mut first: impl FnMut(usize) -> u32,
    ) {
        out.clear();
        // Offsets of a valid array are in bounds and non-decreasing.
        let (offsets, data) = (values.value_offsets(), values.value_data());
        let nulls = values.nulls().filter(|n| n.null_count() > 0);
        let rows = values.len();
        out.reserve(rows);
        let mut previous: Option<Seen<'a>> = None;
        // Rows `row..valid_end` are valid.
        let mut valid_end = if nulls.is_some() { 0 } else { rows };
        let mut row = 0;
        while row < rows {
            if row >= valid_end {
                let bits = nulls.expect("only with nulls").inner();
                if !bits.value(row) {
                    let end = run_end(bits, row, false);
                    out.resize(out.len() + (end - row), null);
                    row = end;
                    continue;
                }
                valid_end = run_end(bits, row, true);
            }
            let b = &data[offsets[row] as usize..offsets[row + 1] as usize];
            let t = tail(b);
            if let Some(p) = previous.filter(|p| holds(p, b, t)) {
                let same = 1 + repeats_after(offsets, data, row + 1, valid_end, b.len());
                out.resize(out.len() + same, p.number);
                row += same;
                continue;
            }
            let seen = self.seen(b, t, || first(row));
            previous = Some(seen);
            out.push(seen.number);
            row += 1;
        }
    }

    /// What a value other than the one looked up last maps to (kept out of line: the loop in
    /// [`Self::map`] keeps the repeat checks, not this).
    #[inline(never)]
    fn seen(&mut self, bytes: &'a [u8], t: u64, first: impl FnOnce() -> u32) -> Seen<'a> {
        let h = hash(bytes, t);
        let at = slot(h);
        match &self.recent[at] {
            Some((seen, sh)) if *sh == h && holds(seen, bytes, t) => *seen,
            _ => {
                let number = *self.all.entry(bytes).or_insert_with(first);
                let seen = Seen {
                    value: bytes,
                    tail: t,
                    number,
                };
                self.recent[at] = Some((seen, h));
                seen
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each value's key among the distinct values of `values`, in order of first appearance, as
    /// the decoder's `keys` numbers them.
    fn keys_of<S: AsRef<str>>(values: &[S]) -> Vec<u32> {
        let array = StringArray::from_iter_values(values.iter().map(AsRef::as_ref));
        let (mut out, mut distinct) = (Vec::new(), 0);
        PlainKeys::new().map(&array, u32::MAX, &mut out, |_| {
            distinct += 1;
            distinct - 1
        });
        out
    }

    #[test]
    fn same_value_same_key_in_order_of_appearance() {
        let names: Vec<String> = (0..200)
            .map(|i| format!("persistent://t/topic-{i}"))
            .collect();
        let (mut values, mut expected) = (Vec::new(), Vec::new());
        for _round in 0..3 {
            values.extend(names.iter().map(String::as_str));
            expected.extend(0..200u32);
        }
        let checks: [(&str, u32); 17] = [
            // Short values and values that differ only before their last 8 bytes.
            ("", 200),
            ("a", 201),
            ("x-12345678", 202),
            ("y-12345678", 203),
            ("x-12345678", 202),
            ("", 200),
            // Equal lengths and last 8 bytes, different heads (one word, and past two words).
            ("a-12345678", 204),
            ("aaaaaaaaaaaaaaaaaaaaa-tail1234", 205),
            ("aaaaaaaaaaaaaaaaaaaab-tail1234", 206),
            ("aaaaaaaaaaaaaaaaaaaaa-tail1234", 205),
            ("a-12345678", 204),
            // Short values (3 and 7 bytes), with equal bytes at the positions a short tail samples.
            ("abc", 207),
            ("axc", 208),
            ("abcdefg", 209),
            ("abcXefg", 210),
            ("abc", 207),
            // Longer than 16 bytes, differing only in the chunk the last one overlaps.
            ("0123456789abcdefghij-tail1234", 211),
        ];
        for (v, k) in checks {
            values.push(v);
            expected.push(k);
        }
        assert_eq!(keys_of(&values), expected);
        assert_eq!(
            keys_of(&[
                "0123456789abcdefghij-tail1234",
                "0123456789abcdefghiX-tail1234"
            ]),
            [0, 1]
        );
    }

    #[test]
    fn names_that_differ_only_in_the_middle() {
        let names: Vec<String> = (0..50)
            .flat_map(|t| {
                (0..4).map(move |p| format!("persistent://public/default/t-{t}-partition-{p}"))
            })
            .collect();
        let (mut values, mut expected) = (Vec::new(), Vec::new());
        for _round in 0..3 {
            for (i, n) in names.iter().enumerate() {
                values.extend([n.as_str(), n.as_str()]);
                expected.extend([i as u32, i as u32]);
            }
        }
        assert_eq!(keys_of(&values), expected);
    }

    #[test]
    fn first_is_asked_once_per_value_with_its_first_row_and_nulls_get_the_null_number() {
        let array = StringArray::from(vec![
            Some("b"),
            None,
            Some("a"),
            Some("b"),
            None,
            Some("a"),
            Some("c"),
        ]);
        let mut asked = Vec::new();
        let mut out = Vec::new();
        PlainKeys::new().map(&array, 99, &mut out, |row| {
            asked.push(row);
            100 + row as u32
        });
        assert_eq!(asked, [0, 2, 6]);
        assert_eq!(out, [100, 99, 102, 100, 99, 102, 106]);
    }

    /// A run of one value ends where a row's length differs, even when the bytes that follow read
    /// the same (`a`, `b` after `ab`, `ab`).
    #[test]
    fn a_run_ends_at_a_row_of_another_length() {
        assert_eq!(
            keys_of(&["ab", "ab", "a", "b", "ab", "ab", "ab", "ab", "", "", "ab"]),
            [0, 0, 1, 2, 0, 0, 0, 0, 3, 3, 0]
        );
    }

    proptest::proptest! {
        /// Keys match a map of the values seen, for values that differ from one another in one or
        /// two bytes anywhere (variants of one name), drawn so that rows repeat, in runs and apart.
        #[test]
        fn keys_are_first_appearance_order(
            base in "[ab]{0,100}",
            flips in proptest::collection::vec((0usize..100, 0usize..100), 1..24),
            picks in proptest::collection::vec((0usize..24, 1usize..4), 1..300),
        ) {
            let mut pool = vec![base.clone()];
            for (i, j) in flips {
                let mut v = base.clone().into_bytes();
                if !v.is_empty() {
                    let n = v.len();
                    v[i % n] ^= 3; // 'a' <-> 'b'
                    v[j % n] ^= 3;
                }
                pool.push(String::from_utf8(v).expect("ascii"));
            }
            let mut seen = std::collections::HashMap::new();
            let (mut values, mut expected) = (Vec::new(), Vec::new());
            for (pick, run) in picks {
                let v = &pool[pick % pool.len()];
                for _ in 0..run {
                    let next = seen.len();
                    expected.push(*seen.entry(v.as_str()).or_insert(next) as u32);
                    values.push(v.as_str());
                }
            }
            proptest::prop_assert_eq!(keys_of(&values), expected);
        }

        /// The same for long runs (past the largest block), nulls in runs and apart, and a slice
        /// of a longer array (so offsets and validity bits start mid-buffer): each value's rows get
        /// the number `first` gave at its first row, and `first` is asked once per value.
        #[test]
        fn runs_nulls_and_slices_match_a_map(
            base in "[ab]{0,40}",
            flips in proptest::collection::vec(0usize..40, 1..8),
            picks in proptest::collection::vec((0usize..13, 1usize..600), 1..30),
            skip in 0usize..70,
        ) {
            // Values of other lengths too (one byte more, one less, empty), so that the lengths
            // decide where some runs end.
            let shorter = base.get(..base.len().saturating_sub(1)).unwrap_or("").to_string();
            let mut pool: Vec<Option<String>> = vec![
                Some(base.clone()),
                None,
                Some(format!("{base}a")),
                Some(shorter),
                Some(String::new()),
            ];
            for i in flips {
                let mut v = base.clone().into_bytes();
                if !v.is_empty() {
                    let n = v.len();
                    v[i % n] ^= 3;
                }
                pool.push(Some(String::from_utf8(v).expect("ascii")));
            }
            let mut values: Vec<Option<&str>> = (0..skip)
                .map(|i| pool[i % pool.len()].as_deref())
                .collect();
            for &(pick, run) in &picks {
                values.extend(std::iter::repeat_n(pool[pick % pool.len()].as_deref(), run));
            }
            let whole = StringArray::from(values.clone());
            let array = whole.slice(skip, values.len() - skip);
            let (mut seen, mut expected_asked) = (std::collections::HashMap::new(), Vec::new());
            let expected: Vec<u32> = values[skip..]
                .iter()
                .enumerate()
                .map(|(row, v)| match v {
                    None => u32::MAX,
                    Some(v) => *seen.entry(*v).or_insert_with(|| {
                        expected_asked.push(row);
                        1000 + row as u32
                    }),
                })
                .collect();
            let (mut out, mut asked) = (Vec::new(), Vec::new());
            PlainKeys::new().map(&array, u32::MAX, &mut out, |row| {
                asked.push(row);
                1000 + row as u32
            });
            proptest::prop_assert_eq!(out, expected);
            proptest::prop_assert_eq!(asked, expected_asked);
        }
    }
}
