//! `reconfig()`: ZooKeeper's dynamic reconfiguration (3.5+) of the ensemble's members, as
//! Curator's `ReconfigBuilder`: servers joining and leaving (incremental), or a whole new
//! member list (non-incremental), optionally only from a given configuration version.
//!
//! The spec of a joining or new member is `server.<id>=<host>:<quorum port>:<election
//! port>[:participant|observer][;[<client host>:]<client port>]`, as in the dynamic
//! configuration file; a leaving member is named by its id. Specs are checked before anything
//! is sent: a malformed one is [`CuratorError::InvalidArgument`]. Design: docs/architecture.md
//! section 3.11.

use zk::EnsembleUpdate;
use zookeeper_client as zk;

use crate::background::CuratorEventType;
use crate::ensemble::CONFIG_PATH;
use crate::error::{CuratorError, Result};
use crate::framework::CuratorFramework;
use crate::ops::outcome::{no_evidence, Verdict};
use crate::ops::Pending;

/// Builder of a reconfiguration. See [`CuratorFramework::reconfig`].
#[derive(Debug, Clone)]
pub struct ReconfigBuilder {
    fw: CuratorFramework,
    joining: Vec<String>,
    leaving: Vec<String>,
    members: Option<Vec<String>>,
    from_config: Option<i64>,
}

impl CuratorFramework {
    /// Starts a reconfiguration of the ensemble (Curator's `reconfig()`): incremental with
    /// [`joining`](ReconfigBuilder::joining) and [`leaving`](ReconfigBuilder::leaving), or a
    /// whole new member list with [`with_new_members`](ReconfigBuilder::with_new_members);
    /// [`from_config`](ReconfigBuilder::from_config) makes it conditional on the configuration
    /// version. It resolves to the new configuration (the bytes of `/zookeeper/config`, with
    /// its `version=` line) and its stat, and goes to the background with
    /// [`Pending::in_background`] like any operation (a
    /// [`Reconfig`](CuratorEventType::Reconfig) event). The servers must allow it
    /// (`reconfigEnabled=true`, and a super user unless ACL checks are skipped); otherwise the
    /// server's refusal comes back typed: [`CuratorError::NoAuth`], or
    /// [`CuratorError::Zk`] with `zk::Error::ReconfigDisabled`.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// use curator_core::connect_string_from_config;
    ///
    /// let (config, _) = fw.get_config().for_ensemble().await?;
    /// let version = curator_core::config_version(&config).expect("a dynamic configuration");
    /// // Server 3 leaves, server 4 joins, only if nobody reconfigured since our read.
    /// let (new_config, _) = fw
    ///     .reconfig()
    ///     .leaving(["3"])
    ///     .joining(["server.4=10.0.0.4:2888:3888:participant;2181"])
    ///     .from_config(version)
    ///     .for_ensemble()
    ///     .await?;
    /// println!("now {:?}", connect_string_from_config(&new_config));
    /// # Ok(()) }
    /// ```
    pub fn reconfig(&self) -> ReconfigBuilder {
        ReconfigBuilder { fw: self.clone(), joining: Vec::new(), leaving: Vec::new(), members: None, from_config: None }
    }
}

impl ReconfigBuilder {
    /// Servers to add, each a `server.<id>=...` spec (added to earlier ones).
    pub fn joining<S: Into<String>>(mut self, servers: impl IntoIterator<Item = S>) -> Self {
        self.joining.extend(servers.into_iter().map(Into::into));
        self
    }
    /// Servers to remove, each by its id (added to earlier ones).
    pub fn leaving<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> Self {
        self.leaving.extend(ids.into_iter().map(Into::into));
        self
    }
    /// The whole new member list, each a `server.<id>=...` spec (a non-incremental
    /// reconfiguration; not with `joining` or `leaving`). An empty list, as no server joining
    /// or leaving, is sent as an incremental change of nothing, as Curator does: the members
    /// stay.
    pub fn with_new_members<S: Into<String>>(mut self, servers: impl IntoIterator<Item = S>) -> Self {
        self.members = Some(servers.into_iter().map(Into::into).collect());
        self
    }
    /// Apply only if the ensemble's configuration has this version (the `version=` of
    /// `/zookeeper/config`, see [`config_version`](crate::config_version); -1: any): otherwise
    /// the server refuses with [`CuratorError::BadVersion`] and nothing changes.
    pub fn from_config(mut self, version: i64) -> Self {
        self.from_config = Some(version);
        self
    }

