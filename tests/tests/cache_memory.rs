//! What a cache holds per node, counted by a global allocator of this test binary (the bytes
//! live allocations asked for): the node, its path and data, and the map's share. No Curator
//! test follows this; Curator's caches keep a node's path once too (the node is the map's value
//! and its path string is the key).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use curator_cache::{ChildData, CuratorCache};
use curator_test::TestingServer;
use futures::future::try_join_all;
use tests::caches::within;
use tests::{client, unique_path};

/// The system allocator, counting the bytes of live allocations.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every method passes the call on to `System` unchanged and counts sizes on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` is the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

const NODES: usize = 4000;
const DATA: usize = 100;

/// A CuratorCache of 4,000 nodes of 100 bytes holds, per node, no more than the node itself
/// (`Arc<ChildData>`), its path once, its data, and 24 bytes of the map's. Measured as what
/// closing and dropping the cache frees, so buffers the connection keeps for later replies do
/// not count. It held every path twice (the map's key and the node's) before, and then each
/// path in a string with room for twice the parent's path (`format!` growing it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_node_keeps_its_path_once() {
    let fw = client(&TestingServer::shared().connect_string()).await;
    let dir = format!("{}/cache", unique_path("cache-memory"));
    fw.create().creating_parents_if_needed().for_path(&dir, Vec::new()).await.expect("cache root");
    let data = vec![b'x'; DATA];
    let names: Vec<String> = (0..NODES).map(|i| format!("{dir}/node-{i:05}")).collect();
    for chunk in names.chunks(500) {
        let creates = chunk.iter().map(|p| async { fw.create().for_path(p, data.clone()).await });
        try_join_all(creates).await.expect("nodes");
    }
    let path_len = names[0].len();
    drop(names);

    let cache = CuratorCache::build(&fw, &dir, &[]).expect("cache");
    cache.start().expect("start");
    within("the first load", cache.wait_initialized()).await.expect("initialized");
    assert_eq!(cache.size(), NODES + 1, "every node and the root cached");
    let held = live();
    cache.close().await;
    drop(cache);
    // The map goes with the cache's last handle; wait until at least the data and paths are
    // freed (the engine's task may drop its handle just after close returns).
    let must_free = (NODES * (DATA + path_len)) as isize;
    let deadline = Instant::now() + Duration::from_secs(10);
    while held - live() < must_free && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await; // poll interval for the drop
    }
    let per_node = (held - live()) as usize / NODES;
    eprintln!("a cached node costs {per_node} bytes (paths of {path_len})");
    let node = 16 + std::mem::size_of::<ChildData>(); // the Arc's counts and the node
    let budget = node + path_len + DATA + 24;
    assert!(
        per_node <= budget,
        "a cached node costs {per_node} bytes; the node ({node}), its path once ({path_len}), its data ({DATA}) and \
         24 for the map make {budget}"
    );
    fw.close().await;
}
