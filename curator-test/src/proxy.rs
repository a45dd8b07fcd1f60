//! [`ChaosProxy`]: a fault-injecting TCP proxy in front of one ZooKeeper server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

use crate::error::TestingError;

/// Frames longer than this are not ZooKeeper frames: the first one switches a connection to raw
/// forwarding (four-letter words are ASCII, so their first four bytes read as a huge length);
/// a later one closes the connection.
const MAX_FRAME: usize = 64 << 20;
/// How long the proxy tries to reach the upstream server for a new connection.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// No xid is being swallowed.
const NO_XID: i64 = i64::MIN;

/// A TCP proxy on a free `127.0.0.1` port in front of one ZooKeeper server, that can pause,
/// cut, refuse, or drop the reply to the next request: network faults on demand, as seen by a
/// real client.
///
/// Connect clients to [`connect_string`](Self::connect_string). Forwarding runs in tokio tasks
/// of the runtime that called [`start`](Self::start); dropping the proxy closes its port and
/// every connection through it.
///
/// ZooKeeper framing is understood (a 4-byte big-endian length, then the body; the first frame
/// each way is the connect handshake; later client bodies start with xid and opcode, server
/// bodies with xid, zxid and err), so that [`swallow_next_reply`](Self::swallow_next_reply)
/// can find the reply to one request. Anything else (a four-letter word) is forwarded raw.
///
/// ```no_run
/// # async fn f(server: &curator_test::TestingServer) -> Result<(), Box<dyn std::error::Error>> {
/// let proxy = curator_test::ChaosProxy::start(&server.connect_string()).await?;
/// let client = zookeeper_client::Client::connect(&proxy.connect_string()).await?;
/// proxy.cut(); // the client sees its connection drop, and reconnects to the same session
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ChaosProxy {
    addr: SocketAddr,
    inner: Arc<Inner>,
    accept: JoinHandle<()>,
}

#[derive(Debug)]
struct Inner {
    upstream: String,
    /// `true` while paused.
    paused: watch::Sender<bool>,
    reject: AtomicBool,
    swallow: AtomicBool,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, AbortHandle>>,
}

impl Inner {
    fn conns(&self) -> MutexGuard<'_, HashMap<u64, AbortHandle>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ChaosProxy {
    /// Starts a proxy on a free `127.0.0.1` port forwarding to `upstream` (`host:port`).
    ///
    /// Must be called inside a tokio runtime. The upstream is connected once per client
    /// connection, when that connection is accepted.
    pub async fn start(upstream: &str) -> Result<ChaosProxy, TestingError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| TestingError::io("bind the proxy on 127.0.0.1:0", e))?;
        let addr = listener.local_addr().map_err(|e| TestingError::io("proxy local_addr", e))?;
        let (paused, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            upstream: upstream.to_string(),
            paused,
            reject: AtomicBool::new(false),
            swallow: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        });
        let accept = tokio::spawn(accept_loop(listener, inner.clone()));
        tracing::debug!(%addr, upstream, "ChaosProxy started");
        Ok(ChaosProxy { addr, inner, accept })
    }

    /// The connect string for clients, `127.0.0.1:PORT`.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// The upstream server this proxy forwards to.
    pub fn upstream(&self) -> &str {
        &self.inner.upstream
    }

    /// Back to normal: ends a [`pause`](Self::pause) (held bytes flow again) and a
    /// [`set_reject(true)`](Self::set_reject).
    pub fn pass(&self) {
        self.inner.reject.store(false, Ordering::SeqCst);
        self.inner.paused.send_replace(false);
        tracing::debug!(addr = %self.addr, "proxy: pass");
    }

    /// Stops forwarding bytes both ways while keeping every connection open: a partition that
    /// TCP does not notice. Requests do not reach the server, replies and pings do not reach
    /// the client; what was read is held and delivered after [`pass`](Self::pass), the rest is
    /// simply not read. New connections are accepted but get no answer either.
    pub fn pause(&self) {
        self.inner.paused.send_replace(true);
        tracing::debug!(addr = %self.addr, "proxy: pause");
    }

    /// Closes every current connection at once (both the client's and the upstream side).
    /// New connections are still accepted and forwarded (unless paused or rejecting).
    pub fn cut(&self) {
        let cut: Vec<AbortHandle> = self.inner.conns().drain().map(|(_, h)| h).collect();
        tracing::debug!(addr = %self.addr, connections = cut.len(), "proxy: cut");
        for h in cut {
            h.abort();
        }
    }

    /// While `true`, new connections are closed as soon as they are accepted (the server "is
    /// unreachable"); existing ones are left alone (combine with [`cut`](Self::cut)).
    pub fn set_reject(&self, reject: bool) {
        self.inner.reject.store(reject, Ordering::SeqCst);
        tracing::debug!(addr = %self.addr, reject, "proxy: set_reject");
    }

    /// Arms a one-shot fault: the next client request (xid > 0: not a ping, not auth or
    /// set-watches, not the connect handshake) on any connection through this proxy is
    /// forwarded and applied by the server, but its reply is dropped and that connection is
    /// closed. The client sees a connection loss although its request was applied.
    pub fn swallow_next_reply(&self) {
        self.inner.swallow.store(true, Ordering::SeqCst);
        tracing::debug!(addr = %self.addr, "proxy: swallow next reply");
    }

    /// Whether a [`swallow_next_reply`](Self::swallow_next_reply) is still waiting for its
    /// request.
    pub fn swallow_pending(&self) -> bool {
        self.inner.swallow.load(Ordering::SeqCst)
    }

    /// The number of open client connections through the proxy.
    pub fn connections(&self) -> usize {
        self.inner.conns().len()
    }
}

