//! A cached entry's payload and the size it is accounted at, in one word.
//!
//! The slab keeps one slot per cached entry, so every word of it is per-entry memory. A payload
//! with bytes is accounted at its length, which its header already holds; a payload without bytes
//! (the lab's size-only entries) has no header, so its size goes in the word itself, marked by the
//! low bit, which a header address never has. A size that differs from the length of real bytes
//! (rare: a caller's `size=` override) does not fit here; the range cache keeps it aside.

use super::{Header, Payload};
use std::mem::ManuallyDrop;
use std::ptr::NonNull;

/// The low bit of a word that holds a size instead of a header address (headers are 4-aligned).
const SIZE_TAG: usize = 1;

// A size of up to `u32::MAX` is shifted left by one bit, past the tag.
const _: () = assert!(usize::BITS > u32::BITS);
const _: () = assert!(std::mem::align_of::<Header>() > SIZE_TAG);

/// Handed out for a word that holds a size: such a payload has no bytes.
static NO_BYTES: Payload = Payload(None);

/// A payload, or the accounted size of an entry without bytes. Never used as a `Payload` while it
/// holds a size: [`SizedPayload::payload`] and the destructor look at the tag first.
#[repr(transparent)]
pub(crate) struct SizedPayload(ManuallyDrop<Payload>);

// SAFETY: either a `Payload` (Send + Sync) or a plain number.
unsafe impl Send for SizedPayload {}
// SAFETY: as for `Send`.
unsafe impl Sync for SizedPayload {}

impl SizedPayload {
    /// `payload` accounted at `size`, and whether the word carries that size: false when the
    /// payload has bytes and `size` is not their length, and the caller must keep `size` itself.
    pub fn new(payload: Payload, size: u32) -> (Self, bool) {
        match payload.0 {
            None if size == 0 => (SizedPayload(ManuallyDrop::new(payload)), true),
            None => {
                let word = ((size as usize) << 1) | SIZE_TAG;
                let tagged = NonNull::new(std::ptr::without_provenance_mut::<Header>(word));
                (SizedPayload(ManuallyDrop::new(Payload(tagged))), true)
            }
            Some(_) => {
                let carried = payload.len() == size as usize;
                (SizedPayload(ManuallyDrop::new(payload)), carried)
            }
        }
    }

    /// The size in the word, if it holds one instead of a payload with bytes.
    #[inline]
    fn tagged_size(&self) -> Option<u32> {
        let word = self.0 .0?.as_ptr().addr();
        // The word was made from a `u32` shifted by one bit, so it fits back.
        (word & SIZE_TAG != 0).then_some((word >> 1) as u32)
    }

    #[inline]
    pub fn payload(&self) -> &Payload {
        match self.tagged_size() {
            Some(_) => &NO_BYTES,
            None => &self.0,
        }
    }

    /// The size carried: the tagged size, or the length of the bytes (which fits, or `new` would
    /// have said the size is not carried).
    #[inline]
    pub fn carried_size(&self) -> u32 {
        match self.tagged_size() {
            Some(size) => size,
            None => self.0.len() as u32,
        }
    }

    /// Hands the payload over, leaving an empty one of size 0.
    pub fn take(&mut self) -> Payload {
        let taken = std::mem::take(self);
        let this = ManuallyDrop::new(taken);
        match this.tagged_size() {
            Some(_) => Payload(None),
            // SAFETY: an untagged word is a payload, moved out exactly once (`this` is never
            // dropped).
            None => unsafe { std::ptr::read(&raw const *this.0) },
        }
    }
}

impl Default for SizedPayload {
    fn default() -> Self {
        SizedPayload(ManuallyDrop::new(Payload(None)))
    }
}

impl Drop for SizedPayload {
    fn drop(&mut self) {
        if self.tagged_size().is_none() {
            // SAFETY: an untagged word is a payload, dropped here once.
            unsafe { ManuallyDrop::drop(&mut self.0) }
        }
    }
}

impl std::fmt::Debug for SizedPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.tagged_size() {
            Some(size) => write!(f, "SizedPayload(no bytes, {size} accounted)"),
            None => write!(f, "SizedPayload({:?})", *self.0),
        }
    }
}

const _: () = assert!(std::mem::size_of::<SizedPayload>() == std::mem::size_of::<usize>());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_without_bytes_lives_in_the_word_and_reads_as_an_empty_payload() {
        for size in [0, 1, 64, u32::MAX - 1, u32::MAX] {
            let (mut s, carried) = SizedPayload::new(Payload::empty(), size);
            assert!(carried);
            assert_eq!(s.carried_size(), size);
            assert!(s.payload().is_empty());
            assert_eq!(s.payload().as_slice(), &[] as &[u8]);
            assert!(s.payload().header_addr().is_none());
            assert!(s.take().is_empty());
            assert_eq!(s.carried_size(), 0);
        }
    }

    /// Bytes that tell when they are freed (their `Arc` goes back to one holder).
    struct Tracked(
        #[allow(dead_code, reason = "held for its drop, never read")] std::sync::Arc<()>,
        Vec<u8>,
    );

    impl crate::cache::payload::PayloadBuffer for Tracked {
        fn as_slice(&self) -> &[u8] {
            &self.1
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    #[test]
    fn bytes_carry_their_length_and_are_freed_once() {
        let alive = std::sync::Arc::new(());
        let bytes = Payload::new(Tracked(alive.clone(), vec![7u8; 10]));
        let (s, carried) = SizedPayload::new(bytes.clone(), 10);
        assert!(carried);
        assert_eq!(s.carried_size(), 10);
        assert_eq!(s.payload().as_slice(), &[7u8; 10]);
        let (mut other, carried) = SizedPayload::new(bytes, 1234);
        assert!(
            !carried,
            "the caller must keep a size the bytes do not have"
        );
        let taken = other.take();
        assert!(other.payload().is_empty());
        assert_eq!(taken.as_slice(), &[7u8; 10]);
        drop((other, taken));
        assert_eq!(
            std::sync::Arc::strong_count(&alive),
            2,
            "`s` still holds the bytes"
        );
        drop(s);
        assert_eq!(
            std::sync::Arc::strong_count(&alive),
            1,
            "freed with the last holder"
        );
    }
}
