//! Payloads that are slices of an Arrow values buffer: a batch inserted from an Arrow binary array
//! (`EntryCache::insert_batch`) caches its entries without copying their bytes.

use crate::entry::{Payload, PayloadBuffer};
use arrow_buffer::Buffer;
use std::any::Any;

/// Bytes `start..start + len` of an Arrow values buffer. It holds the whole buffer rather than a
/// sliced `Buffer` so that entries cut from one buffer can be recognised as neighbours and read back
/// as one Arrow array without copying (see [`contiguous_run`]). The buffer's memory, imported or
/// not, lives as long as any entry or reader copy holds the slice.
#[derive(Debug, Clone)]
pub struct ArrowSlice {
    values: Buffer,
    start: usize,
    len: usize,
}

impl ArrowSlice {
    /// `None` if the range is not inside `values`.
    pub fn new(values: Buffer, start: usize, len: usize) -> Option<Self> {
        let end = start.checked_add(len)?;
        (end <= values.len()).then_some(ArrowSlice { values, start, len })
    }

    /// The buffer the slice is cut from (all of it).
    pub fn values(&self) -> &Buffer {
        &self.values
    }

    pub fn start(&self) -> usize {
        self.start
    }
}

impl PayloadBuffer for ArrowSlice {
    fn as_slice(&self) -> &[u8] {
        &self.values.as_slice()[self.start..self.start + self.len]
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
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
        let slice = payload.buffer::<ArrowSlice>()?;
        run = match run {
            None => Some((&slice.values, slice.start, slice.start + slice.len)),
            // ptr_eq: the same memory region, so one slice of it covers both payloads.
            Some((values, start, end)) if values.ptr_eq(&slice.values) && slice.start == end => {
                Some((values, start, end + slice.len))
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

    fn payload(values: &Buffer, start: usize, len: usize) -> Payload {
        Payload::new(ArrowSlice::new(values.clone(), start, len).unwrap())
    }

    #[test]
    fn slices_share_the_buffer() {
        let values = Buffer::from_vec(b"helloworld".to_vec());
        let p = payload(&values, 5, 5);
        assert_eq!(p.as_slice(), b"world");
        assert_eq!(p.as_slice().as_ptr(), values.as_slice()[5..].as_ptr());
        assert!(ArrowSlice::new(values.clone(), 8, 3).is_none());
        assert!(ArrowSlice::new(values, usize::MAX, 2).is_none());
    }

    #[test]
    fn adjacent_slices_form_a_run() {
        let values = Buffer::from_vec(b"abcdef".to_vec());
        let (a, b, c) = (
            payload(&values, 1, 2),
            payload(&values, 3, 2),
            payload(&values, 5, 1),
        );
        let run = contiguous_run([&a, &Payload::empty(), &b, &c]).unwrap();
        assert_eq!(run.as_slice(), b"bcdef");
        assert_eq!(run.as_ptr(), values.as_slice()[1..].as_ptr());
        assert!(contiguous_run([&b, &a]).is_none(), "out of order");
        assert!(contiguous_run([&a, &c]).is_none(), "a gap");
        let other = Buffer::from_vec(b"abcdef".to_vec());
        assert!(contiguous_run([&a, &payload(&other, 3, 2)]).is_none());
        assert!(contiguous_run([&a, &Payload::from(b"de".to_vec())]).is_none());
        assert!(contiguous_run([&Payload::empty()]).unwrap().is_empty());
    }
}
