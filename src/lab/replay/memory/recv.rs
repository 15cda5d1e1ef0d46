//! Netty's adaptive receive buffers: the size of the buffer each socket read of published entries
//! arrives in.

/// Netty's `AdaptiveRecvByteBufAllocator` size table: 16..=496 by 16, then powers of two.
pub(super) fn size_table() -> Vec<u32> {
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
pub(super) struct AdaptiveRecv {
    pub(super) index: usize,
    pub(super) min_index: usize,
    pub(super) max_index: usize,
    pub(super) decrease_now: bool,
}

/// What a socket read of `actual` bytes teaches the allocator about the next one.
pub(super) fn record(table: &[u32], a: &mut AdaptiveRecv, actual: u64) {
    let smaller = table[a.index.saturating_sub(1).max(a.min_index)] as u64;
    if actual <= smaller {
        if a.decrease_now {
            a.index = a.index.saturating_sub(1).max(a.min_index);
            a.decrease_now = false;
        } else {
            a.decrease_now = true;
        }
    } else if actual >= table[a.index] as u64 {
        a.index = (a.index + 4).min(a.max_index);
        a.decrease_now = false;
    }
}
