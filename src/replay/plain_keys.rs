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
    /// A recent value and its key, by [`slot`] of the value; `None` until used.
    recent: [Option<(&'a str, u32)>; SLOTS],
    /// Every distinct value of the batch so far (bounded by the batch's rows).
    all: FastMap<&'a str, u32>,
}

/// Where a value goes in the recent table: its length and its last (up to) 8 bytes, mixed.
#[inline]
fn slot(s: &str) -> usize {
    let b = s.as_bytes();
    let n = b.len();
    // Fixed-size loads only (a copy of a variable length would be a call per row).
    let tail = if n >= 8 {
        u64::from_le_bytes(b[n - 8..].try_into().expect("8 bytes"))
    } else if n >= 4 {
        let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        u64::from(word(0)) << 32 | u64::from(word(n - 4))
    } else if n > 0 {
        u64::from(b[0]) << 16 | u64::from(b[n / 2]) << 8 | u64::from(b[n - 1])
    } else {
        0
    };
    let mixed = (tail ^ (n as u64).rotate_left(56)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> (64 - SLOTS.trailing_zeros())) as usize
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
        let at = slot(value);
        if let Some((v, k)) = self.recent[at] {
            if v == value {
                return k as usize;
            }
        }
        let next = self.all.len() as u32;
        let k = *self.all.entry(value).or_insert(next);
        self.recent[at] = Some((value, k));
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
    }
}
