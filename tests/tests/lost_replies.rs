//! A write whose reply is lost, then a cut that keeps the session (issue 40): every kind of
//! write is applied once and its writer told the truth, `Ok` only for its own applied write, a
//! refusal only for a write that was not applied, and otherwise `OutcomeUnknown` (or, when the
//! retry policy gave up before anything could be decided, an error whose `outcome_unknown()`
//! holds). Under every error and retry policy. docs/architecture.md section 4.4.
//!
//! The lost reply is the proxy's `swallow_next_reply_to`: the server applies the request, the
//! proxy drops its reply and closes the connection, the client reconnects on the same session.
//! Curator has no counterpart: it sends such writes again (CURATOR-689 for the guarded case).

use std::future::IntoFuture;
use std::time::Duration;

use curator_core::{CreateMode, CuratorError, CuratorFramework, ErrorPolicy, TransactionResult, WriteTag};
use curator_recipes::{InterProcessMutex, SharedCount};
use curator_test::{eventually, ChaosProxy, RequestKind, TestingServer, Timing};
use tests::policies::{framework, framework_with, Retry, COMBINATIONS};
use tests::{init_tracing, unique_path};

/// A fresh proxy and a framework through it, under `policy` and `retry`.
async fn proxied(server: &TestingServer, policy: ErrorPolicy, retry: Retry) -> (ChaosProxy, CuratorFramework) {
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    (proxy, fw)
}

/// Whether `err` leaves the outcome to be found by reading: `OutcomeUnknown` (also when a short
/// retry policy gave up before deciding), or a connection error a short policy gave up with
/// before anything was in doubt; never a refusal such as `NodeExists` or `BadVersion`, which
/// would say the write was not applied.
fn undecided(err: &CuratorError) -> bool {
    matches!(err, CuratorError::OutcomeUnknown { .. }) || err.is_retryable()
}

/// Arms the proxy to lose the reply to the next request of `kind`, runs `write`, and checks the
/// request reached the server.
async fn with_lost_reply<T>(proxy: &ChaosProxy, kind: RequestKind, write: impl IntoFuture<Output = T>) -> T {
    proxy.swallow_next_reply_to(kind);
    let result = write.await;
    assert!(!proxy.swallow_pending(), "the write never reached the server");
    result
}

/// A guarded sequential create whose reply is lost makes one node: before, under
/// `ErrorPolicy::Session` the hold survived the cut and the transaction sent the create again,
/// making two nodes and returning the second path.
#[tokio::test]
async fn a_guarded_sequential_create_whose_reply_is_lost_makes_one_node() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let (proxy, fw) = proxied(server, policy, retry).await;
        let base = unique_path("guarded-seq");
        observer.create().for_path(&base, Vec::new()).await.expect("base");
        let guard = InterProcessMutex::new(&fw, &format!("{base}-lock")).expect("mutex").acquire().await.expect("lock");
        let made = with_lost_reply(
            &proxy,
            RequestKind::Multi,
            guard.create(&format!("{base}/item-"), b"x".to_vec(), CreateMode::PersistentSequential),
        )
        .await;
        let children = observer.get_children().for_path(&base).await.expect("children");
        assert_eq!(children.len(), 1, "{case}: one node, not two: {children:?} ({made:?})");
        match made {
            Ok(path) => assert_eq!(path, format!("{base}/{}", children[0]), "{case}"),
            Err(err) => assert!(undecided(&err), "{case}: {err}"),
        }
        drop(guard);
        fw.close().await;
    }
    observer.close().await;
}

/// A guarded `set_data` whose reply is lost is applied once: before, under
/// `ErrorPolicy::Session` it was sent again, the node's version moved by two and the write
/// returned `Ok`.
#[tokio::test]
async fn a_guarded_set_data_whose_reply_is_lost_is_applied_once() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let (proxy, fw) = proxied(server, policy, retry).await;
        let target = unique_path("guarded-set");
        observer.create().for_path(&target, b"v0".to_vec()).await.expect("target");
        let guard =
            InterProcessMutex::new(&fw, &format!("{target}-lock")).expect("mutex").acquire().await.expect("lock");
        let written = with_lost_reply(&proxy, RequestKind::Multi, guard.set_data(&target, b"v1".to_vec())).await;
        let (data, stat) = observer.get_data().for_path_with_stat(&target).await.expect("read");
        assert_eq!((data.as_slice(), stat.version), (&b"v1"[..], 1), "{case}: applied once ({written:?})");
        match written {
            Ok(stat) => assert_eq!(stat.version, 1, "{case}"),
            Err(err) => assert!(undecided(&err), "{case}: {err}"),
        }
        drop(guard);
        fw.close().await;
    }
    observer.close().await;
}

