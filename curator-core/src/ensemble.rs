//! Ensemble tracking, as Curator's `EnsembleTracker`: the session manager follows ZooKeeper's
//! dynamic configuration (`/zookeeper/config`, ZooKeeper 3.5+) and, when the ensemble changes,
//! moves the session to the new servers (docs/architecture.md section 3.7).
//!
//! What the tracker does, per session and connection:
//! - After each connection (the first of a session and every reconnection, as Curator resets
//!   on `CONNECTED` and `RECONNECTED`) it reads `/zookeeper/config` with a one-shot watch, and
//!   reads again each time the watch fires. The node lies outside any namespace or chroot.
//! - Each configuration is turned into a connect string ([`connect_string_from_config`]: the
//!   client address of every `server.N` line, participants and observers alike, the chroot of
//!   the builder's connect string kept) and kept as the framework's current connect string
//!   ([`CuratorFramework::current_connect_string`](crate::CuratorFramework::current_connect_string)).
//!   An empty or unreadable configuration (a standalone server, a server before 3.5) leaves
//!   the current one as it is.
//! - The session moves to a new client, opened on the current list *with the same session*
//!   (its id and password, zookeeper-client's `Connector::with_session`), in two cases:
//!   1. while connected, a new configuration names none of the client's servers, so the one it
//!      is connected to is leaving: the move starts at once;
//!   2. the connection drops (`Suspended`) and the current list names other servers than the
//!      ones the client was opened with: the move is the reconnection.
//!
//!   The old client is let go of first (the session slot is emptied, so operations wait, and
//!   [`CuratorFramework::client_gone`](crate::CuratorFramework::client_gone) tells whoever keeps
//!   a client across waits to drop it), and it must end before the new one connects: a removed
//!   server goes on serving outside the configuration, and an old client still alive would
//!   reconnect to it and take the session back. So while the tracker is on, the framework's
//!   clients are opened *detached* (dropping one sends no CloseSession), and `close()` closes the
//!   session with a short-lived client on the same session.
//! - Connection states: a move that completes within a tenth of the session timeout (at most
//!   2 s) publishes nothing; a longer one publishes `Suspended` (if the connection had not
//!   dropped already) and then `Reconnected` with `new_session == false`. So a move shows as one
//!   `Suspended`/`Reconnected` pair at most, never as `Lost`: what the session holds (ephemeral
//!   nodes, locks) is not reported lost under [`ErrorPolicy::Session`](crate::ErrorPolicy::Session),
//!   and under the standard policy only if `Suspended` was published. `Lost` comes only as for
//!   any disconnection (no answer for most of a session timeout, docs/architecture.md section
//!   3.2) or if a server says the session expired.
//! - What was registered on the old client ends with it: [`Session::epoch`](crate::Session::epoch)
//!   counts clients, and the caches and `PersistentWatcher` add their watches again on the new
//!   one.
//!
//! Turned off with [`CuratorFrameworkBuilder::ensemble_tracker`](crate::CuratorFrameworkBuilder::ensemble_tracker)
//! (on by default, as in Curator), the client keeps the servers of its builder's connect string.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use zookeeper_client as zk;

use crate::connect_string::server_set;
use crate::error::{CuratorError, Result};

/// The node that holds the ensemble's dynamic configuration.
pub const CONFIG_PATH: &str = "/zookeeper/config";

/// The framework's current connect string: the builder's, replaced by each configuration the
/// tracker reads.
#[derive(Debug)]
pub(crate) struct Ensemble {
    enabled: bool,
    /// The chroot suffix of the builder's connect string (`/app`), or empty.
    chroot: String,
    current: Mutex<String>,
}

