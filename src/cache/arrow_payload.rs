//! Payloads that are slices of an Arrow values buffer: a batch inserted from an Arrow binary array
//! (`EntryCache::insert_batch`) caches its entries without copying their bytes, and without an
//! allocation per entry (a [`PayloadGroup`] per values buffer).

use crate::cache::entry::{Payload, PayloadBuffer};
use crate::cache::payload::PayloadGroup;
use arrow_buffer::Buffer;
use std::any::Any;

/// An Arrow values buffer that payloads are cut from. Payloads of one buffer can be recognised as
/// neighbours and read back as one Arrow array without copying (see [`contiguous_run`]). The
/// buffer's memory, imported or not, lives as long as any entry or reader copy cut from it.
#[derive(Debug, Clone)]
pub struct ArrowValues(pub Buffer);

impl PayloadBuffer for ArrowValues {
    fn as_slice(&self) -> &[u8] {
        self.0.as_slice()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A group that cuts up to `capacity` payloads from `values`.
pub fn slices_of(values: Buffer, capacity: usize) -> Option<PayloadGroup> {
    PayloadGroup::new(ArrowValues(values), capacity)
}

/// Where a payload cut from an Arrow buffer lies in it: the buffer and the payload's start.
fn place(payload: &Payload) -> Option<(&Buffer, usize)> {
    let values = &payload.buffer::<ArrowValues>()?.0;
    // The payload's bytes are inside the buffer, so this is their offset in it.
    let start = payload.as_slice().as_ptr() as usize - values.as_ptr() as usize;
    Some((values, start))
}

/// If `payloads` lie back to back in one Arrow buffer, in this order, that buffer's slice covering
/// all of them; empty payloads (which hold no buffer) fit anywhere. `None` when any payload owns
/// other memory, or the slices are not adjacent.
pub fn contiguous_run<'a>(payloads: impl IntoIterator<Item = &'a Payload>) -> Option<Buffer> {
    let mut run: Option<(&Buffer, usize, usize)> = None;
    for payload in payloads {
        if payload.is_empty() {
            continue;
        }
        let (values, start) = place(payload)?;
        let end = start + payload.len();
        run = match run {
            None => Some((values, start, end)),
            // ptr_eq: the same memory region, so one slice of it covers both payloads.
            Some((run_values, run_start, run_end))
                if run_values.ptr_eq(values) && start == run_end =>
            {
                Some((run_values, run_start, end))
            }
            Some(_) => return None,
        };
    }
    Some(match run {
        Some((values, start, end)) => values.slice_with_length(start, end - start),
        None => Buffer::from_vec(Vec::<u8>::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_share_the_buffer() {
        let values = Buffer::from_vec(b"helloworld".to_vec());
        let mut group = slices_of(values.clone(), 2).unwrap();
        let p = group.slice(5, 5).unwrap();
        assert_eq!(p.as_slice(), b"world");
        assert_eq!(p.as_slice().as_ptr(), values.as_slice()[5..].as_ptr());
        assert!(group.slice(8, 3).is_none());
        assert!(group.slice(usize::MAX, 2).is_none());
    }

    #[test]
    fn adjacent_slices_form_a_run() {
        let values = Buffer::from_vec(b"abcdef".to_vec());
        let mut group = slices_of(values.clone(), 4).unwrap();
        let (a, b, c) = (
            group.slice(1, 2).unwrap(),
            group.slice(3, 2).unwrap(),
            group.slice(5, 1).unwrap(),
        );
        let run = contiguous_run([&a, &Payload::empty(), &b, &c]).unwrap();
        assert_eq!(run.as_slice(), b"bcdef");
        assert_eq!(run.as_ptr(), values.as_slice()[1..].as_ptr());
        assert!(contiguous_run([&b, &a]).is_none(), "out of order");
        assert!(contiguous_run([&a, &c]).is_none(), "a gap");
        let other = Buffer::from_vec(b"abcdef".to_vec());
        let elsewhere = slices_of(other, 1).unwrap().slice(3, 2).unwrap();
        assert!(contiguous_run([&a, &elsewhere]).is_none());
        assert!(contiguous_run([&a, &Payload::from(b"de".to_vec())]).is_none());
        assert!(contiguous_run([&Payload::empty()]).unwrap().is_empty());
    }
}
