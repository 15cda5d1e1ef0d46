//! An entry's bytes, behind one thin reference-counted pointer.
//!
//! Every cached entry holds a payload and eviction frees it, so its layout is on the hot path: owned
//! bytes (`From<Vec<u8>>`, `From<Bytes>` of small sizes, private copies) live in a single allocation
//! after an 8-byte header, so freeing one is one `free`; other buffers (`Payload::new`) sit after the
//! same header, a pointer to their bytes and a vtable pointer, also in one allocation. A payload is
//! one pointer wide, which keeps the cache's slot small. `Arc<dyn PayloadBuffer>` would be two
//! words, and two allocations for a `Vec`.

use crate::cache::holders::Holders;
use bytes::Bytes;
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicUsize, Ordering};

mod sized;
pub(crate) use sized::SizedPayload;

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

/// Owned buffers up to this size are copied into the payload's own allocation (one allocation, one
/// free); larger ones are kept where they are, since copying them costs more than the second free.
const COPY_UP_TO: usize = 4096;

/// The start of every payload allocation, 8 bytes (it is per cached entry). Owned bytes follow it
/// directly; every other kind of payload continues as a [`Foreign`], which says where its bytes
/// are, so reading them never goes through a vtable. The [`FOREIGN`] bit of `len` tells the two
/// apart.
#[repr(C)]
struct Header {
    refs: Holders,
    /// Owned: the length (below [`FOREIGN`]). Foreign: [`FOREIGN`] with the length in the low bits,
    /// or [`LONG`] for a buffer whose length does not fit (its vtable says).
    len: u32,
}

/// The bit of `Header::len` that marks a payload whose bytes are not inline.
const FOREIGN: u32 = 1 << 31;

/// `Header::len` of a foreign buffer of `FOREIGN - 1` bytes or more.
const LONG: u32 = u32::MAX;

/// The longest range [`PayloadGroup::slice`] cuts (its length must fit the header beside the
/// [`FOREIGN`] bit; Pulsar's entries are `int`-sized too).
pub(crate) const MAX_SLICE_LEN: usize = (LONG & !FOREIGN) as usize - 1;

/// The start of a payload that does not own its bytes inline: the header, where the bytes are, and
/// what to do with the rest of the allocation.
#[repr(C)]
struct Foreign {
    header: Header,
    ptr: *const u8,
    vtable: &'static VTable,
}

impl Foreign {
    fn new(len: usize, ptr: *const u8, vtable: &'static VTable) -> Self {
        Foreign {
            header: Header {
                refs: Holders::one(),
                len: short_len(len).map_or(LONG, |l| l | FOREIGN),
            },
            ptr,
            vtable,
        }
    }
}

const _: () = assert!(std::mem::size_of::<Header>() == 8);

struct VTable {
    /// Drops the contents and frees the allocation; called once the last reference is gone.
    release: unsafe fn(NonNull<Header>),
    /// The buffer behind the bytes, for `Payload::buffer`.
    as_any: unsafe fn(NonNull<Header>) -> Option<NonNull<dyn Any>>,
    /// The length when the header says [`LONG`].
    long_len: unsafe fn(NonNull<Header>) -> usize,
    /// Bytes of the allocation that are not the payload's bytes: the header and vtable pointer, and
    /// for an external buffer its struct (a `Vec`'s pointer, capacity and length; a Python object's
    /// handle).
    overhead: usize,
}

/// A buffer given to `Payload::new`, after its header.
#[repr(C)]
struct External<T> {
    foreign: Foreign,
    buffer: T,
}

/// An entry's bytes. Empty payloads (size-only entries, as the replay lab uses) hold nothing; real
/// ones are one shared allocation, so a copy for a reader is a reference-count bump.
#[derive(Default)]
pub struct Payload(Option<NonNull<Header>>);

// SAFETY: the allocation is immutable after construction except for `refs`, which is atomic; the
// buffers it holds are `Send + Sync` (`PayloadBuffer`'s bounds) or plain bytes.
unsafe impl Send for Payload {}
// SAFETY: as for `Send`: shared access reads immutable fields and the atomic `refs`.
unsafe impl Sync for Payload {}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Payload({} bytes)", self.len())
    }
}

