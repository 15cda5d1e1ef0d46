//! Memory truth (PIP-430's note on shared buffers): with `copy_entries` off, a cached entry is a
//! slice of the buffer it arrived in, and that buffer stays allocated while any entry sliced from
//! it is cached. Published entries arrive through Netty's adaptive receive buffers (the broker's
//! `brokerAdaptiveRecvByteBufAllocator{Minimum,Initial,Maximum}Size`), entries read back from
//! BookKeeper in buffers of up to 64 KiB. This tracks those buffers and, sampled each second of
//! trace time, how many bytes the cached entries really retain.

use super::strategy::{CacheStrategy, EntryKey};

/// Netty's `AdaptiveRecvByteBufAllocator` size table: 16..=496 by 16, then powers of two.
fn size_table() -> Vec<u32> {
    let mut t: Vec<u32> = (1..32).map(|i| i * 16).collect();
    let mut s = 512u32;
    while s <= 1 << 30 {
        t.push(s);
        s <<= 1;
    }
    t
}

/// How big the next socket read's buffer is: grows 4 steps after a read fills it, shrinks one step
/// after two reads in a row that fit the next smaller size.
#[derive(Debug, Clone)]
struct AdaptiveRecv {
    index: usize,
    min_index: usize,
    max_index: usize,
    decrease_now: bool,
}

/// A buffer's entries in arrival order; most buffers hold one, so the first is kept inline.
#[derive(Default)]
struct Keys {
    first: Option<EntryKey>,
    rest: Vec<EntryKey>,
}

impl Keys {
    fn push(&mut self, key: EntryKey) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(key);
        } else {
            self.rest.push(key);
        }
    }

    /// Drops the uncached entries in front (entries leave mostly oldest first) and says whether
    /// one is still cached.
    fn any_cached(&mut self, cache: &dyn CacheStrategy) -> bool {
        if let Some(k) = self.first {
            if cache.contains(k) {
                return true;
            }
            self.first = None;
        }
        let gone = self
            .rest
            .iter()
            .take_while(|k| !cache.contains(**k))
            .count();
        self.rest.drain(..gone);
        !self.rest.is_empty()
    }
}

struct Buffer {
    capacity: u64,
    entries: Keys,
}

/// A topic's producer connection: its allocator state and the burst being read.
struct TopicRecv {
    recv: AdaptiveRecv,
    burst_ms: i64,
    burst_bytes: u64,
    /// The buffer the burst fills and the room left in it.
    open: Option<(usize, u64)>,
}

pub struct MemoryModel {
    table: Vec<u32>,
    start: AdaptiveRecv,
    topics: Vec<TopicRecv>,
    storage_buffer: u64,
    buffers: Vec<Buffer>,
    pub peak_retained: u64,
}

impl MemoryModel {
    pub fn new(min: u32, initial: u32, max: u32, storage_buffer: u32) -> Self {
        let table = size_table();
        let at = |size: u32| table.partition_point(|&s| s < size).min(table.len() - 1);
        let start = AdaptiveRecv {
            index: at(initial),
            min_index: at(min),
            max_index: at(max),
            decrease_now: false,
        };
        MemoryModel {
            table,
            start,
            topics: Vec::new(),
            storage_buffer: storage_buffer as u64,
            buffers: Vec::new(),
            peak_retained: 0,
        }
    }

    fn record(&self, a: &mut AdaptiveRecv, actual: u64) {
        let smaller = self.table[a.index.saturating_sub(1).max(a.min_index)] as u64;
        if actual <= smaller {
            if a.decrease_now {
                a.index = a.index.saturating_sub(1).max(a.min_index);
                a.decrease_now = false;
            } else {
                a.decrease_now = true;
            }
        } else if actual >= self.table[a.index] as u64 {
            a.index = (a.index + 4).min(a.max_index);
            a.decrease_now = false;
        }
    }

    fn new_buffer(&mut self, capacity: u64) -> usize {
        self.buffers.push(Buffer {
            capacity,
            entries: Keys::default(),
        });
        self.buffers.len() - 1
    }

    /// A published entry arrives on its topic's producer connection at `ts_us`. Entries published
    /// in the same millisecond arrive in one socket read; the read fills buffers of the allocator's
    /// current guess, and an entry that does not fit the rest of a buffer is copied into one of its
    /// own by the frame decoder.
    pub fn on_publish(&mut self, ts_us: i64, key: EntryKey, size: u32) {
        let t = key.topic as usize;
        while self.topics.len() <= t {
            self.topics.push(TopicRecv {
                recv: self.start.clone(),
                burst_ms: i64::MIN,
                burst_bytes: 0,
                open: None,
            });
        }
        let ms = ts_us.div_euclid(1000);
        let size = size as u64;
        let mut topic = std::mem::replace(
            &mut self.topics[t],
            TopicRecv {
                recv: self.start.clone(),
                burst_ms: 0,
                burst_bytes: 0,
                open: None,
            },
        );
        if topic.burst_ms != ms {
            if topic.burst_bytes > 0 {
                self.record(&mut topic.recv, topic.burst_bytes);
            }
            topic.burst_ms = ms;
            topic.burst_bytes = 0;
            topic.open = None;
        }
        topic.burst_bytes += size;
        let buffer = match topic.open {
            Some((b, room)) if room >= size => {
                topic.open = Some((b, room - size));
                b
            }
            previous => {
                let guess = self.table[topic.recv.index] as u64;
                if previous.is_some() {
                    self.record(&mut topic.recv, guess); // the last read filled its buffer
                }
                if size > guess {
                    topic.open = None;
                    self.new_buffer(size)
                } else {
                    let b = self.new_buffer(guess);
                    topic.open = Some((b, guess - size));
                    b
                }
            }
        };
        self.buffers[buffer].entries.push(key);
        self.topics[t] = topic;
    }

    /// Entries one storage read brought back, in order.
    pub fn on_storage_read(&mut self, entries: &[(EntryKey, u32)]) {
        let mut current: Option<(usize, u64)> = None;
        for &(key, size) in entries {
            let size = size as u64;
            let b = match current {
                Some((b, room)) if room >= size => {
                    current = Some((b, room - size));
                    b
                }
                _ => {
                    let cap = self.storage_buffer.max(size);
                    let b = self.new_buffer(cap);
                    current = Some((b, cap - size));
                    b
                }
            };
            self.buffers[b].entries.push(key);
        }
    }

    /// Bytes held by buffers that still back a cached entry; forgets the others.
    pub fn sample(&mut self, cache: &dyn CacheStrategy) -> u64 {
        // A flag per buffer, not a list searched per buffer: with many topics that search cost
        // topics x buffers every second.
        let mut open = vec![false; self.buffers.len()];
        for t in &self.topics {
            if let Some((b, _)) = t.open {
                open[b] = true;
            }
        }
        let mut keep = Vec::with_capacity(self.buffers.len());
        let mut remap = vec![usize::MAX; self.buffers.len()];
        let mut retained = 0;
        for (i, mut b) in std::mem::take(&mut self.buffers).into_iter().enumerate() {
            let live = b.entries.any_cached(cache);
            if live {
                retained += b.capacity;
            }
            if live || open[i] {
                remap[i] = keep.len();
                keep.push(b);
            }
        }
        self.buffers = keep;
        for t in &mut self.topics {
            if let Some((b, _)) = &mut t.open {
                *b = remap[*b];
            }
        }
        self.peak_retained = self.peak_retained.max(retained);
        retained
    }
}
