//! The only module of the inspector that talks to ZooKeeper, and it only reads.
//!
//! [`Reader`] keeps its [`CuratorFramework`] private and offers two reads: `children`
//! (`getChildren`, with the node's stat) and `data` (`getData`); nothing else in the crate can
//! reach the framework, so nothing can create, delete or set. The framework is built without a
//! namespace (a namespace's node is created on first use, a write) and without watches.
//! [`Reader::connected_sessions`] asks each server of the connect string for its
//! connections with the `cons` four-letter word, which changes nothing either.

use std::collections::BTreeSet;
use std::time::Duration;

use curator_core::RetryNTimes;
use curator_core::{zk, CuratorError, CuratorFramework};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::InspectError;

/// Answers of `cons` longer than this are cut (a busy server's list can be long).
const MAX_CONS_ANSWER: u64 = 16 << 20;

/// A read-only view of one ensemble, through a started, connected framework.
pub(crate) struct Reader {
    fw: CuratorFramework,
    connect: String,
    timeout: Duration,
}

impl Reader {
    /// Connects to `connect`, waiting at most `timeout` for the first connection.
    pub(crate) async fn connect(connect: &str, timeout: Duration) -> Result<Reader, InspectError> {
        let fw = CuratorFramework::builder()
            .connect_string(connect)
            .connection_timeout(timeout)
            // Reads are retried a little across a short cut, then reported.
            .retry_policy(RetryNTimes::new(2, Duration::from_millis(200)))
            .build()
            .map_err(|e| InspectError::BadArguments(format!("--connect {connect:?}: {e}")))?;
        fw.start().map_err(|source| InspectError::Connect { connect: connect.to_string(), source })?;
        if let Err(source) = fw.block_until_connected(timeout).await {
            fw.close().await;
            return Err(InspectError::Connect { connect: connect.to_string(), source });
        }
        Ok(Reader { fw, connect: connect.to_string(), timeout })
    }

    /// Closes the session (it made no node, so nothing goes with it).
    pub(crate) async fn close(self) {
        self.fw.close().await;
    }

    /// The children of `path` (sorted by name) and its stat, `None` when there is no node.
    pub(crate) async fn children(&self, path: &str) -> Result<Option<(Vec<String>, zk::Stat)>, InspectError> {
        match self.fw.get_children().for_path_with_stat(path).await {
            Ok((mut children, stat)) => {
                children.sort();
                Ok(Some((children, stat)))
            }
            Err(CuratorError::NoNode { .. }) => Ok(None),
            Err(e) => Err(read_error(path, e)),
        }
    }

    /// The data and stat of `path`, `None` when there is no node (it may have gone since it was
    /// listed).
    pub(crate) async fn data(&self, path: &str) -> Result<Option<(Vec<u8>, zk::Stat)>, InspectError> {
        match self.fw.get_data().for_path_with_stat(path).await {
            Ok(read) => Ok(Some(read)),
            Err(CuratorError::NoNode { .. }) => Ok(None),
            Err(e) => Err(read_error(path, e)),
        }
    }

    /// The sessions connected to the servers of the connect string, by `cons` on each.
    pub(crate) async fn connected_sessions(&self) -> Vec<ServerSessions> {
        let mut out = Vec::new();
        for server in servers_of(&self.connect) {
            let answer = four_letter_word(&server, "cons", self.timeout).await;
            out.push(match answer {
                Ok(text) if text.contains("not in the whitelist") || text.contains("not executed") => ServerSessions {
                    server,
                    sessions: None,
                    error: Some(format!("the server refused `cons`: {}", text.trim())),
                },
                Ok(text) => ServerSessions { server, sessions: Some(sessions_in_cons(&text)), error: None },
                Err(error) => ServerSessions { server, sessions: None, error: Some(error) },
            });
        }
        out
    }
}

fn read_error(path: &str, source: CuratorError) -> InspectError {
    InspectError::Read { path: path.to_string(), source }
}

/// What one server said about its connections.
#[derive(Debug, Clone)]
pub(crate) struct ServerSessions {
    /// `host:port`, as in the connect string.
    pub(crate) server: String,
    /// The session ids connected to it; `None` when it did not say.
    pub(crate) sessions: Option<BTreeSet<i64>>,
    /// Why it did not say.
    pub(crate) error: Option<String>,
}

/// The `host:port` entries of a connect string, without its chroot suffix.
pub(crate) fn servers_of(connect: &str) -> Vec<String> {
    let hosts = connect.split('/').next().unwrap_or_default();
    hosts.split(',').map(str::trim).filter(|h| !h.is_empty()).map(str::to_string).collect()
}

/// The session ids (`sid=0x...`) in an answer to `cons`.
pub(crate) fn sessions_in_cons(answer: &str) -> BTreeSet<i64> {
    answer
        .split("sid=0x")
        .skip(1)
        .filter_map(|rest| {
            let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
            u64::from_str_radix(&hex, 16).ok().map(|id| id as i64)
        })
        .filter(|id| *id != 0)
        .collect()
}

/// Sends a four-letter word to `server` and reads its whole answer, within `timeout`.
async fn four_letter_word(server: &str, word: &str, timeout: Duration) -> Result<String, String> {
    tracing::debug!(server, word, "four-letter word");
    let exchange = async {
        let mut stream = TcpStream::connect(server).await.map_err(|e| format!("cannot connect to {server}: {e}"))?;
        stream.write_all(word.as_bytes()).await.map_err(|e| format!("cannot send `{word}` to {server}: {e}"))?;
        let mut answer = Vec::new();
        (&mut stream)
            .take(MAX_CONS_ANSWER)
            .read_to_end(&mut answer)
            .await
            .map_err(|e| format!("cannot read the answer to `{word}` from {server}: {e}"))?;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(answer) => answer,
        Err(_) => Err(format!("{server} did not answer `{word}` within {timeout:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_without_chroot() {
        assert_eq!(servers_of("a:1, b:2/app"), vec!["a:1", "b:2"]);
        assert_eq!(servers_of("127.0.0.1:2181"), vec!["127.0.0.1:2181"]);
    }

    #[test]
    fn sessions_from_cons() {
        let answer = " /127.0.0.1:5[1](queued=0,recved=1,sent=1,sid=0x10000b6b8d40001,lop=PING)\n \
                      /127.0.0.1:6[0](queued=0,recved=1,sent=0)\n /127.0.0.1:7[1](sid=0xff,x=1)\n";
        let ids: Vec<i64> = sessions_in_cons(answer).into_iter().collect();
        assert_eq!(ids, vec![0xff, 0x10000b6b8d40001]);
    }
}