impl Payload {
    /// A payload that keeps `buffer` (without copying it); `buffer::<T>()` returns it.
    pub fn new<T: PayloadBuffer>(buffer: T) -> Self {
        if buffer.as_slice().is_empty() {
            return Payload(None);
        }
        let external = Box::new(External {
            foreign: Foreign::new(0, std::ptr::null(), &External::<T>::VTABLE),
            buffer,
        });
        let raw = Box::into_raw(external);
        // SAFETY: `raw` is a live, exclusively owned allocation; the slice points into `buffer`,
        // which stays where it is (the box never moves) for as long as the allocation lives.
        unsafe {
            let slice = (*raw).buffer.as_slice();
            (*raw).foreign = Foreign::new(slice.len(), slice.as_ptr(), &External::<T>::VTABLE);
        }
        // `header` is the first field of a `repr(C)` struct, so the box's address is the header's.
        Payload(NonNull::new(raw.cast::<Header>()))
    }

    /// A payload owning a copy of `bytes`, in one allocation with its header.
    pub fn copy_from_slice(bytes: &[u8]) -> Self {
        if bytes.is_empty() {
            return Payload(None);
        }
        let Some(len) = short_len(bytes.len()) else {
            // Too long for the header: an external buffer keeps its own length.
            return Payload::new(bytes.to_vec());
        };
        // Only FOREIGN's own bit is out of a short length's reach.
        debug_assert_eq!(len & FOREIGN, 0);
        let layout = owned_layout(bytes.len());
        // SAFETY: the layout has a non-zero size (the header); the header and the bytes are
        // written before the pointer escapes, and `release_owned` frees with the same layout.
        unsafe {
            let raw = alloc(layout);
            let Some(base) = NonNull::new(raw) else {
                handle_alloc_error(layout)
            };
            let data = raw.add(std::mem::size_of::<Header>());
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
            let header = base.cast::<Header>();
            header.as_ptr().write(Header {
                refs: Holders::one(),
                len,
            });
            Payload(Some(header))
        }
    }

    pub fn empty() -> Self {
        Payload(None)
    }

    /// Whether the bytes are owned by the payload itself (no external buffer): dropping the last
    /// reference then is one `free` and never runs foreign code.
    pub fn is_owned(&self) -> bool {
        self.0.is_some_and(is_inline)
    }

    /// Whether the payload holds an external buffer (one made by `Payload::new`, or a slice of a
    /// group): dropping its last reference runs the buffer's own release, which may run its
    /// producer's code (a Python object's, an Arrow producer's).
    pub fn is_foreign(&self) -> bool {
        self.foreign().is_some()
    }

    /// The rest of the header of a payload that is not owned inline.
    fn foreign(&self) -> Option<&Foreign> {
        let h = self.0.filter(|&h| !is_inline(h))?;
        // SAFETY: a payload whose bytes are not inline is a `Foreign` (External, Member), alive
        // as long as this reference.
        Some(unsafe { &*h.as_ptr().cast::<Foreign>() })
    }

