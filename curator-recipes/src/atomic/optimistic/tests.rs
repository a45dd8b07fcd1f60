//! The optimistic loop's own tests.

use std::time::Duration;

use curator_core::RetryNTimes;

use super::*;

/// An operation that starts from the node as the previous one's write left it (no read of
/// its own) never writes on data older than the node: here the node is deleted and made again
/// at the same version with other data meanwhile (an ABA on the version), and the next
/// increment still adds to the new data, in one try with no retry allowed. Our tag, deleted
/// with the node, makes the speculative write fail; the try goes on from a fresh read.
#[tokio::test]
async fn a_write_from_the_basis_never_lands_on_a_remade_node() {
    let server = curator_test::TestingServer::shared();
    let fw = CuratorFramework::builder().connect_string(server.connect_string()).build().expect("options");
    fw.start().expect("start");
    fw.block_until_connected(Duration::from_secs(30)).await.expect("connected");
    let path = format!("/behind-unit-{}", uuid::Uuid::new_v4());
    let engine = Engine::new(&fw, &path, Arc::new(RetryNTimes::new(0, Duration::ZERO)), None).expect("engine");
    let increment = |current: Option<&[u8]>| {
        let n = current.map_or(0, |b| i64::from_be_bytes(b.try_into().expect("8 bytes")));
        Ok((n + 1).to_be_bytes().to_vec())
    };
    let value = |v: &AtomicValue<Vec<u8>>| {
        // A missing node's pre-value is empty.
        let n = |b: &[u8]| if b.is_empty() { 0 } else { i64::from_be_bytes(b.try_into().expect("8 bytes")) };
        (v.succeeded, n(&v.pre_value), n(&v.post_value), v.stats.optimistic_tries)
    };
    assert_eq!(value(&engine.apply(increment).await.expect("create")), (true, 0, 1, 1));
    let second = engine.apply(increment).await.expect("speculative");
    assert_eq!(value(&second), (true, 1, 2, 1));
    let version = fw.check_exists().for_path(&path).await.expect("stat").expect("node").version;

    fw.delete().deleting_children_if_needed().for_path(&path).await.expect("delete");
    fw.create().for_path(&path, 100i64.to_be_bytes().to_vec()).await.expect("remake");
    for n in 0..version {
        fw.set_data().for_path(&path, (101 + i64::from(n)).to_be_bytes().to_vec()).await.expect("write");
    }
    let remade = fw.get_data().for_path(&path).await.expect("read");
    let at = fw.check_exists().for_path(&path).await.expect("stat").expect("node").version;
    assert_eq!(at, version, "the remade node is at the version the basis holds");
    let on = i64::from_be_bytes(remade.as_slice().try_into().expect("8 bytes"));

    let third = engine.apply(increment).await.expect("after the remake");
    assert_eq!(value(&third), (true, on, on + 1, 1));
    assert_eq!(fw.get_data().for_path(&path).await.expect("read"), (on + 1).to_be_bytes());
    drop(engine);
    fw.delete().deleting_children_if_needed().for_path(&path).await.expect("cleanup");
    fw.close().await;
}
