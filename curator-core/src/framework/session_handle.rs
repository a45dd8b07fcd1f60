//! [`Session`]: the handle on one ZooKeeper session that operations and recipes run on.

use crate::zk;
#[cfg(doc)]
use crate::CuratorFramework;

/// One ZooKeeper session of the framework.
///
/// Use it for a few requests and drop it: [`CuratorFramework::close`] can end the session only
/// once every clone of its client is dropped, so do not hold one across a long wait (a watch
/// does not need it: zookeeper-client's watchers do not keep the session open).
#[derive(Debug, Clone)]
pub struct Session {
    pub(crate) client: zk::Client,
    pub(crate) generation: u64,
    pub(crate) epoch: u64,
}

impl Session {
    /// The raw client of this session, already rooted at the framework's namespace. Requests
    /// made on it back to back are pipelined and answered in order.
    pub fn client(&self) -> &zk::Client {
        &self.client
    }
    /// The framework's count of sessions so far: 1 for the first, growing with each new one.
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// Whether this is the session of `generation`: a node made on that generation is still
    /// this session's (module [`liveness`](crate::liveness)).
    pub fn is_generation(&self, generation: u64) -> bool {
        self.generation == generation
    }
    /// The ZooKeeper session id.
    pub fn id(&self) -> i64 {
        self.client.session_id().0
    }
    /// The framework's count of clients so far: grows with each new session and each move of
    /// a session to another client (module [`ensemble`](crate::ensemble)). Whatever was
    /// registered on a client (watches) ends with it; whoever keeps a client across waits lets
    /// go of it when [`CuratorFramework::client_gone`] resolves.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}