    /// The vtable of a payload that is not owned inline.
    fn foreign_vtable(&self) -> Option<&'static VTable> {
        self.foreign().map(|f| f.vtable)
    }

    /// Where the reference count lives, for prefetching before a drop; `None` if empty.
    pub(crate) fn header_addr(&self) -> Option<*const u8> {
        self.0.map(|h| h.as_ptr() as *const u8)
    }

    fn header(&self) -> Option<&Header> {
        // SAFETY: a non-empty payload holds a reference, so the allocation is alive.
        self.0.map(|h| unsafe { &*h.as_ptr() })
    }

    pub fn as_slice(&self) -> &[u8] {
        let Some(h) = self.0 else { return &[] };
        let start = match self.foreign() {
            Some(f) => f.ptr,
            None => inline_bytes(h),
        };
        // SAFETY: the bytes are immutable and owned by the allocation (or by the buffer in it),
        // alive as long as this reference; `len` is theirs.
        unsafe { std::slice::from_raw_parts(start, self.len()) }
    }

    pub fn len(&self) -> usize {
        let Some(h) = self.0 else { return 0 };
        // SAFETY: a non-empty payload holds a reference, so the allocation is alive.
        let len = unsafe { (*h.as_ptr()).len };
        match len {
            LONG => {
                let vtable = self
                    .foreign_vtable()
                    .expect("only external buffers are long");
                // SAFETY: the vtable belongs to this live allocation.
                unsafe { (vtable.long_len)(h) }
            }
            len => (len & !FOREIGN) as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The buffer, if this payload was made by `Payload::new` from a `T`, or cut from a `T` by a
    /// [`PayloadGroup`] (then the whole buffer, of which the payload's bytes are a part).
    pub fn buffer<T: 'static>(&self) -> Option<&T> {
        let h = self.0?;
        let vtable = self.foreign_vtable()?;
        // SAFETY: the vtable belongs to this allocation; the returned pointer is into it, alive as
        // long as `self`.
        let any = unsafe { (vtable.as_any)(h)? };
        // SAFETY: `any` points into the allocation, which `self` keeps alive for the borrow.
        unsafe { &*any.as_ptr() }.downcast_ref::<T>()
    }

    /// A private copy of the bytes (the broker's `managedLedgerCacheCopyEntries`): the cached entry
    /// then no longer pins the buffer it was sliced from.
    pub fn deep_copy(&self) -> Self {
        Payload::copy_from_slice(self.as_slice())
    }

    /// Bytes this payload's allocation takes beyond the payload bytes (its header), for accounting.
    pub fn overhead_bytes(&self) -> usize {
        match (self.0, self.foreign_vtable()) {
            (None, _) => 0,
            (Some(_), None) => std::mem::size_of::<Header>(),
            (Some(_), Some(vtable)) => vtable.overhead,
        }
    }
}

impl Clone for Payload {
    fn clone(&self) -> Self {
        if let Some(h) = self.header() {
            h.refs.add();
        }
        Payload(self.0)
    }
}

impl Drop for Payload {
    fn drop(&mut self) {
        let Some(h) = self.0 else { return };
        // SAFETY: this reference keeps the allocation alive until the decrement below.
        let header = unsafe { &*h.as_ptr() };
        if !header.refs.drop_one() {
            return;
        }
        match self.foreign_vtable() {
            // SAFETY: this was the last reference; the vtable frees what built the allocation.
            Some(vtable) => unsafe { (vtable.release)(h) },
            // SAFETY: this was the last reference to an allocation made by `copy_from_slice`.
            None => unsafe { release_owned(h) },
        }
    }
}

/// Whether the payload at `h` owns its bytes inline, right after its header.
#[inline]
fn is_inline(h: NonNull<Header>) -> bool {
    // SAFETY: callers pass the header of a live payload.
    unsafe { (*h.as_ptr()).len & FOREIGN == 0 }
}

/// Where the bytes of an inline payload start.
#[inline]
fn inline_bytes(h: NonNull<Header>) -> *const u8 {
    h.as_ptr()
        .cast::<u8>()
        .wrapping_add(std::mem::size_of::<Header>())
}

/// `len` as a header length (below [`FOREIGN`], with room for [`LONG`]), if it fits.
fn short_len(len: usize) -> Option<u32> {
    if len <= MAX_SLICE_LEN {
        Some(len as u32)
    } else {
        None
    }
}

fn owned_layout(len: usize) -> Layout {
    Layout::from_size_align(
        std::mem::size_of::<Header>().saturating_add(len),
        std::mem::align_of::<Header>(),
    )
    .unwrap_or_else(|_| handle_alloc_error(Layout::new::<Header>()))
}

/// SAFETY: `h` heads an allocation made by `copy_from_slice` with no references left.
unsafe fn release_owned(h: NonNull<Header>) {
    // SAFETY: the caller's contract: `h` heads a live owned allocation nobody else refers to, laid
    // out by `owned_layout` of the length its header holds.
    unsafe {
        let layout = owned_layout((*h.as_ptr()).len as usize);
        dealloc(h.as_ptr().cast::<u8>(), layout);
    }
}

