//! What the inspector reports: one [`Report`] per run, serialised as the `--json` document
//! (its shape is described in the crate's documentation) and rendered as text by
//! [`Report::to_text`](crate::Report::to_text).

use serde::Serialize;

/// One run's findings; `kind` in the JSON says which.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Report {
    /// `lock PATH`.
    Lock(LockReport),
    /// `election PATH`.
    Election(ElectionReport),
    /// `services BASE`.
    Services(ServicesReport),
    /// `orphans PATH`.
    Orphans(OrphansReport),
}

/// A node's data: UTF-8 text when it is printable, else hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Data {
    /// `"utf8"` or `"hex"`.
    pub encoding: &'static str,
    /// The data as text (UTF-8) or as lower-case hex digits.
    pub value: String,
    /// Its length in bytes.
    pub len: usize,
}

impl Data {
    /// Text when `bytes` are UTF-8 without control characters (tab, newline, carriage return
    /// allowed), else hex.
    pub fn of(bytes: &[u8]) -> Data {
        match std::str::from_utf8(bytes) {
            Ok(text) if !text.chars().any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r')) => {
                Data { encoding: "utf8", value: text.to_string(), len: bytes.len() }
            }
            _ => Data { encoding: "hex", value: bytes.iter().map(|b| format!("{b:02x}")).collect(), len: bytes.len() },
        }
    }
}

/// A session id as ZooKeeper prints it (`0x` and lower-case hex, no padding); `None` for 0
/// (a persistent node has no owner).
pub fn session_hex(ephemeral_owner: i64) -> Option<String> {
    (ephemeral_owner != 0).then(|| format!("{:#x}", ephemeral_owner as u64))
}

/// The layout found under a lock path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LockLayout {
    /// No node at the path.
    Missing,
    /// No contender node (nobody holds or waits).
    Empty,
    /// `InterProcessMutex` (and `QueuedMutex`, `LeaderSelector`): `lock-` nodes.
    Mutex,
    /// `InterProcessReadWriteLock`: `__READ__` and `__WRIT__` nodes.
    ReadWrite,
    /// `InterProcessSemaphoreV2` / `InterProcessSemaphoreMutex`: `leases/` and `locks/`.
    Semaphore,
}

/// Which contender node this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContenderKind {
    /// A mutex node (`lock-`): an `InterProcessMutex`'s, a `QueuedMutex`'s, or, in an
    /// election, a `LeaderSelector`'s (it is a mutex; the layout cannot tell which).
    Mutex,
    /// A read-lock node (`__READ__`).
    Read,
    /// A write-lock node (`__WRIT__`).
    Write,
    /// A semaphore lease (`leases/..lease-`).
    Lease,
    /// A semaphore taker in line for the takers' mutex (`locks/..lock-`).
    Taker,
    /// A `LeaderLatch` participant (`latch-`).
    Latch,
}

/// Whether a contender holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// It holds (the lock, a lease, the leadership).
    Holder,
    /// It waits in line.
    Waiter,
}

/// One contender node: a lock holder or waiter, a lease, an election participant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Contender {
    /// Its place in line, from 1 (order by sequence number).
    pub position: usize,
    /// Holder or waiter.
    pub role: Role,
    /// Which recipe node it is.
    pub kind: ContenderKind,
    /// The node's name.
    pub name: String,
    /// The node's full path.
    pub path: String,
    /// The sequence number in its name.
    pub sequence: i64,
    /// The protected id (UUID) in its name, if it has one.
    pub protected_id: Option<String>,
    /// The fencing token a holder of this node is given: the node's czxid
    /// (docs/architecture.md section 8.4).
    pub fencing_token: i64,
    /// The owning session (`ephemeralOwner`) as ZooKeeper prints it; `None` for a persistent node.
    pub session: Option<String>,
    /// The node's data (for locks: the holder's address by default; for elections: the
    /// participant id).
    pub data: Data,
}

/// `lock PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockReport {
    /// The path inspected.
    pub path: String,
    /// The layout found.
    pub layout: LockLayout,
    /// Holders, in order.
    pub holders: Vec<Contender>,
    /// Waiters, in order (for a semaphore: leases beyond `--max-leases`, then the takers).
    pub waiters: Vec<Contender>,
    /// Children that are not contender nodes of the layout, by name.
    pub others: Vec<String>,
    /// Remarks on what could not be decided.
    pub notes: Vec<String>,
}

