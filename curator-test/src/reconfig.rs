//! A [`TestingCluster`] whose membership changes at run time through ZooKeeper's dynamic
//! reconfiguration (ZooKeeper 3.5+), as Curator's `TestReconfiguration` sets one up.

use std::time::Duration;

use zookeeper_client::{Client, EnsembleUpdate};

use crate::cluster::{member_id, TestingCluster};
use crate::error::TestingError;
use crate::node::{Node, Peer, ServerSettings, START_DEADLINE};
use crate::process;
use crate::timing::Timing;

/// How long a reconfiguration may keep being refused (a joining server still syncing, another
/// reconfiguration in progress) before the helper gives up.
const RECONFIG_DEADLINE: Duration = Duration::from_secs(30);

impl TestingCluster {
    /// Starts an ensemble of `n` servers with dynamic reconfiguration enabled
    /// (`reconfigEnabled=true`, `standaloneEnabled=false`, each `server.N` line with its role
    /// and client address, so that `/zookeeper/config` names every client port) and waits until
    /// every member serves. ACL checks are skipped on these servers (`zookeeper.skipACL`), so any
    /// client may reconfigure them; use them only for ensemble changes.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), curator_test::TestingError> {
    /// let mut cluster = curator_test::TestingCluster::start_reconfigurable(3).await?;
    /// let added = cluster.add_server().await?; // member 3, ZooKeeper id 4
    /// cluster.remove_server(0).await?;          // ZooKeeper id 1 leaves the ensemble
    /// assert_eq!(cluster.ensemble_members(), vec![1, 2, added]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`TestingCluster::start`].
    pub async fn start_reconfigurable(n: usize) -> Result<TestingCluster, TestingError> {
        Self::start_with(n, ServerSettings { reconfig: true, ..ServerSettings::default() }).await
    }

    /// Whether the cluster was started with [`start_reconfigurable`](Self::start_reconfigurable).
    pub fn is_reconfigurable(&self) -> bool {
        self.settings.reconfig
    }

    /// The members in the ensemble's configuration, by index, in the order they joined.
    pub fn ensemble_members(&self) -> Vec<usize> {
        self.peers.iter().map(|p| p.id as usize - 1).collect()
    }

    /// The connect string of the members in the ensemble's configuration.
    pub fn ensemble_connect_string(&self) -> String {
        self.ensemble_members().into_iter().map(|i| self.members[i].addr()).collect::<Vec<_>>().join(",")
    }

    /// Starts a new server whose configuration is the ensemble's plus itself, waits until it
    /// serves (a non-voting follower), and adds it to the ensemble by reconfiguration. Returns
    /// its index (its ZooKeeper id is the index plus one).
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] on a cluster not started with
    /// [`start_reconfigurable`](Self::start_reconfigurable); start errors of the new server;
    /// [`TestingError::ZooKeeper`] or [`TestingError::Timeout`] if the ensemble refuses the
    /// change.
    pub async fn add_server(&mut self) -> Result<usize, TestingError> {
        self.check_reconfigurable()?;
        let index = self.members.len();
        let port = process::free_port()?;
        let peer = Peer {
            id: member_id(index),
            peer_port: process::free_port()?,
            election_port: process::free_port()?,
            client_port: port,
        };
        let mut peers = self.peers.clone();
        peers.push(peer);
        let name = format!("server{}", index + 1);
        let mut node = Node::create(self.dir.path(), &name, port, &self.settings, Some((peer.id, &peers)))?;
        node.start_again(&self.classpath, START_DEADLINE).await?;
        self.members.push(node);
        let spec = format!("server.{}", peer.line(true));
        tracing::info!(spec = %spec, "reconfig: adding a server");
        self.reconfig(&[spec.as_str()], &[]).await?;
        self.peers = peers;
        Ok(index)
    }

    /// Removes member `i` from the ensemble by reconfiguration. Its process keeps running, as a
    /// removed server does in production (it no longer serves clients); [`kill`](Self::kill)
    /// ends it.
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] if the cluster is not reconfigurable or `i` is not in
    /// the ensemble; [`TestingError::ZooKeeper`] or [`TestingError::Timeout`] if the ensemble
    /// refuses the change.
    pub async fn remove_server(&mut self, i: usize) -> Result<(), TestingError> {
        self.check_reconfigurable()?;
        let id = member_id(i);
        if !self.peers.iter().any(|p| p.id == id) {
            return Err(TestingError::InvalidArgument(format!("member {i} is not in the ensemble")));
        }
        tracing::info!(member = i, id, "reconfig: removing a server");
        let leaving = id.to_string();
        self.reconfig(&[], &[leaving.as_str()]).await?;
        self.peers.retain(|p| p.id != id);
        Ok(())
    }

    /// The ensemble's dynamic configuration as a member reports it (`/zookeeper/config`).
    ///
    /// # Errors
    /// [`TestingError::ZooKeeper`] if no member answers.
    pub async fn ensemble_config(&self) -> Result<String, TestingError> {
        let client = self.admin_client(None).await?;
        let (data, _) = client.get_config().await?;
        Ok(String::from_utf8_lossy(&data).into_owned())
    }

    fn check_reconfigurable(&self) -> Result<(), TestingError> {
        if self.settings.reconfig {
            Ok(())
        } else {
            Err(TestingError::InvalidArgument("the cluster was not started with start_reconfigurable".into()))
        }
    }

    /// A session on the ensemble's members, leaving out member id `except`.
    async fn admin_client(&self, except: Option<u32>) -> Result<Client, TestingError> {
        let servers: Vec<String> = self
            .peers
            .iter()
            .filter(|p| Some(p.id) != except)
            .map(|p| self.members[p.id as usize - 1].addr())
            .collect();
        let client = Client::connector()
            .with_session_timeout(Timing::new().session_timeout())
            .connect(&servers.join(","))
            .await?;
        Ok(client)
    }

    /// Sends one incremental reconfiguration, through a member that stays, again while the
    /// ensemble says it cannot take it yet.
    async fn reconfig(&self, joining: &[&str], leaving: &[&str]) -> Result<(), TestingError> {
        let except = leaving.first().and_then(|id| id.parse().ok());
        let client = self.admin_client(except).await?;
        let end = tokio::time::Instant::now() + RECONFIG_DEADLINE;
        loop {
            let update =
                EnsembleUpdate::Incremental { joinings: joining.iter().copied(), leavings: leaving.iter().copied() };
            match client.update_ensemble(update, None).await {
                Ok((config, _)) => {
                    tracing::info!(config = %String::from_utf8_lossy(&config), "reconfig: new configuration");
                    return Ok(());
                }
                // NEWCONFIGNOQUORUM (-13), RECONFIGINPROGRESS (-14): zookeeper-client 0.11 has
                // no variants of their own for them.
                Err(err @ zookeeper_client::Error::UnexpectedErrorCode(-13 | -14))
                    if tokio::time::Instant::now() < end =>
                {
                    tracing::debug!(error = %err, "reconfig refused for now; trying again");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(err) => return Err(err.into()),
            }
        }
    }
}