impl<T: PayloadBuffer> External<T> {
    const VTABLE: VTable = VTable {
        release: Self::release,
        as_any: Self::as_any,
        long_len: Self::long_len,
        overhead: std::mem::size_of::<External<T>>(),
    };

    /// SAFETY: `h` heads a live `External<T>`.
    unsafe fn long_len(h: NonNull<Header>) -> usize {
        // SAFETY: the caller's contract: `h` heads a live `External<T>`.
        unsafe { (*h.as_ptr().cast::<External<T>>()).buffer.as_slice().len() }
    }

    /// SAFETY: `h` heads an `External<T>` made by `Payload::new` with no references left.
    unsafe fn release(h: NonNull<Header>) {
        // SAFETY: the caller's contract: `h` is the `Box<External<T>>` `Payload::new` leaked, unshared.
        drop(unsafe { Box::from_raw(h.as_ptr().cast::<External<T>>()) });
    }

    /// SAFETY: `h` heads a live `External<T>`.
    unsafe fn as_any(h: NonNull<Header>) -> Option<NonNull<dyn Any>> {
        // SAFETY: the caller's contract: `h` heads a live `External<T>`.
        let external = unsafe { &*h.as_ptr().cast::<External<T>>() };
        Some(NonNull::from(external.buffer.as_any()))
    }
}

/// A payload cut from a buffer it shares with the other payloads of its [`PayloadGroup`]. Its
/// header is one of the group's, so making it allocates nothing.
#[repr(C)]
struct Member {
    foreign: Foreign,
    group: NonNull<GroupHead>,
}

/// The start of a group's allocation, which holds the group's buffer after this head and then a
/// [`Member`] per payload the group can make.
#[repr(C)]
struct GroupHead {
    /// Members still referenced, plus one while the [`PayloadGroup`] itself lives; the last to go
    /// frees the allocation (buffer included).
    live: AtomicUsize,
    members: usize,
    release: unsafe fn(NonNull<GroupHead>),
    buffer: unsafe fn(NonNull<GroupHead>) -> NonNull<dyn Any>,
}

/// Where a group's parts lie in its allocation.
struct GroupLayout {
    layout: Layout,
    buffer_at: usize,
    members_at: usize,
}

fn group_layout<T>(members: usize) -> Option<GroupLayout> {
    let (layout, buffer_at) = Layout::new::<GroupHead>().extend(Layout::new::<T>()).ok()?;
    let (layout, members_at) = layout.extend(Layout::array::<Member>(members).ok()?).ok()?;
    Some(GroupLayout {
        layout: layout.pad_to_align(),
        buffer_at,
        members_at,
    })
}

/// Payloads that are ranges of one buffer, made without an allocation each: one allocation holds
/// the buffer and the headers of up to `capacity` payloads, and is freed once the group and every
/// payload made from it are gone. For a batch of entries cut from one buffer (the values of an
/// Arrow binary array): it then costs one allocation, not one per entry. The buffer lives as long as
/// any of its payloads does, as it would with one payload per slice.
pub struct PayloadGroup {
    head: NonNull<GroupHead>,
    /// The buffer's bytes (they never move: the buffer is in the allocation).
    bytes: *const u8,
    bytes_len: usize,
    members: NonNull<Member>,
    capacity: usize,
    made: usize,
}

// SAFETY: the group hands out payloads (themselves `Send + Sync`) and touches only members it has
// not handed out yet; the buffer is `Send + Sync` (`PayloadBuffer`'s bounds).
unsafe impl Send for PayloadGroup {}
// SAFETY: as for `Send`: shared access reads the buffer only through `Send + Sync` bounds.
unsafe impl Sync for PayloadGroup {}

