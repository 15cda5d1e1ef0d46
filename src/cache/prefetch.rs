//! Cache prefetch hints, for loops that know which cold memory they will touch a few steps ahead.

/// Hints the CPU to load the cache line at `p` soon.
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe, reason = "the intrinsic is safe in newer Rust")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
