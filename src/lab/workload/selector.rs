//! Key_Shared routing as Pulsar does it by default (AUTO_SPLIT with consistent hashing): a sticky
//! key is hashed with 32-bit MurmurHash3 into `1..=65535`; every consumer owns a number of points
//! on a ring of such hashes (`subscriptionKeySharedConsistentHashingReplicaPoints`, 100 by
//! default) and a key goes to the owner of the first point at or after its hash, wrapping around.
//! A consumer that leaves takes only its own points with it, so the keys of the others stay put.

/// The hashes run from 1 to this value (0 means "no hash" in Pulsar's dispatchers).
pub const STICKY_KEY_HASH_MAX: u32 = 65_535;

/// MurmurHash3 (x86, 32-bit) of `data` with seed 0.
pub fn murmur3_32(data: &[u8]) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let scramble = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h: u32 = 0;
    let mut blocks = data.chunks_exact(4);
    for b in &mut blocks {
        h ^= scramble(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks
        .remainder()
        .iter()
        .enumerate()
        .fold(0u32, |k, (i, &b)| k | (b as u32) << (8 * i));
    h ^= scramble(tail);
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// A sticky key's hash in `1..=STICKY_KEY_HASH_MAX`: the non-negative MurmurHash3 value folded
/// into the range.
pub fn sticky_key_hash(key: &[u8]) -> u32 {
    (murmur3_32(key) & 0x7fff_ffff) % STICKY_KEY_HASH_MAX + 1
}

/// The key an entry without a key carries on a Key_Shared subscription.
pub const NO_KEY: &[u8] = b"NONE_KEY";

#[derive(Debug, Clone)]
struct Point {
    hash: u32,
    /// The consumer that owns the point; later consumers whose point lands on the same hash wait
    /// behind it and take over, in order, when it leaves.
    owners: Vec<usize>,
}

/// The consistent-hashing ring of one Key_Shared subscription. Consumers are ids chosen by the
/// caller, with a name that places their points.
#[derive(Debug, Clone, Default)]
pub struct ConsistentHashRing {
    points_per_consumer: u32,
    points: Vec<Point>,
}

impl ConsistentHashRing {
    pub fn new(points_per_consumer: u32) -> Self {
        ConsistentHashRing {
            points_per_consumer,
            points: Vec::new(),
        }
    }

    fn point_hash(name: &str, i: u32) -> u32 {
        // Name, then the name's index (0: our consumer names are unique), then the point's index,
        // separated by NUL characters.
        sticky_key_hash(format!("{name}\0{}\0{i}", 0).as_bytes())
    }

    pub fn add_consumer(&mut self, id: usize, name: &str) {
        for i in 0..self.points_per_consumer {
            let hash = Self::point_hash(name, i);
            match self.points.binary_search_by_key(&hash, |p| p.hash) {
                Ok(k) => self.points[k].owners.push(id),
                Err(k) => self.points.insert(
                    k,
                    Point {
                        hash,
                        owners: vec![id],
                    },
                ),
            }
        }
    }

    pub fn remove_consumer(&mut self, id: usize, name: &str) {
        for i in 0..self.points_per_consumer {
            let hash = Self::point_hash(name, i);
            if let Ok(k) = self.points.binary_search_by_key(&hash, |p| p.hash) {
                self.points[k].owners.retain(|&o| o != id);
                if self.points[k].owners.is_empty() {
                    self.points.remove(k);
                }
            }
        }
    }

    /// The consumer that gets a hash: the owner of the first point at or after it, wrapping
    /// around; `None` when no consumer is on the ring.
    pub fn select(&self, hash: u32) -> Option<usize> {
        let k = self.points.partition_point(|p| p.hash < hash);
        self.points
            .get(k)
            .or_else(|| self.points.first())
            .map(|p| p.owners[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur3_matches_the_reference_vectors() {
        // Published test vectors of MurmurHash3_x86_32 with seed 0.
        assert_eq!(murmur3_32(b""), 0);
        assert_eq!(murmur3_32(b"hello"), 0x248b_fa47);
        assert_eq!(murmur3_32(b"Hello, world!"), 0xc036_3e43);
        assert_eq!(
            murmur3_32(b"The quick brown fox jumps over the lazy dog"),
            0x2e4f_f723
        );
    }

    #[test]
    fn hashes_stay_in_range() {
        for k in 0..10_000u32 {
            let h = sticky_key_hash(k.to_string().as_bytes());
            assert!((1..=STICKY_KEY_HASH_MAX).contains(&h));
        }
    }
}