impl Ensemble {
    pub(crate) fn new(connect_string: &str, enabled: bool) -> Self {
        let chroot =
            crate::connect_string::parse(connect_string).ok().and_then(|cs| cs.chroot).unwrap_or_default().to_string();
        Ensemble { enabled, chroot, current: Mutex::new(connect_string.to_string()) }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The connect string the next connection uses.
    pub(crate) fn current(&self) -> String {
        self.current.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Applies a configuration read from [`CONFIG_PATH`]; true if the connect string changed.
    fn apply(&self, data: &[u8]) -> bool {
        let servers = match connect_string_from_config(data) {
            Ok(servers) if servers.is_empty() => {
                tracing::debug!(path = CONFIG_PATH, "ensemble configuration names no client address: ignored");
                return false;
            }
            Ok(servers) => servers,
            Err(err) => {
                tracing::warn!(path = CONFIG_PATH, error = %err, "ensemble configuration not understood: ignored");
                return false;
            }
        };
        let next = format!("{servers}{}", self.chroot);
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if same_servers(&current, &next) {
            return false;
        }
        tracing::info!(path = CONFIG_PATH, from = %current, to = %next, "the ensemble changed");
        *current = next;
        true
    }
}

/// Whether two connect strings name the same servers (in any order, chroot ignored).
pub(crate) fn same_servers(a: &str, b: &str) -> bool {
    server_set(a) == server_set(b)
}

/// Whether two connect strings have no server in common (chroot ignored).
pub(crate) fn disjoint_servers(a: &str, b: &str) -> bool {
    server_set(a).is_disjoint(&server_set(b))
}

/// The connect string (`host:port,...`, no chroot) of the servers in a dynamic configuration,
/// as read from [`CONFIG_PATH`]: for each `server.N=quorum;[clientHost:]clientPort` line, in the
/// order of `N`, the client host and port. A wildcard or missing client host (`0.0.0.0`, `::`)
/// stands for the server's quorum host. Lines without a client port are left out, as Curator
/// leaves them out; a configuration with none gives an empty string. IPv6 hosts come in
/// brackets, as zookeeper-client parses them.
///
/// ```
/// use curator_core::connect_string_from_config;
/// let config = b"server.1=10.1.2.3:2888:3888:participant;0.0.0.0:2181\n\
///                server.2=10.1.2.4:2888:3888:observer;10.2.3.4:2182\nversion=100000000\n";
/// assert_eq!(connect_string_from_config(config).unwrap(), "10.1.2.3:2181,10.2.3.4:2182");
/// ```
///
/// # Errors
/// [`CuratorError::InvalidArgument`] for data that is not UTF-8 or a `server.N` line that does
/// not parse.
pub fn connect_string_from_config(data: &[u8]) -> Result<String> {
    let bad = |reason: String| CuratorError::InvalidArgument { path: CONFIG_PATH.to_string(), reason };
    let text = std::str::from_utf8(data).map_err(|_| bad("the configuration is not UTF-8".into()))?;
    let mut servers = Vec::new();
    for line in text.lines().map(str::trim) {
        let Some((key, value)) = line.split_once('=') else { continue };
        let Some(id) = key.trim().strip_prefix("server.") else { continue };
        let id: u64 = id.parse().map_err(|_| bad(format!("bad server id in {line:?}")))?;
        let (quorum, client) = match value.split_once(';') {
            Some((quorum, client)) => (quorum.trim(), client.trim()),
            None => continue,
        };
        let (quorum_host, _) = split_host(quorum).ok_or_else(|| bad(format!("no quorum address in {line:?}")))?;
        let (client_host, port) = match client.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() => (unbracket(host), port),
            _ => ("", client),
        };
        let port: u16 = match port.parse() {
            Ok(p) if p > 0 => p,
            _ => return Err(bad(format!("bad client port in {line:?}"))),
        };
        let host = if client_host.is_empty() || is_wildcard(client_host) { quorum_host } else { client_host };
        let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
        servers.push((id, format!("{host}:{port}")));
    }
    servers.sort_by_key(|(id, _)| *id);
    Ok(servers.into_iter().map(|(_, s)| s).collect::<Vec<_>>().join(","))
}

/// The host of `host:port:port[:role]` or `[v6]:port:port[:role]`, and the rest.
fn split_host(quorum: &str) -> Option<(&str, &str)> {
    match quorum.strip_prefix('[') {
        Some(v6) => v6.split_once(']'),
        None => quorum.split_once(':'),
    }
    .filter(|(host, _)| !host.is_empty())
}

fn unbracket(host: &str) -> &str {
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

fn is_wildcard(host: &str) -> bool {
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_unspecified(),
        Err(_) => false,
    }
}

type Read =
    Pin<Box<dyn Future<Output = std::result::Result<(Vec<u8>, zk::Stat, zk::OneshotWatcher), zk::Error>> + Send>>;
type Change = Pin<Box<dyn Future<Output = zk::WatchedEvent> + Send>>;

/// Reads and watches [`CONFIG_PATH`] on one client, for the session manager. Cancel safe: the
/// request or watch in flight is kept across calls of [`next`](Self::next).
pub(crate) struct Tracker {
    ensemble: Arc<Ensemble>,
    step: Step,
}

enum Step {
    Off,
    Idle,
    Reading(Read),
    Watching(Change),
}

impl Tracker {
    /// A tracker that reads at once (if `ensemble` tracks at all).
    pub(crate) fn new(ensemble: Arc<Ensemble>, client: &zk::Client) -> Self {
        let step = if ensemble.enabled() { Step::Idle } else { Step::Off };
        let mut tracker = Tracker { ensemble, step };
        tracker.read(client);
        tracker
    }