impl Drop for ChaosProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn accept_loop(listener: TcpListener, inner: Arc<Inner>) {
    loop {
        let (client, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // EMFILE and the like: back off instead of spinning.
                tracing::warn!("proxy accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if inner.reject.load(Ordering::SeqCst) {
            tracing::debug!(%peer, "proxy: rejecting connection");
            drop(client);
            continue;
        }
        let id = inner.next_id.fetch_add(1, Ordering::SeqCst);
        // Insert under the lock that the connection's guard takes on exit, so that a
        // connection that ends at once is still removed.
        let mut conns = inner.conns();
        let task = tokio::spawn(connection(inner.clone(), id, client, peer));
        conns.insert(id, task.abort_handle());
    }
}

/// Removes a connection from the table when its task ends or is aborted.
struct ConnGuard {
    inner: Arc<Inner>,
    id: u64,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.inner.conns().remove(&self.id);
    }
}

async fn connection(inner: Arc<Inner>, id: u64, client: TcpStream, peer: SocketAddr) {
    let _guard = ConnGuard { inner: inner.clone(), id };
    let upstream = match tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(&inner.upstream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(%peer, upstream = %inner.upstream, "proxy: upstream refused: {e}");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, upstream = %inner.upstream, "proxy: upstream connect timed out");
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (mut cr, mut cw) = client.into_split();
    let (mut ur, mut uw) = upstream.into_split();
    let mut paused_c = inner.paused.subscribe();
    let mut paused_s = inner.paused.subscribe();

    // Read the first four bytes to tell ZooKeeper framing from a four-letter word.
    wait_pass(&mut paused_c).await;
    let mut head = [0u8; 4];
    if cr.read_exact(&mut head).await.is_err() {
        return;
    }
    let len = u32::from_be_bytes(head) as usize;
    let outcome = if len > MAX_FRAME {
        wait_pass(&mut paused_c).await;
        if uw.write_all(&head).await.is_err() {
            return;
        }
        tokio::select! {
            r = raw(&mut cr, &mut uw, &mut paused_c) => r,
            r = raw(&mut ur, &mut cw, &mut paused_s) => r,
        }
    } else {
        let swallow_xid = AtomicI64::new(NO_XID);
        tokio::select! {
            r = client_to_server(&inner, Some(len), &mut cr, &mut uw, &mut paused_c, &swallow_xid) => r,
            r = server_to_client(&mut ur, &mut cw, &mut paused_s, &swallow_xid) => r,
        }
    };
    match outcome {
        End::Eof => tracing::trace!(%peer, "proxy: connection closed"),
        End::Error(e) => tracing::debug!(%peer, "proxy: connection ended: {e}"),
        End::Swallowed(xid) => {
            tracing::info!(%peer, xid, "proxy: swallowed a reply and closed the connection")
        }
        End::BadFrame(len) => tracing::warn!(%peer, len, "proxy: frame too long; closing"),
    }
    // Dropping the halves closes both sockets.
}

