//! Keys for the values of a plain (not dictionary-encoded) string column, within one batch: the
//! same value always gets the same small key, so the decoder can memoize what a name decoded to
//! exactly as it does for a dictionary's keys, instead of hashing and comparing every row's name
//! against the interned names.
//!
//! A trace's rows come in runs (one cursor's reads of one topic), so most rows repeat the previous
//! row's value: one comparison. The others go to a small direct-mapped table indexed by a hash of
//! the whole value (names such as `persistent://public/default/topic-7-partition-1` differ in the
//! middle, so no part of a name alone tells them apart), then to a map of the batch's distinct
//! values.

use crate::fast_hash::FastMap;

const SLOTS: usize = 64;

/// A value seen in the batch, with what its lookups compare first.
#[derive(Clone, Copy)]
struct Seen<'a> {
    value: &'a [u8],
    tail: u64,
    key: u32,
}

pub(super) struct PlainKeys<'a> {
    /// The previous row's value.
    previous: Option<Seen<'a>>,
    /// A recent value by [`slot`] of its hash; `None` until used.
    recent: [Option<(Seen<'a>, u64)>; SLOTS],
    /// Every distinct value of the batch so far (bounded by the batch's rows).
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

/// A hash of the whole value: its length, tail and every word before the tail.
#[inline]
fn hash(b: &[u8], tail: u64) -> u64 {
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let head = b.len().saturating_sub(8);
    (0..head)
        .step_by(8)
        .fold(mix(b.len() as u64, tail), |h, at| mix(h, word(b, at)))
}

/// The recent-table slot of a hash (its top bits, the best mixed).
#[inline]
fn slot(hash: u64) -> usize {
    (hash >> (64 - SLOTS.trailing_zeros())) as usize
}

/// Whether `seen` holds `b` (whose tail is `t`): lengths, then tails, then what the tail leaves
/// out, a word at a time, inline (a `memcmp` call per row cost more than the rest of the lookup).
#[inline]
fn holds(seen: &Seen<'_>, b: &[u8], t: u64) -> bool {
    let a = seen.value;
    a.len() == b.len() && seen.tail == t && {
        let head = a.len().saturating_sub(8);
        (0..head).step_by(8).all(|at| word(a, at) == word(b, at))
    }
}

impl<'a> PlainKeys<'a> {
    pub(super) fn new() -> Self {
        PlainKeys {
            previous: None,
            recent: [None; SLOTS],
            all: FastMap::default(),
        }
    }

    /// The value's key: 0, 1, ... in order of first appearance in the batch.
    #[inline(always)]
    pub(super) fn key(&mut self, bytes: &'a [u8]) -> u32 {
        let t = tail(bytes);
        if let Some(p) = &self.previous {
            if holds(p, bytes, t) {
                return p.key;
            }
        }
        self.key_of_new_run(bytes, t)
    }

    /// [`Self::key`] for a value that differs from the previous row's (kept out of line: the
    /// decoder inlines the repeat check into its row loop, not this).
    #[inline(never)]
    fn key_of_new_run(&mut self, bytes: &'a [u8], t: u64) -> u32 {
        let h = hash(bytes, t);
        let at = slot(h);
        let seen = match &self.recent[at] {
            Some((seen, sh)) if *sh == h && holds(seen, bytes, t) => *seen,
            _ => {
                let next = self.all.len() as u32;
                let key = *self.all.entry(bytes).or_insert(next);
                let seen = Seen {
                    value: bytes,
                    tail: t,
                    key,
                };
                self.recent[at] = Some((seen, h));
                seen
            }
        };
        self.previous = Some(seen);
        seen.key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_value_same_key_in_order_of_appearance() {
        let mut keys = PlainKeys::new();
        let names: Vec<String> = (0..200)
            .map(|i| format!("persistent://t/topic-{i}"))
            .collect();
        for round in 0..3 {
            for (i, n) in names.iter().enumerate() {
                assert_eq!(keys.key(n.as_bytes()), i as u32, "round {round}");
            }
        }
        // Short values and values that differ only before their last 8 bytes.
        assert_eq!(keys.key(b""), 200);
        assert_eq!(keys.key(b"a"), 201);
        assert_eq!(keys.key(b"x-12345678"), 202);
        assert_eq!(keys.key(b"y-12345678"), 203);
        assert_eq!(keys.key(b"x-12345678"), 202);
        assert_eq!(keys.key(b""), 200);
        // Equal lengths and last 8 bytes, different heads (one word, and past two words).
        assert_eq!(keys.key(b"a-12345678"), 204);
        assert_eq!(keys.key(b"aaaaaaaaaaaaaaaaaaaaa-tail1234"), 205);
        assert_eq!(keys.key(b"aaaaaaaaaaaaaaaaaaaab-tail1234"), 206);
        assert_eq!(keys.key(b"aaaaaaaaaaaaaaaaaaaaa-tail1234"), 205);
        assert_eq!(keys.key(b"a-12345678"), 204);
        // Short values of every length, with equal bytes at the positions a short tail samples.
        assert_eq!(keys.key(b"abc"), 207);
        assert_eq!(keys.key(b"axc"), 208);
        assert_eq!(keys.key(b"abcdefg"), 209);
        assert_eq!(keys.key(b"abcXefg"), 210);
        assert_eq!(keys.key(b"abc"), 207);
    }

    #[test]
    fn names_that_differ_only_in_the_middle() {
        let mut keys = PlainKeys::new();
        let names: Vec<String> = (0..50)
            .flat_map(|t| {
                (0..4).map(move |p| format!("persistent://public/default/t-{t}-partition-{p}"))
            })
            .collect();
        for round in 0..3 {
            for (i, n) in names.iter().enumerate() {
                assert_eq!(keys.key(n.as_bytes()), i as u32, "round {round}");
                assert_eq!(keys.key(n.as_bytes()), i as u32, "round {round}, repeated");
            }
        }
    }

    proptest::proptest! {
        /// Keys match a map of the values seen, for values that differ from one another in one or
        /// two bytes anywhere (variants of one name), drawn so that rows repeat, in runs and apart.
        #[test]
        fn keys_are_first_appearance_order(
            base in "[ab]{0,40}",
            flips in proptest::collection::vec((0usize..40, 0usize..40), 1..24),
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
            let mut keys = PlainKeys::new();
            let mut seen = std::collections::HashMap::new();
            for (pick, run) in picks {
                let v = &pool[pick % pool.len()];
                for _ in 0..run {
                    let next = seen.len();
                    let expected = *seen.entry(v.as_str()).or_insert(next) as u32;
                    proptest::prop_assert_eq!(keys.key(v.as_bytes()), expected);
                }
            }
        }
    }
}
