//! The order in which Java's hash maps iterate their keys, for the port of Pulsar's cursor
//! container ([`super::pulsar_list`]): it rebuilds its list from a `ConcurrentHashMap`'s values
//! and sorts them stably, so which of the cursors at one position ends up last (the tail, where
//! its counting defect lives) is decided by this order; and it applies pending removals in a
//! `HashMap`'s order.
//!
//! Only the layout is modelled (which bin each key is in, and the order of each bin's list), with
//! the JDK 17 rules: a table of 16 bins made on the first insert; `ConcurrentHashMap` doubles it
//! once its size reaches three quarters of it (`addCount`) and moves each bin's nodes as
//! `transfer` does (the nodes before the bin's last run of one side are prepended, so reversed);
//! `HashMap` doubles once its size exceeds three quarters (`putVal`/`resize`) and keeps each
//! bin's order. A new key goes to the end of its bin's list. A bin that reaches 9 keys in a table
//! of fewer than 64 bins makes the table grow (`treeifyBin`); in a larger table it becomes a tree
//! bin, which `ConcurrentHashMap` iterates in its own list order, where new keys go to the front.
//! Two things are approximated, as they need 9 or more names in one bin: a `ConcurrentHashMap`
//! tree bin turns back into a list on a removal when 6 or fewer keys are left (Java decides from
//! the red-black tree's shape), and a `HashMap` tree bin is kept as a list (Java puts a new key
//! after its parent in the tree and moves the root to the front).

use crate::cache::fast_hash::FastMap;

/// Java's `String.hashCode` of `s`: over its UTF-16 code units, `h = 31 * h + c`.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// The name Pulsar gives a subscription's cursor (`Codec.encode`, Java's
/// `URLEncoder.encode(name, UTF_8)`), as its `String.hashCode`: what keys the cursor container's
/// map.
pub fn subscription_cursor_hash(subscription: &str) -> i32 {
    let mut h = 0i32;
    let mut push = |c: u8| h = h.wrapping_mul(31).wrapping_add(c as i32);
    for &b in subscription.as_bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => push(b),
            b' ' => push(b'+'),
            _ => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                push(b'%');
                push(HEX[(b >> 4) as usize]);
                push(HEX[(b & 15) as usize]);
            }
        }
    }
    h
}

/// Which of Java's maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `java.util.concurrent.ConcurrentHashMap`.
    Concurrent,
    /// `java.util.HashMap`.
    Plain,
}

const FIRST_TABLE: usize = 16;
const TREEIFY_AT: usize = 9;
const MIN_TREE_TABLE: usize = 64;
const UNTREEIFY_AT: usize = 6;

#[derive(Debug, Clone, Default)]
struct Bin {
    keys: Vec<u32>,
    tree: bool,
}

/// The iteration order of a Java hash map whose keys are `u32` ids, each with the `hashCode` of
/// the string it stands for. Memory follows the most keys held at once (Java's tables never
/// shrink either).
#[derive(Debug, Clone)]
pub struct JavaHashOrder {
    flavor: Flavor,
    bins: Vec<Bin>,
    /// Each key's spread hash (`h ^ (h >>> 16)`, masked to 31 bits for `ConcurrentHashMap`).
    hashes: FastMap<u32, u32>,
    /// When the table grows: `sizeCtl` (at or past it) or `threshold` (past it).
    grow_at: usize,
}

impl JavaHashOrder {
    pub fn new(flavor: Flavor) -> Self {
        JavaHashOrder {
            flavor,
            bins: Vec::new(),
            hashes: FastMap::default(),
            grow_at: 0,
        }
    }

    fn spread(&self, hash: i32) -> u32 {
        let h = hash as u32;
        let s = h ^ (h >> 16);
        match self.flavor {
            Flavor::Concurrent => s & 0x7fff_ffff,
            Flavor::Plain => s,
        }
    }

    fn bin_of(&self, spread: u32) -> usize {
        spread as usize & (self.bins.len() - 1)
    }

    /// Puts `key` (whose string's `hashCode` is `hash`); a key already held keeps its place.
    pub fn insert(&mut self, key: u32, hash: i32) {
        if self.hashes.contains_key(&key) {
            return;
        }
        if self.bins.is_empty() {
            self.bins = vec![Bin::default(); FIRST_TABLE];
            self.grow_at = FIRST_TABLE - FIRST_TABLE / 4;
        }
        let spread = self.spread(hash);
        self.hashes.insert(key, spread);
        let i = self.bin_of(spread);
        let bin = &mut self.bins[i];
        let before = bin.keys.len();
        if bin.tree && self.flavor == Flavor::Concurrent {
            bin.keys.insert(0, key);
        } else {
            bin.keys.push(key);
        }
        let crowded = !bin.tree && before + 1 >= TREEIFY_AT;
        match self.flavor {
            Flavor::Concurrent => {
                if crowded {
                    self.treeify_or_grow(i);
                }
                while self.hashes.len() >= self.grow_at {
                    self.double();
                }
            }
            Flavor::Plain => {
                if crowded {
                    self.treeify_or_grow(i);
                }
                if self.hashes.len() > self.grow_at {
                    self.double();
                }
            }
        }
    }

    /// `treeifyBin`: a small table grows instead (`ConcurrentHashMap.tryPresize(n << 1)`, which
    /// doubles until it reaches 1.5 times that, rounded up to a power of two; `HashMap.resize()`
    /// once).
    fn treeify_or_grow(&mut self, bin: usize) {
        let n = self.bins.len();
        if n >= MIN_TREE_TABLE {
            self.bins[bin].tree = true;
            return;
        }
        match self.flavor {
            Flavor::Concurrent => {
                let size = n << 1;
                let target = (size + (size >> 1) + 1).next_power_of_two();
                while target > self.grow_at {
                    self.double();
                }
            }
            Flavor::Plain => self.double(),
        }
    }