enum End {
    Eof,
    Error(std::io::Error),
    Swallowed(i32),
    BadFrame(usize),
}

async fn wait_pass(paused: &mut watch::Receiver<bool>) {
    // Err only when the proxy is gone; the task is being aborted then anyway.
    let _ = paused.wait_for(|p| !*p).await;
}

/// Reads one frame (length prefix included) whose length may already be known.
async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, known_len: Option<usize>) -> Result<Option<Vec<u8>>, End> {
    let len = match known_len {
        Some(len) => len,
        None => {
            let mut head = [0u8; 4];
            match r.read_exact(&mut head).await {
                Ok(_) => u32::from_be_bytes(head) as usize,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(End::Error(e)),
            }
        }
    };
    if len > MAX_FRAME {
        return Err(End::BadFrame(len));
    }
    let mut frame = vec![0u8; 4 + len];
    frame[..4].copy_from_slice(&(len as u32).to_be_bytes());
    r.read_exact(&mut frame[4..]).await.map_err(End::Error)?;
    Ok(Some(frame))
}

fn xid_of(frame: &[u8]) -> Option<i32> {
    let b: [u8; 4] = frame.get(4..8)?.try_into().ok()?;
    Some(i32::from_be_bytes(b))
}

async fn client_to_server<R, W>(
    inner: &Inner,
    mut first_len: Option<usize>,
    r: &mut R,
    w: &mut W,
    paused: &mut watch::Receiver<bool>,
    swallow_xid: &AtomicI64,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut handshake = true;
    loop {
        if first_len.is_none() {
            wait_pass(paused).await;
        }
        let frame = match read_frame(r, first_len.take()).await {
            Ok(Some(f)) => f,
            Ok(None) => return End::Eof,
            Err(end) => return end,
        };
        if !handshake {
            if let Some(xid) = xid_of(&frame) {
                if xid > 0 && inner.swallow.compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                    tracing::debug!(xid, "proxy: will swallow the reply to this request");
                    swallow_xid.store(i64::from(xid), Ordering::SeqCst);
                }
            }
        }
        handshake = false;
        wait_pass(paused).await;
        if let Err(e) = w.write_all(&frame).await {
            return End::Error(e);
        }
    }
}

async fn server_to_client<R, W>(
    r: &mut R,
    w: &mut W,
    paused: &mut watch::Receiver<bool>,
    swallow_xid: &AtomicI64,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut handshake = true;
    loop {
        wait_pass(paused).await;
        let frame = match read_frame(r, None).await {
            Ok(Some(f)) => f,
            Ok(None) => return End::Eof,
            Err(end) => return end,
        };
        if !handshake {
            let target = swallow_xid.load(Ordering::SeqCst);
            if target != NO_XID {
                if let Some(xid) = xid_of(&frame) {
                    if i64::from(xid) == target {
                        return End::Swallowed(xid);
                    }
                }
            }
        }
        handshake = false;
        wait_pass(paused).await;
        if let Err(e) = w.write_all(&frame).await {
            return End::Error(e);
        }
    }
}

async fn raw<R, W>(r: &mut R, w: &mut W, paused: &mut watch::Receiver<bool>) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        wait_pass(paused).await;
        let n = match r.read(&mut buf).await {
            Ok(0) => return End::Eof,
            Ok(n) => n,
            Err(e) => return End::Error(e),
        };
        wait_pass(paused).await;
        if let Err(e) = w.write_all(&buf[..n]).await {
            return End::Error(e);
        }
    }
}
