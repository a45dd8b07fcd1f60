//! Apache Curator's `TestGroupMember`, ported to our `GroupMember` against a real ZooKeeper,
//! with what Curator's one test leaves out: the members' view as `MemberEvent`s (joins, leaves,
//! payload changes), a member's return after its session expires (under both error policies and
//! both retry policies), and bad input.

use std::collections::BTreeMap;
use std::time::Duration;

use curator_core::EventStream;
use curator_core::RetryNTimes;
use curator_core::{CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{GroupMember, MemberEvent};
use curator_test::{eventually, expire_session, TestingServer, Timing};
use tests::{builder, client, connected, init_tracing, unique_path};

fn shared() -> String {
    TestingServer::shared().connect_string()
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

fn members(pairs: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
    pairs.iter().map(|(id, data)| (id.to_string(), data.to_vec())).collect()
}

/// The next event about member `id` (others are skipped), within the deadline.
async fn next_about(events: &mut EventStream<MemberEvent>, id: &str) -> MemberEvent {
    tokio::time::timeout(deadline(), async {
        loop {
            let event = events.next().await.expect("the event stream ended");
            let about = match &event {
                MemberEvent::Joined { id, .. } | MemberEvent::Updated { id, .. } | MemberEvent::Left { id } => id,
                other => panic!("unexpected event {other:?}"),
            };
            if about == id {
                return event;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no event about {id}"))
}

/// TestGroupMember.testBasic: two members of one client see each other (a member sees itself
/// even before its node is there), the second leaves, and the first's new payload is what the
/// group shows for it. Curator's default payload, this host's address, is ours too.
#[tokio::test]
async fn basic() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("group-basic");
    let one = GroupMember::builder(&fw, &path, "1").build().unwrap();
    one.start().unwrap();
    one.ready().await.unwrap();
    assert!(one.current_members().contains_key("1"));
    let two = GroupMember::builder(&fw, &path, "2").payload(b"two".to_vec()).build().unwrap();
    two.start().unwrap();
    two.ready().await.unwrap();
    let address = curator_core::local_address().into_bytes();
    let both = members(&[("1", &address), ("2", b"two")]);
    assert!(
        eventually(deadline(), || async { one.current_members() == both && two.current_members() == both }).await,
        "{:?} {:?}",
        one.current_members(),
        two.current_members()
    );

    two.close().await;
    assert!(eventually(deadline(), || async { one.current_members() == members(&[("1", &address)]) }).await);

    one.set_this_data(b"something".to_vec()).unwrap();
    assert!(eventually(deadline(), || async { one.current_members() == members(&[("1", b"something")]) }).await);
    assert_eq!(fw.get_data().for_path(&format!("{path}/1")).await.unwrap(), b"something");
    one.close().await;
    fw.close().await;
}

/// Members of other clients joining, changing their payload and leaving are seen as
/// `Joined`, `Updated` and `Left`, in that order; a member sees its own join too, and members
/// there before it started are reported as joins.
#[tokio::test]
async fn joins_updates_and_leaves_are_member_events() {
    init_tracing();
    let connect = shared();
    let (fw_a, fw_b, fw_c) = futures::join!(client(&connect), client(&connect), client(&connect));
    let path = unique_path("group-events");
    let early = GroupMember::builder(&fw_c, &path, "early").payload(b"e".to_vec()).build().unwrap();
    early.start().unwrap();
    early.ready().await.unwrap();
    assert!(early.wait_for_registration(deadline()).await);

    let watcher = GroupMember::builder(&fw_b, &path, "watcher").payload(b"w".to_vec()).build().unwrap();
    watcher.start().unwrap();
    watcher.ready().await.unwrap();
    let mut events = watcher.events();
    watcher.wait_initialized().await.unwrap();
    assert!(watcher.wait_for_registration(deadline()).await);
    let mut seen = vec![watcher.current_members()];
    if !seen[0].contains_key("early") {
        assert_eq!(
            next_about(&mut events, "early").await,
            MemberEvent::Joined { id: "early".into(), data: b"e".to_vec() }
        );
        seen.push(watcher.current_members());
    }
    assert!(
        eventually(deadline(), || async {
            watcher.current_members() == members(&[("early", b"e"), ("watcher", b"w")])
        })
        .await,
        "{seen:?}"
    );

    let member = GroupMember::builder(&fw_a, &path, "a").payload(b"first".to_vec()).build().unwrap();
    member.start().unwrap();
    member.ready().await.unwrap();
    assert_eq!(next_about(&mut events, "a").await, MemberEvent::Joined { id: "a".into(), data: b"first".to_vec() });
    member.set_this_data(b"second".to_vec()).unwrap();
    assert_eq!(next_about(&mut events, "a").await, MemberEvent::Updated { id: "a".into(), data: b"second".to_vec() });
    member.close().await;
    assert_eq!(next_about(&mut events, "a").await, MemberEvent::Left { id: "a".into() });
    early.close().await;
    assert_eq!(next_about(&mut events, "early").await, MemberEvent::Left { id: "early".into() });
    assert_eq!(watcher.current_members(), members(&[("watcher", b"w")]));
    watcher.close().await;
    for fw in [fw_a, fw_b, fw_c] {
        fw.close().await;
    }
}

/// A member whose session expires leaves and joins again with its latest payload on the new
/// session; another member sees `Left` then `Joined`. Under every error and retry policy.
async fn expiry_round(connect: String, policy: ErrorPolicy, short: bool) {
    let b = builder(&connect).connection_state_error_policy(policy);
    let b = if short { b.retry_policy(RetryNTimes::new(1, Duration::from_millis(100))) } else { b };
    let (fw, observer_fw) = futures::join!(connected(b), client(&connect));
    let path = unique_path("group-expiry");
    let observer = GroupMember::builder(&observer_fw, &path, "observer").build().unwrap();
    observer.start().unwrap();
    observer.ready().await.unwrap();
    let mut events = observer.events();
    let member = GroupMember::builder(&fw, &path, "m").payload(b"one".to_vec()).build().unwrap();
    member.start().unwrap();
    member.ready().await.unwrap();
    assert_eq!(next_about(&mut events, "m").await, MemberEvent::Joined { id: "m".into(), data: b"one".to_vec() });
    member.set_this_data(b"two".to_vec()).unwrap();
    assert_eq!(next_about(&mut events, "m").await, MemberEvent::Updated { id: "m".into(), data: b"two".to_vec() });

    let info = fw.session().await.unwrap().client().session().clone();
    expire_session(&connect, &info).await.unwrap();
    let context = format!("{policy:?} short={short}");
    assert_eq!(next_about(&mut events, "m").await, MemberEvent::Left { id: "m".into() }, "{context}");
    assert_eq!(
        next_about(&mut events, "m").await,
        MemberEvent::Joined { id: "m".into(), data: b"two".to_vec() },
        "{context}"
    );
    let owner = observer_fw.check_exists().for_path(&format!("{path}/m")).await.unwrap().expect("back").ephemeral_owner;
    assert_eq!(owner, fw.session().await.unwrap().id(), "{context}");
    member.close().await;
    observer.close().await;
    fw.close().await;
    observer_fw.close().await;
}

/// See `expiry_round`.
#[tokio::test]
async fn member_rejoins_after_session_expiry() {
    init_tracing();
    let connect = shared();
    let rounds = [
        (ErrorPolicy::Standard, false),
        (ErrorPolicy::Standard, true),
        (ErrorPolicy::Session, false),
        (ErrorPolicy::Session, true),
    ]
    .map(|(policy, short)| expiry_round(connect.clone(), policy, short));
    futures::future::join_all(rounds).await;
}

/// Bad input is a typed error from `start`, and nothing is created: an invalid group path, an
/// empty member id or one that is not one node name (`InvalidArgument`, the check of every
/// participant id), a payload over the framework's limit.
#[tokio::test]
async fn bad_input_is_a_typed_error() {
    init_tracing();
    let fw: CuratorFramework = connected(builder(&shared()).max_data_len(16)).await;
    let path = unique_path("group-bad");
    for bad in ["relative", "/a//b", "/trailing/"] {
        let err = GroupMember::builder(&fw, bad, "m").build().unwrap_err();
        assert!(matches!(err, CuratorError::InvalidPath { .. }), "{bad:?}: {err:?}");
    }
    for id in ["", "a/b", "..", "."] {
        let err = GroupMember::builder(&fw, &path, id).build().unwrap_err();
        assert!(matches!(err, CuratorError::InvalidArgument { .. }), "{id:?}: {err:?}");
    }
    let err = GroupMember::builder(&fw, &path, "m").payload(vec![0u8; 17]).build().unwrap_err();
    assert!(matches!(err, CuratorError::DataTooLarge { .. }), "{err:?}");
    assert!(fw.check_exists().for_path(&path).await.unwrap().is_none(), "nothing may be created");

    let member = GroupMember::builder(&fw, &path, "m").payload(b"ok".to_vec()).build().unwrap();
    member.start().unwrap();
    member.ready().await.unwrap();
    let err = member.set_this_data(vec![0u8; 17]).unwrap_err();
    assert!(matches!(err, CuratorError::DataTooLarge { .. }), "{err:?}");
    assert_eq!(member.current_members().get("m").map(Vec::as_slice), Some(&b"ok"[..]));
    member.close().await;
    fw.close().await;
}

/// Ours: a listener given to the builder is in place before the group is first loaded, so it
/// hears every member already there as a join (one added after `start` may miss some).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builder_listener_hears_the_members_already_there() {
    init_tracing();
    let path = unique_path("group-builder-listener");
    let fw = client(&shared()).await;
    let mut early = Vec::new();
    for i in 0..5 {
        let member = GroupMember::builder(&fw, &path, &format!("m{i}")).payload(vec![i]).build().expect("join");
        member.start().expect("join");
        member.ready().await.expect("join");
        assert!(member.wait_for_registration(deadline()).await);
        early.push(member);
    }
    let heard = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::new()));
    let sink = heard.clone();
    let late = GroupMember::builder(&fw, &path, "late")
        .payload(b"l".to_vec())
        .listener(move |event: &MemberEvent| {
            if let MemberEvent::Joined { id, data } = event {
                sink.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), data.clone());
            }
        })
        .build()
        .expect("join");
    late.start().expect("join");
    late.ready().await.expect("join");
    let want: BTreeMap<String, Vec<u8>> =
        (0..5u8).map(|i| (format!("m{i}"), vec![i])).chain([("late".to_string(), b"l".to_vec())]).collect();
    let all = eventually(deadline(), || async { *heard.lock().unwrap_or_else(|e| e.into_inner()) == want }).await;
    assert!(all, "heard {:?}", heard.lock().unwrap_or_else(|e| e.into_inner()).keys());
    late.close().await;
    for member in early {
        member.close().await;
    }
    fw.close().await;
}