    fn double(&mut self) {
        let n = self.bins.len();
        let mut next = vec![Bin::default(); n * 2];
        for (i, bin) in std::mem::take(&mut self.bins).into_iter().enumerate() {
            let high = |k: &u32| self.hashes[k] as usize & n != 0;
            let (lo, hi): (Vec<u32>, Vec<u32>) = if bin.tree || self.flavor == Flavor::Plain {
                bin.keys.iter().partition(|k| !high(k))
            } else {
                // `transfer`: the run at the end that goes to one side moves as it is; each key
                // before it is prepended to its side.
                let run_from = (1..bin.keys.len())
                    .rev()
                    .find(|&j| high(&bin.keys[j]) != high(&bin.keys[j - 1]))
                    .unwrap_or(0);
                let run = &bin.keys[run_from..];
                let run_high = run.first().is_some_and(high);
                let mut lo: Vec<u32> = Vec::new();
                let mut hi: Vec<u32> = Vec::new();
                for k in bin.keys[..run_from].iter().rev() {
                    if high(k) {
                        hi.push(*k);
                    } else {
                        lo.push(*k);
                    }
                }
                if run_high {
                    hi.extend_from_slice(run);
                } else {
                    lo.extend_from_slice(run);
                }
                (lo, hi)
            };
            let tree_kept = |keys: &Vec<u32>| bin.tree && keys.len() > UNTREEIFY_AT;
            next[i].tree = tree_kept(&lo);
            next[i + n].tree = tree_kept(&hi);
            next[i].keys = lo;
            next[i + n].keys = hi;
        }
        self.bins = next;
        self.grow_at = match self.flavor {
            Flavor::Concurrent => 2 * n - n / 2,
            Flavor::Plain => self.grow_at * 2,
        };
    }

    /// Removes `key`; returns whether it was held.
    pub fn remove(&mut self, key: u32) -> bool {
        let Some(spread) = self.hashes.remove(&key) else {
            return false;
        };
        let i = self.bin_of(spread);
        let bin = &mut self.bins[i];
        if let Some(at) = bin.keys.iter().position(|&k| k == key) {
            bin.keys.remove(at);
        }
        if bin.tree && self.flavor == Flavor::Concurrent && bin.keys.len() <= UNTREEIFY_AT {
            bin.tree = false;
        }
        true
    }

    /// Removes every key, keeping the table (`HashMap.clear`).
    pub fn clear(&mut self) {
        self.hashes.clear();
        for bin in &mut self.bins {
            bin.keys.clear();
            bin.tree = false;
        }
    }

    /// The keys in the map's iteration order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.bins.iter().flat_map(|b| b.keys.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_hash_is_javas() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        // "hello".hashCode() in Java.
        assert_eq!(java_string_hash("hello"), 99_162_322);
        // Overflows wrap: "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // Outside the BMP: two UTF-16 units.
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn cursor_names_are_url_encoded() {
        assert_eq!(subscription_cursor_hash("sub-1"), java_string_hash("sub-1"));
        assert_eq!(subscription_cursor_hash("a b"), java_string_hash("a+b"));
        assert_eq!(subscription_cursor_hash("a/b"), java_string_hash("a%2Fb"));
        assert_eq!(subscription_cursor_hash("é"), java_string_hash("%C3%A9"));
    }

    #[test]
    fn a_small_map_iterates_by_low_hash_bits_then_insertion() {
        let mut m = JavaHashOrder::new(Flavor::Concurrent);
        // Hashes 17 and 1 share bin 1; 3 is alone in bin 3.
        m.insert(10, 17);
        m.insert(11, 3);
        m.insert(12, 1);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![10, 12, 11]);
        assert!(m.remove(10));
        assert!(!m.remove(10));
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![12, 11]);
    }

    #[test]
    fn growth_reverses_a_concurrent_bins_head_and_keeps_a_plain_ones() {
        for flavor in [Flavor::Concurrent, Flavor::Plain] {
            let mut m = JavaHashOrder::new(flavor);
            // Bin 0 of 16: hashes 0, 32, 16, 48 (bit 16 decides the side after doubling), then
            // filler keys in other bins up to the growth point.
            for (k, h) in [(0, 0), (1, 32), (2, 16), (3, 48)] {
                m.insert(k, h);
            }
            let mut key = 100;
            while m.bins.len() == 16 {
                m.insert(key, key as i32 % 15 + 1);
                key += 1;
            }
            let bin0: Vec<u32> = m.bins[0].keys.clone();
            let bin16: Vec<u32> = m.bins[16].keys.clone();
            match flavor {
                // The last run is [2, 3] (high); 0 and 1 before it are prepended to the low side.
                Flavor::Concurrent => {
                    assert_eq!(bin0, vec![1, 0]);
                    assert_eq!(bin16, vec![2, 3]);
                }
                Flavor::Plain => {
                    assert_eq!(bin0, vec![0, 1]);
                    assert_eq!(bin16, vec![2, 3]);
                }
            }
            // ConcurrentHashMap grows on its 12th key, HashMap on its 13th.
            let grew_at = key - 100 + 4;
            assert_eq!(grew_at, if flavor == Flavor::Concurrent { 12 } else { 13 });
        }
    }
}
