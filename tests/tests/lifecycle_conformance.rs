//! Issue 27's lifecycle conformance suite: every started type of the workspace, put through
//! the same scenarios of its life, one table-driven test per scenario.
//!
//! Curator has no single test class for this: it follows a convention, one lifecycle idiom for
//! every recipe (`LATENT -> STARTED -> STOPPED`, one `start()`, an idempotent `close()`), and
//! each recipe's own tests check their part of it. Here the convention is checked for all types
//! at once (module `curator_core::lifecycle` is that idiom, written once).
//!
//! Every type has the same calls (module `curator_core::lifecycle`): built latent, a sync
//! `start()`, an async `ready()` for the first outcome (caches: `wait_initialized()`), an
//! idempotent `async fn close(&self)`. One macro ([`subject!`]) makes the same small adapter
//! ([`Subject`]) for each; only the arguments of a cache's start, the name of its `ready` and
//! discovery's error type differ. A scenario
//! runs against every type of [`KINDS`], each on a framework of its own under a base path of
//! its own, and collects every (type, scenario, what happened) that is not as it should be, so
//! that one run shows each type's outcome; the test fails listing them all.
//!
//! Ephemeral checks look for any ephemeral node under the type's base path: only the type's own
//! framework works there, so every such node is of that framework's session.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_cache::{CuratorCache, NodeCache, PathChildrenCache, StartMode, TreeCache};
use curator_core::zk::{Acl, AuthId, Permission};
use curator_core::EventStream;
use curator_core::{CuratorError, CuratorFramework};
use curator_discovery::{DiscoveryError, ServiceCache, ServiceDiscovery, ServiceInstance, ServiceProvider};
use curator_recipes::PersistentWatcher;
use curator_recipes::{DistributedIdQueue, DistributedQueue, StringSerializer};
use curator_recipes::{GroupMember, PersistentNode, PersistentTtlNode};
use curator_recipes::{LeaderLatch, LeaderObserver, LeaderSelector};
use curator_recipes::{SetPartitioner, SharedCount, SharedValue};
use curator_test::TestingServer;
use tests::{client, init_tracing, unique_path};

type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
type Outcome = Result<(), CuratorError>;
/// A type's adapter, or why it could not be made.
type Made = Result<Box<dyn Subject>, CuratorError>;

/// How long a close, a start or a promised event may take before it counts as a hang.
const BOUND: Duration = Duration::from_secs(10);

/// One started thing, as the scenarios see it: the one convention's calls.
trait Subject: Send + Sync {
    /// Its sync `start()`.
    fn start(&self) -> Outcome;
    /// Its first outcome: `ready()` (caches: `wait_initialized()`).
    fn ready(&self) -> Fut<'_, Outcome>;
    /// Its `close()`.
    fn close(&self) -> Fut<'_, ()>;
    /// The end of a stream of its events taken now, for a type that has one.
    fn stream_end(&self) -> Option<Fut<'static, ()>>;
    /// Whether it is closed, as every type shows it: a start is `AlreadyClosed` (a start of a
    /// thing that is not closed cannot be wanted here: it is started or refused already).
    fn is_closed(&self) -> bool {
        matches!(self.start(), Err(CuratorError::AlreadyClosed { .. }))
    }
}

/// Discovery's errors carry the framework's.
fn discovery_error(err: DiscoveryError) -> CuratorError {
    match err {
        DiscoveryError::Curator(err) => err,
        other => CuratorError::IllegalState(format!("not a CuratorError: {other}")),
    }
}

fn same(err: CuratorError) -> CuratorError {
    err
}

fn ends<E: Send + 'static>(mut stream: EventStream<E>) -> Option<Fut<'static, ()>> {
    Some(Box::pin(async move { while stream.next().await.is_some() {} }))
}

