//! One proxied connection: a reader and a writer per direction, joined by a queue that is the
//! delay line for [`ChaosProxy::set_latency`](super::ChaosProxy::set_latency).
//!
//! Each reader stamps what it reads with the instant it may be written (now plus the latency
//! at that moment) and queues it; each writer takes the queue in order, waits for the stamp
//! and for its direction to flow, and writes. Order within a direction is the read order, and
//! frames that arrive together are delayed together rather than one latency after another.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::flow::{Direction, Hold};
use super::{Inner, SeenRequest};

/// Frames longer than this are not ZooKeeper frames: the first one switches a connection to raw
/// forwarding (four-letter words are ASCII, so their first four bytes read as a huge length);
/// a later one closes the connection.
const MAX_FRAME: usize = 64 << 20;
/// How long the proxy tries to reach the upstream server for a new connection.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// No xid is being swallowed.
const NO_XID: i64 = i64::MIN;
/// Frames (or raw chunks) read but not yet written, per direction.
const QUEUE: usize = 256;
/// Size of one read in raw mode.
const RAW_CHUNK: usize = 16 * 1024;

/// Bytes read and the instant they may be written.
type Delayed = (Instant, Vec<u8>);

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

/// Why a connection ended.
enum End {
    Eof,
    Error(std::io::Error),
    Swallowed(i32),
    BadFrame(usize),
}

