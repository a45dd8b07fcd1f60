//! Interop with Apache Curator 5.4's `LeaderLatch` and `LeaderSelector` (Debian's jars): Java
//! participants (tests/java/LeaderPeer.java, each on a session of its own) and Rust participants
//! take turns in one election on one path. As the leaders close one by one, alternating between
//! the sides, exactly one leads at a time, every participant leads once, in the order they
//! joined, and both sides name the same leader and list the same participants in the same order.
//! One at a time is the leadership checker's (`tests::leadership`): the Rust participants record
//! their terms into it as they happen, and the Java ones go in from the peer's ELECTED / DEPOSED
//! lines (their times on the clock both processes read) with the czxid of their node as the
//! token; its report must be clean: no overlap, tokens growing with every new leader. Missing
//! `javac` or jars fail the test with a message saying what to install.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use curator_core::CuratorFramework;
use curator_recipes::{LatchEvent, LeaderLatch, LeaderSelector, Participant, SelectorEvent, TermEnd};
use curator_test::{eventually, TestingServer, Timing};
use tests::java::LinePeer;
use tests::leadership::{close_latch, instant_of_epoch_us, LeadershipChecker};
use tests::locks::now_us;
use tests::{client, init_tracing, unique_path};

/// A participant's view of the line: (id, is leader), leader first.
type View = Vec<(String, bool)>;

/// Becoming leader and ceasing to be, as either side reported it, in microseconds since the
/// epoch (the clock both processes read).
#[derive(Debug, Clone, Default)]
struct Log(Arc<Mutex<Vec<(String, bool, u64)>>>);

impl Log {
    fn push(&self, who: &str, elected: bool, at_us: u64) {
        self.0.lock().unwrap().push((who.to_string(), elected, at_us));
    }

    /// Whether `who` has been elected.
    fn elected(&self, who: &str) -> bool {
        self.0.lock().unwrap().iter().any(|(w, elected, _)| w == who && *elected)
    }

    /// Each participant's terms as [start, end] pairs, in the order reported; panics on a term
    /// that never ended or an end without a start.
    fn terms(&self) -> BTreeMap<String, Vec<(u64, u64)>> {
        let mut open: BTreeMap<String, u64> = BTreeMap::new();
        let mut terms: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for (who, elected, at) in self.0.lock().unwrap().iter() {
            if *elected {
                assert!(open.insert(who.clone(), *at).is_none(), "{who} elected twice without an end between");
            } else {
                let start = open.remove(who).unwrap_or_else(|| panic!("{who}'s term ended before it began"));
                terms.entry(who.clone()).or_default().push((start, *at));
            }
        }
        assert!(open.is_empty(), "terms that never ended: {open:?}");
        terms
    }

    /// The order in which participants were first elected.
    fn leaders(&self) -> Vec<String> {
        self.0.lock().unwrap().iter().filter(|(_, elected, _)| *elected).map(|(w, _, _)| w.clone()).collect()
    }
}

/// Curator `LeaderLatch` or `LeaderSelector` participants in a Java process.
struct JavaPeer {
    peer: LinePeer,
}