/// The adapter of one type: `subject!(Adapter(Type), start: |it| it.start(), ready: ready,
/// errors: same, events: yes)`.
macro_rules! subject {
    ($adapter:ident($ty:ty), start: |$it:ident| $start:expr, ready: $ready:ident, errors: $errors:ident, events: $events:ident) => {
        struct $adapter($ty);
        impl Subject for $adapter {
            fn start(&self) -> Outcome {
                let $it = &self.0;
                $start.map_err($errors)
            }
            fn ready(&self) -> Fut<'_, Outcome> {
                Box::pin(async move { self.0.$ready().await.map_err($errors) })
            }
            fn close(&self) -> Fut<'_, ()> {
                Box::pin(self.0.close())
            }
            fn stream_end(&self) -> Option<Fut<'static, ()>> {
                subject!(@events $events, self.0)
            }
        }
    };
    (@events yes, $it:expr) => { ends($it.events()) };
    (@events states, $it:expr) => { ends($it.states()) };
    (@events no, $it:expr) => { None };
}

subject!(Latch(LeaderLatch), start: |it| it.start(), ready: ready, errors: same, events: yes);
subject!(Selector(LeaderSelector), start: |it| it.start(), ready: ready, errors: same, events: yes);
subject!(Observer(LeaderObserver), start: |it| it.start(), ready: ready, errors: same, events: no);
subject!(Node(PersistentNode), start: |it| it.start(), ready: ready, errors: same, events: no);
subject!(TtlNode(PersistentTtlNode), start: |it| it.start(), ready: ready, errors: same, events: no);
subject!(Member(GroupMember), start: |it| it.start(), ready: ready, errors: same, events: yes);
subject!(Partitioner(SetPartitioner), start: |it| it.start(), ready: ready, errors: same, events: states);
subject!(Watcher(PersistentWatcher), start: |it| it.start(), ready: ready, errors: same, events: yes);
subject!(Value(SharedValue), start: |it| it.start(), ready: ready, errors: same, events: yes);
subject!(Count(SharedCount), start: |it| it.start(), ready: ready, errors: same, events: yes);
subject!(NodeC(NodeCache), start: |it| it.start(true), ready: wait_initialized, errors: same, events: yes);
subject!(Children(PathChildrenCache), start: |it| it.start(StartMode::BuildInitialCache), ready: wait_initialized, errors: same, events: yes);
subject!(Tree(TreeCache), start: |it| it.start(), ready: wait_initialized, errors: same, events: yes);
subject!(Cache(CuratorCache), start: |it| it.start(), ready: wait_initialized, errors: same, events: yes);
subject!(Discovery(ServiceDiscovery), start: |it| it.start(), ready: ready, errors: discovery_error, events: no);
subject!(SvcCache(ServiceCache), start: |it| it.start(), ready: ready, errors: discovery_error, events: yes);
// A provider made by `ServiceDiscovery::service_provider` owns its service cache: its start
// starts the cache, its close closes it.
subject!(Provider(ServiceProvider), start: |it| it.start(), ready: ready, errors: discovery_error, events: no);
subject!(Queue(DistributedQueue<String>), start: |it| it.start(), ready: ready, errors: same, events: yes);
subject!(IdQueue(DistributedIdQueue<String>), start: |it| it.start(), ready: ready, errors: same, events: yes);