impl PayloadGroup {
    /// A group over `buffer` that can make up to `capacity` payloads; `None` if that many headers
    /// do not fit in memory's address space.
    pub fn new<T: PayloadBuffer>(buffer: T, capacity: usize) -> Option<Self> {
        let parts = group_layout::<T>(capacity)?;
        // SAFETY: the layout has a non-zero size (the head); the head and the buffer are written
        // before anything reads them, and members only as payloads are made.
        unsafe {
            let raw = alloc(parts.layout);
            let Some(base) = NonNull::new(raw) else {
                handle_alloc_error(parts.layout)
            };
            let head = base.cast::<GroupHead>();
            head.as_ptr().write(GroupHead {
                live: AtomicUsize::new(capacity.saturating_add(1)),
                members: capacity,
                release: release_group::<T>,
                buffer: group_buffer::<T>,
            });
            let at = raw.add(parts.buffer_at).cast::<T>();
            at.write(buffer);
            let bytes = (*at).as_slice();
            Some(PayloadGroup {
                head,
                bytes: bytes.as_ptr(),
                bytes_len: bytes.len(),
                members: NonNull::new_unchecked(raw.add(parts.members_at).cast::<Member>()),
                capacity,
                made: 0,
            })
        }
    }

    /// The buffer's bytes `start..start + len` as a payload; `None` if the range is not in the
    /// buffer, is longer than [`MAX_SLICE_LEN`] (2 GiB - 2), or the group has made `capacity`
    /// payloads. An empty range is an empty payload.
    pub fn slice(&mut self, start: usize, len: usize) -> Option<Payload> {
        if start.checked_add(len)? > self.bytes_len {
            return None;
        }
        let short = short_len(len)?;
        if len == 0 {
            return Some(Payload(None));
        }
        if self.made == self.capacity {
            return None;
        }
        // SAFETY: member `made` is inside the allocation and not handed out yet; the bytes are in
        // the buffer (checked above), which lives as long as the allocation.
        unsafe {
            let member = self.members.as_ptr().add(self.made);
            member.write(Member {
                foreign: Foreign::new(short as usize, self.bytes.add(start), &MEMBER_VTABLE),
                group: self.head,
            });
            self.made += 1;
            Some(Payload(Some(NonNull::new_unchecked(
                member.cast::<Header>(),
            ))))
        }
    }
}

impl Drop for PayloadGroup {
    fn drop(&mut self) {
        // The members never made were counted live from the start; they go now, with the group.
        let going = self.capacity - self.made + 1;
        // SAFETY: the group's own count keeps the allocation alive until this decrement.
        unsafe { release_group_refs(self.head, going) }
    }
}

/// Drops `n` of the group's live counts, freeing it when they were the last.
///
/// SAFETY: the caller holds `n` of the counts.
unsafe fn release_group_refs(head: NonNull<GroupHead>, n: usize) {
    // SAFETY: the caller holds counts, so the group is alive.
    let h = unsafe { &*head.as_ptr() };
    if h.live.fetch_sub(n, Ordering::Release) != n {
        return;
    }
    fence(Ordering::Acquire);
    // SAFETY: those were the last counts: nothing else refers to the group.
    unsafe { (h.release)(head) };
}

/// SAFETY: `head` heads a group over a `T` with no live counts left.
unsafe fn release_group<T>(head: NonNull<GroupHead>) {
    // SAFETY: the caller's contract: `head` heads a group over a `T`, unshared; the layout is the
    // one it was allocated with, and its buffer sits at `buffer_at`.
    unsafe {
        let members = (*head.as_ptr()).members;
        let parts = group_layout::<T>(members).expect("computed when the group was made");
        let raw = head.as_ptr().cast::<u8>();
        std::ptr::drop_in_place(raw.add(parts.buffer_at).cast::<T>());
        dealloc(raw, parts.layout);
    }
}

/// SAFETY: `head` heads a live group over a `T`.
unsafe fn group_buffer<T: PayloadBuffer>(head: NonNull<GroupHead>) -> NonNull<dyn Any> {
    // SAFETY: the caller's contract: `head` heads a live group over a `T` at `buffer_at`.
    let buffer = unsafe {
        let parts = group_layout::<T>((*head.as_ptr()).members).expect("computed when made");
        &*head.as_ptr().cast::<u8>().add(parts.buffer_at).cast::<T>()
    };
    NonNull::from(buffer.as_any())
}

static MEMBER_VTABLE: VTable = VTable {
    release: release_member,
    as_any: member_buffer,
    long_len: never_long,
    overhead: std::mem::size_of::<Member>(),
};

