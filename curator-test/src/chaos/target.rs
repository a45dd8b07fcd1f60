//! What an [`Injector`](super::Injector) acts on: [`Target`]s (clients behind proxies) and an
//! [`Ensemble`] (the servers).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Mutex;
use zookeeper_client::{Client, SessionInfo};

use crate::{ChaosProxy, TestingCluster, TestingServer};

/// How a [`Target`] finds its client's current session (which changes when the client makes a
/// new one after an expiry). `None` when there is none right now.
pub type SessionSource = dyn Fn() -> Option<SessionInfo> + Send + Sync;

/// One client under test: the [`ChaosProxy`] it connects through, a way to find its current
/// session (for [`Fault::Expire`](super::Fault::Expire)), and a "holding" flag.
///
/// The flag is how a scenario says "this client holds the lock now": while it is set, an
/// injector may aim a partition longer than the session timeout at this client (see
/// [`InjectorBuilder::long_partition_chance`](super::InjectorBuilder::long_partition_chance)),
/// the fault a lock most needs to survive. Clones share the flag, so keep a clone to set it.
///
/// ```no_run
/// # async fn f(server: &curator_test::TestingServer) -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use curator_test::{chaos::Target, ChaosProxy};
/// let proxy = Arc::new(ChaosProxy::start(&server.connect_string()).await?);
/// let client = zookeeper_client::Client::connect(&proxy.connect_string()).await?;
/// let target = Target::for_client(proxy, &client);
/// target.set_holding(true); // granted
/// target.set_holding(false); // released
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Target {
    proxy: Arc<ChaosProxy>,
    session: Arc<SessionSource>,
    holding: Arc<AtomicBool>,
}

impl Target {
    /// A target connecting through `proxy`, whose current session `session` returns.
    pub fn new(proxy: Arc<ChaosProxy>, session: impl Fn() -> Option<SessionInfo> + Send + Sync + 'static) -> Target {
        Target { proxy, session: Arc::new(session), holding: Arc::new(AtomicBool::new(false)) }
    }

    /// A target for one `zookeeper_client` client (a clone of it is kept, which keeps the
    /// client alive as long as the target). Its session is the client's, even after it
    /// expired: expiring it again is then counted as skipped.
    pub fn for_client(proxy: Arc<ChaosProxy>, client: &Client) -> Target {
        let client = client.clone();
        Target::new(proxy, move || Some(client.session().clone()))
    }

    /// The proxy the client connects through.
    pub fn proxy(&self) -> &Arc<ChaosProxy> {
        &self.proxy
    }

    /// The client's current session, if it has one.
    pub fn session(&self) -> Option<SessionInfo> {
        (self.session)()
    }

    /// Says whether the client holds (a lock, a lease...) right now.
    pub fn set_holding(&self, holding: bool) {
        self.holding.store(holding, Ordering::SeqCst);
    }

    /// What [`set_holding`](Self::set_holding) said last (false at first).
    pub fn is_holding(&self) -> bool {
        self.holding.load(Ordering::SeqCst)
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("proxy", &self.proxy.connect_string())
            .field("upstream", &self.proxy.upstream())
            .field("holding", &self.is_holding())
            .finish_non_exhaustive()
    }
}

/// The servers an [`Injector`](super::Injector) may pause, restart or kill. They are shared
/// behind a tokio mutex so that a test can still use them; the injector holds the lock while
/// it changes them (for a [`Fault::LeaderKill`](super::Fault::LeaderKill), through the whole
/// election and restart).
#[derive(Clone, Debug)]
pub enum Ensemble {
    /// One standalone server.
    Server(Arc<Mutex<TestingServer>>),
    /// An ensemble.
    Cluster(Arc<Mutex<TestingCluster>>),
}

impl Ensemble {
    /// The connect string of every server.
    pub async fn connect_string(&self) -> String {
        match self {
            Ensemble::Server(s) => s.lock().await.connect_string(),
            Ensemble::Cluster(c) => c.lock().await.connect_string(),
        }
    }

    /// The number of servers (1 for a standalone server).
    pub async fn members(&self) -> usize {
        match self {
            Ensemble::Server(_) => 1,
            Ensemble::Cluster(c) => c.lock().await.len(),
        }
    }
}