/// Polls `check` every 20 ms until it is true, or `within` has passed.
async fn poll(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A type in the table.
struct Kind {
    name: &'static str,
    /// Makes the type on `fw`, working at or under `base`.
    make: fn(&CuratorFramework, &str) -> Made,
    /// The node to give a refusing ACL (its parents are made open): `base` for a writer (which
    /// works under it: read-only), the node it reads for a reader (no READ).
    refuse_at: fn(&str) -> String,
    /// Only reads: refused by an ACL without READ (writers: by a read-only ACL).
    reads_only: bool,
    /// Makes an ephemeral node once started.
    ephemeral: bool,
}

fn at_base(base: &str) -> String {
    base.to_string()
}
fn under(base: &str) -> String {
    format!("{base}/x")
}
fn service(base: &str) -> String {
    format!("{base}/svc")
}

fn queue_builder(fw: &CuratorFramework, path: &str) -> curator_recipes::QueueBuilder<String> {
    DistributedQueue::builder(fw, path, StringSerializer).consumer(|_item: String| async { Ok::<(), String>(()) })
}

fn instance() -> ServiceInstance {
    ServiceInstance::builder("svc").id("i1").port(8080).build()
}

fn boxed(subject: impl Subject + 'static) -> Made {
    Ok(Box::new(subject))
}

/// Every started type. Writers work under `base` (refused by a read-only `base`), readers at
/// the node they read (refused by an ACL without READ there).
const KINDS: &[Kind] = &[
    Kind {
        name: "LeaderLatch",
        make: |fw, base| boxed(Latch(LeaderLatch::new(fw, &under(base), "p")?)),
        refuse_at: at_base,
        reads_only: false,
        ephemeral: true,
    },
    Kind {
        name: "LeaderSelector",
        make: |fw, base| {
            // The leader keeps its term until it loses it (closed, say).
            let selector = LeaderSelector::builder(fw, &under(base), |leadership| async move {
                leadership.lost().await;
            })
            .build()?;
            boxed(Selector(selector))
        },
        refuse_at: at_base,
        reads_only: false,
        ephemeral: true,
    },
    Kind {
        name: "LeaderObserver",
        make: |fw, base| boxed(Observer(LeaderObserver::new(fw, base)?)),
        refuse_at: at_base,
        reads_only: true,
        ephemeral: false,
    },
    Kind {
        name: "PersistentNode",
        make: |fw, base| boxed(Node(PersistentNode::builder(fw, &under(base)).build()?)),
        refuse_at: at_base,
        reads_only: false,
        ephemeral: true,
    },
    Kind {
        name: "PersistentTtlNode",
        make: |fw, base| boxed(TtlNode(PersistentTtlNode::builder(fw, &under(base), Duration::from_secs(10)).build()?)),
        refuse_at: at_base,
        reads_only: false,
        ephemeral: false,
    },
    Kind {
        name: "GroupMember",
        make: |fw, base| boxed(Member(GroupMember::builder(fw, &under(base), "m").build()?)),
        refuse_at: at_base,
        reads_only: false,
        ephemeral: true,
    },
    Kind {
        name: "SetPartitioner",
        make: |fw, base| {
            let partitioner =
                SetPartitioner::builder(fw, &under(base), "m", ["a", "b"]).settle(Duration::from_millis(50)).build()?;
            boxed(Partitioner(partitioner))
        },
        refuse_at: at_base,
        reads_only: false,
        ephemeral: true,
    },
    Kind {
        name: "PersistentWatcher",
        make: |fw, base| boxed(Watcher(PersistentWatcher::new(fw, base, true)?)),
        refuse_at: at_base,
        reads_only: true,
        ephemeral: false,
    },
    Kind {
        name: "SharedValue",
        make: |fw, base| boxed(Value(SharedValue::new(fw, &under(base), b"v".to_vec())?)),
        refuse_at: at_base,
        reads_only: false,
        ephemeral: false,
    },
    Kind {
        name: "SharedCount",
        make: |fw, base| boxed(Count(SharedCount::new(fw, &under(base), 0)?)),
        refuse_at: at_base,
        reads_only: false,
        ephemeral: false,
    },
    Kind {
        name: "NodeCache",
        make: |fw, base| boxed(NodeC(NodeCache::new(fw, base)?)),
        refuse_at: at_base,
        reads_only: true,
        ephemeral: false,
    },
    Kind {
        name: "PathChildrenCache",
        make: |fw, base| boxed(Children(PathChildrenCache::new(fw, base, true)?)),
        refuse_at: at_base,
        reads_only: true,
        ephemeral: false,
    },
    Kind {
        name: "TreeCache",
        make: |fw, base| boxed(Tree(TreeCache::new(fw, base)?)),
        refuse_at: at_base,
        reads_only: true,
        ephemeral: false,
    },
    Kind {
        name: "CuratorCache",
        make: |fw, base| boxed(Cache(CuratorCache::build(fw, base, &[])?)),
        refuse_at: at_base,
        reads_only: true,
        ephemeral: false,
    },
    Kind {
        name: "ServiceDiscovery",
        make: |fw, base| {
            let discovery = ServiceDiscovery::builder(fw, base).this_instance(instance()).build();
            boxed(Discovery(discovery.map_err(discovery_error)?))
        },
        refuse_at: at_base,
        reads_only: false,
        ephemeral: true,
    },
    Kind {
        name: "ServiceCache",
        make: |fw, base| {
            let discovery = ServiceDiscovery::builder(fw, base).build().map_err(discovery_error)?;
            boxed(SvcCache(discovery.service_cache_builder("svc").build().map_err(discovery_error)?))
        },
        refuse_at: service,
        reads_only: true,
        ephemeral: false,
    },
    Kind {
        name: "ServiceProvider",
        make: |fw, base| {
            let discovery = ServiceDiscovery::builder(fw, base).build().map_err(discovery_error)?;
            let provider = discovery.service_provider("svc", ServiceProvider::builder()).map_err(discovery_error)?;
            boxed(Provider(provider))
        },
        refuse_at: service,
        reads_only: true,
        ephemeral: false,
    },
    Kind {
        name: "DistributedQueue",
        make: |fw, base| boxed(Queue(queue_builder(fw, &under(base)).build()?)),
        refuse_at: at_base,
        reads_only: false,
        ephemeral: false,
    },
    Kind {
        name: "DistributedIdQueue",
        make: |fw, base| boxed(IdQueue(queue_builder(fw, &under(base)).build_id_queue()?)),
        refuse_at: at_base,
        reads_only: false,
        ephemeral: false,
    },
];

/// Known exceptions: (type, scenario, why). A scenario skips these, and the test says so.
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    // ZooKeeper (3.8) checks no ACL on `addWatch`: a watch on a node without READ is accepted
    // (the watcher's `Reset { cause: Started }` arrives), so there is no refusal to report.
    ("PersistentWatcher", "start refused by an ACL", "the server accepts addWatch without READ: nothing is refused"),
];

