//! Path utilities: validation, joining, splitting, and ordering children by sequence number
//! (Curator's `ZKPaths`).
//!
//! ```
//! use curator_core::path;
//!
//! assert_eq!(path::make_path("/locks", "job-1"), "/locks/job-1");
//! assert_eq!(path::split("/a/b/c"), vec!["a", "b", "c"]);
//! assert!(path::validate("/a//b").is_err());
//! let mut children = vec!["x-lock-0000000010".to_string(), "y-lock-0000000002".to_string()];
//! path::sort_by_sequence(&mut children, "lock-");
//! assert_eq!(children[0], "y-lock-0000000002");
//! ```

use crate::error::{CuratorError, Result};

/// The separator of path segments.
pub const SEPARATOR: char = '/';

/// Prefix of a protected node's name: `_c_` + UUID + `-` + the name the user gave.
pub const PROTECTED_PREFIX: &str = "_c_";

/// Separator between the UUID of a protected name and the user's name.
pub const PROTECTED_SEPARATOR: char = '-';

/// Length of a protected prefix: `_c_` (3) + a hyphenated UUID (36) + `-` (1).
pub const PROTECTED_PREFIX_LEN: usize = 3 + 36 + 1;

/// Longest path accepted, in bytes: half of the largest request sent by default
/// ([`DEFAULT_MAX_REQUEST_LEN`](crate::builder::DEFAULT_MAX_REQUEST_LEN)), so that a path and a
/// namespace, each valid, always fit in one request. No request can carry a much longer path:
/// the server would close the connection.
pub const MAX_PATH_LEN: usize = crate::limits::DEFAULT_MAX_REQUEST_LEN / 2;

/// Checks that `path` is a valid absolute ZooKeeper path, as the server would.
///
/// Refused: empty, no leading slash, a trailing slash (except for `/`), an empty segment,
/// `.` or `..` segments, NUL and other control or unassigned characters, and paths longer
/// than [`MAX_PATH_LEN`] bytes.
pub fn validate(path: &str) -> Result<()> {
    validate_inner(path, false)
}

/// As [`validate`], but allows the trailing slash a sequential create may end with
/// (`/queue/` + sequence number).
pub fn validate_sequential(path: &str) -> Result<()> {
    validate_inner(path, true)
}

fn validate_inner(path: &str, sequential: bool) -> Result<()> {
    let bad = |reason| Err(CuratorError::InvalidPath { path: path.to_string(), reason });
    if path.is_empty() {
        return bad("path is empty");
    }
    if !path.starts_with(SEPARATOR) {
        return bad("path must start with '/'");
    }
    if path.len() > MAX_PATH_LEN {
        return bad("path is longer than any request may carry (path::MAX_PATH_LEN)");
    }
    if path.len() == 1 {
        return Ok(());
    }
    let body = if sequential { path.strip_suffix(SEPARATOR).unwrap_or(path) } else { path };
    if body.ends_with(SEPARATOR) {
        return bad("path must not end with '/'");
    }
    for segment in body[1..].split(SEPARATOR) {
        if segment.is_empty() {
            return bad("empty segment ('//')");
        }
        if segment == "." || segment == ".." {
            return bad("relative segments ('.' or '..') are not allowed");
        }
    }
    for c in path.chars() {
        let code = c as u32;
        let invalid = code == 0
            || (0x01..=0x1f).contains(&code)
            || (0x7f..=0x9f).contains(&code)
            || (0xd800..=0xf8ff).contains(&code)
            || (0xfff0..=0xffff).contains(&code);
        if invalid {
            return bad("path contains a control or unassigned character");
        }
    }
    Ok(())
}

/// Joins a parent path and a child name with exactly one separator.
pub fn make_path(parent: &str, child: &str) -> String {
    let parent = parent.trim_end_matches(SEPARATOR);
    let child = child.trim_start_matches(SEPARATOR);
    let mut out = String::with_capacity(parent.len() + child.len() + 2);
    if !parent.is_empty() {
        if !parent.starts_with(SEPARATOR) {
            out.push(SEPARATOR);
        }
        out.push_str(parent);
    }
    if !child.is_empty() {
        out.push(SEPARATOR);
        out.push_str(child);
    }
    if out.is_empty() {
        out.push(SEPARATOR);
    }
    out
}

/// The segments of a path, without empty ones: `/a/b` gives `["a", "b"]`.
pub fn split(path: &str) -> Vec<&str> {
    path.split(SEPARATOR).filter(|s| !s.is_empty()).collect()
}

