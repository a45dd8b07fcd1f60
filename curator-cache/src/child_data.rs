//! [`ChildData`]: one cached node, and [`TreeCacheSelector`]: which nodes a tree cache holds.
//!
//! ```
//! use curator_cache::ChildData;
//! use curator_core::zk::Stat;
//!
//! let stat = Stat { czxid: 1, mzxid: 1, pzxid: 1, ctime: 0, mtime: 0, version: 0, cversion: 0,
//!                   aversion: 0, ephemeral_owner: 0, data_length: 2, num_children: 0 };
//! let node = ChildData::new("/app/members/m1", stat, Some(b"hi".to_vec()));
//! assert_eq!(node.name(), "m1");
//! assert_eq!(node.data(), Some(&b"hi"[..]));
//! ```

use curator_core::zk::Stat;

/// One node as a cache last saw it: its path, its stat and (unless the cache was told not to
/// keep data) its data.
///
/// Caches hand these out as `Arc<ChildData>`: cloning is cheap and a node a listener holds is
/// never changed under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildData {
    /// The full path of the node (under the framework's namespace, if any).
    pub path: String,
    /// The node's stat as read with its data.
    pub stat: Stat,
    /// The node's data, or `None` when the cache does not keep data. Data is bytes: a node whose
    /// data was text yesterday and binary today is cached the same way.
    pub data: Option<Vec<u8>>,
}

impl ChildData {
    /// A node with the given path, stat and data.
    pub fn new(path: impl Into<String>, stat: Stat, data: Option<Vec<u8>>) -> Self {
        Self { path: path.into(), stat, data }
    }

    /// The full path of the node.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The last segment of the path (`""` for `/`).
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or("")
    }

    /// The node's stat.
    pub fn stat(&self) -> &Stat {
        &self.stat
    }

    /// The node's data, if the cache keeps data.
    pub fn data(&self) -> Option<&[u8]> {
        self.data.as_deref()
    }
}

/// Chooses which nodes a [`TreeCache`](crate::TreeCache) (or a [`CuratorCache`](crate::CuratorCache)
/// built with one) holds, as Curator's `TreeCacheSelector`.
///
/// A node below the root is cached when every node from the root's child down to it is
/// accepted by [`accept_child`](Self::accept_child), and its parent and every ancestor up to
/// the root may be traversed ([`traverse_children`](Self::traverse_children)). The root itself
/// is always cached. Both methods see full paths and are called for every event, so keep them
/// cheap; they must not block.
pub trait TreeCacheSelector: Send + Sync + 'static {
    /// Whether the children of `full_path` are cached (default: yes).
    fn traverse_children(&self, full_path: &str) -> bool {
        let _ = full_path;
        true
    }

    /// Whether the node `full_path` is cached (default: yes).
    fn accept_child(&self, full_path: &str) -> bool {
        let _ = full_path;
        true
    }
}

/// The selector that caches everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultTreeCacheSelector;

impl TreeCacheSelector for DefaultTreeCacheSelector {}
