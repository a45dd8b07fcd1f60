//! Caches under failure, each test on a dedicated server: random churn by other sessions
//! while the proxy cuts and pauses the cache's connection and its session is expired or
//! partitioned past its timeout; afterwards every cache equals the server and its event log
//! replayed from empty equals the server. Each scenario checks all four caches at once
//! (CuratorCache, PathChildrenCache, TreeCache, NodeCache), so it lives here rather than in one
//! cache's file. (The cost of a change in server requests: `cache_path_children.rs`.)

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_cache::{
    CuratorCache, CuratorCacheEvent, EventStream, NodeCache, NodeCacheEvent, PathChildrenCache, PathChildrenCacheEvent,
    StartMode, TreeCache, TreeCacheEvent,
};
use curator_core::{ConnectionState, CuratorFramework};
use curator_test::{eventually, expire_session, ChaosProxy, TestingCluster, TestingServer, Timing};
use tests::caches::{children_only, create, delete, replay_children, replay_curator, replay_tree, set, within};
use tests::zk::{listing, raw_client};
use tests::{client, init_tracing};

const BASE: &str = "/churn";

/// Random creates, sets and deletes under [`BASE`] (two levels) until told to stop.
fn churn(fw: CuratorFramework, stop: Arc<AtomicBool>, ops: Arc<AtomicUsize>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut rng = fastrand::Rng::new();
        while !stop.load(Ordering::SeqCst) {
            let k = rng.usize(0..12);
            let path = if rng.bool() { format!("{BASE}/k{k}") } else { format!("{BASE}/k{k}/j{}", rng.usize(0..4)) };
            let data: Vec<u8> = (0..rng.usize(0..40)).map(|_| rng.u8(..)).collect();
            let _ = match rng.usize(0..40) {
                // Now and then the root itself changes (caches register their watch again).
                0 => fw.set_data().for_path(BASE, data).await.map(|_| ()),
                1..=19 => fw.create().creating_parents_if_needed().for_path(&path, data).await.map(|_| ()),
                20..=29 => fw.set_data().for_path(&path, data).await.map(|_| ()),
                _ => fw.delete().deleting_children_if_needed().for_path(&path).await,
            };
            ops.fetch_add(1, Ordering::SeqCst);
        }
    })
}

async fn wait_ops(ops: &AtomicUsize, more: usize) {
    let target = ops.load(Ordering::SeqCst) + more;
    assert!(
        eventually(Timing::new().deadline(), || async { ops.load(Ordering::SeqCst) >= target }).await,
        "churn stalled"
    );
}

/// The caches under test and their event streams.
struct Caches {
    curator: CuratorCache,
    children: PathChildrenCache,
    tree: TreeCache,
    node: NodeCache,
    curator_events: EventStream<CuratorCacheEvent>,
    children_events: EventStream<PathChildrenCacheEvent>,
    tree_events: EventStream<TreeCacheEvent>,
    node_events: EventStream<NodeCacheEvent>,
    curator_log: Vec<CuratorCacheEvent>,
    children_log: Vec<PathChildrenCacheEvent>,
    tree_log: Vec<TreeCacheEvent>,
    node_log: Vec<NodeCacheEvent>,
}

impl Caches {
    async fn start(fw: &CuratorFramework) -> Caches {
        let curator = CuratorCache::build(fw, BASE, &[]).unwrap();
        let children = PathChildrenCache::new(fw, BASE, true).unwrap();
        let tree = TreeCache::new(fw, BASE).unwrap();
        let node = NodeCache::new(fw, &format!("{BASE}/k0")).unwrap();
        let c = Caches {
            curator_events: curator.events(),
            children_events: children.events(),
            tree_events: tree.events(),
            node_events: node.events(),
            curator,
            children,
            tree,
            node,
            curator_log: Vec::new(),
            children_log: Vec::new(),
            tree_log: Vec::new(),
            node_log: Vec::new(),
        };
        c.curator.start().unwrap();
        c.children.start(StartMode::Normal).unwrap();
        c.tree.start().unwrap();
        c.node.start(false).unwrap();
        within("curator init", c.curator.wait_initialized()).await.unwrap();
        within("tree init", c.tree.wait_initialized()).await.unwrap();
        within("pcc init", c.children.wait_initialized()).await.unwrap();
        within("node init", c.node.wait_initialized()).await.unwrap();
        c
    }

    fn drain(&mut self) {
        while let Some(e) = self.curator_events.try_next() {
            self.curator_log.push(e);
        }
        while let Some(e) = self.children_events.try_next() {
            self.children_log.push(e);
        }
        while let Some(e) = self.tree_events.try_next() {
            self.tree_log.push(e);
        }
        while let Some(e) = self.node_events.try_next() {
            self.node_log.push(e);
        }
    }

    fn node_state(&self) -> Option<Vec<u8>> {
        self.node.current_data().map(|n| n.data.clone().unwrap_or_default())
    }

    fn node_replayed(&self) -> Option<Vec<u8>> {
        let mut state = None;
        for e in &self.node_log {
            if let NodeCacheEvent::NodeChanged(n) = e {
                state = n.as_ref().map(|n| n.data.clone().unwrap_or_default());
            }
        }
        state
    }

