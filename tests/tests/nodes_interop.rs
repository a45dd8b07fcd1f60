//! Interop with Apache Curator 5.4's `GroupMember` (Debian's jars): Java members
//! (tests/java/GroupPeer.java) and Rust members on one path see the same member set, with the
//! same payloads, as members join and leave on either side.

use std::collections::BTreeMap;

use curator_core::CuratorFramework;
use curator_recipes::GroupMember;
use curator_test::{eventually, TestingServer, Timing};
use tests::java::LinePeer;
use tests::{client, init_tracing, unique_path};

/// A Curator `GroupMember` in a Java process.
struct JavaMember(LinePeer);

impl JavaMember {
    async fn join(connect: &str, path: &str, id: &str, payload: &str) -> JavaMember {
        JavaMember(LinePeer::start("GroupPeer", &[connect, path, id, payload]).await)
    }

    /// The members and payloads as Curator's `getCurrentMembers()` sees them.
    async fn members(&mut self) -> BTreeMap<String, Vec<u8>> {
        let line = self.0.command("MEMBERS").await;
        line.split_whitespace()
            .skip(1)
            .filter_map(|pair| pair.split_once('='))
            .map(|(id, payload)| (id.to_string(), payload.as_bytes().to_vec()))
            .collect()
    }

    async fn leave(self) {
        self.0.quit().await;
    }
}

fn expected(members: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    members.iter().map(|(id, payload)| (id.to_string(), payload.as_bytes().to_vec())).collect()
}

/// Waits until the Rust members and the Java members all see `want`.
async fn converge(rust: &[&GroupMember], java: &mut [&mut JavaMember], want: &BTreeMap<String, Vec<u8>>) {
    let deadline = Timing::new().deadline();
    for member in rust {
        let seen = eventually(deadline, || async { member.current_members() == *want }).await;
        assert!(seen, "Rust member {} sees {:?}, not {:?}", member.id(), member.current_members(), want.keys());
    }
    for member in java.iter_mut() {
        let mut last = BTreeMap::new();
        let deadline_at = std::time::Instant::now() + deadline;
        while std::time::Instant::now() < deadline_at {
            last = member.members().await;
            if last == *want {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await; // poll interval
        }
        assert_eq!(last, *want, "a Java member's view");
    }
}

async fn rust_member(fw: &CuratorFramework, path: &str, id: &str, payload: &str) -> GroupMember {
    let member = GroupMember::builder(fw, path, id).payload(payload.as_bytes().to_vec()).build().expect("join");
    member.start().expect("join");
    member.ready().await.expect("join");
    member
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_group_members_see_the_same_group() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let path = unique_path("interop-group");
    let (fw1, fw2) = (client(&connect).await, client(&connect).await);
    let r1 = rust_member(&fw1, &path, "rust-1", "r1").await;
    let r2 = rust_member(&fw2, &path, "rust-2", "r2").await;
    let mut j1 = JavaMember::join(&connect, &path, "java-1", "j1").await;
    let mut j2 = JavaMember::join(&connect, &path, "java-2", "j2").await;
    let all = expected(&[("java-1", "j1"), ("java-2", "j2"), ("rust-1", "r1"), ("rust-2", "r2")]);
    converge(&[&r1, &r2], &mut [&mut j1, &mut j2], &all).await;

    // A Rust member changes its payload; a Java member leaves; a Rust member leaves.
    r1.set_this_data(b"r1-new".to_vec()).expect("set data");
    let changed = expected(&[("java-1", "j1"), ("java-2", "j2"), ("rust-1", "r1-new"), ("rust-2", "r2")]);
    converge(&[&r1, &r2], &mut [&mut j1, &mut j2], &changed).await;
    j2.leave().await;
    let without_j2 = expected(&[("java-1", "j1"), ("rust-1", "r1-new"), ("rust-2", "r2")]);
    converge(&[&r1, &r2], &mut [&mut j1], &without_j2).await;
    r2.close().await;
    let without_r2 = expected(&[("java-1", "j1"), ("rust-1", "r1-new")]);
    converge(&[&r1], &mut [&mut j1], &without_r2).await;

    j1.leave().await;
    r1.close().await;
    let observer = client(&connect).await;
    assert!(
        eventually(Timing::new().deadline(), || async { tests::children(&observer, &path).await.is_empty() }).await,
        "members left behind"
    );
    for fw in [fw1, fw2, observer] {
        fw.close().await;
    }
}