/// A guarded transaction with a `set_data` at an expected version whose reply is lost is never
/// reported refused: before, under `ErrorPolicy::Session` it was sent again and returned
/// `BadVersion`, a failure for a write that was applied.
#[tokio::test]
async fn a_guarded_versioned_transaction_whose_reply_is_lost_is_not_reported_refused() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let (proxy, fw) = proxied(server, policy, retry).await;
        let target = unique_path("guarded-versioned");
        observer.create().for_path(&target, b"v0".to_vec()).await.expect("target");
        let guard =
            InterProcessMutex::new(&fw, &format!("{target}-lock")).expect("mutex").acquire().await.expect("lock");
        let committed = with_lost_reply(
            &proxy,
            RequestKind::Multi,
            guard.transaction().set_data(&target, b"v1".to_vec(), Some(0)).commit(),
        )
        .await;
        let stat = observer.check_exists().for_path(&target).await.expect("stat").expect("node");
        assert_eq!(stat.version, 1, "{case}: applied once ({committed:?})");
        if let Err(err) = &committed {
            assert!(undecided(err), "{case}: a write that was applied reported as {err}");
        }
        drop(guard);
        fw.close().await;
    }
    observer.close().await;
}

/// With a write tag, a guarded transaction whose reply was lost is decided exactly: `Ok` with
/// its results read back (a sequential create's path, a data write's stat), whatever the error
/// policy made of the hold meanwhile (the write was applied while the hold held).
#[tokio::test]
async fn a_guarded_transaction_with_a_write_tag_is_decided_exactly() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let (proxy, fw) = proxied(server, policy, retry).await;
        let target = unique_path("guarded-tagged");
        observer.create().for_path(&target, b"v0".to_vec()).await.expect("target");
        let tag = WriteTag::new(&fw, &target).expect("tag");
        let guard =
            InterProcessMutex::new(&fw, &format!("{target}-lock")).expect("mutex").acquire().await.expect("lock");
        let transaction = guard
            .transaction()
            .set_data(&target, b"v1".to_vec(), Some(0))
            .create(&format!("{target}/log-"), b"v1".to_vec(), CreateMode::PersistentSequential)
            .with_write_tag(&tag);
        let results = match with_lost_reply(&proxy, RequestKind::Multi, transaction.commit()).await {
            Ok(results) => results,
            // A short policy may give up before a session is back: nothing decided, nothing sent again.
            Err(err) if retry == Retry::Short && undecided(&err) => {
                tracing::info!(%case, error = %err, "gave up before deciding");
                drop(guard);
                fw.close().await;
                continue;
            }
            Err(err) => panic!("{case}: the tag decides: {err}"),
        };
        let (data, stat) = observer.get_data().for_path_with_stat(&target).await.expect("read");
        assert_eq!((data.as_slice(), stat.version), (&b"v1"[..], 1), "{case}: applied once");
        let logs: Vec<String> = observer
            .get_children()
            .for_path(&target)
            .await
            .expect("children")
            .into_iter()
            .filter(|c| c.starts_with("log-"))
            .collect();
        assert_eq!(logs.len(), 1, "{case}: {logs:?}");
        assert!(
            matches!(&results[0], TransactionResult::SetData { stat: s, .. } if s.version == 1 && s.mzxid == stat.mzxid),
            "{case}: {results:?}"
        );
        assert!(
            matches!(&results[1], TransactionResult::Create { path } if *path == format!("{target}/{}", logs[0])),
            "{case}: {results:?}"
        );
        drop(guard);
        fw.close().await;
    }
    observer.close().await;
}

