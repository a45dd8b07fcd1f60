//! Interop of the modeled client's JSON with Jackson as Curator's `JacksonModelSerializer`
//! uses it (issue 29 item 4): a Java peer (tests/java/ModeledJacksonPeer.java, Jackson 2.14
//! and Curator 5.4 from Debian's jars) and the Rust client write and read the same nodes, for a
//! model with nested objects, options (null and not), lists and a map. Rust's serde JSON bytes
//! for the same struct are Jackson's, byte for byte; each side reads what the other wrote to
//! an equal model; an older Rust model (fewer fields) reads the Java model, since both ignore
//! unknown fields. Missing `javac` or jars fail the test with a message saying what to install.

use std::collections::BTreeMap;

use curator_core::ZPath;
use curator_modeled::{ModelSpec, ModeledFramework};
use serde::{Deserialize, Serialize};
use tests::fixture::{init_tracing, unique_path, Fixture};
use tests::java::LinePeer;

/// The peer's `Address`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Address {
    street: Option<String>,
    number: i32,
}

/// The peer's `Person`: the same properties in the same order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Person {
    first_name: String,
    age: i32,
    id: i64,
    active: bool,
    nickname: Option<String>,
    home: Address,
    previous_home: Option<Address>,
    tags: Vec<String>,
    visited: Vec<Address>,
    scores: BTreeMap<String, i32>,
}

/// An older model of the same node: two of its fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OlderPerson {
    first_name: String,
    age: i32,
}

fn address(street: &str, number: i32) -> Address {
    Address { street: Some(street.into()), number }
}

/// The peer's cases, built in Rust.
fn cases() -> Vec<(&'static str, Person)> {
    vec![
        (
            "full",
            Person {
                first_name: "Zoë \"Z\" O'Brien\\ a/b\ttab".into(),
                age: -42,
                id: 9_007_199_254_740_993,
                active: true,
                nickname: Some("zed".into()),
                home: address("1 Galt's Gulch", 7),
                previous_home: Some(address("Old Trafford", 10)),
                tags: vec!["b".into(), "a".into(), "日本".into()],
                visited: vec![address("x", 1), address("y", 2)],
                scores: BTreeMap::from([("math".into(), 90), ("art".into(), -1), ("Zed".into(), 0)]),
            },
        ),
        (
            "sparse",
            Person {
                first_name: String::new(),
                age: 0,
                id: 0,
                active: false,
                nickname: None,
                home: Address { street: None, number: 0 },
                previous_home: None,
                tags: Vec::new(),
                visited: Vec::new(),
                scores: BTreeMap::new(),
            },
        ),
    ]
}

/// Curator has no such test (its modeled tests stay in Java); the bytes follow
/// `JacksonModelSerializer`'s use of a default `ObjectMapper`.
#[tokio::test]
async fn jackson_and_serde_write_the_same_bytes_and_read_each_other() {
    init_tracing();
    let fixture = Fixture::shared().await;
    let fw = fixture.client().await;
    let mut peer = LinePeer::start("ModeledJacksonPeer", &[&fixture.connect_string()]).await;
    let base = unique_path("modeled-interop");
    for (case, person) in cases() {
        // The same bytes.
        let answer = peer.command(&format!("BYTES {case}")).await;
        let jackson = answer.strip_prefix("BYTES ").expect("BYTES <json>");
        let serde = String::from_utf8(serde_json::to_vec(&person).unwrap()).unwrap();
        assert_eq!(serde, jackson, "{case}: serde's bytes are not Jackson's");

        // Java writes, Rust reads.
        let from_java = format!("{base}/{case}-from-java");
        assert_eq!(peer.command(&format!("WRITE {case} {from_java}")).await, "WROTE");
        let client: ModeledFramework<Person> =
            ModeledFramework::new(&fw, ModelSpec::json(ZPath::parse(&from_java).unwrap()).build().unwrap());
        assert_eq!(client.read().await.unwrap(), person, "{case}: what Java wrote");
        assert_eq!(fw.get_data().for_path(&from_java).await.unwrap(), jackson.as_bytes(), "{case}");
        let older: ModeledFramework<OlderPerson> =
            ModeledFramework::new(&fw, ModelSpec::json(ZPath::parse(&from_java).unwrap()).build().unwrap());
        let expected = OlderPerson { first_name: person.first_name.clone(), age: person.age };
        assert_eq!(older.read().await.unwrap(), expected, "{case}: an older model");

        // Rust writes, Java reads.
        let from_rust = format!("{base}/{case}-from-rust");
        let client = client.with_path(ZPath::parse(&from_rust).unwrap());
        client.set(&person).await.unwrap();
        assert_eq!(fw.get_data().for_path(&from_rust).await.unwrap(), jackson.as_bytes(), "{case}");
        assert_eq!(peer.command(&format!("READ {case} {from_rust}")).await, "EQUAL", "{case}: what Rust wrote");
    }
    // And a difference is seen: Java reads the other case's node as different.
    assert!(peer.command(&format!("READ full {base}/sparse-from-rust")).await.starts_with("DIFFERENT "));
    peer.quit().await;
    fw.close().await;
}
