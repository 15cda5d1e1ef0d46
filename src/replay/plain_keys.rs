//! Keys for the values of a plain (not dictionary-encoded) string column, within one batch: the
//! same value always gets the same small key, so the decoder can memoize what a name decoded to
//! exactly as it does for a dictionary's keys, instead of hashing and comparing every row's name
//! against the interned names.
//!
//! A trace's names are few and long (`persistent://public/default/topic-7`) and differ at the end,
//! so a small direct-mapped table indexed by the length and the last bytes finds almost every row's
//! value with one comparison; the rest go through a map of the batch's distinct values.

use crate::fast_hash::FastMap;

const SLOTS: usize = 64;

pub(super) struct PlainKeys<'a> {
    /// A recent value, its key and its [`tail`], by [`slot`] of the value; `None` until used.
    recent: [Option<(&'a str, u32, u64)>; SLOTS],
    /// Every distinct value of the batch so far (bounded by the batch's rows).
    all: FastMap<&'a str, u32>,
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

/// Where a value goes in the recent table: its length and tail, mixed.
#[inline]
fn slot(n: usize, tail: u64) -> usize {
    let mixed = (tail ^ (n as u64).rotate_left(56)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> (64 - SLOTS.trailing_zeros())) as usize
}

/// Whether two values with equal lengths and tails are equal: compares what the tail leaves out,
/// a word at a time, inline (a `memcmp` call per row cost more than the rest of the lookup).
#[inline]
fn same_head(a: &[u8], b: &[u8]) -> bool {
    let head = a.len().saturating_sub(8);
    (0..head).step_by(8).all(|at| word(a, at) == word(b, at))
}

impl<'a> PlainKeys<'a> {
    pub(super) fn new() -> Self {
        PlainKeys {
            recent: [None; SLOTS],
            all: FastMap::default(),
        }
    }

    /// The value's key: 0, 1, ... in order of first appearance in the batch.
    #[inline]
    pub(super) fn key(&mut self, value: &'a str) -> usize {
        let bytes = value.as_bytes();
        let t = tail(bytes);
        let at = slot(bytes.len(), t);
        if let Some((v, k, vt)) = self.recent[at] {
            if vt == t && v.len() == bytes.len() && same_head(v.as_bytes(), bytes) {
                return k as usize;
            }
        }
        let next = self.all.len() as u32;
        let k = *self.all.entry(value).or_insert(next);
        self.recent[at] = Some((value, k, t));
        k as usize
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
                assert_eq!(keys.key(n), i, "round {round}");
            }
        }
        // Short values and values that differ only before their last 8 bytes.
        assert_eq!(keys.key(""), 200);
        assert_eq!(keys.key("a"), 201);
        assert_eq!(keys.key("x-12345678"), 202);
        assert_eq!(keys.key("y-12345678"), 203);
        assert_eq!(keys.key("x-12345678"), 202);
        assert_eq!(keys.key(""), 200);
        // Equal lengths and last 8 bytes, different heads (one word, and past two words).
        assert_eq!(keys.key("a-12345678"), 204);
        assert_eq!(keys.key("aaaaaaaaaaaaaaaaaaaaa-tail1234"), 205);
        assert_eq!(keys.key("aaaaaaaaaaaaaaaaaaaab-tail1234"), 206);
        assert_eq!(keys.key("aaaaaaaaaaaaaaaaaaaaa-tail1234"), 205);
        assert_eq!(keys.key("a-12345678"), 204);
        // Short values of every length, with equal bytes at the positions a short tail samples.
        assert_eq!(keys.key("abc"), 207);
        assert_eq!(keys.key("axc"), 208);
        assert_eq!(keys.key("abcdefg"), 209);
        assert_eq!(keys.key("abcXefg"), 210);
        assert_eq!(keys.key("abc"), 207);
    }

    proptest::proptest! {
        /// Keys match a map of the values seen, for values that differ in few bytes anywhere (a
        /// two-letter alphabet, lengths 0 to 40, so many share lengths and tails).
        #[test]
        fn keys_are_first_appearance_order(values in proptest::collection::vec("[ab]{0,40}", 1..300)) {
            let mut keys = PlainKeys::new();
            let mut seen = std::collections::HashMap::new();
            for v in &values {
                let next = seen.len();
                let expected = *seen.entry(v.as_str()).or_insert(next);
                proptest::prop_assert_eq!(keys.key(v), expected);
            }
        }
    }
}
