//! Part 2: workers register as ephemeral members; a PathChildrenCache shows joins and leaves as
//! they happen, including a member whose session is expired on purpose (it rejoins on its new
//! session by itself).

use std::sync::Arc;
use std::time::Duration;

use curator_cache::{PathChildrenCache, PathChildrenCacheEvent, StartMode};
use curator_core::{ConnectionState, CreateMode, CuratorError, CuratorFramework, Result};
use tokio::sync::mpsc;

use super::Checks;

const MEMBERS: &str = "/members";
const WORKERS: usize = 6;
const EXPIRED: usize = 3;

/// What the cache told us.
#[derive(Debug)]
enum Seen {
    Joined(String),
    Left(String),
}

async fn register(fw: &CuratorFramework, worker: usize) -> Result<String> {
    fw.create()
        .creating_parents_if_needed()
        .with_mode(CreateMode::Ephemeral)
        .for_path(&format!("{MEMBERS}/worker-{worker}"), format!("worker {worker}, pid {}", std::process::id()))
        .await
}

/// Waits for the cache to report `want`, printing what it reports meanwhile.
async fn expect(rx: &mut mpsc::UnboundedReceiver<Seen>, mut want: impl FnMut(&Seen) -> bool) -> bool {
    let wait = async {
        while let Some(seen) = rx.recv().await {
            if want(&seen) {
                return true;
            }
        }
        false
    };
    tokio::time::timeout(Duration::from_secs(30), wait).await.unwrap_or(false)
}

pub(crate) async fn run(connect: &str, namespace: &str, checks: &mut Checks) -> Result<()> {
    let observer = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
    observer.create().creating_parents_if_needed().for_path(MEMBERS, Vec::new()).await.or_else(|e| match e {
        CuratorError::NodeExists { .. } => Ok(String::new()),
        e => Err(e),
    })?;
    let cache = Arc::new(PathChildrenCache::new(&observer, MEMBERS, true)?);
    let (tx, mut rx) = mpsc::unbounded_channel();
    cache.add_listener(move |event: &PathChildrenCacheEvent| match event {
        PathChildrenCacheEvent::ChildAdded(m) => {
            let data = m.data().map(String::from_utf8_lossy).unwrap_or_default();
            tracing::info!("  + joined: {} ({data})", m.name());
            let _ = tx.send(Seen::Joined(m.name().to_string()));
        }
        PathChildrenCacheEvent::ChildRemoved(m) => {
            tracing::info!("  - left:   {}", m.name());
            let _ = tx.send(Seen::Left(m.name().to_string()));
        }
        _ => {}
    });
    cache.start(StartMode::PostInitializedEvent).await?;

    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let fw = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
        register(&fw, worker).await?;
        workers.push(fw);
    }
    let mut joined = 0;
    let all_joined = expect(&mut rx, |s| {
        joined += usize::from(matches!(s, Seen::Joined(_)));
        joined == WORKERS
    })
    .await;
    checks.record("the cache saw every member join", all_joined, format!("{WORKERS} members"));

    // Expire one member's session on purpose: its node goes; the framework opens a new session
    // and the worker registers again when told so.
    let victim = workers[EXPIRED].clone();
    let mut states = victim.connection_state_stream();
    let rejoin = tokio::spawn(async move {
        while let Some(e) = states.next().await {
            if e.state == ConnectionState::Reconnected && e.new_session {
                tracing::info!("  worker-{EXPIRED}: new session {:#x}, registering again", e.session_id);
                return register(&victim, EXPIRED).await.map(|_| true);
            }
        }
        Ok(false)
    });
    let session = workers[EXPIRED].session().await?;
    tracing::info!("expiring worker-{EXPIRED}'s session {:#x} on purpose", session.id());
    curator_test::expire_session(connect, session.client().session())
        .await
        .map_err(|e| CuratorError::IllegalState(format!("expire_session: {e}")))?;
    drop(session);
    let name = format!("worker-{EXPIRED}");
    let left = expect(&mut rx, |s| matches!(s, Seen::Left(n) if *n == name)).await;
    checks.record("the expired member's leave was seen", left, name.clone());
    let rejoined = rejoin.await.map_err(|e| CuratorError::IllegalState(e.to_string()))??
        && expect(&mut rx, |s| matches!(s, Seen::Joined(n) if *n == name)).await;
    checks.record("it rejoined on its new session", rejoined, name);

    // Two members leave for good.
    for fw in workers.drain(..2) {
        fw.close().await;
    }
    let mut gone = 0;
    let left = expect(&mut rx, |s| {
        gone += usize::from(matches!(s, Seen::Left(_)));
        gone == 2
    })
    .await;
    checks.record("members that close are seen leaving", left, "worker-0, worker-1");

    let mut listed = observer.get_children().for_path(MEMBERS).await?;
    listed.sort();
    let mut cached: Vec<String> = cache.current_data().iter().map(|m| m.name().to_string()).collect();
    cached.sort();
    tracing::info!("members now: {}", cached.join(", "));
    checks.record("the cache equals the server's listing", cached == listed, format!("{} members", listed.len()));
    cache.close();
    for fw in workers {
        fw.close().await;
    }
    observer.close().await;
    Ok(())
}
