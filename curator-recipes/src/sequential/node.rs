//! Our own node: how an acquire creates it ([`NodeKind`]) and what we know of it once it
//! exists ([`LockNode`]).

use curator_core::{path, zk, Session};

/// A contender node this process holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockNode {
    /// Full path of the node (relative to the framework's namespace).
    pub path: String,
    /// Its sequence number.
    pub sequence: i64,
    /// The zxid that created it.
    pub czxid: i64,
    /// The fencing token: `czxid`, except for a read node taken under the write lock (a
    /// downgrade), which continues that hold and carries the write node's token, so that
    /// tokens keep growing with acquisition order among holds that exclude each other.
    pub fencing_token: i64,
    /// The framework session generation it was created on.
    pub generation: u64,
    /// The ZooKeeper session that owns it.
    pub session_id: i64,
}

impl LockNode {
    /// Our node at `path`, as its stat and the session it was found on describe it.
    pub(super) fn ours(path: String, sequence: i64, stat: &zk::Stat, kind: NodeKind, session: &Session) -> Self {
        LockNode {
            path,
            sequence,
            czxid: stat.czxid,
            fencing_token: kind.token(stat.czxid),
            generation: session.generation(),
            session_id: session.id(),
        }
    }

    /// A node made by a plain create (a semaphore lease), on `session`.
    pub(crate) fn created_on(path: String, sequence: i64, stat: &zk::Stat, session: &Session) -> Self {
        Self::ours(path, sequence, stat, NodeKind::Sequential, session)
    }

    /// The node's name (the last path segment).
    pub(crate) fn name(&self) -> &str {
        path::node_name(&self.path)
    }
}

/// How to create the node of one acquire.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NodeKind {
    /// Ephemeral sequential `P/_c_<uuid>-<name><seq>`.
    Sequential,
    /// Ephemeral `P/_c_<uuid>-<name><seq>` with a given sequence (Curator 5.5's read node taken
    /// under the write lock), to be created on session `generation` only, with the write
    /// node's fencing token.
    Fixed { sequence: i64, generation: u64, token: i64 },
}

impl NodeKind {
    /// The path to create under `base_path`: for a sequential node, the server appends the
    /// sequence number to it.
    pub(super) fn create_path(self, base_path: &str, prefix: &str, name: &str) -> String {
        match self {
            NodeKind::Sequential => path::make_path(base_path, &format!("{prefix}{name}")),
            NodeKind::Fixed { sequence, .. } => {
                path::make_path(base_path, &format!("{prefix}{name}{}", path::format_sequence(sequence)))
            }
        }
    }

    /// The create mode: both kinds are ephemeral, only one is sequential.
    pub(super) fn mode(self) -> zk::CreateMode {
        match self {
            NodeKind::Sequential => zk::CreateMode::EphemeralSequential,
            NodeKind::Fixed { .. } => zk::CreateMode::Ephemeral,
        }
    }

    /// The full path and sequence number of the node created at `create_path`, given the
    /// sequence number the server answered with.
    pub(super) fn created(self, create_path: &str, server_sequence: i64) -> (String, i64) {
        match self {
            NodeKind::Sequential => {
                (format!("{create_path}{}", path::format_sequence(server_sequence)), server_sequence)
            }
            NodeKind::Fixed { sequence, .. } => (create_path.to_string(), sequence),
        }
    }

    /// The fencing token of a node of this kind created at `czxid`.
    fn token(self, czxid: i64) -> i64 {
        match self {
            NodeKind::Sequential => czxid,
            NodeKind::Fixed { token, .. } => token,
        }
    }
}
