//! The one error type of this crate.

use std::time::Duration;

/// Everything that can go wrong while starting, stopping or poking test servers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestingError {
    /// ZooKeeper's jars (or `java`) are not on this machine.
    #[error(
        "ZooKeeper not found (looked for /usr/share/java/zookeeper.jar; set ZOOKEEPER_CLASSPATH or run `apt-get install -y zookeeper default-jre-headless`)"
    )]
    NotInstalled,

    /// An operating system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A server did not answer `srvr` with a `Mode:` line in time.
    #[error("ZooKeeper on {addr} did not become ready within {waited:?}; log tail ({log}):\n{log_tail}")]
    StartTimeout {
        /// The server's client address, `127.0.0.1:PORT`.
        addr: String,
        /// How long we waited.
        waited: Duration,
        /// Path of the server's log file.
        log: String,
        /// The last lines of the server's log.
        log_tail: String,
    },

    /// A server process exited while it was starting.
    #[error("ZooKeeper on {addr} exited while starting ({status}); log tail ({log}):\n{log_tail}")]
    Exited {
        /// The server's client address, `127.0.0.1:PORT`.
        addr: String,
        /// The exit status as text.
        status: String,
        /// Path of the server's log file.
        log: String,
        /// The last lines of the server's log.
        log_tail: String,
    },

    /// Something did not happen within its deadline.
    #[error("timed out after {after:?}: {what}")]
    Timeout {
        /// What we were waiting for.
        what: String,
        /// How long we waited.
        after: Duration,
    },

    /// The operation needs a running server process and there is none.
    #[error("ZooKeeper on {addr} is not running")]
    NotRunning {
        /// The server's client address, `127.0.0.1:PORT`.
        addr: String,
    },

    /// A caller passed something that cannot work (for example a member index out of range).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The ZooKeeper client reported an error.
    #[error("ZooKeeper client error: {0}")]
    ZooKeeper(#[from] zookeeper_client::Error),

    /// A helper thread failed (for example the thread that starts [`crate::TestingServer::shared`]).
    #[error("internal error: {0}")]
    Internal(String),
}

impl TestingError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TestingError::Io { context: context.into(), source }
    }

    pub(crate) fn timeout(what: impl Into<String>, after: Duration) -> Self {
        TestingError::Timeout { what: what.into(), after }
    }
}
