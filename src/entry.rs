//! What the cache hands to readers: a copy of a cached entry that shares its payload and its
//! expected-read counter with the cached original.

use crate::position::Position;
use crate::read_count::ReadCountHandler;
use bytes::Bytes;
use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Memory that holds an entry's bytes: a Rust buffer, or (in the bindings) a Python object whose
/// buffer is shared without copying. `as_any` lets the owner of a payload recover its own type, so
/// that bytes that came from Python go back to Python as the same object.
pub trait PayloadBuffer: Send + Sync + 'static {
    fn as_slice(&self) -> &[u8];
    fn as_any(&self) -> &dyn Any;
}

impl PayloadBuffer for Bytes {
    fn as_slice(&self) -> &[u8] {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl PayloadBuffer for Vec<u8> {
    fn as_slice(&self) -> &[u8] {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An entry's bytes. Empty payloads (size-only entries, as the replay lab uses) hold nothing; real
/// ones are one shared buffer, so a copy for a reader is a reference-count bump.
#[derive(Clone, Default)]
pub struct Payload(Option<Arc<dyn PayloadBuffer>>);

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Payload({} bytes)", self.len())
    }
}

impl Payload {
    pub fn new(buffer: impl PayloadBuffer) -> Self {
        if buffer.as_slice().is_empty() {
            Payload(None)
        } else {
            Payload(Some(Arc::new(buffer)))
        }
    }

    pub fn empty() -> Self {
        Payload(None)
    }

    pub fn as_slice(&self) -> &[u8] {
        self.0.as_deref().map_or(&[], |b| b.as_slice())
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The buffer, if it is of type `T`.
    pub fn buffer<T: 'static>(&self) -> Option<&T> {
        self.0
            .as_deref()
            .and_then(|b| b.as_any().downcast_ref::<T>())
    }

    /// A private copy of the bytes (the broker's `managedLedgerCacheCopyEntries`): the cached entry
    /// then no longer pins the buffer it was sliced from.
    pub fn deep_copy(&self) -> Self {
        Payload::new(self.as_slice().to_vec())
    }
}

impl From<Bytes> for Payload {
    fn from(b: Bytes) -> Self {
        Payload::new(b)
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Self {
        Payload::new(v)
    }
}

impl From<&'static [u8]> for Payload {
    fn from(v: &'static [u8]) -> Self {
        Payload::new(Bytes::from_static(v))
    }
}

/// A reader's copy of a cached entry. Releasing it consumes one expected read, once.
#[derive(Debug)]
pub struct CachedEntry {
    position: Position,
    payload: Payload,
    size: u32,
    requeue_count: u16,
    read_count: Option<ReadCountHandler>,
    released: AtomicBool,
}

impl CachedEntry {
    pub(crate) fn new(
        position: Position,
        payload: Payload,
        size: u32,
        requeue_count: u16,
        read_count: Option<ReadCountHandler>,
    ) -> Self {
        CachedEntry {
            position,
            payload,
            size,
            requeue_count,
            read_count,
            released: AtomicBool::new(false),
        }
    }

    pub fn position(&self) -> Position {
        self.position
    }

    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    pub fn data(&self) -> &[u8] {
        self.payload.as_slice()
    }

    /// The accounted size (may differ from the payload length when the caller said so).
    pub fn size(&self) -> u32 {
        self.size
    }

    /// How often the cached entry's TTL had been extended when this copy was taken.
    pub fn requeue_count(&self) -> u16 {
        self.requeue_count
    }

    /// Remaining expected reads of the cached entry; `None` if it was cached without any.
    pub fn expected_reads(&self) -> Option<i32> {
        self.read_count.as_ref().map(|h| h.expected_reads())
    }

    pub fn read_count_handler(&self) -> Option<&ReadCountHandler> {
        self.read_count.as_ref()
    }

    /// Another unreleased copy of the same entry (same payload, same read counter).
    pub fn copy(&self) -> CachedEntry {
        CachedEntry::new(
            self.position,
            self.payload.clone(),
            self.size,
            self.requeue_count,
            self.read_count.clone(),
        )
    }

    /// A copy for an entry that is not cached: no counter, nothing to consume.
    pub fn uncached(position: Position, payload: Payload) -> CachedEntry {
        let size = payload.len() as u32;
        CachedEntry::new(position, payload, size, 0, None)
    }

    /// Consumes one expected read the first time it is called; returns whether this call did.
    pub fn release(&self) -> bool {
        if self.released.swap(true, Ordering::AcqRel) {
            return false;
        }
        if let Some(h) = &self.read_count {
            h.mark_read();
        }
        true
    }

    pub fn is_released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }
}
