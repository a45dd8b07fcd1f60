//! The one error type of the framework and its recipes.
//!
//! Every failure that can reach a user is a [`CuratorError`]: bad input is refused before anything
//! is sent, server answers keep the path they concern, and [`CuratorError::is_retryable`] says
//! whether the outcome of the operation is unknown (and so may be retried).
//!
//! Messages show a long path shortened (its head, its tail and its length, see [`ShortPath`]);
//! the error's `path` field and [`CuratorError::path`] keep all of it.

use zookeeper_client as zk;

/// Paths up to this many bytes are shown whole in messages.
pub const SHOWN_PATH_MAX: usize = 240;

/// Bytes shown of each end of a longer path.
const SHOWN_PATH_END: usize = 100;

/// Shows a path in a message as `Debug` does (quoted, escaped), shortened to its first and last
/// 100 bytes or so and its length in bytes when it is longer than [`SHOWN_PATH_MAX`]: a 1 MB
/// path must not make a 1 MB message.
///
/// ```
/// use curator_core::ShortPath;
/// assert_eq!(ShortPath("/a").to_string(), "\"/a\"");
/// let long = format!("/{}", "x".repeat(1000));
/// assert!(ShortPath(&long).to_string().ends_with("xxx\" (1001 bytes)"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ShortPath<'a>(pub &'a str);

impl std::fmt::Display for ShortPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.0;
        if path.len() <= SHOWN_PATH_MAX {
            return write!(f, "{path:?}");
        }
        let mut head = SHOWN_PATH_END;
        while !path.is_char_boundary(head) {
            head -= 1;
        }
        let mut tail = path.len() - SHOWN_PATH_END;
        while !path.is_char_boundary(tail) {
            tail += 1;
        }
        write!(f, "\"{}…{}\" ({} bytes)", path[..head].escape_debug(), path[tail..].escape_debug(), path.len())
    }
}

/// Result alias used across the workspace.
pub type Result<T, E = CuratorError> = std::result::Result<T, E>;

