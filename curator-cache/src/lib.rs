//! # curator-cache
//!
//! ZooKeeper caches with the ideas and APIs of Apache Curator's, on persistent watches
//! (ZooKeeper 3.6+): [`CuratorCache`], [`PathChildrenCache`], [`NodeCache`] and [`TreeCache`].
//!
//! Coming from Java Curator? `docs/from-curator.md` in the repository maps each idiom, Java
//! then Rust.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use curator_cache::{PathChildrenCache, PathChildrenCacheEvent, StartMode};
//! use curator_core::{CreateMode, CuratorFramework};
//! use curator_test::TestingServer;
//!
//! let server = TestingServer::start().await?; // a real ZooKeeper on a free port
//! let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
//! fw.start()?;
//! fw.block_until_connected(Duration::from_secs(10)).await?;
//!
//! let cache = PathChildrenCache::new(&fw, "/members", true)?; // made at start if missing
//! let mut events = cache.events();
//! cache.start(StartMode::BuildInitialCache)?;
//! cache.wait_initialized().await?; // the first load is done
//!
//! fw.create()
//!     .creating_parents_if_needed()
//!     .with_mode(CreateMode::Ephemeral)
//!     .for_path("/members/a", b"10.0.0.1".to_vec())
//!     .await?;
//! match events.next().await {
//!     Some(PathChildrenCacheEvent::ChildAdded(child)) => assert_eq!(child.path, "/members/a"),
//!     other => panic!("unexpected {other:?}"),
//! }
//! assert_eq!(cache.current_data().len(), 1);
//! cache.close().await;
//! fw.close().await;
//! # Ok(()) }
//! ```
//!
//! ## How they work
//! Every cache is the same engine with a different scope: one persistent watch on its root
//! (recursive, or on the node only for [`NodeCache`] and single-node caches) and a map of the
//! nodes in scope.
//! - **Start and catch-up** load the whole scope with ZooKeeper's multi-read: getData and
//!   getChildren requests batched by the thousand (and by estimated reply size, well under the
//!   server's 1 MB packet limit), several batches in flight.
//! - **Each change costs one request**: a created or changed node is read once; a deletion
//!   costs nothing. Curator's `PathChildrenCache` re-lists the parent and reads every child's
//!   data on each change; this one does not.
//! - **Order**: one task applies the events in the order ZooKeeper sent them; reads are
//!   pipelined, and a read that brings nothing newer than the cache (by `mzxid`) changes
//!   nothing, so a node is never reported going back in time.
//! - **Never stale for long**: when the connection comes back (ZooKeeper does not replay
//!   events a persistent watch missed while disconnected; core's
//!   [`PersistentWatch`](curator_core::PersistentWatch) registers the watch again on the new
//!   connection), when a session is lost and a new one opens, or when a read fails, the cache
//!   loads again and reports exactly the nodes added, changed and removed meanwhile.
//! - **Listeners** are callbacks or [`EventStream`]s (core's one listener mechanism,
//!   [`curator_core::Listeners`]), each with its own unbounded queue:
//!   callbacks run on the blocking pool in order, so a slow one delays only itself, and none
//!   loses events. Caches also report connection changes (Curator's `CuratorCache` does not).
//!
//! Every item is at the crate's root: the four caches ([`CuratorCache`], [`PathChildrenCache`],
//! [`NodeCache`], [`TreeCache`]), the cached node ([`ChildData`]), the tree selector
//! ([`TreeCacheSelector`]), with core's [`EventStream`] and [`ListenerId`].
//!
//! | what | requests (measured on ZooKeeper 3.8, see the `cache_faults` tests) |
//! |---|---|
//! | a node below the root created or changed | 1 (getData) |
//! | a node below the root deleted | 0 |
//! | initial load of N nodes | about N / 1,000 + 3 multi-reads (10,000 children: 13 requests, ~25 ms here) |
//! | reconnection (same session) | AddWatch again (by core's `PersistentWatch`: zookeeper-client 0.11.2 does not re-send persistent watches) and a reload; the difference as events |
//! | lost session, failed read | a reload (with a new watch on a new session) and the difference as events |
//! | the root itself created, changed or deleted | before 3.9: AddWatch and a reload (a [`NodeCache`]: 2 requests); from 3.9: as any node |
//!
//! **ZooKeeper before 3.9** keeps one watch per path and connection (ZOOKEEPER-4466). The caches
//! survive one-shot data watches set by other recipes of the same framework on their root (they
//! register again, and load, after each change of the root). But a one-shot *children* watch set
//! on a recursive cache's root through the same framework stops firing once the cache registers
//! its watch (as after every reconnection): give such a cache its own `CuratorFramework`.
//!
//! Paths are checked when a cache is built ([`CuratorError::InvalidPath`](curator_core::CuratorError::InvalidPath));
//! the root need not exist. A [`PathChildrenCache`] makes its path and the missing parents as
//! containers when it starts, as Curator's does; the other caches do on request
//! ([`TreeCacheBuilder::create_parent_containers`], [`CuratorCacheOption::CreateParentContainers`]).
//! Data is bytes, whatever it held before.
#![warn(missing_docs)]

mod child_data;
mod curator_cache;
mod engine;
mod node_cache;
mod path_children;
mod shell;
mod tree_cache;

// The public surface, flat (docs/architecture.md section 1.1); api/curator-cache.txt lists it.
pub use child_data::{ChildData, DefaultTreeCacheSelector, TreeCacheSelector};
pub use curator_cache::{
    CuratorCache, CuratorCacheBuilder, CuratorCacheEvent, CuratorCacheListener, CuratorCacheListenerBuilder,
    CuratorCacheOption,
};
pub use curator_core::{EventStream, ListenerId};
pub use node_cache::{NodeCache, NodeCacheEvent};
pub use path_children::{
    PathChildrenCache, PathChildrenCacheBuilder, PathChildrenCacheEvent, PathChildrenCacheEventType, StartMode,
};
pub use tree_cache::{TreeCache, TreeCacheBuilder, TreeCacheEvent};

#[cfg(test)]
mod send_checks {
    use super::*;

    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: T) {}

    #[allow(dead_code, clippy::diverging_sub_expression)]
    fn caches_and_their_futures_are_send(fw: curator_core::CuratorFramework) {
        let cc = CuratorCache::build(&fw, "/a", &[]).unwrap_or_else(|_| unreachable!());
        let pcc = PathChildrenCache::new(&fw, "/a", true).unwrap_or_else(|_| unreachable!());
        let nc = NodeCache::new(&fw, "/a").unwrap_or_else(|_| unreachable!());
        let tc = TreeCache::new(&fw, "/a").unwrap_or_else(|_| unreachable!());
        send_sync(&cc);
        send_sync(&pcc);
        send_sync(&nc);
        send_sync(&tc);
        send(cc.wait_initialized());
        send(pcc.wait_initialized());
        send(pcc.close());
        send(pcc.rebuild());
        send(pcc.rebuild_node("/a/b"));
        send(pcc.clear_and_refresh());
        send(nc.close());
        send(tc.wait_initialized());
        send(cc.events());
    }
}