    /// The connect string it keeps up to date.
    pub(crate) fn ensemble(&self) -> &Ensemble {
        &self.ensemble
    }

    /// Reads again (after a reconnection: a change may have been missed while disconnected).
    pub(crate) fn read(&mut self, client: &zk::Client) {
        if matches!(self.step, Step::Off) {
            return;
        }
        tracing::debug!(path = CONFIG_PATH, "get_config (ensemble tracker)");
        self.step = Step::Reading(Box::pin(client.get_and_watch_config()));
    }

    /// Waits for the next configuration and applies it; returns true when the connect string
    /// changed. Pends while there is nothing to wait for.
    pub(crate) async fn next(&mut self, client: &zk::Client) -> bool {
        loop {
            match &mut self.step {
                Step::Off | Step::Idle => return std::future::pending().await,
                Step::Reading(read) => match read.await {
                    Ok((data, _, watcher)) => {
                        self.step = Step::Watching(Box::pin(watcher.changed()));
                        if self.ensemble.apply(&data) {
                            return true;
                        }
                    }
                    Err(zk::Error::NoNode) => {
                        tracing::debug!(
                            path = CONFIG_PATH,
                            "no ensemble configuration (server before 3.5?): not tracking"
                        );
                        self.step = Step::Off;
                    }
                    Err(err) => {
                        // Read again after the next reconnection.
                        tracing::debug!(path = CONFIG_PATH, error = %err, "could not read the ensemble configuration");
                        self.step = Step::Idle;
                    }
                },
                Step::Watching(change) => {
                    let event = change.await;
                    if event.event_type == zk::EventType::Session {
                        // The session ended: nothing more to read on this client.
                        self.step = Step::Idle;
                    } else {
                        tracing::debug!(path = CONFIG_PATH, event = ?event.event_type, "ensemble configuration changed");
                        self.read(client);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Curator's TestReconfiguration.testConfigToConnectionString* and testIPv6Wildcard*/testMixedIP*
    // cases, with zookeeper-client's bracketed IPv6.
    #[test]
    fn config_to_connect_string() {
        let cases: &[(&str, &str)] = &[
            ("server.1=10.1.2.3:2888:3888:participant;10.2.3.4:2181", "10.2.3.4:2181"),
            ("server.1=10.1.2.3:2888:3888:participant;2181", "10.1.2.3:2181"),
            ("server.1=10.1.2.3:2888:3888:participant;0.0.0.0:2181", "10.1.2.3:2181"),
            ("server.1=10.1.2.3:2888:3888:participant", ""),
            (
                "server.1=[2001:db8:85a3:0:0:8a2e:370:7334]:2888:3888:participant;[::]:2181",
                "[2001:db8:85a3:0:0:8a2e:370:7334]:2181",
            ),
            ("server.1=[1010:1:2:3:4:5:6:7]:2888:3888:participant;[::0]:2181", "[1010:1:2:3:4:5:6:7]:2181"),
            ("server.1=10.1.2.3:2888:3888:participant;[::]:2181", "10.1.2.3:2181"),
            ("server.1=[2001:db8::1]:2888:3888:participant;127.0.0.1:2181", "127.0.0.1:2181"),
            ("server.10=h10:1:2:participant;h10:9\nserver.2=h2:1:2:observer;h2:8\nversion=1", "h2:8,h10:9"),
        ];
        for (config, expected) in cases {
            assert_eq!(connect_string_from_config(config.as_bytes()).unwrap(), *expected, "{config}");
        }
    }

    #[test]
    fn bad_configs_are_typed_errors() {
        for config in ["server.x=h:1:2;h:3", "server.1=h:1:2;h:port", "server.1=h:1:2;h:0", "server.1=;h:3"] {
            assert!(
                matches!(connect_string_from_config(config.as_bytes()), Err(CuratorError::InvalidArgument { .. })),
                "{config}"
            );
        }
        assert!(connect_string_from_config(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn chroot_is_kept_and_servers_compared_as_sets() {
        let e = Ensemble::new("a:1,b:2/app", true);
        assert!(e.apply(b"server.1=x:1:2:participant;c:3"));
        assert_eq!(e.current(), "c:3/app");
        assert!(!e.apply(b"server.1=x:1:2:participant;c:3"));
        assert!(same_servers("a:1,b:2", "tcp://b:2,A:1/x"));
        assert!(!same_servers("a:1", "a:1,b:2"));
        assert_eq!(Ensemble::new("tcp://a:1", true).current(), "tcp://a:1");
        assert!(Ensemble::new("tcp://a:1", true).chroot.is_empty());
        assert_eq!(Ensemble::new("tcp://a:1,tcp://b:2/app", true).chroot, "/app");
    }
}
