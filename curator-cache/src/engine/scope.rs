//! What a cache holds ([`Scope`]: a root, a depth, a selector) and ordered lookups of the nodes
//! below a path in the map.

use std::sync::Arc;

use curator_core::AddWatchMode;

use super::NodeMap;
use crate::child_data::{ChildData, TreeCacheSelector};

/// What a cache holds: the root and how far below it.
pub(crate) struct Scope {
    pub(crate) root: String,
    /// 0: the root only; 1: the root and its children; `usize::MAX`: everything.
    pub(crate) max_depth: usize,
    pub(crate) selector: Option<Arc<dyn TreeCacheSelector>>,
}

impl Scope {
    /// The depth of `path` below the root (0 for the root), or `None` when it is not under it.
    pub(crate) fn depth(&self, path: &str) -> Option<usize> {
        if path == self.root {
            return Some(0);
        }
        let rest = if self.root == "/" {
            path.strip_prefix('/')?
        } else {
            path.strip_prefix(self.root.as_str())?.strip_prefix('/')?
        };
        if rest.is_empty() {
            return None;
        }
        Some(rest.split('/').count())
    }

    /// Whether the node `path` belongs in the cache.
    pub(crate) fn contains(&self, path: &str) -> bool {
        let Some(depth) = self.depth(path) else { return false };
        if depth > self.max_depth {
            return false;
        }
        let Some(selector) = &self.selector else { return true };
        if depth == 0 {
            return true;
        }
        if !selector.traverse_children(&self.root) {
            return false;
        }
        let mut next = if self.root == "/" { 1 } else { self.root.len() + 1 };
        loop {
            match path[next..].find('/') {
                Some(offset) => {
                    let ancestor = &path[..next + offset];
                    if !selector.accept_child(ancestor) || !selector.traverse_children(ancestor) {
                        return false;
                    }
                    next += offset + 1;
                }
                None => return selector.accept_child(path),
            }
        }
    }

    /// Whether the children of the cached node `path`, at `depth`, are in scope at all.
    pub(super) fn lists(&self, path: &str, depth: usize) -> bool {
        depth < self.max_depth && self.selector.as_ref().is_none_or(|s| s.traverse_children(path))
    }

    /// Whether the selector (if any) takes the child at `child`.
    pub(super) fn accepts(&self, child: &str) -> bool {
        self.selector.as_ref().is_none_or(|s| s.accept_child(child))
    }

    /// The full path of the child `name` of `parent`, in a string of just its length: the
    /// cache keeps it for as long as it holds the node (`format!` left room for twice the
    /// parent's path, 40 bytes a node with 60-byte paths).
    pub(super) fn child_path(parent: &str, name: &str) -> String {
        let parent = if parent == "/" { "" } else { parent };
        let mut path = String::with_capacity(parent.len() + 1 + name.len());
        path.push_str(parent);
        path.push('/');
        path.push_str(name);
        path
    }

    /// The watch the scope needs on its root: on the node only for depth 0, else recursive.
    pub(super) fn watch_mode(&self) -> AddWatchMode {
        if self.max_depth == 0 {
            AddWatchMode::Persistent
        } else {
            AddWatchMode::PersistentRecursive
        }
    }
}

/// Whether `path` is strictly below `ancestor`.
#[cfg(test)]
pub(crate) fn is_descendant(path: &str, ancestor: &str) -> bool {
    if ancestor == "/" {
        return path.len() > 1 && path.starts_with('/');
    }
    path.len() > ancestor.len() && path.starts_with(ancestor) && path.as_bytes()[ancestor.len()] == b'/'
}

/// The keys of the nodes strictly below `path` in `map`, in order.
pub(crate) fn descendants<'a>(
    map: &'a NodeMap,
    path: &str,
) -> impl DoubleEndedIterator<Item = (&'a str, &'a Arc<ChildData>)> {
    // Keys starting with "path/" sort in ["path/", "path0"): '0' follows '/'.
    let (lo, hi) =
        if path == "/" { ("/".to_string(), "0".to_string()) } else { (format!("{path}/"), format!("{path}0")) };
    let root_too = path == "/";
    map.range(&lo, &hi).filter(move |(k, _)| !(root_too && *k == "/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_core::zk;

    struct NoB;
    impl TreeCacheSelector for NoB {
        fn accept_child(&self, full_path: &str) -> bool {
            !full_path.ends_with("/b")
        }
        fn traverse_children(&self, full_path: &str) -> bool {
            !full_path.ends_with("/leaf")
        }
    }

    fn scope(root: &str, max_depth: usize) -> Scope {
        Scope { root: root.into(), max_depth, selector: None }
    }

    #[test]
    fn depth_and_scope() {
        let s = scope("/a", 1);
        assert_eq!(s.depth("/a"), Some(0));
        assert_eq!(s.depth("/a/x"), Some(1));
        assert_eq!(s.depth("/a/x/y"), Some(2));
        assert_eq!(s.depth("/ab"), None);
        assert_eq!(s.depth("/"), None);
        assert!(s.contains("/a/x"));
        assert!(!s.contains("/a/x/y"));
        let r = scope("/", usize::MAX);
        assert_eq!(r.depth("/"), Some(0));
        assert_eq!(r.depth("/x"), Some(1));
        assert_eq!(r.depth("/x/y"), Some(2));
        let sel = Scope { root: "/r".into(), max_depth: usize::MAX, selector: Some(Arc::new(NoB)) };
        assert!(sel.contains("/r"));
        assert!(sel.contains("/r/a"));
        assert!(!sel.contains("/r/b"));
        assert!(!sel.contains("/r/b/c"));
        assert!(sel.contains("/r/leaf"));
        assert!(!sel.contains("/r/leaf/x"));
    }

    #[test]
    fn descendant_ranges() {
        let mut map = NodeMap::new();
        for p in ["/", "/a", "/a/b", "/a/b/c", "/a-x", "/a0", "/ab"] {
            let stat = zk::Stat {
                czxid: 1,
                mzxid: 1,
                pzxid: 1,
                ctime: 0,
                mtime: 0,
                version: 0,
                cversion: 0,
                aversion: 0,
                ephemeral_owner: 0,
                data_length: 0,
                num_children: 0,
            };
            map.insert(Arc::new(ChildData::new(p, stat, None)));
        }
        let below: Vec<&str> = descendants(&map, "/a").map(|(k, _)| k).collect();
        assert_eq!(below, vec!["/a/b", "/a/b/c"]);
        assert_eq!(descendants(&map, "/").count(), 6);
        assert!(is_descendant("/a/b", "/a"));
        assert!(!is_descendant("/ab", "/a"));
        assert!(is_descendant("/a", "/"));
        assert!(!is_descendant("/", "/"));
    }
}
