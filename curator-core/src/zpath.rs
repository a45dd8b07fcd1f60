//! [`ZPath`]: a ZooKeeper path whose nodes may be named parameters (Curator's x-async `ZPath`),
//! the path of a modeled node and of a schema's pattern.
//!
//! The algorithm is a list of nodes, each fixed or a parameter. Resolving fills the parameters
//! left to right with values, each checked to be one valid node name, so a value never adds a
//! level to the path; only a path with no parameter left has a full path to send.

use std::fmt;

use crate::error::{CuratorError, Result};
use crate::path;

/// The opening of a parameter's node name, as in `{id}`.
const PARAMETER_OPEN: char = '{';
/// The closing of a parameter's node name.
const PARAMETER_CLOSE: char = '}';
/// The name [`ZPath::parameter`] gives when none is asked for (Curator's default).
pub const DEFAULT_PARAMETER: &str = "id";

/// One node of a [`ZPath`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Node {
    /// A node name, as sent.
    Fixed(String),
    /// A parameter, by its name (without the braces).
    Parameter(String),
}

/// A ZooKeeper path whose nodes may be named parameters: `/config/{service}/{key}`, parsed
/// once and resolved with values where it is used. Curator's x-async `ZPath`, with typed
/// errors where Curator throws.
///
/// ```
/// use curator_core::ZPath;
///
/// let template = ZPath::parse_with_ids("/config/{service}/{key}")?;
/// assert_eq!(template.parameters().collect::<Vec<_>>(), ["service", "key"]);
/// assert!(!template.is_resolved());
/// assert!(template.full_path().is_err()); // nothing to send yet
///
/// let path = template.resolved(["billing", "timeout"])?;
/// assert_eq!(path.full_path()?, "/config/billing/timeout");
/// assert!(template.matches("/config/search/limit"));
/// assert_eq!(template.values_in("/config/search/limit"), Some(vec!["search".to_string(), "limit".to_string()]));
///
/// // A value is one node name: it never adds a level.
/// assert!(template.resolved(["billing/other", "timeout"]).is_err());
/// # Ok::<(), curator_core::CuratorError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ZPath {
    nodes: Vec<Node>,
}

impl ZPath {
    /// The root, `/`.
    pub fn root() -> ZPath {
        ZPath { nodes: Vec::new() }
    }

    /// The path `path`, every node fixed, **even one written as `{name}`**: `parse("/m/{id}")`
    /// is the literal node `{id}`, not a parameter (Curator's `parse`, which its own tests hold
    /// to: a node name may look like a parameter and still be a name). For parameters use
    /// [`parse_with_ids`](Self::parse_with_ids); [`literal_ids`](Self::literal_ids) names such
    /// nodes, and curator-modeled's `ModelSpec` refuses a path that has any. A path the server
    /// would refuse is [`InvalidPath`](CuratorError::InvalidPath).
    ///
    /// ```
    /// use curator_core::ZPath;
    ///
    /// let literal = ZPath::parse("/m/{id}")?;
    /// assert!(literal.is_resolved());
    /// assert_eq!(literal.literal_ids().collect::<Vec<_>>(), ["{id}"]);
    /// assert_eq!(ZPath::parse_with_ids("/m/{id}")?.parameters().collect::<Vec<_>>(), ["id"]);
    /// # Ok::<(), curator_core::CuratorError>(())
    /// ```
    pub fn parse(path: &str) -> Result<ZPath> {
        path::validate(path)?;
        Ok(ZPath { nodes: path::split(path).into_iter().map(|n| Node::Fixed(n.to_string())).collect() })
    }

    /// The path `path` with each node written `{name}` a parameter named `name` (Curator's
    /// `parseWithIds`). Other nodes are fixed.
    pub fn parse_with_ids(path: &str) -> Result<ZPath> {
        path::validate(path)?;
        let nodes = path::split(path).into_iter().map(|n| node_of(path, n)).collect::<Result<_>>()?;
        Ok(ZPath { nodes })
    }