/// A transaction decided by data unique to it is `Ok` after a lost reply, its results read
/// back; one decided by a node it deletes is `OutcomeUnknown` once that node is gone (another
/// client could have deleted it), never sent again; evidence naming a node the transaction does
/// not write is `InvalidArgument`, nothing sent.
#[tokio::test]
async fn transactions_decided_by_unique_data_or_a_deleted_node() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let (proxy, fw) = proxied(server, policy, retry).await;
        let node = unique_path("decided");
        let id = |n: u32| format!("record {n} {:016x}", fastrand::u64(..)).into_bytes();
        let made = with_lost_reply(
            &proxy,
            RequestKind::Multi,
            fw.transaction().create(&node, id(1), CreateMode::Persistent).decided_by_data(&node, None).commit(),
        )
        .await;
        match &made {
            Ok(results) => {
                assert!(matches!(&results[0], TransactionResult::Create { path } if *path == node), "{case}")
            }
            Err(err) => assert!(retry == Retry::Short && undecided(err), "{case}: {err}"),
        }
        let (_, found) = observer.get_data().for_path_with_stat(&node).await.expect("made once");
        let second = id(2);
        let written = with_lost_reply(
            &proxy,
            RequestKind::Multi,
            fw.transaction()
                .set_data(&node, second.clone(), Some(found.version))
                .decided_by_data(&node, Some(&found))
                .commit(),
        )
        .await;
        let (data, stat) = observer.get_data().for_path_with_stat(&node).await.expect("read");
        assert_eq!((data, stat.version), (second, found.version + 1), "{case}: applied once ({written:?})");
        match &written {
            Ok(results) => assert!(
                matches!(&results[0], TransactionResult::SetData { stat: s, .. } if s.mzxid == stat.mzxid),
                "{case}: {results:?}"
            ),
            Err(err) => assert!(retry == Retry::Short && undecided(err), "{case}: {err}"),
        }
        let deleted = with_lost_reply(
            &proxy,
            RequestKind::Multi,
            fw.transaction().delete(&node, None).decided_by_delete(&node, stat.czxid).commit(),
        )
        .await;
        assert!(deleted.as_ref().is_err_and(undecided), "{case}: gone proves nothing: {deleted:?}");
        assert!(observer.check_exists().for_path(&node).await.expect("exists").is_none(), "{case}");
        let bad = fw
            .transaction()
            .create(&node, id(3), CreateMode::Persistent)
            .decided_by_data("/elsewhere", None)
            .commit()
            .await;
        assert!(matches!(bad, Err(CuratorError::InvalidArgument { .. })), "{case}: {bad:?}");
        fw.close().await;
    }
    observer.close().await;
}

/// Plain writes whose reply is lost, with nothing to prove their outcome, are not sent again:
/// a sequential create makes one node (before: two), an unversioned `set_data` moves the
/// version by one (before: two), a create at a fixed path is not reported `NodeExists` and a
/// versioned `set_data` not `BadVersion` (before: both, for writes that were applied).
#[tokio::test]
async fn plain_writes_whose_reply_is_lost_are_applied_once() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let (proxy, fw) = proxied(server, policy, retry).await;
        let base = unique_path("plain");
        observer.create().for_path(&base, b"v0".to_vec()).await.expect("base");

        let seq = with_lost_reply(
            &proxy,
            RequestKind::Create,
            fw.create().with_mode(CreateMode::PersistentSequential).for_path(&format!("{base}/seq-"), Vec::new()),
        )
        .await;
        assert_eq!(observer.get_children().for_path(&base).await.expect("children").len(), 1, "{case}: {seq:?}");
        assert!(seq.as_ref().is_err_and(undecided), "{case}: nothing proves it: {seq:?}");

        let set = with_lost_reply(&proxy, RequestKind::SetData, fw.set_data().for_path(&base, b"v1".to_vec())).await;
        let stat = observer.check_exists().for_path(&base).await.expect("stat").expect("node");
        assert_eq!(stat.version, 1, "{case}: {set:?}");
        assert!(set.as_ref().is_err_and(undecided), "{case}: {set:?}");

        let fixed = format!("{base}/fixed");
        let create = with_lost_reply(&proxy, RequestKind::Create, fw.create().for_path(&fixed, Vec::new())).await;
        assert!(create.as_ref().is_err_and(undecided), "{case}: an applied create reported as {create:?}");

        let versioned = with_lost_reply(
            &proxy,
            RequestKind::SetData,
            fw.set_data().with_version(1).for_path(&base, b"v2".to_vec()),
        )
        .await;
        assert!(versioned.as_ref().is_err_and(undecided), "{case}: an applied write reported as {versioned:?}");
        let stat = observer.check_exists().for_path(&base).await.expect("stat").expect("node");
        assert_eq!(stat.version, 2, "{case}");

        // Writes whose evidence decides: a protected create finds its node, a quiet delete
        // finds the node gone, an if_missing create finds it there.
        let protected = with_lost_reply(
            &proxy,
            RequestKind::Create,
            fw.create()
                .with_protection()
                .with_mode(CreateMode::EphemeralSequential)
                .for_path(&format!("{base}/p-"), Vec::new()),
        )
        .await;
        if let Err(err) = &protected {
            assert!(retry == Retry::Short && undecided(err), "{case}: {err}");
        }
        let gone = with_lost_reply(&proxy, RequestKind::Delete, fw.delete().quietly().for_path(&fixed)).await;
        if let Err(err) = &gone {
            assert!(retry == Retry::Short && undecided(err), "{case}: {err}");
        }
        let again =
            with_lost_reply(&proxy, RequestKind::Create, fw.create().if_missing().for_path(&fixed, Vec::new())).await;
        if let Err(err) = &again {
            assert!(retry == Retry::Short && undecided(err), "{case}: {err}");
        }
        assert!(observer.check_exists().for_path(&fixed).await.expect("stat").is_some(), "{case}");
        fw.close().await;
    }
    observer.close().await;
}

