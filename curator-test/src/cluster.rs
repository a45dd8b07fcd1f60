//! [`TestingCluster`]: an ensemble of ZooKeeper servers on loopback.

use std::time::Duration;

use tempfile::TempDir;

use crate::error::TestingError;
use crate::node::{Node, Peer, ServerSettings, START_DEADLINE};
use crate::process;
use crate::server::START_ATTEMPTS;
use crate::timing::eventually;

/// An ensemble of `n` ZooKeeper servers (3 is the usual choice) on `127.0.0.1`, each a child
/// java process with its own data directory, client port, peer port and election port.
///
/// Members are numbered from 0; member `i` has ZooKeeper id `i + 1`. Dropping the cluster kills
/// every member.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), curator_test::TestingError> {
/// use std::time::Duration;
/// let mut cluster = curator_test::TestingCluster::start(3).await?;
/// let leader = cluster.wait_for_leader(Duration::from_secs(30)).await?;
/// cluster.kill(leader).await?;
/// let next = cluster.wait_for_leader(Duration::from_secs(30)).await?;
/// assert_ne!(leader, next);
/// cluster.restart(leader).await?; // rejoins as a follower
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TestingCluster {
    // Declared before `dir`: processes die before their directories are removed.
    pub(crate) members: Vec<Node>,
    pub(crate) classpath: String,
    /// The members of the ensemble's configuration (`reconfig.rs` adds and removes).
    pub(crate) peers: Vec<Peer>,
    pub(crate) settings: ServerSettings,
    pub(crate) dir: TempDir,
}

impl TestingCluster {
    /// Starts an ensemble of `n` servers and waits (up to 30 s) until every member serves
    /// (answers `srvr` as leader or follower). With `n == 1` the single member runs standalone.
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] for `n == 0`, and the errors of
    /// [`TestingServerBuilder::start`](crate::TestingServerBuilder::start).
    pub async fn start(n: usize) -> Result<TestingCluster, TestingError> {
        Self::start_with(n, ServerSettings::default()).await
    }

    pub(crate) async fn start_with(n: usize, settings: ServerSettings) -> Result<TestingCluster, TestingError> {
        if n == 0 {
            return Err(TestingError::InvalidArgument("a cluster needs at least one member".into()));
        }
        let classpath = process::classpath()?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let dir = tempfile::Builder::new()
                .prefix("curator-test-ensemble-")
                .tempdir()
                .map_err(|e| TestingError::io("create a temporary directory", e))?;
            let mut peers = Vec::with_capacity(n);
            let mut client_ports = Vec::with_capacity(n);
            for i in 0..n {
                client_ports.push(process::free_port()?);
                peers.push(Peer {
                    id: member_id(i),
                    peer_port: process::free_port()?,
                    election_port: process::free_port()?,
                    client_port: client_ports[i],
                });
            }
            let mut members = Vec::with_capacity(n);
            for (i, &port) in client_ports.iter().enumerate() {
                let name = format!("server{}", i + 1);
                members.push(Node::create(dir.path(), &name, port, &settings, Some((member_id(i), &peers)))?);
            }
            for m in &mut members {
                m.spawn(&classpath)?;
            }
            let mut cluster =
                TestingCluster { members, classpath: classpath.clone(), peers, settings: settings.clone(), dir };
            match cluster.wait_all_ready().await {
                Ok(()) => {
                    tracing::info!(connect = %cluster.connect_string(), "TestingCluster started");
                    return Ok(cluster);
                }
                Err(e) if attempt < START_ATTEMPTS && cluster.members.iter().any(Node::clashed) => {
                    tracing::info!("port clash in ensemble, retrying on other ports: {e}");
                    for m in &mut cluster.members {
                        m.kill().await?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub(crate) async fn wait_all_ready(&mut self) -> Result<(), TestingError> {
        // The processes run on their own, so waiting for one member after another is as quick
        // as waiting for all at once; one deadline covers them all.
        let end = tokio::time::Instant::now() + START_DEADLINE;
        for m in &mut self.members {
            let left = end.saturating_duration_since(tokio::time::Instant::now());
            m.wait_ready(left.max(Duration::from_millis(1))).await?;
        }
        Ok(())
    }

    /// The connect string naming every member: `127.0.0.1:a,127.0.0.1:b,...`.
    pub fn connect_string(&self) -> String {
        self.members.iter().map(Node::addr).collect::<Vec<_>>().join(",")
    }

    /// The connect string of member `i` alone, `127.0.0.1:PORT`.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn connect_string_of(&self, i: usize) -> String {
        self.members[i].addr()
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false: a cluster has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The pid of member `i`'s java process, if `i` is a member and its process is running
    /// (it may be paused). A restarted member has a new pid.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members.get(i).and_then(Node::pid)
    }

    /// Whether member `i`'s process is running.
    pub fn is_running(&self, i: usize) -> bool {
        self.members.get(i).is_some_and(Node::is_spawned)
    }

    fn member(&mut self, i: usize) -> Result<&mut Node, TestingError> {
        let n = self.members.len();
        self.members
            .get_mut(i)
            .ok_or_else(|| TestingError::InvalidArgument(format!("member {i} of a {n}-member cluster")))
    }

    /// Kills member `i` (SIGKILL) and waits until its process is gone. Its data is kept.
    pub async fn kill(&mut self, i: usize) -> Result<(), TestingError> {
        self.member(i)?.kill().await
    }

    /// Starts member `i` again (killing it first if it runs), same ports and data, and waits
    /// until it has rejoined the quorum (answers `srvr` as leader or follower).
    pub async fn restart(&mut self, i: usize) -> Result<(), TestingError> {
        let classpath = self.classpath.clone();
        let member = self.member(i)?;
        member.kill().await?;
        member.start_again(&classpath, START_DEADLINE).await
    }

    /// Freezes member `i` (SIGSTOP) and returns once all its threads are stopped.
    pub fn pause(&self, i: usize) -> Result<(), TestingError> {
        self.member_ref(i)?.freeze()
    }

    /// Lets a paused member `i` run again (SIGCONT).
    pub fn resume(&self, i: usize) -> Result<(), TestingError> {
        self.member_ref(i)?.signal(libc::SIGCONT)
    }

    fn member_ref(&self, i: usize) -> Result<&Node, TestingError> {
        let n = self.members.len();
        self.members.get(i).ok_or_else(|| TestingError::InvalidArgument(format!("member {i} of a {n}-member cluster")))
    }

    /// The index of the member whose `srvr` says `Mode: leader` (or `Mode: standalone` in a
    /// one-member cluster), if one does right now.
    pub async fn leader(&self) -> Option<usize> {
        for (i, m) in self.members.iter().enumerate() {
            if m.is_spawned() && matches!(m.mode().await.as_deref(), Some("leader") | Some("standalone")) {
                return Some(i);
            }
        }
        None
    }

    /// Waits until some member is leader and returns its index.
    ///
    /// # Errors
    /// [`TestingError::Timeout`] when no member says it leads within `timeout`.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<usize, TestingError> {
        let found = std::sync::Mutex::new(None);
        let ok = eventually(timeout, || async {
            let leader = self.leader().await;
            if let Ok(mut f) = found.lock() {
                *f = leader;
            }
            leader.is_some()
        })
        .await;
        let found = found.into_inner().ok().flatten();
        match found {
            Some(i) if ok => Ok(i),
            _ => Err(TestingError::timeout("a cluster member to become leader", timeout)),
        }
    }
}

pub(crate) fn member_id(i: usize) -> u32 {
    u32::try_from(i + 1).unwrap_or(u32::MAX)
}