    /// The path of `nodes` below the root, each `{name}` a parameter (Curator's `from`).
    pub fn from_nodes<I, S>(nodes: I) -> Result<ZPath>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        nodes.into_iter().try_fold(ZPath::root(), |path, node| path.child(node.as_ref()))
    }

    /// The node name of a parameter named `name`, to build a path with
    /// [`child`](Self::child) or [`from_nodes`](Self::from_nodes): `{name}`.
    pub fn parameter(name: &str) -> String {
        format!("{PARAMETER_OPEN}{name}{PARAMETER_CLOSE}")
    }

    /// This path with one more node: `name`, or a parameter when `name` is `{parameter}`. A
    /// name with a `/` or that the server would refuse is [`InvalidPath`](CuratorError::InvalidPath).
    pub fn child(&self, name: &str) -> Result<ZPath> {
        let shown = format!("{self}/{name}");
        let node = node_of(&shown, name)?;
        let mut nodes = self.nodes.clone();
        nodes.push(node);
        Ok(ZPath { nodes })
    }

    /// The path one level up. The root has none: [`InvalidPath`](CuratorError::InvalidPath).
    pub fn parent(&self) -> Result<ZPath> {
        match self.nodes.split_last() {
            Some((_, rest)) => Ok(ZPath { nodes: rest.to_vec() }),
            None => Err(CuratorError::InvalidPath { path: "/".to_string(), reason: "the root has no parent" }),
        }
    }

    /// Whether this is the root.
    pub fn is_root(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The last node's name as written (`{name}` for a parameter); `/` for the root.
    pub fn node_name(&self) -> String {
        match self.nodes.last() {
            Some(node) => node_text(node),
            None => "/".to_string(),
        }
    }

    /// The names of the parameters not yet resolved, in order.
    pub fn parameters(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().filter_map(|node| match node {
            Node::Parameter(name) => Some(name.as_str()),
            Node::Fixed(_) => None,
        })
    }

    /// The fixed nodes written as a parameter would be (`{name}`), in order: names
    /// [`parse`](Self::parse) kept literally where [`parse_with_ids`](Self::parse_with_ids)
    /// would have made parameters (or values a [`resolved`](Self::resolved) gave so).
    pub fn literal_ids(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().filter_map(|node| match node {
            Node::Fixed(name) if ZPath::is_id(name) => Some(name.as_str()),
            _ => None,
        })
    }

    /// Whether the node name `name` is written as a parameter, `{name}` (Curator's `isId`;
    /// here the inner name must be non-empty and hold no brace, as
    /// [`parse_with_ids`](Self::parse_with_ids) reads it).
    pub fn is_id(name: &str) -> bool {
        parameter_name(name).is_some()
    }

    /// Whether no parameter is left, so that the path can be sent.
    pub fn is_resolved(&self) -> bool {
        self.parameters().next().is_none()
    }

    /// The path to send. A path with a parameter left has none:
    /// [`InvalidArgument`](CuratorError::InvalidArgument) naming the path.
    pub fn full_path(&self) -> Result<String> {
        if let Some(name) = self.parameters().next() {
            return Err(CuratorError::InvalidArgument {
                path: self.to_string(),
                reason: format!("parameter {{{name}}} is not resolved"),
            });
        }
        Ok(self.to_string())
    }

    /// This path with its first parameters, left to right, given `values` (fewer values than
    /// parameters leave the rest for later, as Curator's `resolved`). Each value must be one
    /// valid node name: one with a `/`, `.`, `..` or a character the server refuses is
    /// [`InvalidPath`](CuratorError::InvalidPath); more values than parameters is
    /// [`InvalidArgument`](CuratorError::InvalidArgument).
    pub fn resolved<I, S>(&self, values: I) -> Result<ZPath>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut nodes = self.nodes.clone();
        let mut open = nodes.iter_mut().filter(|n| matches!(n, Node::Parameter(_)));
        for value in values {
            let value = value.as_ref();
            let Some(slot) = open.next() else {
                return Err(CuratorError::InvalidArgument {
                    path: self.to_string(),
                    reason: format!("more values than parameters (value {value:?} is left over)"),
                });
            };
            check_name(&format!("{self} <- {value}"), value)?;
            *slot = Node::Fixed(value.to_string());
        }
        Ok(ZPath { nodes })
    }

    /// Whether `other`'s nodes begin this path's, node for node (a parameter matches only the
    /// same parameter).
    pub fn starts_with(&self, other: &ZPath) -> bool {
        self.nodes.starts_with(&other.nodes)
    }

    /// Curator's schema pattern of this path: each parameter written `.*` (`/one/.*/two`), the
    /// form Curator's schema sets use.
    pub fn schema_pattern(&self) -> String {
        self.schema_regex(str::to_string, ".*")
    }

    /// A regular expression of this path: each fixed node written by `fixed`, each parameter
    /// as `parameter` ([`Schema::builder_for_zpath`](crate::Schema::builder_for_zpath)).
    pub(crate) fn schema_regex(&self, fixed: impl Fn(&str) -> String, parameter: &str) -> String {
        if self.nodes.is_empty() {
            return "/".to_string();
        }
        self.nodes
            .iter()
            .map(|node| match node {
                Node::Fixed(name) => format!("/{}", fixed(name)),
                Node::Parameter(_) => format!("/{parameter}"),
            })
            .collect()
    }

    /// Whether the concrete path `path` is this path with some value for each parameter.
    pub fn matches(&self, path: &str) -> bool {
        self.values_in(path).is_some()
    }

    /// The values the parameters take in the concrete path `path`, in order, or `None` when
    /// `path` is not this path with some values (a different length or fixed node).
    pub fn values_in(&self, path: &str) -> Option<Vec<String>> {
        if path::validate(path).is_err() {
            return None;
        }
        let names = path::split(path);
        if names.len() != self.nodes.len() {
            return None;
        }
        let mut values = Vec::new();
        for (node, name) in self.nodes.iter().zip(names) {
            match node {
                Node::Fixed(fixed) if fixed == name => {}
                Node::Fixed(_) => return None,
                Node::Parameter(_) => values.push(name.to_string()),
            }
        }
        Some(values)
    }
}

