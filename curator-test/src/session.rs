//! Killing a session on demand.
//!
//! The classic way (Curator's old `KillSession`) is to attach a second client to the session
//! and close it. With `zookeeper-client` that races: when the second client attaches, the
//! server closes the first client's connection, the first client reconnects within a
//! millisecond (it does not back off), which closes the second client's connection before its
//! CloseSession is read, and so on; it can take seconds or never finish.
//!
//! So [`expire_session`] sends the CloseSession *pipelined* right behind the ConnectRequest,
//! in the same write, on a raw connection. The password is private to `SessionInfo`, so the
//! ConnectRequest is obtained from `zookeeper-client` itself: a client built
//! `with_session(..)` connects to a local one-shot listener, which keeps its first frame (the
//! ConnectRequest, carrying id and password) and hangs up.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zookeeper_client::{Client, SessionInfo};

use crate::error::TestingError;

/// How long [`expire_session`] may take in all.
const EXPIRE_DEADLINE: Duration = Duration::from_secs(30);
/// Attempts when the original client wins the race and closes our connection first.
const ATTEMPTS: usize = 20;
/// ZooKeeper's opcode for closeSession.
const OP_CLOSE_SESSION: i32 = -11;
/// The xid of our CloseSession request.
const CLOSE_XID: i32 = 1;
/// A ConnectRequest is small; anything bigger is not one.
const MAX_CONNECT_FRAME: usize = 4096;

/// Expires a session on demand: attaches to the session with its id and password, closes it,
/// and waits until the server confirms the close.
///
/// What happens, and when:
/// - On the server the session ends at once, before this returns: its ephemeral nodes are
///   deleted and watchers of those nodes (other clients' included) are notified right away,
///   so another client may, for example, take over a lock the victim held.
/// - The victim client is not told. It learns only when its connection is closed (the server
///   closes it when another connection attaches to the session, and on the close) and its
///   next reconnect is refused as expired; only then does its state go to
///   [`SessionState::Expired`](zookeeper_client::SessionState::Expired). With a direct, healthy
///   connection that takes milliseconds, but it can take seconds: when the victim's connection
///   runs through a paused [`ChaosProxy`](crate::ChaosProxy) it sees neither the close nor a
///   refusal until the proxy passes (or its own session timeout runs out), and a client
///   between reconnect attempts learns at its next attempt.
///
/// So for a while the victim may still believe it holds what its session held. Tests that
/// check for that should take the instant this call was made (not when it returns, nor when the
/// victim notices) as the moment the session was revoked.
///
/// `connect_string` may be any connect string that reaches the session's ensemble (servers are
/// tried in order; a chroot suffix is ignored).
///
/// ```no_run
/// # async fn f(server: &curator_test::TestingServer) -> Result<(), Box<dyn std::error::Error>> {
/// let client = zookeeper_client::Client::connect(&server.connect_string()).await?;
/// curator_test::expire_session(&server.connect_string(), client.session()).await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`TestingError::ZooKeeper`] with `SessionExpired` if the session is already gone;
/// [`TestingError::Io`] if no server can be reached; [`TestingError::Timeout`] after 30 s.
pub async fn expire_session(connect_string: &str, session: &SessionInfo) -> Result<(), TestingError> {
    let work = async {
        let connect_frame = capture_connect_request(session).await?;
        let hosts = hosts_of(connect_string);
        if hosts.is_empty() {
            return Err(TestingError::InvalidArgument(format!("no server in connect string {connect_string:?}")));
        }
        let mut last_err = None;
        let mut sent_close = false;
        for attempt in 1..=ATTEMPTS {
            for host in &hosts {
                match close_on(host, &connect_frame).await {
                    Ok(()) => {
                        tracing::debug!(session = %session.id(), host, attempt, "session closed");
                        return Ok(());
                    }
                    // A retry that finds the session gone: an earlier attempt's CloseSession
                    // was applied but the original client's reconnect closed our connection
                    // before the reply came.
                    Err(TestingError::ZooKeeper(zookeeper_client::Error::SessionExpired)) if sent_close => {
                        tracing::debug!(session = %session.id(), host, attempt, "session already closed by an earlier attempt");
                        return Ok(());
                    }
                    Err(e @ TestingError::ZooKeeper(_)) => return Err(e),
                    Err(e) => {
                        sent_close |=
                            !matches!(e, TestingError::Io { ref context, .. } if context.starts_with("connect to"));
                        tracing::debug!(session = %session.id(), host, attempt, "closing the session failed: {e}");
                        last_err = Some(e);
                    }
                }
            }
        }
        Err(last_err.unwrap_or_else(|| TestingError::Internal("expire_session made no attempt".into())))
    };
    match tokio::time::timeout(EXPIRE_DEADLINE, work).await {
        Ok(result) => result,
        Err(_) => Err(TestingError::timeout(format!("expire session {}", session.id()), EXPIRE_DEADLINE)),
    }
}

/// `host:port` entries of a connect string, without chroot or `tcp://` prefixes.
fn hosts_of(connect_string: &str) -> Vec<String> {
    connect_string
        .split(',')
        .map(|h| {
            let h = h.trim();
            let h = h.strip_prefix("tcp://").unwrap_or(h);
            h.split('/').next().unwrap_or_default().to_string()
        })
        .filter(|h| !h.is_empty())
        .collect()
}