fn exception(kind: &str, scenario: &str) -> Option<&'static str> {
    EXCEPTIONS.iter().find(|(k, s, _)| *k == kind && *s == scenario).map(|(_, _, why)| *why)
}

/// The ephemeral nodes at or under `root` (none when it cannot be read).
async fn ephemerals(fw: &CuratorFramework, root: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![root.to_string()];
    while let Some(path) = todo.pop() {
        if let Ok(Some(stat)) = fw.check_exists().for_path(&path).await {
            if stat.ephemeral_owner != 0 {
                found.push(path.clone());
            }
        }
        for child in tests::children(fw, &path).await {
            todo.push(if path == "/" { format!("/{child}") } else { format!("{path}/{child}") });
        }
    }
    found
}

/// Waits up to `within` for `root` to have ephemeral nodes (`want`) or none (`!want`).
async fn await_ephemerals(fw: &CuratorFramework, root: &str, want: bool, within: Duration) -> Vec<String> {
    let until = Instant::now() + within;
    loop {
        let found = ephemerals(fw, root).await;
        if found.is_empty() != want || Instant::now() >= until {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn connect() -> String {
    TestingServer::shared().connect_string()
}

/// Runs `scenario` for every kind (concurrently, each in a task of its own so that a panic is
/// one type's outcome), and fails listing every (type, scenario, what happened) that was not
/// as it should be. `scenario` gives `Err(what happened)`.
async fn run<F>(name: &'static str, scenario: fn(&'static Kind) -> F)
where
    F: Future<Output = Result<(), String>> + Send + 'static,
{
    init_tracing();
    let mut runs = Vec::new();
    for kind in KINDS {
        if let Some(why) = exception(kind.name, name) {
            eprintln!("{name}: {}: known exception: {why}", kind.name);
            continue;
        }
        runs.push((kind.name, tokio::spawn(tokio::time::timeout(Duration::from_secs(40), scenario(kind)))));
    }
    let mut failures = Vec::new();
    for (kind, run) in runs {
        let outcome = match run.await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(what))) => Err(what),
            Ok(Err(_)) => Err("the scenario did not end within 40 s".to_string()),
            Err(join) => Err(format!("panicked: {join}")),
        };
        match outcome {
            Ok(()) => eprintln!("{name}: {kind}: ok"),
            Err(what) => failures.push(format!("({kind}, {name}): {what}")),
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(BOUND, f).await.map_err(|_| format!("{what} did not return within {BOUND:?}"))
}

/// Start, then close at once: nothing it created or adopted is left (no ephemeral node under
/// its base), its event stream ends (the events it promises have all arrived), and it is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_then_close_at_once() {
    run("start then close", |kind| async move {
        let fw = client(&connect()).await;
        let base = unique_path("conform");
        let subject = (kind.make)(&fw, &base).map_err(|e| format!("make: {e:?}"))?;
        let ended = subject.stream_end();
        subject.start().map_err(|e| format!("start: {e:?}"))?;
        if kind.ephemeral {
            let made = await_ephemerals(&fw, &base, true, BOUND).await;
            if made.is_empty() {
                return Err("no ephemeral node was made".into());
            }
        }
        bounded("close", subject.close()).await?;
        let left = ephemerals(&fw, &base).await;
        if !left.is_empty() {
            return Err(format!("left after close: {left:?}"));
        }
        if let Some(ended) = ended {
            bounded("the end of the event stream", ended).await?;
        }
        if !subject.is_closed() {
            return Err("not closed after close".into());
        }
        drop(subject);
        fw.close().await;
        Ok(())
    })
    .await;
}

