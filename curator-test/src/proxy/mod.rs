//! [`ChaosProxy`]: a fault-injecting TCP proxy in front of one ZooKeeper server.

mod flow;
mod forward;
mod record;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

use self::flow::{Direction, Hold};
pub use self::record::SeenRequest;
use crate::error::TestingError;

/// A TCP proxy on a free `127.0.0.1` port in front of one ZooKeeper server, that can pause
/// traffic (both ways or one way), delay it, cut connections, refuse new ones, or drop the
/// reply to the next request: network faults on demand, as seen by a real client.
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
/// The faults and what ends them:
///
/// | fault | ended by |
/// |---|---|
/// | [`pause`](Self::pause), [`pause_requests`](Self::pause_requests), [`pause_replies`](Self::pause_replies) | [`pass`](Self::pass) |
/// | [`set_reject(true)`](Self::set_reject) | [`pass`](Self::pass) or `set_reject(false)` |
/// | [`set_latency`](Self::set_latency) | `set_latency(Duration::ZERO)` (not `pass`) |
/// | [`swallow_next_reply`](Self::swallow_next_reply), [`swallow_next_reply_to`](Self::swallow_next_reply_to), [`swallow_replies_under`](Self::swallow_replies_under) | the next request (of the kind, under the path: as many as asked), or [`disarm_swallow`](Self::disarm_swallow) |
/// | [`cut`](Self::cut) | nothing to end: it closes what is open, once |
///
/// Besides faults, it can [`record_requests`](Self::record_requests): which requests clients
/// sent, in order.
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

/// A kind of client request, for [`ChaosProxy::swallow_next_reply_to`] (by the request's
/// ZooKeeper opcode).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// Any request (not a ping, not auth or set-watches).
    Any,
    /// A create of any mode (create, create2, container, TTL).
    Create,
    /// A delete (or a container's delete).
    Delete,
    /// A setData.
    SetData,
    /// A getData.
    GetData,
    /// An exists.
    Exists,
    /// A getChildren (either version).
    GetChildren,
    /// A multi (write or read).
    Multi,
}

impl RequestKind {
    /// Whether a request with ZooKeeper opcode `op` is of this kind.
    pub(crate) fn matches(self, op: i32) -> bool {
        match self {
            RequestKind::Any => true,
            RequestKind::Create => matches!(op, 1 | 15 | 19 | 21),
            RequestKind::Delete => matches!(op, 2 | 20),
            RequestKind::SetData => op == 5,
            RequestKind::GetData => op == 4,
            RequestKind::Exists => op == 3,
            RequestKind::GetChildren => matches!(op, 8 | 12),
            RequestKind::Multi => matches!(op, 14 | 22),
        }
    }
}

#[derive(Debug)]
struct Inner {
    upstream: String,
    /// Which directions are held.
    hold: watch::Sender<Hold>,
    /// The delay of every forwarded frame, in nanoseconds.
    latency_nanos: AtomicU64,
    reject: AtomicBool,
    /// How many replies an armed swallow still takes (0: none armed).
    swallow: AtomicUsize,
    /// The requests an armed swallow waits for: their kind, and a prefix of their path.
    swallow_kind: Mutex<(RequestKind, Option<String>)>,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, AbortHandle>>,
    /// Whether requests are being recorded into `seen`.
    recording: AtomicBool,
    seen: Mutex<Vec<SeenRequest>>,
}