/// Forwards one accepted client connection until either side closes it, a fault ends it, or
/// the task is aborted (by `cut`).
pub(super) async fn connection(inner: Arc<Inner>, id: u64, client: TcpStream, peer: SocketAddr) {
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

    // Read the first four bytes to tell ZooKeeper framing from a four-letter word.
    wait_flow(&mut inner.hold.subscribe(), Direction::Requests).await;
    let mut head = [0u8; 4];
    if cr.read_exact(&mut head).await.is_err() {
        return;
    }
    let len = u32::from_be_bytes(head) as usize;
    let (req_tx, req_rx) = mpsc::channel(QUEUE);
    let (rep_tx, rep_rx) = mpsc::channel(QUEUE);
    let requests_out = write_out(req_rx, &mut uw, &inner, Direction::Requests);
    let replies_out = write_out(rep_rx, &mut cw, &inner, Direction::Replies);
    let outcome = if len > MAX_FRAME {
        tokio::select! {
            r = direction(read_raw(head.to_vec(), &mut cr, req_tx, &inner, Direction::Requests), requests_out) => r,
            r = direction(read_raw(Vec::new(), &mut ur, rep_tx, &inner, Direction::Replies), replies_out) => r,
        }
    } else {
        let swallow_xid = AtomicI64::new(NO_XID);
        tokio::select! {
            r = direction(read_requests(&inner, len, &mut cr, req_tx, &swallow_xid), requests_out) => r,
            r = direction(read_replies(&inner, &mut ur, rep_tx, &swallow_xid), replies_out) => r,
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

/// Drives one direction: the reader until it ends, and the writer until it has written what
/// the reader queued (then the reader's reason is the direction's) or fails (then its own).
async fn direction(read: impl Future<Output = End>, write: impl Future<Output = Option<End>>) -> End {
    tokio::pin!(read);
    tokio::pin!(write);
    let mut read_end = None;
    loop {
        tokio::select! {
            end = &mut read, if read_end.is_none() => read_end = Some(end),
            written = &mut write => return written.or(read_end).unwrap_or(End::Eof),
        }
    }
}

async fn wait_flow(hold: &mut watch::Receiver<Hold>, dir: Direction) {
    // Err only when the proxy is gone; the task is being aborted then anyway.
    let _ = hold.wait_for(|h| !h.holds(dir)).await;
}

/// Queues `bytes` to be written one latency from now. False when the writer is gone.
async fn queue(inner: &Inner, tx: &mpsc::Sender<Delayed>, bytes: Vec<u8>) -> bool {
    tx.send((Instant::now() + inner.latency(), bytes)).await.is_ok()
}

/// Writes what the reader queued, in order, each piece no earlier than its stamp and only while
/// `dir` flows. `None` once the queue is closed and empty, `Some` when a write fails.
async fn write_out<W>(mut rx: mpsc::Receiver<Delayed>, w: &mut W, inner: &Inner, dir: Direction) -> Option<End>
where
    W: AsyncWrite + Unpin,
{
    let mut hold = inner.hold.subscribe();
    while let Some((due, bytes)) = rx.recv().await {
        if due > Instant::now() {
            tokio::time::sleep_until(due).await;
        }
        wait_flow(&mut hold, dir).await;
        if let Err(e) = w.write_all(&bytes).await {
            return Some(End::Error(e));
        }
    }
    None
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

/// The opcode of a client request frame (after its length and xid).
pub(super) fn opcode_of(frame: &[u8]) -> Option<i32> {
    let b: [u8; 4] = frame.get(8..12)?.try_into().ok()?;
    Some(i32::from_be_bytes(b))
}

/// Client to server, framed. The first frame (the connect handshake, whose length was already
/// read) is never a swallow candidate.
async fn read_requests<R>(
    inner: &Inner,
    first_len: usize,
    r: &mut R,
    tx: mpsc::Sender<Delayed>,
    swallow_xid: &AtomicI64,
) -> End
where
    R: AsyncRead + Unpin,
{
    let mut hold = inner.hold.subscribe();
    let mut first_len = Some(first_len);
    loop {
        let handshake = first_len.is_some();
        if !handshake {
            wait_flow(&mut hold, Direction::Requests).await;
        }
        let frame = match read_frame(r, first_len.take()).await {
            Ok(Some(f)) => f,
            Ok(None) => return End::Eof,
            Err(end) => return end,
        };
        if !handshake {
            // The kind is looked at only while a swallow is armed: no lock per frame otherwise.
            let wanted = || {
                let target = inner.swallow_kind.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let (kind, prefix) = &*target;
                opcode_of(&frame).is_some_and(|op| kind.matches(op))
                    && prefix.as_deref().is_none_or(|prefix| {
                        SeenRequest::parse(&frame).and_then(|r| r.path).is_some_and(|p| p.starts_with(prefix))
                    })
            };
            if let Some(xid) = xid_of(&frame) {
                if xid > 0 {
                    inner.record(&frame);
                }
                // One swallowed reply per connection: it ends the connection.
                if xid > 0
                    && swallow_xid.load(Ordering::SeqCst) == NO_XID
                    && inner.swallow.load(Ordering::SeqCst) > 0
                    && wanted()
                    && inner.swallow.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
                {
                    tracing::debug!(xid, "proxy: will swallow the reply to this request");
                    swallow_xid.store(i64::from(xid), Ordering::SeqCst);
                }
            }
        }
        if !queue(inner, &tx, frame).await {
            return End::Eof;
        }
    }
}

/// Server to client, framed. Ends the connection instead of passing on the swallowed reply.
async fn read_replies<R>(inner: &Inner, r: &mut R, tx: mpsc::Sender<Delayed>, swallow_xid: &AtomicI64) -> End
where
    R: AsyncRead + Unpin,
{
    let mut hold = inner.hold.subscribe();
    let mut handshake = true;
    loop {
        wait_flow(&mut hold, Direction::Replies).await;
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
        if !queue(inner, &tx, frame).await {
            return End::Eof;
        }
    }
}

/// Either direction, unframed (four-letter words). `first` is what was already read.
async fn read_raw<R>(first: Vec<u8>, r: &mut R, tx: mpsc::Sender<Delayed>, inner: &Inner, dir: Direction) -> End
where
    R: AsyncRead + Unpin,
{
    if !first.is_empty() && !queue(inner, &tx, first).await {
        return End::Eof;
    }
    let mut hold = inner.hold.subscribe();
    let mut buf = vec![0u8; RAW_CHUNK];
    loop {
        wait_flow(&mut hold, dir).await;
        let n = match r.read(&mut buf).await {
            Ok(0) => return End::Eof,
            Ok(n) => n,
            Err(e) => return End::Error(e),
        };
        if !queue(inner, &tx, buf[..n].to_vec()).await {
            return End::Eof;
        }
    }
}