/// Issue 27: a member whose node the server refuses (the group path allows reading only)
/// reports `NoAuth` from `ready()`, promptly (`start()` only spawns the member's task and
/// returns `Ok`), the member is closed (state `Closed`, a second start `AlreadyClosed`, its
/// event stream ended) and nothing is left running; before issue 27, `start()` returned `Ok`
/// and `current_members()` showed the member itself, never registered, while its node was
/// retried for ever. Under every error and retry policy.
#[tokio::test]
async fn a_refused_registration_is_reported_by_ready() {
    use tests::policies::{framework, COMBINATIONS};
    init_tracing();
    let connect = shared();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&connect, policy, retry).await;
        let path = unique_path("group-noauth");
        tests::zk::read_only_node(&fw, &path).await;
        let member = GroupMember::builder(&fw, &path, "refused").build().expect("member");
        let mut events = member.events();
        let started = std::time::Instant::now();
        member.start().expect("start only spawns the task");
        let r = tokio::time::timeout(Timing::new().deadline(), member.ready()).await.expect("ready returns");
        assert!(matches!(r, Err(CuratorError::NoAuth { .. })), "{policy:?}/{retry:?}: {r:?}");
        assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: took {:?}", started.elapsed());
        assert_eq!(member.state(), curator_core::LifeState::Closed);
        assert!(matches!(member.start(), Err(CuratorError::AlreadyClosed { what: "GroupMember" })));
        let ended = tokio::time::timeout(Timing::new().deadline(), async { while events.next().await.is_some() {} });
        assert!(ended.await.is_ok(), "the member's event stream ends");
        assert!(fw.get_children().for_path(&path).await.unwrap().is_empty());
        member.close().await;
        fw.close().await;
    }
}