    /// Whether every cache, and every event log replayed from empty, equals `all`.
    fn matches(&mut self, all: &BTreeMap<String, Vec<u8>>) -> Result<(), String> {
        self.drain();
        let kids = children_only(all, BASE);
        let k0 = all.get(&format!("{BASE}/k0")).cloned();
        let curator: BTreeMap<_, _> =
            self.curator.entries().iter().map(|n| (n.path.clone(), n.data.clone().unwrap_or_default())).collect();
        let children: BTreeMap<_, _> =
            self.children.current_data().iter().map(|n| (n.path.clone(), n.data.clone().unwrap_or_default())).collect();
        let mut tree = BTreeMap::new();
        let mut todo = vec![BASE.to_string()];
        while let Some(p) = todo.pop() {
            if let Some(n) = self.tree.current_data(&p) {
                tree.insert(p.clone(), n.data.clone().unwrap_or_default());
            }
            for name in self.tree.current_children(&p).unwrap_or_default().into_keys() {
                todo.push(format!("{p}/{name}"));
            }
        }
        let checks = [
            ("CuratorCache", curator == *all),
            ("CuratorCache log", replay_curator(&self.curator_log) == *all),
            ("PathChildrenCache", children == kids),
            ("PathChildrenCache log", replay_children(&self.children_log) == kids),
            ("TreeCache", tree == *all && self.tree.size() == all.len()),
            ("TreeCache log", replay_tree(&self.tree_log) == *all),
            ("NodeCache", self.node_state() == k0),
            ("NodeCache log", self.node_replayed() == k0),
        ];
        let wrong: Vec<_> = checks.iter().filter(|(_, ok)| !ok).map(|(name, _)| *name).collect();
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!("differs from the server: {wrong:?}"))
        }
    }

    async fn converge(&mut self, raw: &curator_core::zk::Client) {
        let deadline = Instant::now() + Timing::new().deadline();
        loop {
            let all = listing(raw, BASE).await;
            match self.matches(&all) {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("{e} ({} nodes on the server)", all.len()),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

async fn writers(connect: &str, n: usize) -> Vec<CuratorFramework> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(client(connect).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_converge_after_cuts_pauses_and_session_expiry_under_churn() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let fw = client(&proxy.connect_string()).await;
    let raw = raw_client(&server.connect_string()).await;
    let writers = writers(&server.connect_string(), 3).await;
    for k in 0..6 {
        create(&writers[0], &format!("{BASE}/k{k}/j0"), b"seed").await;
    }
    let mut caches = Caches::start(&fw).await;
    let mut states = fw.connection_state_stream();

    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = writers.iter().map(|w| churn(w.clone(), stop.clone(), ops.clone())).collect();
    wait_ops(&ops, 150).await;

    // 1. The connection is cut: same session, reconnects at once.
    proxy.cut();
    wait_ops(&ops, 150).await;
    // 2. The connection stalls for a moment (less than the session timeout).
    proxy.pause();
    wait_ops(&ops, 100).await;
    proxy.pass();
    wait_ops(&ops, 100).await;
    // 3. The session is expired: a new session, a new watch, a full catch-up.
    let info = fw.session().await.unwrap().client().session().clone();
    expire_session(&server.connect_string(), &info).await.unwrap();
    let seen = within("new session", async {
        let mut seen = Vec::new();
        while let Some(e) = states.next().await {
            seen.push(e.state);
            if e.state == ConnectionState::Reconnected && e.new_session {
                break;
            }
        }
        seen
    })
    .await;
    assert!(seen.contains(&ConnectionState::Lost), "saw {seen:?}");
    wait_ops(&ops, 150).await;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }

    caches.converge(&raw).await;
    let kinds: Vec<_> = caches.children_log.iter().map(|e| e.kind()).collect();
    use curator_cache::PathChildrenCacheEventType as K;
    assert!(kinds.contains(&K::ConnectionLost), "PathChildrenCache reported the lost session");
    assert!(kinds.contains(&K::ConnectionReconnected));
    assert!(kinds.contains(&K::ChildAdded) && kinds.contains(&K::ChildUpdated) && kinds.contains(&K::ChildRemoved));

    // Still following after all that.
    create(&writers[0], &format!("{BASE}/k0/after"), b"x").await;
    caches.converge(&raw).await;
    for w in &writers {
        w.close().await;
    }
    fw.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_catch_up_after_a_partition_longer_than_the_session_timeout() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let fw = client(&proxy.connect_string()).await;
    let raw = raw_client(&server.connect_string()).await;
    let writers = writers(&server.connect_string(), 2).await;
    create(&writers[0], &format!("{BASE}/k0"), b"seed").await;
    let mut caches = Caches::start(&fw).await;
    let mut states = fw.connection_state_stream();

    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = writers.iter().map(|w| churn(w.clone(), stop.clone(), ops.clone())).collect();
    wait_ops(&ops, 100).await;
    proxy.pause();
    // Churn goes on while the cache's side is partitioned until its session is presumed lost.
    let seen = within("lost", async {
        let mut seen = Vec::new();
        while let Some(e) = states.next().await {
            seen.push(e.state);
            if e.state == ConnectionState::Lost {
                break;
            }
        }
        seen
    })
    .await;
    assert!(seen.contains(&ConnectionState::Suspended), "saw {seen:?}");
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    // Nothing the cache holds may be newer than the server, but it is stale now.
    proxy.pass();
    caches.converge(&raw).await;
    let kinds: Vec<_> = caches.children_log.iter().map(|e| e.kind()).collect();
    use curator_cache::PathChildrenCacheEventType as K;
    assert!(kinds.contains(&K::ConnectionSuspended) && kinds.contains(&K::ConnectionLost), "{kinds:?}");
    for w in &writers {
        w.close().await;
    }
    fw.close().await;
}

/// A persistent watch does not get the events it missed while disconnected (ZOOKEEPER-4698),
/// even when the session survives: the caches must catch up after every reconnection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_missed_while_disconnected_are_reported_after_reconnecting_to_the_same_session() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let fw = client(&proxy.connect_string()).await;
    let raw = raw_client(&server.connect_string()).await;
    let writer = client(&server.connect_string()).await;
    create(&writer, &format!("{BASE}/k0"), b"before").await;
    create(&writer, &format!("{BASE}/k1"), b"doomed").await;
    let mut caches = Caches::start(&fw).await;
    let mut states = fw.connection_state_stream();
    let session_before = fw.session().await.unwrap().id();

    proxy.pause();
    within("suspended", async {
        while let Some(e) = states.next().await {
            if e.state == ConnectionState::Suspended {
                break;
            }
        }
    })
    .await;
    // While the cache's connection is down: an update, a delete, a create, a deep create.
    set(&writer, &format!("{BASE}/k0"), b"during").await;
    delete(&writer, &format!("{BASE}/k1")).await;
    create(&writer, &format!("{BASE}/k2/j0"), b"new").await;
    proxy.pass();
    let reconnected = within("reconnected", async {
        while let Some(e) = states.next().await {
            if e.state == ConnectionState::Reconnected {
                return e;
            }
        }
        panic!("no reconnection");
    })
    .await;
    assert!(!reconnected.new_session, "the session survived");
    assert_eq!(fw.session().await.unwrap().id(), session_before);
    caches.converge(&raw).await;
    let names: Vec<_> = caches
        .children_log
        .iter()
        .filter_map(|e| match e {
            PathChildrenCacheEvent::ChildAdded(n) => Some(format!("added {}", n.name())),
            PathChildrenCacheEvent::ChildUpdated(n) => Some(format!("updated {}", n.name())),
            PathChildrenCacheEvent::ChildRemoved(n) => Some(format!("removed {}", n.name())),
            PathChildrenCacheEvent::ConnectionSuspended => Some("suspended".into()),
            PathChildrenCacheEvent::ConnectionReconnected => Some("reconnected".into()),
            _ => None,
        })
        .collect();
    let after: Vec<_> = names.iter().skip_while(|n| *n != "suspended").cloned().collect();
    assert_eq!(after[..2], ["suspended".to_string(), "reconnected".to_string()], "{names:?}");
    let mut caught_up = after[2..].to_vec();
    caught_up.sort();
    assert_eq!(caught_up, vec!["added k2", "removed k1", "updated k0"], "{names:?}");
    assert_eq!(caches.node_state().as_deref(), Some(&b"during"[..]));
    // And they still follow changes: the watch was registered again on the new connection
    // (zookeeper-client does not do it for persistent watches).
    set(&writer, &format!("{BASE}/k0"), b"after").await;
    create(&writer, &format!("{BASE}/k3/j1"), b"after").await;
    caches.converge(&raw).await;
    assert_eq!(caches.node_state().as_deref(), Some(&b"after"[..]));
    writer.close().await;
    fw.close().await;
}

/// An ensemble loses its leader under churn: every client connection drops and moves to
/// another member; the caches catch up and equal the ensemble afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_converge_when_the_ensemble_loses_its_leader_under_churn() {
    init_tracing();
    let mut cluster = TestingCluster::start(3).await.unwrap();
    let connect = cluster.connect_string();
    let fw = client(&connect).await;
    let writers = writers(&connect, 2).await;
    for k in 0..4 {
        create(&writers[0], &format!("{BASE}/k{k}"), b"seed").await;
    }
    let mut caches = Caches::start(&fw).await;
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = writers.iter().map(|w| churn(w.clone(), stop.clone(), ops.clone())).collect();
    wait_ops(&ops, 100).await;
    let leader = cluster.wait_for_leader(Timing::new().deadline()).await.unwrap();
    cluster.kill(leader).await.unwrap();
    cluster.wait_for_leader(Timing::new().deadline()).await.unwrap();
    wait_ops(&ops, 100).await;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    // List through a writer's session: it has seen its own writes, and the caches must too.
    let raw = writers[0].session().await.unwrap().client().clone();
    caches.converge(&raw).await;
    for w in &writers {
        w.close().await;
    }
    fw.close().await;
}