impl JavaPeer {
    /// Starts the peer with a client per id (`kind`: `latch` or `selector`); its ELECTED and
    /// DEPOSED lines go to `log`.
    async fn start(connect: &str, kind: &str, path: &str, ids: &[&str], log: Log) -> JavaPeer {
        let args: Vec<&str> = [connect, kind, path].into_iter().chain(ids.iter().copied()).collect();
        let peer = LinePeer::with_events("LeaderPeer", &args, move |line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["ELECTED", who, at] => log.push(who, true, at.parse().expect("micros")),
                ["DEPOSED", who, at] => log.push(who, false, at.parse().expect("micros")),
                _ => return false,
            }
            true
        })
        .await;
        JavaPeer { peer }
    }

    /// Sends `line` and returns the answer; panics on ERROR or silence.
    async fn command(&mut self, line: &str) -> String {
        self.peer.command(line).await
    }

    /// The leader's id as Curator's `getLeader()` of participant `id` names it.
    async fn leader(&mut self, id: &str) -> Option<String> {
        let answer = self.command(&format!("LEADER {id}")).await;
        let words: Vec<&str> = answer.split_whitespace().collect();
        match words.as_slice() {
            ["LEADER", "-", _] => None,
            ["LEADER", leader, "true"] => Some(leader.to_string()),
            _ => panic!("getLeader() of {id}: {answer}"),
        }
    }

    /// Curator's `getParticipants()` as participant `id` sees them.
    async fn participants(&mut self, id: &str) -> View {
        let answer = self.command(&format!("PARTICIPANTS {id}")).await;
        answer
            .split_whitespace()
            .skip(1)
            .map(|p| {
                let (id, leader) = p.rsplit_once(':').expect("id:isLeader");
                (id.to_string(), leader == "true")
            })
            .collect()
    }

    /// The czxid of participant `id`'s node.
    async fn token(&mut self, id: &str) -> i64 {
        let answer = self.command(&format!("TOKEN {id}")).await;
        answer.rsplit(' ').next().and_then(|t| t.parse().ok()).expect("a token")
    }

    async fn quit(self) {
        self.peer.quit().await;
    }
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One Rust participant, latch or selector, behind one interface.
trait RustParticipant: Send + Sync {
    fn id(&self) -> &str;
    /// The fencing token of the current term, if it leads.
    fn token(&self) -> Option<i64>;
    fn leader(&self) -> BoxFuture<'_, Option<String>>;
    fn participants(&self) -> BoxFuture<'_, View>;
    /// Closes it; `log` and `checker` get the end of a term that closing ends without an event.
    fn close(&self, log: &Log, checker: &LeadershipChecker) -> BoxFuture<'_, ()>;
}

fn view(participants: curator_core::Result<Vec<Participant>>) -> View {
    participants.expect("participants").into_iter().map(|p| (p.id, p.is_leader)).collect()
}

impl RustParticipant for LeaderLatch {
    fn id(&self) -> &str {
        LeaderLatch::id(self)
    }
    fn token(&self) -> Option<i64> {
        self.leadership().map(|l| l.fencing_token())
    }
    fn leader(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move { LeaderLatch::leader(self).await.expect("leader").map(|p| p.id) })
    }
    fn participants(&self) -> BoxFuture<'_, View> {
        Box::pin(async move { view(LeaderLatch::participants(self).await) })
    }
    fn close(&self, log: &Log, checker: &LeadershipChecker) -> BoxFuture<'_, ()> {
        let (log, checker) = (log.clone(), checker.clone());
        Box::pin(async move {
            // A silent close publishes nothing: the term ends as we decide to close.
            let end = now_us();
            let leading = self.has_leadership();
            close_latch(&checker, self.id(), self).await;
            if leading {
                log.push(self.id(), false, end);
            }
        })
    }
}

impl RustParticipant for LeaderSelector {
    fn id(&self) -> &str {
        LeaderSelector::id(self)
    }
    fn token(&self) -> Option<i64> {
        self.leadership().map(|l| l.fencing_token())
    }
    fn leader(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move { LeaderSelector::leader(self).await.expect("leader").map(|p| p.id) })
    }
    fn participants(&self) -> BoxFuture<'_, View> {
        Box::pin(async move { view(LeaderSelector::participants(self).await) })
    }
    fn close(&self, log: &Log, checker: &LeadershipChecker) -> BoxFuture<'_, ()> {
        let (log, checker) = (log.clone(), checker.clone());
        Box::pin(async move {
            // The term ends as we decide to close; the Ended event it brings (Interrupted)
            // reaches the listener later and is not a term's end of its own.
            let end = now_us();
            let leading = self.has_leadership();
            checker.stopping(self.id(), "close()");
            LeaderSelector::close(self).await;
            if leading {
                log.push(self.id(), false, end);
            }
        })
    }
}

/// Who joined, in line order: a Rust participant or a Java one (by id).
enum Joined {
    Rust(Box<dyn RustParticipant>),
    Java(String),
}