/// `/one/{p}/two`: fixed nodes as they are, parameters in braces, the root as `/`.
impl fmt::Display for ZPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nodes.is_empty() {
            return f.write_str("/");
        }
        for node in &self.nodes {
            write!(f, "/{}", node_text(node))?;
        }
        Ok(())
    }
}

fn node_text(node: &Node) -> String {
    match node {
        Node::Fixed(name) => name.clone(),
        Node::Parameter(name) => ZPath::parameter(name),
    }
}

/// The parameter's name in `name` written `{name}`, if it is written so.
fn parameter_name(name: &str) -> Option<&str> {
    name.strip_prefix(PARAMETER_OPEN)
        .and_then(|rest| rest.strip_suffix(PARAMETER_CLOSE))
        .filter(|inner| !inner.is_empty() && !inner.contains([PARAMETER_OPEN, PARAMETER_CLOSE]))
}

/// `{name}` as a parameter, else a fixed node; either must be one valid node name.
fn node_of(shown: &str, name: &str) -> Result<Node> {
    check_name(shown, name)?;
    Ok(match parameter_name(name) {
        Some(inner) => Node::Parameter(inner.to_string()),
        None => Node::Fixed(name.to_string()),
    })
}

/// One node name the server accepts: no `/`, not empty, `.` or `..`, no refused character.
fn check_name(shown: &str, name: &str) -> Result<()> {
    let bad = |reason| Err(CuratorError::InvalidPath { path: shown.to_string(), reason });
    if name.contains(path::SEPARATOR) {
        return bad("a node name cannot hold '/'");
    }
    if name.is_empty() {
        return bad("a node name cannot be empty");
    }
    path::validate(&format!("/{name}")).map_err(|e| match e {
        CuratorError::InvalidPath { reason, .. } => CuratorError::InvalidPath { path: shown.to_string(), reason },
        other => other,
    })
}

#[cfg(test)]
#[path = "zpath_tests.rs"]
mod tests;
