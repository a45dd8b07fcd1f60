//! [`NodeMap`]: the nodes of a cache by full path, each path kept once.
//!
//! A map from `String` to `Arc<ChildData>` keeps every path twice, once as the key and once in
//! the node; at 50,000 cached nodes with paths of 60 bytes that was about 100 bytes a node, a
//! quarter of the cache's memory. Here the node is its own key: a set ordered by the node's
//! path, looked up by `&str` through [`Borrow`].

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use crate::child_data::ChildData;

/// A node in the set, ordered and found by its path.
#[derive(Debug, Clone)]
struct ByPath(Arc<ChildData>);

impl Borrow<str> for ByPath {
    fn borrow(&self) -> &str {
        &self.0.path
    }
}

impl PartialEq for ByPath {
    fn eq(&self, other: &Self) -> bool {
        self.0.path == other.0.path
    }
}

impl Eq for ByPath {}

impl PartialOrd for ByPath {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByPath {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.path.cmp(&other.0.path)
    }
}

/// The nodes of a cache by full path, in path order.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeMap {
    nodes: BTreeSet<ByPath>,
}

impl NodeMap {
    /// An empty map.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// How many nodes it holds.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Drops every node.
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
    }

    /// The node at `path`.
    pub(crate) fn get(&self, path: &str) -> Option<&Arc<ChildData>> {
        self.nodes.get(path).map(|n| &n.0)
    }

    /// Whether a node is at `path`.
    pub(crate) fn contains_key(&self, path: &str) -> bool {
        self.nodes.contains(path)
    }

    /// Puts `node` at its path; returns the node it replaced.
    pub(crate) fn insert(&mut self, node: Arc<ChildData>) -> Option<Arc<ChildData>> {
        self.nodes.replace(ByPath(node)).map(|old| old.0)
    }

    /// Takes the node at `path` out.
    pub(crate) fn remove(&mut self, path: &str) -> Option<Arc<ChildData>> {
        self.nodes.take(path).map(|old| old.0)
    }

    /// Every node with its path, in path order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &Arc<ChildData>)> {
        self.nodes.iter().map(|n| (n.0.path.as_str(), &n.0))
    }

    /// Every node, in path order.
    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &Arc<ChildData>> {
        self.nodes.iter().map(|n| &n.0)
    }

    /// The nodes with paths in `[from, to)`, in path order.
    pub(crate) fn range<'a>(
        &'a self,
        from: &str,
        to: &str,
    ) -> impl DoubleEndedIterator<Item = (&'a str, &'a Arc<ChildData>)> {
        self.nodes.range::<str, _>((Bound::Included(from), Bound::Excluded(to))).map(|n| (n.0.path.as_str(), &n.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_core::zk::Stat;

    fn node(path: &str, version: i32) -> Arc<ChildData> {
        let stat = Stat {
            czxid: 1,
            mzxid: 1,
            pzxid: 1,
            ctime: 0,
            mtime: 0,
            version,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        };
        Arc::new(ChildData::new(path, stat, None))
    }

    #[test]
    fn a_node_is_found_replaced_and_taken_by_its_path() {
        let mut map = NodeMap::new();
        assert!(map.insert(node("/a/b", 0)).is_none());
        assert!(map.insert(node("/a", 0)).is_none());
        assert!(map.insert(node("/a-b", 0)).is_none());
        let old = map.insert(node("/a/b", 1)).map(|n| n.stat.version);
        assert_eq!(old, Some(0));
        assert_eq!(map.len(), 3);
        assert_eq!(map.get("/a/b").map(|n| n.stat.version), Some(1));
        assert!(map.contains_key("/a") && !map.contains_key("/b"));
        let paths: Vec<&str> = map.iter().map(|(p, _)| p).collect();
        assert_eq!(paths, ["/a", "/a-b", "/a/b"]);
        let below: Vec<&str> = map.range("/a/", "/a0").map(|(p, _)| p).collect();
        assert_eq!(below, ["/a/b"]);
        assert_eq!(map.remove("/a").map(|n| n.path.clone()), Some("/a".to_string()));
        assert_eq!(map.len(), 2);
    }
}