/// The election recipe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ElectionRecipe {
    /// No node at the path.
    Missing,
    /// No participant.
    Empty,
    /// `LeaderLatch` (`latch-` nodes).
    LeaderLatch,
    /// `lock-` nodes: a `LeaderSelector`'s, or a mutex's (`InterProcessMutex`, `QueuedMutex`).
    /// A `LeaderSelector` is a mutex, with the same node names, so the layout cannot tell which;
    /// the first in line is the leader or the lock's holder.
    MutexOrLeaderSelector,
    /// `latch-` and `lock-` nodes under one path.
    Mixed,
}

/// `election PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ElectionReport {
    /// The path inspected.
    pub path: String,
    /// The recipe found.
    pub recipe: ElectionRecipe,
    /// The first node's data: the leader's participant id (for
    /// [`MutexOrLeaderSelector`](ElectionRecipe::MutexOrLeaderSelector), the leader's id or the
    /// lock holder's data), if anyone is in line.
    pub leader: Option<String>,
    /// Every participant in order; the first is the leader (`role` `holder`).
    pub participants: Vec<Contender>,
    /// Children that are not participant nodes, by name.
    pub others: Vec<String>,
}

/// `services BASE`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServicesReport {
    /// The base path inspected.
    pub base: String,
    /// Whether the base path exists.
    pub exists: bool,
    /// The services (children of the base), by name.
    pub services: Vec<Service>,
}

/// One service under a discovery base path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Service {
    /// Its name.
    pub name: String,
    /// Its instances, by id.
    pub instances: Vec<Instance>,
}

/// One instance node of a service.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instance {
    /// The node's name (the instance id).
    pub id: String,
    /// The node's full path.
    pub path: String,
    /// The owning session; `None` for a persistent (`STATIC`/`PERMANENT`) registration.
    pub session: Option<String>,
    /// `address` from the JSON.
    pub address: Option<String>,
    /// `port` from the JSON.
    pub port: Option<i32>,
    /// `sslPort` from the JSON.
    pub ssl_port: Option<i32>,
    /// `serviceType` from the JSON (`DYNAMIC`, `STATIC`, ...).
    pub service_type: Option<String>,
    /// `enabled` from the JSON (missing = true).
    pub enabled: Option<bool>,
    /// `registrationTimeUTC` from the JSON, ms since the epoch.
    pub registration_time_utc: Option<i64>,
    /// The payload, without Jackson's type information.
    pub payload: Option<serde_json::Value>,
    /// Why the node could not be read as an instance; then `data` holds what it has.
    pub error: Option<String>,
    /// The node's data, only when it is not an instance.
    pub data: Option<Data>,
}

/// What is known of a protected node's owning session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// Its session is connected to one of the servers.
    Alive,
    /// An orphan: every server answered, and none has a connection for its session.
    Orphan,
    /// Not every server answered, and those that did have no connection for its session.
    Unknown,
    /// A persistent node: ZooKeeper records no owner, so none can be judged.
    Persistent,
}

/// One protected node found by `orphans`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProtectedNode {
    /// The node's full path.
    pub path: String,
    /// The protected id (UUID) in its name.
    pub protected_id: String,
    /// The owning session; `None` for a persistent node.
    pub session: Option<String>,
    /// What is known of that session.
    pub status: Liveness,
    /// The node's czxid.
    pub czxid: i64,
    /// The node's creation time, ms since the epoch.
    pub ctime: i64,
    /// The node's data.
    pub data: Data,
}

/// What one server said when asked for its connections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerAnswer {
    /// `host:port`.
    pub server: String,
    /// Whether it listed its connections.
    pub answered: bool,
    /// How many sessions it listed.
    pub sessions: usize,
    /// Why it did not answer.
    pub error: Option<String>,
}

/// `orphans PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrphansReport {
    /// The path inspected (its whole subtree is searched).
    pub path: String,
    /// Whether the path exists.
    pub exists: bool,
    /// Whether liveness could be decided: every server listed its connections.
    pub liveness_determined: bool,
    /// Each server's answer.
    pub servers: Vec<ServerAnswer>,
    /// How many nodes were visited.
    pub visited: usize,
    /// True when the search stopped at `--max-nodes` before the end of the subtree.
    pub truncated: bool,
    /// How many protected nodes are orphans.
    pub orphans: usize,
    /// Every protected node found, in path order, with its status.
    pub nodes: Vec<ProtectedNode>,
}