/// Everything that can go wrong in the framework or a recipe.
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum CuratorError {
    /// The path is not a valid ZooKeeper path. Nothing was sent.
    #[error("invalid path {}: {reason}", ShortPath(.path))]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An argument other than the path is not acceptable (a negative version, a zero TTL, ...).
    /// Nothing was sent, unless the reason says the server refused the request
    /// (ZooKeeper's BADARGUMENTS, as for a delete of `/zookeeper`): then nothing was applied.
    #[error("invalid argument for {}: {reason}", ShortPath(.path))]
    InvalidArgument {
        /// The path of the operation.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The request is larger than the framework sends: its data is over the framework's
    /// `max_data_len`, or the whole request (paths with the namespace, data and ACLs) is over
    /// its `max_request_len`, which keeps requests under the server's packet limit
    /// (`jute.maxbuffer`; the server would close the connection). Nothing was sent.
    #[error("request for {} too large: {len} bytes, more than the limit of {max}", ShortPath(.path))]
    DataTooLarge {
        /// The path of the operation (of the first operation, for a transaction).
        path: String,
        /// Size found: of the data, or of the whole request.
        len: usize,
        /// The limit it is over.
        max: usize,
    },
    /// The operation breaks the framework's [`SchemaSet`](crate::SchemaSet) (or no schema of a
    /// set without a default schema matches its path). Nothing was sent. Curator's
    /// `SchemaViolation`.
    #[error("schema violation at {}: {reason} (schema {schema:?})", ShortPath(.path))]
    SchemaViolation {
        /// The path of the operation, as the caller gave it (relative to the namespace).
        path: String,
        /// The name of the schema broken ("" where no schema matches).
        schema: String,
        /// What is wrong ("must be ephemeral", "cannot be deleted", "data is not valid: ...").
        reason: String,
    },
    /// The node does not exist.
    #[error("no node {}", ShortPath(.path))]
    NoNode {
        /// The node.
        path: String,
    },
    /// The node already exists.
    #[error("node {} already exists", ShortPath(.path))]
    NodeExists {
        /// The node.
        path: String,
    },
    /// The expected version did not match the node's.
    #[error("bad version for {}", ShortPath(.path))]
    BadVersion {
        /// The node.
        path: String,
    },
    /// The node has children, so it cannot be deleted.
    #[error("node {} has children", ShortPath(.path))]
    NotEmpty {
        /// The node.
        path: String,
    },
    /// The session is not authorised for this operation.
    #[error("not authorised for {}", ShortPath(.path))]
    NoAuth {
        /// The node.
        path: String,
    },
    /// The parent of the node is ephemeral.
    #[error("cannot create {}: ephemeral nodes cannot have children", ShortPath(.path))]
    NoChildrenForEphemerals {
        /// The node.
        path: String,
    },
    /// The ACL is empty or not valid.
    #[error("invalid ACL for {}", ShortPath(.path))]
    InvalidAcl {
        /// The node.
        path: String,
    },
    /// The connection was lost while the operation was in flight, or no connection could be had
    /// in time: the outcome is unknown. Retryable.
    #[error("connection lost during operation on {}: {detail}", ShortPath(.path))]
    ConnectionLoss {
        /// The path of the operation ("" where there is none).
        path: String,
        /// What the client reported.
        detail: String,
    },
    /// No connection could be had in time (before the first connection, or for an operation
    /// while disconnected): nothing was sent. Retryable.
    #[error("not connected: {detail}")]
    NotConnected {
        /// Why, and to what.
        detail: String,
    },
    /// The session expired. The framework opens a new one by itself; retryable, as in Curator.
    #[error("session expired during operation on {}", ShortPath(.path))]
    SessionExpired {
        /// The path of the operation.
        path: String,
    },
    /// TLS failed: the certificates or key given to the builder cannot be used (from `build()`,
    /// with no server), or the latest attempt to open a session failed in the TLS handshake
    /// with `server` (a CA that did not sign the server's certificate, a server that refused
    /// the client's certificate, a plain client on a secure port or the reverse). Operations
    /// and `block_until_connected` get it at once while the session manager keeps retrying
    /// with its backoff; not retryable. Docs: docs/operations.md section 3. Only with
    /// curator-core's `tls` feature.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[error("TLS error{}: {detail}", if .server.is_empty() { String::new() } else { format!(" with {}", .server) })]
    Tls {
        /// The server (`host:port`) whose handshake failed; empty for bad settings.
        server: String,
        /// What went wrong, and what to check.
        detail: String,
    },
    /// The server refused the session's credentials (ZooKeeper's AUTH_FAILED: a wrong SASL
    /// password or user, a server that requires SASL from a client that has none, or a scheme
    /// given with `authorization` that the server does not have; the detail says which were
    /// given, never the secrets). As for
    /// ZooKeeper's Java client, this is final: the framework stops opening sessions, and every
    /// operation fails with it at once until the framework is closed and built again with
    /// other credentials. Not retryable. Docs: docs/operations.md section 4.
    #[error("authentication failed: {detail}")]
    AuthFailed {
        /// What was refused.
        detail: String,
    },
    /// The operation did not complete within the time it was given.
    #[error("operation on {} timed out", ShortPath(.path))]
    Timeout {
        /// The path of the operation.
        path: String,
    },
    /// The framework was closed: the operation came after `close()`, or `close()` cut it short
    /// (then its request may or may not have been applied). Its [`code`](Self::code) is
    /// SESSIONEXPIRED, as in Curator. Not retryable.
    #[error("the framework is closed")]
    Closed,
    /// A recipe, cache or the framework was used before its `start()` (module
    /// [`Lifecycle`](crate::Lifecycle)). Nothing was sent. Not retryable: an operation on a
    /// framework not started fails with it at once; a cache started before its framework
    /// reports it as the error of its loads and keeps trying until the framework starts. Its
    /// [`code`](Self::code) is -1, as for [`IllegalState`](Self::IllegalState) (Curator throws
    /// an `IllegalStateException`).
    #[error("{what} is not started")]
    NotStarted {
        /// What was not started (`"LeaderLatch"`, `"the framework"`, ...).
        what: &'static str,
    },
    /// `start()` was called on something already started. Nothing changed.
    #[error("{what} is already started")]
    AlreadyStarted {
        /// What was started twice.
        what: &'static str,
    },
    /// A recipe or cache was used (or started) after its own `close()`. The framework's close
    /// is [`Closed`](Self::Closed).
    #[error("{what} is closed")]
    AlreadyClosed {
        /// What was closed.
        what: &'static str,
    },
    /// `start()` was called outside a tokio runtime: what it starts runs as tasks. Nothing
    /// was started.
    #[error("{what} must be started within a tokio runtime")]
    NoRuntime {
        /// What could not be started.
        what: &'static str,
    },
    /// A release (or a double barrier's leave) of something this caller does not hold: never
    /// acquired, released already, or held by another task or handle. Curator throws an
    /// `IllegalMonitorStateException` for a release of a lock it does not hold. Nothing was
    /// sent. [Permanent](Self::is_permanent): the same call fails the same way until an acquire.
    #[error("{what} {} is not held here", ShortPath(.path))]
    NotHeld {
        /// The lock's, semaphore's or barrier's path.
        path: String,
        /// What was released (`"the lock"`, `"the double barrier"`, ...).
        what: &'static str,
    },
    /// An acquire (or a double barrier's enter) that what this caller already holds forbids: a
    /// second acquire of a mutex that is not reentrant, a write lock asked for under the read
    /// lock of the same handle (an upgrade, which would deadlock), an enter while inside. Nothing
    /// was sent. [Permanent](Self::is_permanent): the same call fails the same way until the
    /// caller releases what it holds.
    #[error("{} is held here already: {reason}", ShortPath(.path))]
    AlreadyHeld {
        /// The lock's, semaphore's or barrier's path.
        path: String,
        /// Why that forbids the call, and what to do first.
        reason: &'static str,
    },
    /// A node this caller made and still relied on (a lock's, a barrier member's) is gone, or
    /// may be: deleted by someone else, gone with the session that made it, or its connection
    /// suspended. The recipe cannot go on with it; the caller must release (or leave) and
    /// start over, which may succeed. Neither retryable nor [permanent](Self::is_permanent).
    #[error("our node {} is gone: {reason}", ShortPath(.path))]
    OwnNodeLost {
        /// Our node (for a read lock asked for under a write lock that is gone: the read node
        /// that was to continue the write node's hold).
        path: String,
        /// How it went (or may have gone), and what the call could not do.
        reason: String,
    },
    /// A write whose reply was lost could not be decided: it may or may not have been applied
    /// (a distributed atomic's write tag was changed by someone else meanwhile, or was gone
    /// past its reap age). [`outcome_unknown`](Self::outcome_unknown) is true; it is not
    /// retryable, since a retry could apply the write twice: read the value again and decide.
    /// Not [permanent](Self::is_permanent).
    #[error("the outcome of a write of {} is unknown: {reason}", ShortPath(.path))]
    OutcomeUnknown {
        /// The node written.
        path: String,
        /// Why it could not be decided.
        reason: String,
    },
    /// A recipe's background work stopped trying after the framework's retry policy gave up on
    /// it (a leader selector whose leadership function failed term after term): it waits for
    /// the caller (`requeue()`) instead. Reported to the unhandled-error listeners. Not
    /// [permanent](Self::is_permanent): the caller may start it again.
    #[error("gave up on {}: {reason}", ShortPath(.path))]
    GaveUp {
        /// The recipe's path.
        path: String,
        /// What failed, and what starts it again.
        reason: &'static str,
    },
    /// An internal invariant of the framework or a recipe does not hold (a server answer of a
    /// shape that cannot come, ...). No caller is expected to branch on it: every state a
    /// caller can bring about has a variant of its own.
    #[error("illegal state: {0}")]
    IllegalState(String),
    /// A node a recipe reads holds data it cannot understand.
    #[error("unexpected data in {}: {reason}", ShortPath(.path))]
    BadData {
        /// The node.
        path: String,
        /// What was expected.
        reason: String,
    },
    /// No watch of the kind asked for is there to remove: the watch given to
    /// [`watches().remove()`](crate::WatchesBuilder::remove) is of another
    /// [`WatcherType`](crate::WatcherType) or on another path, its session ended, or the server
    /// answered NOWATCHER. Not retryable; `quietly()` makes it a success. Curator's
    /// `KeeperException.NoWatcherException`.
    #[error("no watch to remove on {}", ShortPath(.path))]
    NoWatcher {
        /// The path given to the removal.
        path: String,
    },
    /// Any other error from ZooKeeper or the client.
    #[error("ZooKeeper error on {}: {source}", ShortPath(.path))]
    Zk {
        /// The path of the operation.
        path: String,
        /// The client's error.
        source: zk::Error,
    },
}

impl CuratorError {
    /// Converts a client error into ours, keeping the path it concerns.
    pub fn from_zk(path: &str, err: zk::Error) -> Self {
        let path = path.to_string();
        match err {
            zk::Error::NoNode => Self::NoNode { path },
            zk::Error::NodeExists => Self::NodeExists { path },
            zk::Error::BadVersion => Self::BadVersion { path },
            zk::Error::NotEmpty => Self::NotEmpty { path },
            zk::Error::NoAuth => Self::NoAuth { path },
            zk::Error::NoChildrenForEphemerals => Self::NoChildrenForEphemerals { path },
            zk::Error::InvalidAcl => Self::InvalidAcl { path },
            zk::Error::NoWatcher => Self::NoWatcher { path },
            zk::Error::SessionExpired => Self::SessionExpired { path },
            zk::Error::ConnectionLoss | zk::Error::Timeout => Self::ConnectionLoss { path, detail: err.to_string() },
            // zookeeper-client reports a connection that died under a request in many shapes
            // (docs/architecture.md section 2.3): treat every one of them as "outcome unknown".
            zk::Error::Custom(_) | zk::Error::SessionMoved | zk::Error::Throttled => {
                Self::ConnectionLoss { path, detail: err.to_string() }
            }
            zk::Error::AuthFailed => Self::AuthFailed {
                detail: format!("the server refused the session's credentials (operation on {path:?})"),
            },
            // The server's BADARGUMENTS comes as this reason; others are the client's own checks.
            zk::Error::BadArguments(&"server error") => {
                let reason = match path.as_str() {
                    "/zookeeper" | "/zookeeper/config" | "/zookeeper/quota" => {
                        "refused by the server (BADARGUMENTS): the node is one of ZooKeeper's own".to_string()
                    }
                    _ => "refused by the server as a bad argument (BADARGUMENTS)".to_string(),
                };
                Self::InvalidArgument { path, reason }
            }
            zk::Error::BadArguments(reason) => Self::InvalidArgument { path, reason: reason.to_string() },
            other => Self::Zk { path, source: other },
        }
    }

    /// True when the outcome of the operation is unknown and it may be tried again: connection
    /// loss in any form, and session expiry (the retry then runs on the new session).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::ConnectionLoss { .. } | Self::NotConnected { .. } | Self::SessionExpired { .. })
    }

    /// True for a refusal that no retry mends and that the caller must hear of: no permission
    /// ([`NoAuth`](Self::NoAuth), [`AuthFailed`](Self::AuthFailed)), an ACL the server refuses
    /// ([`InvalidAcl`](Self::InvalidAcl)), or bad input ([`InvalidPath`](Self::InvalidPath),
    /// [`InvalidArgument`](Self::InvalidArgument), [`DataTooLarge`](Self::DataTooLarge),
    /// [`SchemaViolation`](Self::SchemaViolation),
    /// [`NoChildrenForEphemerals`](Self::NoChildrenForEphemerals)), or a call the caller's own
    /// holds forbid ([`NotHeld`](Self::NotHeld), [`AlreadyHeld`](Self::AlreadyHeld)). A recipe
    /// whose first attempt meets one reports it from `start` instead of retrying for ever.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            Self::NoAuth { .. }
                | Self::AuthFailed { .. }
                | Self::InvalidAcl { .. }
                | Self::InvalidPath { .. }
                | Self::InvalidArgument { .. }
                | Self::DataTooLarge { .. }
                | Self::SchemaViolation { .. }
                | Self::NoChildrenForEphemerals { .. }
                | Self::NotHeld { .. }
                | Self::AlreadyHeld { .. }
        )
    }

    /// Whether the request may have been applied although no answer said so: a retryable
    /// error, or one whose operation was cut short after such an error, by a deadline
    /// ([`Timeout`](Self::Timeout): the retry loop gives up there with it, in place of the
    /// connection loss) or by [`close`](crate::CuratorFramework::close), or one a recipe could
    /// not decide ([`OutcomeUnknown`](Self::OutcomeUnknown)). Cleanups (a protected
    /// create's orphan, a guaranteed delete) go on after these, never after a definite answer.
    pub fn outcome_unknown(&self) -> bool {
        self.is_retryable() || matches!(self, Self::Timeout { .. } | Self::Closed | Self::OutcomeUnknown { .. })
    }

    /// The path the error concerns, where there is one.
    pub fn path(&self) -> Option<&str> {
        match self {
            Self::InvalidPath { path, .. }
            | Self::InvalidArgument { path, .. }
            | Self::DataTooLarge { path, .. }
            | Self::SchemaViolation { path, .. }
            | Self::NoNode { path }
            | Self::NodeExists { path }
            | Self::BadVersion { path }
            | Self::NotEmpty { path }
            | Self::NoAuth { path }
            | Self::NoChildrenForEphemerals { path }
            | Self::InvalidAcl { path }
            | Self::NoWatcher { path }
            | Self::ConnectionLoss { path, .. }
            | Self::SessionExpired { path }
            | Self::Timeout { path }
            | Self::BadData { path, .. }
            | Self::NotHeld { path, .. }
            | Self::AlreadyHeld { path, .. }
            | Self::OwnNodeLost { path, .. }
            | Self::OutcomeUnknown { path, .. }
            | Self::GaveUp { path, .. }
            | Self::Zk { path, .. } => Some(path),
            Self::Closed
            | Self::NotStarted { .. }
            | Self::AlreadyStarted { .. }
            | Self::AlreadyClosed { .. }
            | Self::NoRuntime { .. }
            | Self::IllegalState(_)
            | Self::NotConnected { .. }
            | Self::AuthFailed { .. } => None,
            #[cfg(feature = "tls")]
            Self::Tls { .. } => None,
        }
    }

    /// ZooKeeper's numeric result code for this error (0 is success; see `KeeperException.Code`).
    /// Errors raised before anything was sent map to `BADARGUMENTS` (-8). [`Closed`](Self::Closed)
    /// maps to `SESSIONEXPIRED` (-112), the code Curator gives operations cut short by its close.
    pub fn code(&self) -> i32 {
        match self {
            Self::NoNode { .. } => -101,
            Self::NodeExists { .. } => -110,
            Self::BadVersion { .. } => -103,
            Self::NotEmpty { .. } => -111,
            Self::NoAuth { .. } => -102,
            Self::NoChildrenForEphemerals { .. } => -108,
            Self::InvalidAcl { .. } => -114,
            Self::NoWatcher { .. } => -121,
            Self::ConnectionLoss { .. } | Self::NotConnected { .. } => -4,
            #[cfg(feature = "tls")]
            Self::Tls { .. } => -4,
            Self::AuthFailed { .. } => -115,
            Self::SessionExpired { .. } | Self::Closed => -112,
            Self::Timeout { .. } => -7,
            Self::InvalidPath { .. }
            | Self::InvalidArgument { .. }
            | Self::DataTooLarge { .. }
            | Self::SchemaViolation { .. } => -8,
            Self::NotStarted { .. }
            | Self::AlreadyStarted { .. }
            | Self::AlreadyClosed { .. }
            | Self::NoRuntime { .. }
            | Self::NotHeld { .. }
            | Self::AlreadyHeld { .. }
            | Self::OwnNodeLost { .. }
            | Self::OutcomeUnknown { .. }
            | Self::GaveUp { .. }
            | Self::IllegalState(_)
            | Self::BadData { .. }
            | Self::Zk { .. } => -1,
        }
    }
}