impl Joined {
    fn id(&self) -> &str {
        match self {
            Joined::Rust(p) => p.id(),
            Joined::Java(id) => id,
        }
    }
}

/// The election with everybody in line: every participant still open names `want` as the
/// leader and lists `line` (ids in order, the first one leading). Polls until they agree or
/// the deadline passes, then asserts.
async fn assert_views(joined: &[Joined], java: &mut JavaPeer, want: &str, line: &[&str]) {
    let expected: View = line.iter().enumerate().map(|(i, id)| (id.to_string(), i == 0)).collect();
    let deadline = std::time::Instant::now() + Timing::new().deadline();
    loop {
        let mut seen = Vec::new();
        for p in joined {
            let (leader, participants) = match p {
                Joined::Rust(r) => (r.leader().await, r.participants().await),
                Joined::Java(id) => (java.leader(id).await, java.participants(id).await),
            };
            seen.push((p.id().to_string(), leader, participants));
        }
        let agree =
            seen.iter().all(|(_, leader, participants)| leader.as_deref() == Some(want) && *participants == expected);
        if agree {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the sides disagree: want {want} leading {expected:?}, saw {seen:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await; // poll interval
    }
}

/// The shared scenario: `joined` (alternating Rust and Java, already in line in this order) lead
/// one after the other; each leader is checked from both sides and then closed.
async fn take_turns(
    mut joined: Vec<Joined>,
    java: &mut JavaPeer,
    log: &Log,
    checker: &LeadershipChecker,
) -> BTreeMap<String, i64> {
    let mut tokens = BTreeMap::new();
    while !joined.is_empty() {
        let leader = joined[0].id().to_string();
        let elected = eventually(Timing::new().deadline(), || async { log.elected(&leader) }).await;
        assert!(elected, "{leader} never became leader; leaders so far: {:?}", log.leaders());
        let line: Vec<String> = joined.iter().map(|p| p.id().to_string()).collect();
        let line: Vec<&str> = line.iter().map(String::as_str).collect();
        assert_views(&joined, java, &leader, &line).await;
        let token = match &joined[0] {
            Joined::Rust(r) => r.token().expect("the Rust leader has a term"),
            Joined::Java(id) => java.token(id).await,
        };
        tokens.insert(leader.clone(), token);
        match joined.remove(0) {
            Joined::Rust(r) => r.close(log, checker).await,
            Joined::Java(id) => assert_eq!(java.command(&format!("CLOSE {id}")).await, format!("CLOSED {id}")),
        }
    }
    tokens
}

/// The verdict: every participant led once, in `order`; the leadership checker, given the Java
/// terms from the peer's lines (the Rust ones it recorded as they happened), finds no overlap
/// and no token inversion.
fn verify(log: &Log, checker: &LeadershipChecker, tokens: &BTreeMap<String, i64>, order: &[&str]) {
    let terms = log.terms();
    let leaders = log.leaders();
    assert_eq!(leaders, order, "the order of leaders");
    for (who, terms) in &terms {
        assert_eq!(terms.len(), 1, "{who} led more than once: {terms:?}");
        let (start_us, end_us) = terms[0];
        assert!(start_us <= end_us, "{who}'s term ends before it starts: {terms:?}");
        if who.starts_with("java-") {
            let token = *tokens.get(who).unwrap_or_else(|| panic!("{who}'s token"));
            let term = checker.began_at(who, token, instant_of_epoch_us(start_us));
            checker.ended_at(term, "DEPOSED", instant_of_epoch_us(end_us));
        }
    }
    for term in checker.terms() {
        assert_eq!(tokens.get(&term.participant), Some(&term.token), "{}'s recorded token", term.participant);
    }
    let report = checker.verify();
    assert_eq!(report.terms, order.len(), "one term each: {report:#}");
}

async fn rust_frameworks(connect: &str, n: usize) -> Vec<CuratorFramework> {
    let mut fws = Vec::new();
    for _ in 0..n {
        fws.push(client(connect).await);
    }
    fws
}

/// Curator's `LeaderLatch` (Java, a session each) and our `LeaderLatch` on one path: the latches
/// join alternately, then the leaders close one by one, alternating sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_latches_elect_one_leader_at_a_time() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let path = unique_path("interop-latch");
    let log = Log::default();
    let checker = LeadershipChecker::new();
    let mut java = JavaPeer::start(&connect, "latch", &path, &["java-0", "java-1", "java-2"], log.clone()).await;
    let fws = rust_frameworks(&connect, 3).await;

    let mut joined = Vec::new();
    for (i, fw) in fws.iter().enumerate() {
        let id = format!("rust-{i}");
        let events = log.clone();
        let latch = LeaderLatch::builder(fw, &path)
            .id(id.clone())
            .listener(move |event: &LatchEvent| match event {
                LatchEvent::IsLeader(_) => events.push(&id, true, now_us()),
                LatchEvent::NotLeader(_) => events.push(&id, false, now_us()),
                _ => {} // a kind added later: not a term's start or end
            })
            .build()
            .expect("latch");
        checker.record_latch(&latch, latch.id());
        latch.start().expect("start");
        latch.ready().await.expect("start"); // returns once our node is in line
        joined.push(Joined::Rust(Box::new(latch)));
        let java_id = format!("java-{i}");
        assert_eq!(java.command(&format!("START {java_id}")).await, format!("STARTED {java_id}"));
        joined.push(Joined::Java(java_id));
    }
    let order: Vec<String> = joined.iter().map(|p| p.id().to_string()).collect();

    let tokens = take_turns(joined, &mut java, &log, &checker).await;
    let order: Vec<&str> = order.iter().map(String::as_str).collect();
    verify(&log, &checker, &tokens, &order);

    java.quit().await;
    assert!(tests::children(&fws[0], &path).await.is_empty(), "nodes left behind");
    for fw in fws {
        fw.close().await;
    }
}

/// Curator's `LeaderSelector` (Java, whose `takeLeadership` blocks until interrupted) and our
/// `LeaderSelector` (whose leadership function never returns) on one path: the selectors join
/// alternately, then the leaders close one by one, alternating sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_selectors_elect_one_leader_at_a_time() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let path = unique_path("interop-selector");
    let log = Log::default();
    let checker = LeadershipChecker::new();
    let mut java = JavaPeer::start(&connect, "selector", &path, &["java-0", "java-1", "java-2"], log.clone()).await;
    let fws = rust_frameworks(&connect, 3).await;

    let mut joined = Vec::new();
    for (i, fw) in fws.iter().enumerate() {
        let id = format!("rust-{i}");
        let events = log.clone();
        let listener_id = id.clone();
        let lead = checker.recording(&id, |_term| futures::future::pending::<()>());
        let selector = LeaderSelector::builder(fw, &path, lead)
            .id(id.clone())
            .listener(move |event: &SelectorEvent| match event {
                SelectorEvent::Took(_) => events.push(&listener_id, true, now_us()),
                SelectorEvent::Ended { end: TermEnd::Interrupted, .. } => {} // by our close: logged there
                SelectorEvent::Ended { .. } => events.push(&listener_id, false, now_us()),
                _ => {} // a kind added later: not a term's start or end
            })
            .build()
            .expect("selector");
        selector.start().expect("start");
        selector.ready().await.expect("start"); // in line in the background
        let in_line = eventually(Timing::new().deadline(), || async {
            selector.participants().await.map(|ps| ps.iter().any(|p| p.id == id)).unwrap_or(false)
        })
        .await;
        assert!(in_line, "{id}'s node never appeared");
        joined.push(Joined::Rust(Box::new(selector)));
        let java_id = format!("java-{i}");
        assert_eq!(java.command(&format!("START {java_id}")).await, format!("STARTED {java_id}"));
        joined.push(Joined::Java(java_id));
    }
    let order: Vec<String> = joined.iter().map(|p| p.id().to_string()).collect();

    let tokens = take_turns(joined, &mut java, &log, &checker).await;
    // A Java selector's term ends (its DEPOSED line) when takeLeadership, interrupted by
    // close(), returns: possibly after CLOSED.
    let ended = eventually(Timing::new().deadline(), || async {
        let events = log.0.lock().unwrap().clone();
        events.iter().filter(|(_, elected, _)| *elected).count() == events.iter().filter(|(_, e, _)| !*e).count()
    })
    .await;
    assert!(ended, "a term never ended: {:?}", log.0.lock().unwrap());
    let order: Vec<&str> = order.iter().map(String::as_str).collect();
    verify(&log, &checker, &tokens, &order);

    java.quit().await;
    assert!(tests::children(&fws[0], &path).await.is_empty(), "nodes left behind");
    for fw in fws {
        fw.close().await;
    }
}