impl Inner {
    fn conns(&self) -> MutexGuard<'_, HashMap<u64, AbortHandle>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_nanos.load(Ordering::SeqCst))
    }

    /// Records a client request frame, if recording.
    fn record(&self, frame: &[u8]) {
        if self.recording.load(Ordering::SeqCst) {
            if let Some(seen) = SeenRequest::parse(frame) {
                self.seen.lock().unwrap_or_else(PoisonError::into_inner).push(seen);
            }
        }
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
        let (hold, _) = watch::channel(Hold::Nothing);
        let inner = Arc::new(Inner {
            upstream: upstream.to_string(),
            hold,
            latency_nanos: AtomicU64::new(0),
            reject: AtomicBool::new(false),
            swallow: AtomicUsize::new(0),
            swallow_kind: Mutex::new((RequestKind::Any, None)),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
            recording: AtomicBool::new(false),
            seen: Mutex::new(Vec::new()),
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

    /// Back to normal: ends a [`pause`](Self::pause), [`pause_requests`](Self::pause_requests)
    /// and [`pause_replies`](Self::pause_replies) (held bytes flow again, in order) and a
    /// [`set_reject(true)`](Self::set_reject).
    ///
    /// Latency is left as it is: it is a setting rather than an outage, and a test may want
    /// a slow network underneath its pauses. End it with `set_latency(Duration::ZERO)`. An
    /// armed [`swallow_next_reply`](Self::swallow_next_reply) also stays armed.
    pub fn pass(&self) {
        self.inner.reject.store(false, Ordering::SeqCst);
        self.inner.hold.send_replace(Hold::Nothing);
        tracing::debug!(addr = %self.addr, "proxy: pass");
    }

    /// Stops forwarding bytes both ways while keeping every connection open: a partition that
    /// TCP does not notice. Requests do not reach the server, replies and pings do not reach
    /// the client; what was read is held and delivered after [`pass`](Self::pass), the rest is
    /// simply not read. New connections are accepted but get no answer either.
    pub fn pause(&self) {
        self.inner.hold.send_replace(Hold::Both);
        tracing::debug!(addr = %self.addr, "proxy: pause");
    }

    /// Holds client-to-server bytes only, until [`pass`](Self::pass): requests and pings do not
    /// reach the server, while whatever the server sends (replies to earlier requests, watch
    /// notifications) still reaches the client. The server hears nothing from the client, so
    /// the session expires on the server after its timeout. Combined with
    /// [`pause_replies`](Self::pause_replies) it is a [`pause`](Self::pause).
    pub fn pause_requests(&self) {
        self.inner.hold.send_modify(|h| *h = h.and(Direction::Requests));
        tracing::debug!(addr = %self.addr, "proxy: pause requests");
    }

    /// Holds server-to-client bytes only, until [`pass`](Self::pass): requests keep reaching
    /// the server and are applied, but the client gets no reply, no ping answer and no
    /// notification. The client's pings keep its session alive on the server while the client
    /// itself sees silence, gives up on the connection and (after its session timeout) may
    /// consider the session lost. Combined with [`pause_requests`](Self::pause_requests) it is
    /// a [`pause`](Self::pause).
    pub fn pause_replies(&self) {
        self.inner.hold.send_modify(|h| *h = h.and(Direction::Replies));
        tracing::debug!(addr = %self.addr, "proxy: pause replies");
    }

    /// Delays every frame forwarded from now on, both ways, by `latency` (so a round trip takes
    /// at least twice as long), keeping the order of frames on each connection. Frames that
    /// arrive together are delayed together, not one after another. `Duration::ZERO` turns it
    /// off; frames already read keep the delay they were read under.
    ///
    /// [`pass`](Self::pass) does not reset latency.
    pub fn set_latency(&self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.inner.latency_nanos.store(nanos, Ordering::SeqCst);
        tracing::debug!(addr = %self.addr, ?latency, "proxy: set_latency");
    }

    /// The latency set by [`set_latency`](Self::set_latency) (zero by default).
    pub fn latency(&self) -> Duration {
        self.inner.latency()
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
        self.swallow_next_reply_to(RequestKind::Any);
    }

    /// As [`swallow_next_reply`](Self::swallow_next_reply), for the next request of `kind`
    /// only: requests of other kinds pass untouched while it waits.
    pub fn swallow_next_reply_to(&self, kind: RequestKind) {
        self.arm_swallow(kind, None, 1);
    }

    /// As [`swallow_next_reply_to`](Self::swallow_next_reply_to), for the next `count`
    /// requests of `kind` whose path starts with `prefix` (each on the connection it came on,
    /// which is then closed): other requests pass untouched while it waits. For a fault that
    /// must hit one client's requests on one path, and again on its retries, whatever else is
    /// sent meanwhile (the ensemble tracker's getData of `/zookeeper/config` after each
    /// reconnection, say).
    pub fn swallow_replies_under(&self, kind: RequestKind, prefix: &str, count: usize) {
        self.arm_swallow(kind, Some(prefix.to_string()), count);
    }

    fn arm_swallow(&self, kind: RequestKind, prefix: Option<String>, count: usize) {
        tracing::debug!(addr = %self.addr, ?kind, ?prefix, count, "proxy: swallow next replies");
        *self.inner.swallow_kind.lock().unwrap_or_else(PoisonError::into_inner) = (kind, prefix);
        self.inner.swallow.store(count, Ordering::SeqCst);
    }

    /// Whether a [`swallow_next_reply`](Self::swallow_next_reply) (or a swallow of several) is
    /// still waiting for a request. It turns `false` when the proxy reads the last one, which may
    /// be before the server has applied it: a test that then looks at the server's state polls
    /// for it.
    pub fn swallow_pending(&self) -> bool {
        self.inner.swallow.load(Ordering::SeqCst) > 0
    }

    /// Cancels a [`swallow_next_reply`](Self::swallow_next_reply) (or what is left of a swallow
    /// of several) still waiting for its request, and says whether one was. Once a request has
    /// been picked, its reply will be swallowed whatever happens here.
    pub fn disarm_swallow(&self) -> bool {
        let was = self.inner.swallow.swap(0, Ordering::SeqCst) > 0;
        tracing::debug!(addr = %self.addr, was_pending = was, "proxy: disarm swallow");
        was
    }

    /// Whether the proxy is back to normal: nothing held, new connections accepted, no
    /// latency and no swallow armed.
    pub fn is_passing(&self) -> bool {
        *self.inner.hold.borrow() == Hold::Nothing
            && !self.inner.reject.load(Ordering::SeqCst)
            && self.latency().is_zero()
            && !self.swallow_pending()
    }

    /// Starts (`true`) or stops recording the requests clients send through the proxy (xid > 0:
    /// not pings, auth or set-watches, not the connect handshake), in the order the proxy reads
    /// them; [`take_seen_requests`](Self::take_seen_requests) hands them over.
    pub fn record_requests(&self, on: bool) {
        self.inner.recording.store(on, Ordering::SeqCst);
        tracing::debug!(addr = %self.addr, on, "proxy: record requests");
    }

    /// The requests recorded since the last call, oldest first (and forgets them).
    pub fn take_seen_requests(&self) -> Vec<SeenRequest> {
        std::mem::take(&mut *self.inner.seen.lock().unwrap_or_else(PoisonError::into_inner))
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
        let task = tokio::spawn(forward::connection(inner.clone(), id, client, peer));
        conns.insert(id, task.abort_handle());
    }
}