    /// Sends the reconfiguration; resolves to the new configuration and its stat.
    ///
    /// After a lost reply it is sent again only when it was made [`from_config`](Self::from_config)
    /// and the configuration is still at that version (so it was not applied); otherwise it ends
    /// with [`OutcomeUnknown`](CuratorError::OutcomeUnknown): read the configuration to see
    /// (docs/architecture.md section 4.4).
    pub fn for_ensemble(self) -> Pending<(Vec<u8>, zk::Stat)> {
        let kind = CuratorEventType::Reconfig;
        if let Err(err) = self.check() {
            return Pending::failed(&self.fw, kind, CONFIG_PATH, err);
        }
        let Self { fw, joining, leaving, members, from_config } = self;
        let version = from_config.filter(|v| *v != -1);
        let fw2 = fw.clone();
        Pending::new(&fw, kind, CONFIG_PATH, async move {
            let (joining, leaving, members) = (&joining, &leaving, &members);
            fw2.write_with_retry(
                "reconfig",
                CONFIG_PATH,
                |session, flight| async move {
                    tracing::debug!(path = CONFIG_PATH, ?joining, ?leaving, ?members, ?version, "reconfig");
                    let client = session.client();
                    let sent = match members.as_ref().filter(|m| !m.is_empty()) {
                        Some(members) => {
                            let ensemble = members.iter().map(String::as_str);
                            client.update_ensemble(EnsembleUpdate::New { ensemble }, version).await
                        }
                        None => {
                            let update = EnsembleUpdate::Incremental {
                                joinings: joining.iter().map(String::as_str),
                                leavings: leaving.iter().map(String::as_str),
                            };
                            client.update_ensemble(update, version).await
                        }
                    };
                    flight.seen(sent).map_err(|e| CuratorError::from_zk(CONFIG_PATH, e))
                },
                |session, _| async move { decide(&session, version).await },
            )
            .await
        })
    }