/// Members are never [`LONG`] (`slice` refuses such ranges).
unsafe fn never_long(_: NonNull<Header>) -> usize {
    unreachable!("a member's length always fits its header")
}

/// SAFETY: `h` heads a member with no references left.
unsafe fn release_member(h: NonNull<Header>) {
    // SAFETY: the caller's contract: `h` heads a member, which holds one of its group's counts.
    unsafe { release_group_refs((*h.as_ptr().cast::<Member>()).group, 1) };
}

/// SAFETY: `h` heads a live member, which keeps its group alive.
unsafe fn member_buffer(h: NonNull<Header>) -> Option<NonNull<dyn Any>> {
    // SAFETY: the caller's contract: `h` heads a live member, which keeps its group alive.
    unsafe {
        let group = (*h.as_ptr().cast::<Member>()).group;
        Some(((*group.as_ptr()).buffer)(group))
    }
}

impl From<Bytes> for Payload {
    fn from(b: Bytes) -> Self {
        if b.len() <= COPY_UP_TO {
            Payload::copy_from_slice(&b)
        } else {
            Payload::new(b)
        }
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Self {
        if v.len() <= COPY_UP_TO {
            Payload::copy_from_slice(&v)
        } else {
            Payload::new(v)
        }
    }
}

impl From<&'static [u8]> for Payload {
    fn from(v: &'static [u8]) -> Self {
        Payload::new(Bytes::from_static(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Holds a reference to a counter, so that a test sees when it is dropped.
    struct Tracked(
        #[allow(dead_code, reason = "held for its drop, never read")] Arc<()>,
        Vec<u8>,
    );

    impl PayloadBuffer for Tracked {
        fn as_slice(&self) -> &[u8] {
            &self.1
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    #[test]
    fn owned_and_external_payloads_share_on_clone_and_free_on_last_drop() {
        let owned = Payload::from(vec![1u8, 2, 3]);
        let copy = owned.clone();
        assert_eq!(copy.as_slice(), &[1, 2, 3]);
        assert_eq!(copy.as_slice().as_ptr(), owned.as_slice().as_ptr());
        assert!(owned.buffer::<Vec<u8>>().is_none());
        drop(owned);
        assert_eq!(copy.len(), 3);

        let alive = Arc::new(());
        let external = Payload::new(Tracked(alive.clone(), vec![9; 10]));
        let other = external.clone();
        assert_eq!(external.buffer::<Tracked>().unwrap().1.len(), 10);
        assert!(external.buffer::<Vec<u8>>().is_none());
        assert_eq!(other.as_slice(), &[9; 10]);
        drop(external);
        assert_eq!(Arc::strong_count(&alive), 2, "one reference left");
        drop(other);
        assert_eq!(
            Arc::strong_count(&alive),
            1,
            "the buffer is dropped with the last reference"
        );
    }

    #[test]
    fn a_group_frees_its_buffer_after_the_group_and_its_last_payload() {
        let alive = Arc::new(());
        let mut group = PayloadGroup::new(Tracked(alive.clone(), b"abcdef".to_vec()), 4).unwrap();
        let a = group.slice(0, 2).unwrap();
        let b = group.slice(2, 3).unwrap();
        assert!(group.slice(0, 0).unwrap().is_empty(), "an empty range");
        assert!(group.slice(4, 3).is_none(), "past the end");
        assert!(group.slice(usize::MAX, 2).is_none(), "overflowing");
        let c = group.slice(5, 1).unwrap();
        let d = group.slice(0, 6).unwrap();
        assert!(group.slice(0, 1).is_none(), "capacity used up");
        assert_eq!(
            (a.as_slice(), b.as_slice(), c.as_slice()),
            (&b"ab"[..], &b"cde"[..], &b"f"[..])
        );
        assert_eq!(
            b.as_slice().as_ptr(),
            a.as_slice()[2..].as_ptr(),
            "no copies"
        );
        assert_eq!(
            a.buffer::<Tracked>().unwrap().1,
            b"abcdef",
            "the whole buffer"
        );
        assert_eq!(a.overhead_bytes(), std::mem::size_of::<Member>());
        drop(group);
        let a2 = a.clone();
        drop((a, b, d));
        assert_eq!(Arc::strong_count(&alive), 2, "c and a copy of a are left");
        drop(c);
        assert_eq!(a2.as_slice(), b"ab");
        drop(a2);
        assert_eq!(Arc::strong_count(&alive), 1, "freed with the last payload");

        // A group that made nothing, or less than it could, frees everything when dropped.
        let mut group = PayloadGroup::new(Tracked(alive.clone(), vec![1; 10]), 1000).unwrap();
        drop(PayloadGroup::new(Tracked(alive.clone(), vec![1; 10]), 0).unwrap());
        let one = group.slice(1, 1).unwrap();
        drop(group);
        assert_eq!(Arc::strong_count(&alive), 2);
        drop(one);
        assert_eq!(Arc::strong_count(&alive), 1);
        assert!(PayloadGroup::new(Vec::<u8>::new(), usize::MAX).is_none());
    }

    #[test]
    fn a_groups_payloads_dropped_on_many_threads_free_it_once() {
        let alive = Arc::new(());
        for _ in 0..20 {
            let mut group = PayloadGroup::new(Tracked(alive.clone(), vec![3; 4000]), 4000).unwrap();
            let payloads: Vec<Payload> = (0..4000).map(|i| group.slice(i, 1).unwrap()).collect();
            let copies: Vec<Payload> = payloads.iter().map(Payload::clone).collect();
            std::thread::scope(|s| {
                s.spawn(move || drop(payloads));
                s.spawn(move || drop(copies));
                drop(group);
            });
            assert_eq!(Arc::strong_count(&alive), 1);
        }
    }

    #[test]
    fn headers_are_8_bytes_and_tell_inline_bytes_from_foreign_ones() {
        assert_eq!(short_len(0), Some(0));
        assert_eq!(short_len(MAX_SLICE_LEN), Some((1 << 31) - 2));
        assert_eq!(
            short_len(MAX_SLICE_LEN + 1),
            None,
            "FOREIGN | that would be LONG"
        );
        assert_eq!(short_len(usize::MAX), None);
        let owned = Payload::copy_from_slice(b"abc");
        assert!(owned.is_owned());
        assert_eq!(owned.overhead_bytes(), 8);
        assert_eq!(owned.as_slice(), b"abc");
        assert!(owned.buffer::<Vec<u8>>().is_none());
        // A buffer that keeps its bytes inline, right after the vtable pointer.
        struct Inline([u8; 8]);
        impl PayloadBuffer for Inline {
            fn as_slice(&self) -> &[u8] {
                &self.0
            }
            fn as_any(&self) -> &dyn Any {
                self
            }
        }
        let external = Payload::new(Inline(*b"12345678"));
        assert!(!external.is_owned());
        assert_eq!(external.as_slice(), b"12345678");
        assert_eq!(external.len(), 8);
        assert_eq!(external.buffer::<Inline>().unwrap().0, *b"12345678");
        assert_eq!(external.overhead_bytes(), 8 + 8 + 8 + 8);
        let mut group = PayloadGroup::new(Vec::from(&b"xyz"[..]), 1).unwrap();
        let member = group.slice(1, 2).unwrap();
        assert!(!member.is_owned());
        assert_eq!((member.as_slice(), member.len()), (&b"yz"[..], 2));
    }

    #[test]
    fn empty_buffers_make_empty_payloads_and_deep_copies_own_their_bytes() {
        assert!(Payload::from(Vec::new()).is_empty());
        assert!(Payload::new(Bytes::new()).is_empty());
        let big = Payload::from(vec![5u8; COPY_UP_TO + 1]);
        assert!(
            big.buffer::<Vec<u8>>().is_some(),
            "large buffers are kept, not copied"
        );
        let copy = big.deep_copy();
        assert_eq!(copy.as_slice(), big.as_slice());
        assert_ne!(copy.as_slice().as_ptr(), big.as_slice().as_ptr());
        assert_eq!(std::mem::size_of::<Payload>(), 8);
    }
}