/// Lets `zookeeper-client` write the ConnectRequest for `session` to a local listener and
/// returns that frame (length prefix included).
async fn capture_connect_request(session: &SessionInfo) -> Result<Vec<u8>, TestingError> {
    let listener =
        TcpListener::bind(("127.0.0.1", 0)).await.map_err(|e| TestingError::io("bind a listener on 127.0.0.1:0", e))?;
    let addr = listener.local_addr().map_err(|e| TestingError::io("listener local_addr", e))?;
    let connect_string = addr.to_string();
    let client = Client::connector().with_session(session.clone()).with_fail_eagerly().connect(&connect_string);
    let capture = async {
        let (mut stream, _) = listener.accept().await.map_err(|e| TestingError::io("accept", e))?;
        let mut head = [0u8; 4];
        stream.read_exact(&mut head).await.map_err(|e| TestingError::io("read the ConnectRequest length", e))?;
        let len = u32::from_be_bytes(head) as usize;
        if !(24..=MAX_CONNECT_FRAME).contains(&len) {
            return Err(TestingError::Internal(format!("unexpected ConnectRequest length {len}")));
        }
        let mut frame = vec![0u8; 4 + len];
        frame[..4].copy_from_slice(&head);
        stream.read_exact(&mut frame[4..]).await.map_err(|e| TestingError::io("read the ConnectRequest", e))?;
        Ok(frame)
    };
    // The client future never completes successfully (we hang up); it only has to write.
    let frame = tokio::select! {
        frame = capture => frame?,
        r = client => {
            return Err(match r {
                Err(e) => TestingError::ZooKeeper(e),
                Ok(_) => TestingError::Internal("a client connected to the capture listener".into()),
            });
        }
    };
    // Body: protocolVersion i32, lastZxidSeen i64, timeOut i32, sessionId i64, passwd, readOnly.
    let id = frame.get(20..28).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(i64::from_be_bytes);
    if id != Some(session.id().0) {
        return Err(TestingError::Internal(format!(
            "captured ConnectRequest names session {id:?}, not {}",
            session.id()
        )));
    }
    Ok(frame)
}

/// Sends ConnectRequest + CloseSession in one write to `host` and waits for the close's reply.
async fn close_on(host: &str, connect_frame: &[u8]) -> Result<(), TestingError> {
    let mut stream = TcpStream::connect(host).await.map_err(|e| TestingError::io(format!("connect to {host}"), e))?;
    let _ = stream.set_nodelay(true);
    let mut out = Vec::with_capacity(connect_frame.len() + 12);
    out.extend_from_slice(connect_frame);
    out.extend_from_slice(&8u32.to_be_bytes());
    out.extend_from_slice(&CLOSE_XID.to_be_bytes());
    out.extend_from_slice(&OP_CLOSE_SESSION.to_be_bytes());
    stream.write_all(&out).await.map_err(|e| TestingError::io(format!("send CloseSession to {host}"), e))?;

    // ConnectResponse: protocolVersion i32, timeOut i32, sessionId i64, passwd, readOnly.
    let response = read_frame(&mut stream, host, "ConnectResponse").await?;
    let timeout = response.get(4..8).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(i32::from_be_bytes);
    let id = response.get(8..16).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(i64::from_be_bytes);
    match (timeout, id) {
        (Some(t), Some(id)) if t > 0 && id != 0 => {}
        (Some(_), Some(_)) => return Err(TestingError::ZooKeeper(zookeeper_client::Error::SessionExpired)),
        _ => return Err(TestingError::Internal(format!("short ConnectResponse from {host}"))),
    }
    // Replies: xid i32, zxid i64, err i32. Wait for ours.
    loop {
        let reply = read_frame(&mut stream, host, "CloseSession reply").await?;
        let xid = reply.get(0..4).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(i32::from_be_bytes);
        let err = reply.get(12..16).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(i32::from_be_bytes);
        if xid == Some(CLOSE_XID) {
            return match err {
                Some(0) => Ok(()),
                Some(code) => {
                    Err(TestingError::Internal(format!("closeSession on {host} failed with error code {code}")))
                }
                None => Err(TestingError::Internal(format!("short reply from {host}"))),
            };
        }
    }
}

async fn read_frame(stream: &mut TcpStream, host: &str, what: &str) -> Result<Vec<u8>, TestingError> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).await.map_err(|e| TestingError::io(format!("read {what} from {host}"), e))?;
    let len = u32::from_be_bytes(head) as usize;
    if len > 1 << 20 {
        return Err(TestingError::Internal(format!("frame of {len} bytes from {host}")));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await.map_err(|e| TestingError::io(format!("read {what} from {host}"), e))?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::hosts_of;

    #[test]
    fn hosts_of_connect_strings() {
        assert_eq!(hosts_of("127.0.0.1:1"), vec!["127.0.0.1:1"]);
        assert_eq!(hosts_of("127.0.0.1:1,127.0.0.1:2/chroot/x"), vec!["127.0.0.1:1", "127.0.0.1:2"]);
        assert_eq!(hosts_of("tcp://a:1,tcp://b:2/c"), vec!["a:1", "b:2"]);
        assert!(hosts_of("").is_empty());
    }
}