    /// Everything that can be told before sending.
    fn check(&self) -> Result<()> {
        let bad = |reason: String| Err(CuratorError::InvalidArgument { path: CONFIG_PATH.into(), reason });
        if let Some(v) = self.from_config.filter(|v| *v < -1) {
            return bad(format!("bad configuration version {v}"));
        }
        match &self.members {
            Some(_) if !self.joining.is_empty() || !self.leaving.is_empty() => {
                return bad("with_new_members replaces the member list: not with joining or leaving".into());
            }
            Some(members) => members.iter().try_for_each(|s| check_server_spec(s))?,
            None => {
                self.joining.iter().try_for_each(|s| check_server_spec(s))?;
                for id in &self.leaving {
                    if parse_id(id).is_none() {
                        return bad(format!("leaving server {id:?}: not a server id (a positive number)"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// A server id: a positive number (ZooKeeper's `myid`).
fn parse_id(id: &str) -> Option<u64> {
    id.trim().parse::<u64>().ok().filter(|id| *id > 0)
}

/// A port number, 1 to 65535.
fn is_port(port: &str) -> bool {
    port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// Checks a member spec `server.<id>=<host>:<port>:<port>[:role][;[<host>:]<port>]`, the form
/// of a `server.N` line of the dynamic configuration.
fn check_server_spec(spec: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(CuratorError::InvalidArgument {
            path: CONFIG_PATH.into(),
            reason: format!(
                "server spec {spec:?}: {why} (expected server.<id>=<host>:<port>:<port>[:participant|observer][;[<host>:]<port>])"
            ),
        })
    };
    if spec.contains(',') || spec.chars().any(char::is_whitespace) {
        return bad("one server, without commas or spaces");
    }
    let Some((key, value)) = spec.split_once('=') else { return bad("no `=`") };
    if key.strip_prefix("server.").and_then(parse_id).is_none() {
        return bad("it does not start with server.<id>, the id a positive number");
    }
    let (quorum, client) = match value.split_once(';') {
        Some((quorum, client)) => (quorum, Some(client)),
        None => (value, None),
    };
    // host:port:port[:role]; the host may be an IPv6 address in brackets.
    let (host, rest) = match quorum.strip_prefix('[') {
        Some(v6) => match v6.split_once("]:") {
            Some((host, rest)) => (host, rest),
            None => return bad("an IPv6 host needs its closing bracket"),
        },
        None => match quorum.split_once(':') {
            Some((host, rest)) => (host, rest),
            None => return bad("no quorum and election ports"),
        },
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let ports_ok = parts.len() >= 2 && is_port(parts[0]) && is_port(parts[1]);
    let role_ok = match parts.get(2) {
        None => parts.len() == 2,
        Some(role) => parts.len() == 3 && matches!(*role, "participant" | "observer"),
    };
    if host.is_empty() || !ports_ok || !role_ok {
        return bad("a host, two ports from 1 to 65535 and, optionally, participant or observer");
    }
    if let Some(client) = client {
        let port = client.rsplit_once(':').map_or(client, |(_, port)| port);
        if !is_port(port) {
            return bad("the client port is not from 1 to 65535");
        }
    }
    Ok(())
}

/// The version of an ensemble configuration (its `version=<hex>` line), as
/// [`ReconfigBuilder::from_config`] takes it; `None` if it has none (a server without dynamic
/// reconfiguration).
///
/// ```
/// let config = b"server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\nversion=100000000";
/// assert_eq!(curator_core::config_version(config), Some(0x1_0000_0000));
/// assert_eq!(curator_core::config_version(b""), None);
/// ```
pub fn config_version(config: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(config).ok()?;
    text.lines().find_map(|line| line.trim().strip_prefix("version=")).and_then(|v| i64::from_str_radix(v, 16).ok())
}

/// Whether a reconfiguration whose reply was lost was applied (docs/architecture.md section
/// 4.4): one made `from_config(version)` was not while the configuration is still at `version`
/// (after a sync); anything else tells nothing (another client may have changed it, maybe to
/// the same members).
async fn decide(session: &crate::framework::Session, version: Option<i64>) -> Result<Verdict<(Vec<u8>, zk::Stat)>> {
    let Some(version) = version else { return Ok(no_evidence("a reconfiguration not made from a known version")) };
    let client = session.client();
    tracing::debug!(path = CONFIG_PATH, version, "sync + getConfig (a reconfiguration in doubt)");
    let sync = client.sync(CONFIG_PATH);
    let read = client.get_config();
    match sync.await {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(err) => return Err(CuratorError::from_zk(CONFIG_PATH, err)),
    }
    let (config, _) = read.await.map_err(|e| CuratorError::from_zk(CONFIG_PATH, e))?;
    Ok(match config_version(&config) {
        Some(now) if now == version => Verdict::NotApplied,
        _ => {
            Verdict::Unknown("the configuration changed since the reconfiguration was sent, by it or by another".into())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_specs() {
        for good in [
            "server.1=127.0.0.1:2888:3888",
            "server.2=zk2:2888:3888:participant",
            "server.3=zk3:2888:3888:observer;2181",
            "server.4=zk4:2888:3888:participant;0.0.0.0:2181",
            "server.5=[::1]:2888:3888;[::1]:2181",
        ] {
            assert!(check_server_spec(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "1=zk1:2888:3888",
            "server.0=zk1:2888:3888",
            "server.x=zk1:2888:3888",
            "server.1",
            "server.1=zk1",
            "server.1=zk1:2888",
            "server.1=zk1:2888:99999",
            "server.1=:2888:3888",
            "server.1=zk1:2888:3888:leader",
            "server.1=zk1:2888:3888;",
            "server.1=zk1:2888:3888;zk1:0",
            "server.1=zk1:2888:3888,server.2=zk2:2888:3888",
            "server.1=[::1:2888:3888",
        ] {
            assert!(matches!(check_server_spec(bad), Err(CuratorError::InvalidArgument { .. })), "{bad:?}");
        }
    }

    #[test]
    fn versions() {
        assert_eq!(config_version(b"server.1=a:1:2\nversion=2000000a1\n"), Some(0x2_0000_00a1));
        assert_eq!(config_version(b"version=zz"), None);
        assert_eq!(config_version(&[0xff, 0xfe]), None);
    }
}