/// Splits a path into its parent and its last segment: `/a/b` gives `("/a", "b")`, `/a`
/// gives `("/", "a")`, `/` gives `("/", "")`.
pub fn parent_and_node(path: &str) -> (&str, &str) {
    match path.rfind(SEPARATOR) {
        Some(0) => ("/", &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("/", path),
    }
}

/// The last segment of a path.
pub fn node_name(path: &str) -> &str {
    parent_and_node(path).1
}

/// The parent of a path (`/` for top-level nodes and the root).
pub fn parent(path: &str) -> &str {
    parent_and_node(path).0
}

/// The sequence number a sequential node's name ends with, read after the last occurrence of
/// `lock_name` (`lock-`, `latch-`, `__READ__`...). `None` if the name does not contain it or
/// what follows is not a number.
pub fn sequence_after(name: &str, lock_name: &str) -> Option<i64> {
    let start = name.rfind(lock_name)? + lock_name.len();
    let digits = &name[start..];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Sorts children by the sequence number after `lock_name`, as Curator orders contenders.
/// Names without one sort last, by name.
pub fn sort_by_sequence(children: &mut [String], lock_name: &str) {
    children.sort_by(|a, b| {
        let key = |s: &str| (sequence_after(s, lock_name).unwrap_or(i64::MAX), s.to_string());
        key(a).cmp(&key(b))
    });
}

/// Formats a sequence number as ZooKeeper does: ten digits, zero padded.
pub fn format_sequence(sequence: i64) -> String {
    if sequence <= i64::from(i32::MAX) {
        format!("{sequence:010}")
    } else {
        format!("{sequence:019}")
    }
}

/// The protected name for `node` with the given id: `_c_<uuid>-<node>`.
pub fn protected_name(id: &uuid::Uuid, node: &str) -> String {
    format!("{PROTECTED_PREFIX}{}{PROTECTED_SEPARATOR}{node}", id.hyphenated())
}

/// If `name` is a protected name, the name without its `_c_<uuid>-` prefix.
pub fn strip_protected_prefix(name: &str) -> &str {
    match protected_id(name) {
        Some(_) => &name[PROTECTED_PREFIX_LEN..],
        None => name,
    }
}

/// The UUID text of a protected name, if `name` is one.
pub fn protected_id(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PROTECTED_PREFIX)?;
    let id = rest.get(..36)?;
    if rest[36..].starts_with(PROTECTED_SEPARATOR) && uuid::Uuid::try_parse(id).is_ok() {
        Some(id)
    } else {
        None
    }
}

/// Every ancestor of `path`, outermost first, excluding `/` and the path itself:
/// `/a/b/c` gives `["/a", "/a/b"]`.
pub fn ancestors(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 1;
    while let Some(i) = path[from..].find(SEPARATOR) {
        out.push(&path[..from + i]);
        from += i + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_table() {
        let bad = [
            "",
            "a",
            "a/b",
            "/a/",
            "//",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/.",
            "/a\u{0}b",
            "/a\u{1}",
            "/\u{7f}",
            "/\u{fff5}",
        ];
        for p in bad {
            assert!(matches!(validate(p), Err(CuratorError::InvalidPath { .. })), "{p:?} should be invalid");
        }
        for p in ["/", "/a", "/a/b", "/a.b", "/a..b", "/.a", "/zookeeper", "/ü"] {
            assert!(validate(p).is_ok(), "{p:?} should be valid");
        }
        assert!(validate_sequential("/queue/").is_ok());
        let longest = format!("/{}", "a".repeat(MAX_PATH_LEN - 1));
        assert!(validate(&longest).is_ok());
        assert!(validate(&format!("{longest}b")).is_err());
        assert!(validate_sequential("/queue//").is_err());
    }

    #[test]
    fn joins_and_splits() {
        assert_eq!(make_path("/", "a"), "/a");
        assert_eq!(make_path("/a/", "/b"), "/a/b");
        assert_eq!(make_path("a", "b"), "/a/b");
        assert_eq!(make_path("/a", ""), "/a");
        assert_eq!(make_path("", ""), "/");
        assert_eq!(parent_and_node("/a/b"), ("/a", "b"));
        assert_eq!(parent_and_node("/a"), ("/", "a"));
        assert_eq!(ancestors("/a/b/c"), vec!["/a", "/a/b"]);
        assert!(ancestors("/a").is_empty());
    }

    #[test]
    fn sequences_and_protection() {
        assert_eq!(sequence_after("_c_x-lock-0000000042", "lock-"), Some(42));
        assert_eq!(sequence_after("lock-", "lock-"), None);
        assert_eq!(sequence_after("other", "lock-"), None);
        assert_eq!(sequence_after("a-lock-b-lock-0000000007", "lock-"), Some(7));
        assert_eq!(format_sequence(7), "0000000007");
        let id = uuid::Uuid::new_v4();
        let name = protected_name(&id, "lock-0000000001");
        assert_eq!(name.len(), PROTECTED_PREFIX_LEN + "lock-0000000001".len());
        assert_eq!(protected_id(&name), Some(id.hyphenated().to_string().as_str()));
        assert_eq!(strip_protected_prefix(&name), "lock-0000000001");
        assert_eq!(strip_protected_prefix("lock-1"), "lock-1");
        assert_eq!(protected_id("_c_not-a-uuid-lock-1"), None);
    }
}
