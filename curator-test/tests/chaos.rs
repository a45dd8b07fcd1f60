//! The chaos injector against real servers and clients behind proxies: a seed fixes the
//! sequence of faults, a run leaves every proxy passing and the server serving, long
//! partitions go to a target that says it holds, and a leader kill leaves the ensemble whole.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect, init_tracing, persistent, unique_path};
use curator_test::chaos::{Ensemble, FaultKind, Injector, Target};
use curator_test::{four_letter_word, ChaosProxy, TestingCluster, TestingServer, Timing};
use tokio::sync::Mutex;
use zookeeper_client::Client;

/// Chosen because its first faults, within the run's 2.5 s, mix a swallowed reply, a server
/// restart, an expiry and a one-way pause (the test prints the plan).
const SEED: u64 = 2688;
/// How long each run injects.
const RUN: Duration = Duration::from_millis(2500);

/// Keeps a client busy (so that a swallowed reply has a request to take) until aborted.
fn traffic(client: Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            let _ = client.get_data("/").await;
        }
    })
}

#[tokio::test]
async fn a_seed_fixes_the_faults_and_a_run_leaves_everything_working() {
    init_tracing();
    let timing = Timing::new();
    let session_timeout = Duration::from_secs(2);
    let server = TestingServer::start().await.unwrap();
    let server_addr = server.connect_string();
    let server = Arc::new(Mutex::new(server));
    let mut targets = Vec::new();
    let mut busy = Vec::new();
    for _ in 0..2 {
        let proxy = Arc::new(ChaosProxy::start(&server_addr).await.unwrap());
        let client = connect(&proxy.connect_string(), session_timeout).await;
        targets.push(Target::for_client(proxy, &client));
        busy.push(traffic(client));
    }
    let build = |seed| {
        Injector::builder(seed)
            .targets(targets.clone())
            .ensemble(Ensemble::Server(server.clone()))
            .session_timeout(session_timeout)
            .mean_gap(Duration::from_millis(250))
            .build()
    };

    let first = build(SEED).await.unwrap();
    assert_eq!(first.kinds().len(), 10, "every kind but leader_kill: {:?}", first.kinds());
    assert!(!first.kinds().contains(&FaultKind::LeaderKill));
    let plan = first.preview(64);
    for p in plan.iter().take(8) {
        eprintln!("planned: after {:?}, {} on target {:?}", p.gap, p.fault, p.target);
    }
    assert_ne!(build(SEED + 1).await.unwrap().preview(64), plan, "another seed, the same plan");

    let mut records = Vec::new();
    for injector in [first, build(SEED).await.unwrap()] {
        assert_eq!(injector.preview(64), plan);
        let record = injector.run(Instant::now() + RUN).await;
        for event in &record.log {
            eprintln!("run {}: {event}", records.len() + 1);
        }
        assert!(!record.log.is_empty(), "no fault in {RUN:?}");
        assert!(record.log.len() <= plan.len());
        // The log follows the plan: same faults (durations included), same targets.
        for (event, planned) in record.log.iter().zip(&plan) {
            assert_eq!((event.fault, event.target), (planned.fault, planned.target));
        }
        let counted: u64 = record.counts.values().chain(record.skipped.values()).sum();
        assert_eq!(counted, record.log.len() as u64);
        let expired: usize = record.expiries.iter().map(Vec::len).sum();
        assert_eq!(expired as u64, record.counts.get("expire").copied().unwrap_or(0));
        assert!(record.is_restored(), "{:?}", record.restore_errors);
        records.push(record);
    }
    let (a, b) = (records[0].sequence(), records[1].sequence());
    let n = a.len().min(b.len());
    assert_eq!(a[..n], b[..n], "two runs of one seed went different ways");
    for handle in busy {
        handle.abort();
    }

    // Nothing is left broken: the server serves, every proxy passes traffic.
    assert!(server.lock().await.is_running());
    assert_eq!(four_letter_word(&server_addr, "ruok").await.unwrap(), "imok");
    for (i, target) in targets.iter().enumerate() {
        let proxy = target.proxy();
        assert!(proxy.is_passing(), "proxy {i} was left with a fault");
        assert_eq!(four_letter_word(&proxy.connect_string(), "ruok").await.unwrap(), "imok");
        let client = connect(&proxy.connect_string(), timing.session_timeout()).await;
        let path = unique_path("after-chaos");
        client.create(&path, b"", &persistent()).await.unwrap();
    }
}

