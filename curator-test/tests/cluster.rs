//! TestingCluster: a 3-member ensemble survives the loss of its leader, elects another, and
//! takes the old leader back; pid(i) follows each member's process.

mod common;

use common::{connect, init_tracing, persistent, unique_path};
use curator_test::{eventually, four_letter_word, TestingCluster, Timing};

fn process_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn cluster_survives_killing_its_leader() {
    init_tracing();
    let timing = Timing::new();
    let mut cluster = TestingCluster::start(3).await.unwrap();
    assert_eq!(cluster.len(), 3);
    assert_eq!(cluster.connect_string().split(',').count(), 3);
    assert_eq!(cluster.connect_string().split(',').next().unwrap(), cluster.connect_string_of(0));

    let client = connect(&cluster.connect_string(), timing.session_timeout()).await;
    let base = unique_path("cluster");
    client.create(&base, b"", &persistent()).await.unwrap();
    let session = client.session_id();

    let pids: Vec<u32> = (0..3).map(|i| cluster.pid(i).expect("a running member has a pid")).collect();
    assert!(pids[0] != pids[1] && pids[1] != pids[2] && pids[0] != pids[2], "{pids:?}");
    assert_eq!(cluster.pid(3), None);
    assert!(pids.iter().all(|pid| process_exists(*pid)), "{pids:?}");

    let leader = cluster.wait_for_leader(timing.deadline()).await.unwrap();
    let followers = (0..3).filter(|&i| i != leader).count();
    assert_eq!(followers, 2);
    cluster.kill(leader).await.unwrap();
    assert!(!cluster.is_running(leader));
    assert_eq!(cluster.pid(leader), None);
    assert!(!process_exists(pids[leader]), "kill() returned while the leader's java still exists");

    let next = cluster.wait_for_leader(timing.deadline()).await.unwrap();
    assert_ne!(next, leader);

    // The client on the full connect string keeps working, same session. A request in flight
    // when its server went away may fail; retry until the ensemble answers.
    let child = format!("{base}/after-failover");
    assert!(
        eventually(timing.deadline(), || async {
            match client.create(&child, b"", &persistent()).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => true,
                Err(e) => {
                    tracing::info!("create during failover: {e}");
                    false
                }
            }
        })
        .await
    );
    assert_eq!(client.session_id(), session);

    // The old leader rejoins as a follower and has the data.
    cluster.restart(leader).await.unwrap();
    let new_pid = cluster.pid(leader).expect("a restarted member has a pid");
    assert_ne!(new_pid, pids[leader]);
    let srvr = four_letter_word(&cluster.connect_string_of(leader), "srvr").await.unwrap();
    assert!(srvr.contains("Mode: follower"), "{srvr}");
    let direct = connect(&cluster.connect_string_of(leader), timing.session_timeout()).await;
    direct.sync(&child).await.unwrap();
    assert!(direct.check_stat(&child).await.unwrap().is_some());
}

#[tokio::test]
async fn a_cluster_needs_members() {
    assert!(TestingCluster::start(0).await.is_err());
}
