//! Interop with Apache Curator 5.4's `SimpleDistributedQueue` (Debian's jars): a Java peer
//! (tests/java/SimpleQueuePeer.java, a session of its own) and Rust queues on one path. Java
//! offers and Rust takes, then Rust offers and Java takes, then both take from one queue at
//! once: every item arrives once, byte for byte (empty items, zero and 0xff bytes included), and
//! a single taker gets them in the order they were offered. Missing `javac` or jars fail the
//! test with a message saying what to install.

use std::collections::BTreeMap;

use curator_recipes::SimpleDistributedQueue;
use curator_test::{TestingServer, Timing};
use tests::java::LinePeer;
use tests::{client, init_tracing, unique_path};

/// A Curator `SimpleDistributedQueue` in a Java process.
struct JavaQueue(LinePeer);

impl JavaQueue {
    async fn start(connect: &str, path: &str) -> JavaQueue {
        JavaQueue(LinePeer::start("SimpleQueuePeer", &[connect, path]).await)
    }

    async fn command(&mut self, line: &str) -> String {
        self.0.command(line).await
    }

    async fn offer(&mut self, item: &[u8]) {
        assert_eq!(self.command(&format!("OFFER {}", hex(item))).await, "OFFERED");
    }

    async fn take(&mut self) -> Vec<u8> {
        let answer = self.command("TAKE").await;
        unhex(answer.strip_prefix("TOOK").unwrap_or_else(|| panic!("TAKE answered {answer:?}")).trim())
    }

    async fn poll(&mut self, ms: u64) -> Option<Vec<u8>> {
        let answer = self.command(&format!("POLL {ms}")).await;
        answer.strip_prefix("TOOK").map(|h| unhex(h.trim()))
    }

    async fn quit(self) {
        self.0.quit().await;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len() / 2).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex")).collect()
}

/// Item `i` of a run: empty for 0, else `i`, a zero byte, 0xff and a tag.
fn item(i: usize, tag: u8) -> Vec<u8> {
    if i == 0 {
        return Vec::new();
    }
    vec![i as u8, 0x00, 0xff, tag]
}

const ITEMS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_simple_queues_hand_items_to_each_other() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let path = unique_path("simple-queue-interop");
    let fw = client(&connect).await;
    let rust = SimpleDistributedQueue::new(&fw, &path).expect("queue");
    let mut java = JavaQueue::start(&connect, &path).await;

    // Java offers, Rust takes: a take waiting before the first offer, then the rest in order.
    let waiting = rust.clone();
    let first = tokio::spawn(async move { waiting.take().await });
    for i in 0..ITEMS {
        java.offer(&item(i, b'j')).await;
    }
    let mut got = vec![tokio::time::timeout(Timing::new().deadline(), first).await.unwrap().unwrap().unwrap()];
    for _ in 1..ITEMS {
        got.push(rust.take().await.unwrap());
    }
    assert_eq!(got, (0..ITEMS).map(|i| item(i, b'j')).collect::<Vec<_>>(), "Java's items, in order");
    assert_eq!(rust.poll(std::time::Duration::ZERO).await.unwrap(), None);

    // Rust offers, Java takes, in order.
    for i in 0..ITEMS {
        rust.offer(item(i, b'r')).await.unwrap();
    }
    for i in 0..ITEMS {
        assert_eq!(java.take().await, item(i, b'r'), "Rust's item {i}");
    }
    assert_eq!(java.poll(100).await, None);

    // Both take from one queue at once: each item once.
    for i in 0..ITEMS {
        rust.offer(item(i, b'b')).await.unwrap();
    }
    let taker = rust.clone();
    let rust_side = tokio::spawn(async move {
        let mut got = Vec::new();
        while let Some(item) = taker.poll(std::time::Duration::from_millis(300)).await.unwrap() {
            got.push(item);
        }
        got
    });
    let mut java_side = Vec::new();
    while let Some(item) = java.poll(300).await {
        java_side.push(item);
    }
    let rust_side = rust_side.await.unwrap();
    let mut counts: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for item in rust_side.iter().chain(&java_side) {
        *counts.entry(item.clone()).or_default() += 1;
    }
    assert_eq!(counts.len(), ITEMS, "every item taken (Rust {}, Java {})", rust_side.len(), java_side.len());
    assert!(counts.values().all(|&n| n == 1), "an item taken twice: {counts:?}");

    java.quit().await;
    fw.close().await;
}