#[tokio::test]
async fn long_partitions_go_to_the_target_that_holds() {
    init_tracing();
    let server = TestingServer::shared();
    let mut targets = Vec::new();
    for _ in 0..3 {
        let proxy = Arc::new(ChaosProxy::start(&server.connect_string()).await.unwrap());
        targets.push(Target::new(proxy, || None));
    }
    targets[1].set_holding(true);
    // A short session timeout as the injector sees it, so that long pauses stay short.
    let timeout = Duration::from_millis(400);
    let injector = Injector::builder(3)
        .targets(targets.clone())
        .kinds([FaultKind::Pause, FaultKind::PauseRequests, FaultKind::Reject])
        .session_timeout(timeout)
        .mean_gap(Duration::from_millis(20))
        .long_partition_chance(1.0)
        .build()
        .await
        .unwrap();
    let record = injector.spawn(Instant::now() + Duration::from_secs(1)).await.unwrap();
    assert!(!record.log.is_empty());
    for event in &record.log {
        assert_eq!(event.target, Some(1), "{event}");
        assert!(event.fault.duration().is_some_and(|d| d > timeout), "{event}");
        assert_eq!(event.skipped, None);
    }
    assert!(targets.iter().all(|t| t.proxy().is_passing()));
}

#[tokio::test]
async fn a_leader_kill_elects_another_and_brings_the_old_leader_back() {
    init_tracing();
    let timing = Timing::new();
    let cluster = Arc::new(Mutex::new(TestingCluster::start(3).await.unwrap()));
    let before = cluster.lock().await.wait_for_leader(timing.deadline()).await.unwrap();
    let injector = Injector::builder(5)
        .ensemble(Ensemble::Cluster(cluster.clone()))
        .kinds([FaultKind::LeaderKill])
        .mean_gap(Duration::from_millis(1))
        .build()
        .await
        .unwrap();
    // The first gap is at most 4 ms; the kill and election take far longer than the window,
    // so the run does exactly one fault.
    let record = injector.run(Instant::now() + Duration::from_millis(50)).await;
    assert_eq!(record.log.len(), 1, "{:?}", record.log);
    let event = &record.log[0];
    assert_eq!((event.skipped.as_deref(), event.member), (None, Some(before)), "{event}");
    assert!(record.is_restored(), "{:?}", record.restore_errors);
    let cluster = cluster.lock().await;
    assert!((0..3).all(|i| cluster.is_running(i)));
    cluster.wait_for_leader(timing.deadline()).await.unwrap();
    let srvr = four_letter_word(&cluster.connect_string_of(before), "srvr").await.unwrap();
    assert!(srvr.contains("Mode: follower"), "the old leader did not come back as a follower: {srvr}");
}

#[tokio::test]
async fn an_injector_refuses_what_it_cannot_do() {
    init_tracing();
    let proxy = Arc::new(ChaosProxy::start("127.0.0.1:1").await.unwrap());
    let target = Target::new(proxy, || None);
    // Nothing to act on.
    assert!(Injector::builder(1).build().await.is_err());
    // Client faults without a target.
    assert!(Injector::builder(1).kinds([FaultKind::Cut]).build().await.is_err());
    // Server faults without an ensemble.
    let builder = Injector::builder(1).target(target.clone());
    assert!(builder.kinds([FaultKind::ServerPause]).build().await.is_err());
    // Without an ensemble the default is every client fault.
    let injector = Injector::builder(1).target(target).build().await.unwrap();
    assert_eq!(injector.kinds().len(), 8);
    assert!(injector.kinds().iter().all(|k| k.needs_target()));
}
