//! `reconfig()` (issue 31 item 5) on a `TestingCluster` with dynamic reconfiguration: a member
//! removed and added back, from a configuration version, a stale version refused, the whole
//! member list replaced, in the background, bad input refused before sending; and a
//! reconfiguration whose reply is lost, under both error policies and a patient and a short
//! retry policy. After Apache Curator's `TestReconfiguration` (`testAddAndRemove`,
//! `testAddAndRemoveWithEmptyList`, `testNewMembersWithEmptyList`, `testApiPermutations`).

use std::future::IntoFuture;
use std::time::Duration;

use curator_core::zk::Error as ZkError;
use curator_core::{config_version, CuratorError, CuratorEventType, CuratorFramework};
use curator_test::{eventually, ChaosProxy, TestingCluster, Timing};
use tests::policies::{with_policies, COMBINATIONS};
use tests::{builder, connected, init_tracing};

/// The ids of the `server.N` lines of a configuration, sorted.
fn ids(config: &[u8]) -> Vec<u32> {
    let mut ids: Vec<u32> = String::from_utf8_lossy(config)
        .lines()
        .filter_map(|l| l.strip_prefix("server.")?.split_once('=')?.0.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

/// The `server.<id>=...` line of `id`.
fn spec(config: &[u8], id: u32) -> String {
    let prefix = format!("server.{id}=");
    String::from_utf8_lossy(config).lines().find(|l| l.starts_with(&prefix)).expect("a member's line").to_string()
}

fn version(config: &[u8]) -> i64 {
    config_version(config).expect("a configuration version")
}

async fn current(fw: &CuratorFramework) -> Vec<u8> {
    fw.get_config().for_ensemble().await.expect("getConfig").0
}

/// Sends `build()`'s reconfiguration until the ensemble can take it: a joining server that is
/// still syncing is refused with NEWCONFIGNOQUORUM (-13), one behind another change with
/// RECONFIGINPROGRESS (-14); both are ZooKeeper's "not yet", polled within the deadline.
async fn until_taken(
    build: impl Fn() -> curator_core::ReconfigBuilder,
) -> Result<(Vec<u8>, curator_core::zk::Stat), CuratorError> {
    let end = tokio::time::Instant::now() + Timing::new().deadline();
    loop {
        match build().for_ensemble().await {
            Err(err) if not_yet(&err) && tokio::time::Instant::now() < end => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// The configuration once the ensemble takes conditional changes. Right after a cluster
/// starts, its leader may still refuse a change from the version its members report
/// (`BadVersion`) for a moment; an empty change from that version, polled within the deadline,
/// says when it no longer does (and makes a new version, which is returned).
async fn settled(fw: &CuratorFramework) -> Vec<u8> {
    let end = tokio::time::Instant::now() + Timing::new().deadline();
    loop {
        let v = version(&current(fw).await);
        match fw.reconfig().leaving(Vec::<String>::new()).from_config(v).for_ensemble().await {
            Ok((config, _)) => return config,
            Err(CuratorError::BadVersion { .. }) if tokio::time::Instant::now() < end => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => panic!("the ensemble never took a change from version {v:x}: {err:?}"),
        }
    }
}

/// ZooKeeper's "not yet" for a reconfiguration: NEWCONFIGNOQUORUM (-13), RECONFIGINPROGRESS
/// (-14), which zookeeper-client 0.11 gives as codes.
fn not_yet(err: &CuratorError) -> bool {
    matches!(err, CuratorError::Zk { source: ZkError::UnexpectedErrorCode(-13 | -14), .. })
}

/// Curator's `TestReconfiguration.testAddAndRemove` and `testApiPermutations` with
/// `fromConfig`: server 2 leaves at the current version; a change from the old version is
/// `BadVersion` and changes nothing; server 2 joins again from the new version; the whole list
/// is replaced (`with_new_members`) in the background; empty changes (`testAddAndRemoveWith
/// EmptyList`, `testNewMembersWithEmptyList`) keep the members. The client is on server 1 and
/// the servers changed are not the leader (ZooKeeper elects the highest id, 3, here): removing
/// the leader starts an election, which drops every client connection, and a conditional
/// change whose reply is lost so is `BadVersion` on its retry (the second test shows it). Bad specs and ids, a version
/// below -1 and a new list mixed with joining are `InvalidArgument` before sending.
#[tokio::test]
async fn remove_and_add_back_a_member_from_a_config_version() {
    init_tracing();
    let cluster = TestingCluster::start_reconfigurable(3).await.expect("cluster");
    let fw = connected(builder(&cluster.connect_string_of(0)).ensemble_tracker(false)).await;
    let config0 = settled(&fw).await;
    assert_eq!(ids(&config0), [1, 2, 3]);
    assert_eq!(current(&fw).await, config0);
    let (v0, spec2) = (version(&config0), spec(&config0, 2));

    // Bad input: typed, nothing sent.
    let bad = [
        fw.reconfig().joining(["server.9=nohost"]).for_ensemble(),
        fw.reconfig().joining(["server.9=h:1:2,server.8=h:3:4"]).for_ensemble(),
        fw.reconfig().leaving(["three"]).for_ensemble(),
        fw.reconfig().leaving(["0"]).for_ensemble(),
        fw.reconfig().with_new_members([spec2.clone()]).leaving(["1"]).for_ensemble(),
        fw.reconfig().with_new_members(["server.1=h:1:99999"]).for_ensemble(),
        fw.reconfig().leaving(["2"]).from_config(-2).for_ensemble(),
    ];
    for pending in bad {
        let refused = pending.await;
        assert!(
            matches!(&refused, Err(CuratorError::InvalidArgument { path, .. }) if path == "/zookeeper/config"),
            "{refused:?}"
        );
    }
    assert_eq!(version(&current(&fw).await), v0, "nothing was sent");

    // Server 2 leaves, from the current version. If server 2 led, leaving ends its leadership,
    // our server drops its clients, and the reply can be lost: the framework's retry from v0 then
    // finds the change made, BadVersion (docs/architecture.md section 3.11). The change stands.
    let config1 = match fw.reconfig().leaving(["2"]).from_config(v0).for_ensemble().await {
        Ok((config, _)) => config,
        Err(CuratorError::BadVersion { .. }) => {
            let left = eventually(Timing::new().deadline(), || async { ids(&current(&fw).await) == [1, 3] }).await;
            assert!(left, "leave: BadVersion, and server 2 is still a member");
            current(&fw).await
        }
        Err(err) => panic!("leave: {err:?}"),
    };
    assert_eq!(ids(&config1), [1, 3]);
    let v1 = version(&config1);
    assert!(v1 > v0, "{v1:x} after {v0:x}");
    assert_eq!(current(&fw).await, config1);

    // From the old version: refused, nothing changes.
    let stale = fw.reconfig().joining([spec2.clone()]).from_config(v0).for_ensemble().await;
    assert!(matches!(&stale, Err(CuratorError::BadVersion { path }) if path == "/zookeeper/config"), "{stale:?}");
    assert_eq!(ids(&current(&fw).await), [1, 3]);

    // Back again, from the new version.
    let (config2, _) =
        until_taken(|| fw.reconfig().joining([spec2.clone()]).from_config(v1)).await.expect("join again");
    assert_eq!(ids(&config2), [1, 2, 3]);
    assert_eq!(spec(&config2, 2), spec2);
    let v2 = version(&config2);
    assert!(v2 > v1);

    // Empty changes keep the members.
    let (same, _) =
        fw.reconfig().leaving(Vec::<String>::new()).joining(Vec::<String>::new()).for_ensemble().await.unwrap();
    assert_eq!(ids(&same), [1, 2, 3]);
    let (same, _) = until_taken(|| fw.reconfig().with_new_members(Vec::<String>::new())).await.unwrap();
    assert_eq!(ids(&same), [1, 2, 3]);

    // The whole list, in the background: servers 1 and 3.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let members = [spec(&config2, 1), spec(&config2, 3)];
    fw.reconfig().with_new_members(members).for_ensemble().in_background(move |_, event| drop(tx.send(event)));
    let event = tokio::time::timeout(Timing::new().deadline(), rx.recv()).await.expect("event").expect("sent");
    assert_eq!((event.event_type, event.result_code), (CuratorEventType::Reconfig, 0), "{:?}", event.error);
    assert_eq!(event.path, "/zookeeper/config");
    assert_eq!(ids(event.data.as_deref().expect("the new configuration")), [1, 3]);
    assert_eq!(ids(&current(&fw).await), [1, 3]);
    fw.close().await;
}

/// A reconfiguration whose reply is lost after the ensemble applied it (the proxy in front of
/// the client's server swallows it and drops the connection), under both error policies and a
/// patient and a short retry policy: no panic, no hang, a typed answer (the retry's `BadVersion`
/// when it was conditional and the lost reply was the change's, since that change moved the
/// version; success, an unknown outcome or ZooKeeper's typed "not yet" otherwise), and the
/// configuration is what the answer says. Each run removes
/// server 2 and adds it back.
#[tokio::test]
async fn reconfig_whose_reply_is_lost() {
    init_tracing();
    let cluster = TestingCluster::start_reconfigurable(3).await.expect("cluster");
    let observer = connected(builder(&cluster.connect_string_of(0)).ensemble_tracker(false)).await;
    let spec2 = spec(&settled(&observer).await, 2);
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&cluster.connect_string_of(0)).await.expect("proxy");
        let b = with_policies(builder(&proxy.connect_string()).ensemble_tracker(false), policy, retry);
        let fw = connected(b).await;
        // No change in progress: the one below is the one whose reply is lost.
        let v = version(&settled(&fw).await);

        // Conditional: when the lost reply was the change's, the retry finds the version moved
        // by it (`BadVersion`); when it was a refusal (another change still in progress), the
        // retry applies it.
        proxy.swallow_next_reply();
        let pending = fw.reconfig().leaving(["2"]).from_config(v).for_ensemble();
        let outcome = tokio::time::timeout(Timing::new().deadline() * 3, pending.into_future()).await.expect("no hang");
        assert!(!proxy.swallow_pending(), "{case}: the reconfig never reached the server");
        let now = ids(&current(&observer).await);
        match &outcome {
            Ok(_) | Err(CuratorError::BadVersion { .. }) => assert_eq!(now, [1, 3], "{case}: {outcome:?}"),
            Err(err) if err.outcome_unknown() || not_yet(err) => {
                assert!(now == [1, 3] || now == [1, 2, 3], "{case}: {now:?}");
            }
            Err(err) => panic!("{case}: {err:?}"),
        }
        if now == [1, 2, 3] {
            until_taken(|| observer.reconfig().leaving(["2"])).await.expect("server 2 leaves");
        }

        // Unconditional: a retry asks again for a change already made, which is no change.
        proxy.swallow_next_reply();
        let pending = until_taken(|| fw.reconfig().joining([spec2.clone()]));
        let outcome = tokio::time::timeout(Timing::new().deadline() * 3, pending).await.expect("no hang");
        assert!(!proxy.swallow_pending(), "{case}: the reconfig never reached the server");
        let now = ids(&current(&observer).await);
        match &outcome {
            Ok(_) => assert_eq!(now, [1, 2, 3], "{case}"),
            Err(err) if err.outcome_unknown() || not_yet(err) => {
                assert!(now == [1, 3] || now == [1, 2, 3], "{case}: {now:?}");
            }
            Err(err) => panic!("{case}: {err:?}"),
        }
        if now == [1, 3] {
            until_taken(|| observer.reconfig().joining([spec2.clone()])).await.expect("server 2 joins");
        }
        assert_eq!(ids(&current(&observer).await), [1, 2, 3], "{case}: added back");
        fw.close().await;
    }
    observer.close().await;
}