/// Close twice, started or never started: the second close does nothing and returns, and the
/// thing stays closed (a start is `AlreadyClosed`). Curator's `testClosingMultipleTimes`
/// (TestPersistentNode) does this for one recipe; every type here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_twice() {
    run("close twice", |kind| async move {
        let fw = client(&connect()).await;
        for started in [true, false] {
            let base = unique_path("conform");
            let subject = (kind.make)(&fw, &base).map_err(|e| format!("make: {e:?}"))?;
            if started {
                subject.start().map_err(|e| format!("start: {e:?}"))?;
            }
            bounded("first close", subject.close()).await?;
            bounded("second close", subject.close()).await?;
            if !subject.is_closed() {
                return Err(format!("not closed after two closes (started: {started})"));
            }
        }
        fw.close().await;
        Ok(())
    })
    .await;
}

/// Start twice: `AlreadyStarted`, and the first start's thing goes on: its first outcome is
/// `Ok` (closed cleanly after).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_twice() {
    run("start twice", |kind| async move {
        let fw = client(&connect()).await;
        let base = unique_path("conform");
        let subject = (kind.make)(&fw, &base).map_err(|e| format!("make: {e:?}"))?;
        subject.start().map_err(|e| format!("start: {e:?}"))?;
        let outcome = match subject.start() {
            Err(CuratorError::AlreadyStarted { .. }) => match bounded("ready", subject.ready()).await? {
                Ok(()) => Ok(()),
                Err(e) => Err(format!("ready gave {e:?}")),
            },
            other => Err(format!("second start gave {other:?}, not AlreadyStarted")),
        };
        bounded("close", subject.close()).await?;
        fw.close().await;
        outcome
    })
    .await;
}

/// Start on a closed framework: `Closed` (or `Closed` from the constructor), except for
/// PersistentWatcher, documented to start and deliver its final `Closed` event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_on_a_closed_framework() {
    run("start on a closed framework", |kind| async move {
        let fw = client(&connect()).await;
        fw.close().await;
        let base = unique_path("conform");
        let subject = match (kind.make)(&fw, &base) {
            Ok(subject) => subject,
            Err(CuratorError::Closed) => return Ok(()),
            Err(e) => return Err(format!("make: {e:?}")),
        };
        let ended = subject.stream_end();
        let outcome = match (kind.name, subject.start()) {
            ("PersistentWatcher", Ok(())) => match ended {
                Some(ended) => bounded("the final event and the end of the stream", ended).await,
                None => Ok(()),
            },
            (_, Err(CuratorError::Closed)) => Ok(()),
            (_, other) => Err(format!("start gave {other:?}, not Closed")),
        };
        bounded("close", subject.close()).await?;
        outcome
    })
    .await;
}