/// The proxy's delay for the race below: long enough for the other client to write first,
/// well inside the session timeout the race's framework sets.
const HELD: Duration = Duration::from_millis(700);

/// `SharedCount::try_set` racing another client's equal write: A's `try_set(v, x + 1)` is held
/// up in the proxy (never reaching the server: the connection is cut under it), B's
/// `try_set(v, x + 1)` succeeds; A must not report B's write as its own. Before, A's retry met
/// `BadVersion`, found `x + 1` at `v + 1` (the framework's byte-comparing idempotent set) and
/// returned true: two successes, one increment.
#[tokio::test]
async fn a_try_set_racing_an_equal_write_does_not_claim_it() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = framework_with(&proxy.connect_string(), policy, retry, HELD * 20).await;
        let path = unique_path("try-set-race");
        let (a, b) = (SharedCount::new(&fw, &path, 0).expect("a"), SharedCount::new(&observer, &path, 0).expect("b"));
        for count in [&a, &b] {
            count.start().expect("start");
            count.ready().await.expect("ready");
        }
        let (seen_a, seen_b) = (a.versioned_value().expect("a"), b.versioned_value().expect("b"));
        assert_eq!((seen_a.version, seen_b.version), (0, 0), "{case}");
        proxy.record_requests(true);
        proxy.set_latency(HELD);
        let (mine, ()) = tokio::join!(a.try_set(&seen_a, 1), async {
            let held = eventually(Timing::new().deadline(), || async {
                proxy.take_seen_requests().iter().any(|r| r.is(RequestKind::Multi) || r.is(RequestKind::SetData))
            })
            .await;
            assert!(held, "{case}: A's write never left");
            assert!(b.try_set(&seen_b, 1).await.expect("b's write"), "{case}: B's equal write succeeds");
            proxy.cut();
            proxy.set_latency(Duration::ZERO);
        });
        match mine {
            Ok(won) => assert!(!won, "{case}: A claimed B's write"),
            Err(err) => assert!(undecided(&err), "{case}: {err}"),
        }
        let (data, stat) = observer.get_data().for_path_with_stat(&path).await.expect("read");
        assert_eq!((data, stat.version), (1i32.to_be_bytes().to_vec(), 1), "{case}: one increment");
        a.close().await;
        b.close().await;
        fw.close().await;
    }
    observer.close().await;
}

/// `SharedCount::try_set` whose own write is applied and its reply lost while another client
/// writes on top (before A learns anything): A's write was applied, so it must not report
/// false. Before, A's retry met `BadVersion`, found the other client's value and returned false.
#[tokio::test]
async fn a_try_set_whose_reply_is_lost_under_another_write_is_its_own() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let (proxy, fw) = proxied(server, policy, retry).await;
        let path = unique_path("try-set-over");
        let a = SharedCount::new(&fw, &path, 0).expect("a");
        a.start().expect("start");
        a.ready().await.expect("ready");
        let seen = a.versioned_value().expect("a");
        // New connections are refused from before the lost reply until the other client wrote.
        proxy.set_reject(true);
        // The count's next request is its write (a multi with its tag; a setData before).
        proxy.swallow_next_reply();
        let (mine, ()) = tokio::join!(a.try_set(&seen, 1), async {
            let applied = eventually(Timing::new().deadline(), || async {
                observer.check_exists().for_path(&path).await.ok().flatten().is_some_and(|s| s.version == 1)
            })
            .await;
            assert!(applied, "{case}: A's write was not applied");
            observer.set_data().with_version(1).for_path(&path, 2i32.to_be_bytes().to_vec()).await.expect("b");
            proxy.set_reject(false);
        });
        match mine {
            Ok(won) => assert!(won, "{case}: A denied its own applied write"),
            Err(err) => assert!(retry == Retry::Short && undecided(&err), "{case}: {err}"),
        }
        let (data, stat) = observer.get_data().for_path_with_stat(&path).await.expect("read");
        assert_eq!((data, stat.version), (2i32.to_be_bytes().to_vec(), 2), "{case}");
        a.close().await;
        fw.close().await;
    }
    observer.close().await;
}
