//! A growable array kept in fixed-size pages, so that growing never moves what is already there.
//!
//! An entry cache's slab grows by one slot per insert and can hold millions. As one `Vec` it doubled:
//! each doubling copied the whole slab into fresh memory (the copy and the page faults were a fifth
//! of a large `insert_batch`), and up to half the capacity sat unused. Here growth adds a page and
//! copies nothing; unused capacity is under one page. The first page starts small and doubles up to
//! a full page, so a cache of a few entries stays small.

const PAGE_BITS: u32 = 12;
/// Elements per page.
const PAGE: usize = 1 << PAGE_BITS;
const FIRST_PAGE: usize = 4;

#[derive(Debug)]
pub(crate) struct Pages<T> {
    pages: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Pages<T> {
    fn default() -> Self {
        Pages {
            pages: Vec::new(),
            len: 0,
        }
    }
}

fn split(i: usize) -> (usize, usize) {
    (i >> PAGE_BITS, i & (PAGE - 1))
}

impl<T> Pages<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn push(&mut self, value: T) {
        match self.pages.last_mut() {
            Some(page) if page.len() < PAGE => {
                if page.len() == page.capacity() {
                    // Only the first page grows in place; its size bounds the copy.
                    let grown = (page.capacity() * 2).clamp(FIRST_PAGE, PAGE);
                    page.reserve_exact(grown - page.len());
                }
                page.push(value);
            }
            _ => {
                let capacity = if self.pages.is_empty() {
                    FIRST_PAGE
                } else {
                    PAGE
                };
                let mut page = Vec::with_capacity(capacity);
                page.push(value);
                self.pages.push(page);
            }
        }
        self.len += 1;
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        let (page, at) = split(i);
        self.pages.get(page)?.get(at)
    }

    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        let (page, at) = split(i);
        self.pages.get_mut(page)?.get_mut(at)
    }

    /// Where element `i` is or would be, for prefetching; any address for an `i` out of range.
    #[inline]
    pub fn addr(&self, i: usize) -> *const T {
        let (page, at) = split(i);
        self.pages
            .get(page)
            .map_or(std::ptr::null(), |p| p.as_ptr().wrapping_add(at))
    }

    /// Swaps elements `a` and `b` (both below [`Self::len`]).
    #[inline]
    pub fn swap(&mut self, a: usize, b: usize) {
        let ((pa, ia), (pb, ib)) = (split(a), split(b));
        if pa == pb {
            self.pages[pa].swap(ia, ib);
        } else {
            let (low, high) = self.pages.split_at_mut(pa.max(pb));
            let (first, second) = (&mut low[pa.min(pb)], &mut high[0]);
            let (i_first, i_second) = if pa < pb { (ia, ib) } else { (ib, ia) };
            std::mem::swap(&mut first[i_first], &mut second[i_second]);
        }
    }

    /// Elements the pages have room for.
    pub fn capacity(&self) -> usize {
        self.pages.iter().map(Vec::capacity).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.pages.iter().flatten()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.pages.iter_mut().flatten()
    }

    /// Frees every page without running the elements' destructors.
    ///
    /// # Safety
    /// No element may own anything (a leak otherwise): the caller has emptied them all.
    pub unsafe fn forget_all(&mut self) {
        for page in &mut self.pages {
            // SAFETY: shrinking the length only; the caller vouches that nothing leaks.
            unsafe { page.set_len(0) };
        }
        *self = Pages::default();
    }
}

impl<T> std::ops::Index<usize> for Pages<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        let (page, at) = split(i);
        &self.pages[page][at]
    }
}

impl<T> std::ops::IndexMut<usize> for Pages<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        let (page, at) = split(i);
        &mut self.pages[page][at]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_within_and_across_pages() {
        let mut pages = Pages::default();
        let mut vec = Vec::new();
        for i in 0..2 * PAGE + 3 {
            pages.push(i);
            vec.push(i);
        }
        for (a, b) in [
            (0, 1),
            (3, 3),
            (5, PAGE + 7),
            (2 * PAGE + 2, 9),
            (PAGE, 2 * PAGE),
        ] {
            pages.swap(a, b);
            vec.swap(a, b);
        }
        assert!(pages.iter().eq(vec.iter()));
    }

    #[test]
    fn indexes_like_a_vec_across_pages_and_never_moves_an_element() {
        let mut pages = Pages::default();
        let mut first_of_page2 = None;
        for i in 0..3 * PAGE + 5 {
            pages.push(i);
            if i == PAGE {
                first_of_page2 = Some(pages.addr(PAGE));
            }
        }
        assert_eq!(pages.len(), 3 * PAGE + 5);
        assert_eq!(
            pages.addr(PAGE),
            first_of_page2.unwrap(),
            "growth moved a page"
        );
        for i in [0, 1, PAGE - 1, PAGE, 2 * PAGE + 7, 3 * PAGE + 4] {
            assert_eq!(pages[i], i);
            assert_eq!(pages.get(i), Some(&i));
        }
        assert_eq!(pages.get(3 * PAGE + 5), None);
        assert!(pages.addr(10 * PAGE).is_null());
        *pages.get_mut(PAGE + 1).unwrap() = 0;
        pages[PAGE + 2] = 0;
        assert_eq!(pages.iter().filter(|&&v| v == 0).count(), 3);
        assert!(pages.iter().copied().eq((0..3 * PAGE + 5).map(|i| {
            if i == PAGE + 1 || i == PAGE + 2 {
                0
            } else {
                i
            }
        })));
        // Unused room: the last page's, under one page.
        assert!(pages.capacity() - pages.len() < PAGE);
    }

    #[test]
    fn a_small_array_takes_little_room() {
        let mut pages = Pages::default();
        for i in 0..5u64 {
            pages.push(i);
        }
        assert_eq!(pages.capacity(), 8);
        // SAFETY: u64 owns nothing.
        unsafe { pages.forget_all() };
        assert_eq!((pages.len(), pages.capacity()), (0, 0));
    }
}