/// Start outside a runtime (a plain thread): `NoRuntime`, no panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_outside_a_runtime() {
    run("start outside a runtime", |kind| async move {
        let fw = client(&connect()).await;
        let base = unique_path("conform");
        let subject: Arc<dyn Subject> = Arc::from((kind.make)(&fw, &base).map_err(|e| format!("make: {e:?}"))?);
        let plain = subject.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plain.start()));
            let _ = tx.send(started.map_err(|_| ()));
        });
        let started =
            bounded("start on a plain thread", rx).await?.map_err(|_| "the start's thread died".to_string())?;
        let outcome = match started {
            Ok(Err(CuratorError::NoRuntime { .. })) => Ok(()),
            Ok(other) => Err(format!("start gave {other:?}, not NoRuntime")),
            Err(()) => Err("start panicked".to_string()),
        };
        bounded("close", subject.close()).await?;
        fw.close().await;
        outcome
    })
    .await;
}

/// Start with an ACL that refuses the client (a read-only base for a writer, as
/// tests/tests/leader_latch.rs `a_refused_first_join_is_reported_by_ready`; no READ for a
/// reader): `start` returns `Ok` (it only spawns), and within 1 s `ready` returns the typed,
/// permanent error and the thing is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_refused_by_an_acl() {
    run("start refused by an ACL", |kind| async move {
        let fw = client(&connect()).await;
        let base = unique_path("conform");
        let refused = (kind.refuse_at)(&base);
        let permission = if kind.reads_only {
            Permission::WRITE | Permission::CREATE | Permission::DELETE | Permission::ADMIN
        } else {
            Permission::READ
        };
        if refused != base {
            fw.create().for_path(&base, Vec::new()).await.map_err(|e| format!("create {base}: {e:?}"))?;
        }
        fw.create()
            .with_acl(vec![Acl::new(permission, AuthId::anyone())])
            .for_path(&refused, Vec::new())
            .await
            .map_err(|e| format!("create {refused}: {e:?}"))?;
        let subject = (kind.make)(&fw, &base).map_err(|e| format!("make: {e:?}"))?;
        // How soon a refused start must be reported (issue 27): at once, without waiting for a
        // connection or retrying, so within the framework's connection timeout.
        let refusal = tests::at_once(&fw);
        let began = Instant::now();
        subject.start().map_err(|e| format!("start: {e:?}"))?;
        let reported = tokio::time::timeout(refusal, subject.ready()).await;
        let took = began.elapsed();
        let outcome = match reported {
            Ok(Err(err)) if err.is_permanent() => {
                if poll(refusal.saturating_sub(took), || subject.is_closed()).await {
                    Ok(())
                } else {
                    Err(format!("ready gave {err:?} after {took:?}, but it is not closed within {refusal:?}"))
                }
            }
            Ok(Err(err)) => Err(format!("ready gave {err:?}, not a refusal")),
            Ok(Ok(())) => Err("ready gave Ok".into()),
            Err(_) => Err(format!("ready did not report the refusal within {refusal:?}")),
        };
        bounded("close", subject.close()).await?;
        fw.close().await;
        outcome
    })
    .await;
}

/// Drop without close: its ephemeral nodes go (polled with a deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_without_close() {
    run("drop without close", |kind| async move {
        let fw = client(&connect()).await;
        let base = unique_path("conform");
        let subject = (kind.make)(&fw, &base).map_err(|e| format!("make: {e:?}"))?;
        subject.start().map_err(|e| format!("start: {e:?}"))?;
        if kind.ephemeral && await_ephemerals(&fw, &base, true, BOUND).await.is_empty() {
            return Err("no ephemeral node was made".into());
        }
        drop(subject);
        let left = await_ephemerals(&fw, &base, false, BOUND).await;
        fw.close().await;
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("still there {BOUND:?} after the drop: {left:?}"))
        }
    })
    .await;
}

/// The framework closed while the type is started: closing the type afterwards neither hangs
/// nor panics, and it is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framework_closed_while_started() {
    run("framework closed while started", |kind| async move {
        let fw = client(&connect()).await;
        let base = unique_path("conform");
        let subject = (kind.make)(&fw, &base).map_err(|e| format!("make: {e:?}"))?;
        subject.start().map_err(|e| format!("start: {e:?}"))?;
        bounded("the framework's close", fw.close()).await?;
        bounded("close", subject.close()).await?;
        bounded("second close", subject.close()).await?;
        if !subject.is_closed() {
            return Err("not closed after close".into());
        }
        Ok(())
    })
    .await;
}