/// A Rust leader proclaims (issue 31 item 7) while a Curator `LeaderLatch` waits on the same
/// path: Curator still names the Rust participant as leader (`getLeader()`), the value node
/// `P/proclaimed` sorts after every contender in Curator's order, so it never leads and is never
/// watched as a predecessor; Curator's `getParticipants()` lists it last, as a participant that
/// does not lead, with the value node's data as its id (docs/architecture.md section 15.3).
/// When the Rust leader closes, the Java latch leads, and our observer shows it with no value:
/// the Rust term's value is not shown as the Java leader's. No Curator test has a value node;
/// the election itself follows `TestLeaderLatch.testCorrectWatching`'s line of two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_latch_sees_the_right_leader_while_we_proclaim() {
    use curator_recipes::LeaderObserver;
    use futures::StreamExt;

    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let path = unique_path("interop-proclaim");
    let log = Log::default();
    let mut java = JavaPeer::start(&connect, "latch", &path, &["java-1"], log.clone()).await;
    let fw = client(&connect).await;
    let observer = LeaderObserver::new(&fw, &path).unwrap();
    observer.start().unwrap();
    observer.ready().await.unwrap();
    let mut observed = Box::pin(observer.observe());

    let latch = LeaderLatch::new(&fw, &path, "rust-1").unwrap();
    latch.start().unwrap();
    let term = latch.await_leadership().await.unwrap();
    term.proclaim("10.0.0.1:1").await.unwrap();
    assert_eq!(java.command("START java-1").await, "STARTED java-1");
    for value in ["10.0.0.1:2", "10.0.0.1:3"] {
        term.proclaim(value).await.unwrap();
        assert_eq!(java.leader("java-1").await.as_deref(), Some("rust-1"), "Curator's leader after {value}");
        let value_node = format!("{}:{value}", term.fencing_token());
        let want: View = vec![("rust-1".into(), true), ("java-1".into(), false), (value_node, false)];
        assert_eq!(java.participants("java-1").await, want, "Curator's participants after {value}");
        assert_eq!(view(latch.participants().await), vec![("rust-1".into(), true), ("java-1".into(), false)]);
    }
    assert!(!log.elected("java-1"), "the Java latch led while the Rust one did");
    let deadline = tokio::time::Instant::now() + Timing::new().deadline();
    loop {
        let seen = tokio::time::timeout_at(deadline, observed.next()).await.expect("observed in time").expect("open");
        if seen.value.as_deref() == Some(&b"10.0.0.1:3"[..]) {
            assert_eq!((seen.leader.id.as_str(), seen.leader.token), ("rust-1", term.fencing_token()));
            break;
        }
    }

    latch.close().await;
    assert!(eventually(Timing::new().deadline(), || async { log.elected("java-1") }).await, "Java never led");
    assert_eq!(java.leader("java-1").await.as_deref(), Some("java-1"));
    let java_token = java.token("java-1").await;
    let seen = loop {
        let seen = tokio::time::timeout_at(deadline, observed.next()).await.expect("observed in time").expect("open");
        if seen.leader.token == java_token {
            break seen;
        }
    };
    assert_eq!((seen.leader.id.as_str(), seen.value.as_deref()), ("java-1", None), "{seen:?}");
    assert_eq!(java.command("CLOSE java-1").await, "CLOSED java-1");
    java.quit().await;
    observer.close().await;
    fw.close().await;
}
