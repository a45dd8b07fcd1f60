//! A counting global allocator: the bytes this process's live allocations asked for, the
//! counterpart of a JVM's used heap after a collection (the cache scenarios' memory per node).
//! It counts every allocation, one relaxed atomic add each, which no scenario here notices
//! beside its network round trips.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// The system allocator, counting.
pub(crate) struct Counting;

/// Bytes asked for by live allocations.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Bytes asked for by this process's live allocations so far.
pub(crate) fn live_bytes() -> i64 {
    LIVE.load(Ordering::Relaxed) as i64
}

fn add(bytes: usize) {
    LIVE.fetch_add(bytes as isize, Ordering::Relaxed);
}

fn sub(bytes: usize) {
    LIVE.fetch_sub(bytes as isize, Ordering::Relaxed);
}

// SAFETY: every method hands the call to `System` unchanged and only counts sizes on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` is the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size);
            sub(layout.size());
        }
        p
    }
}
