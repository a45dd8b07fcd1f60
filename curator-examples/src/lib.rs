//! Shared pieces of the demo and the examples: where ZooKeeper is, and logging.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let zk = curator_examples::Zookeeper::from_env(None).await?;
//! println!("using {}", zk.connect_string());
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

use curator_test::TestingServer;

/// The ZooKeeper an example talks to: one named by `--connect` or `ZK_CONNECT`, or one started
/// here (and stopped when this is dropped).
#[derive(Debug)]
pub struct Zookeeper {
    connect_string: String,
    embedded: Option<TestingServer>,
}

impl Zookeeper {
    /// Uses `connect` if given, else `ZK_CONNECT`, else starts an embedded server.
    pub async fn from_env(connect: Option<String>) -> Result<Zookeeper, curator_test::TestingError> {
        let named = connect.or_else(|| std::env::var("ZK_CONNECT").ok()).filter(|s| !s.trim().is_empty());
        match named {
            Some(connect_string) => Ok(Zookeeper { connect_string, embedded: None }),
            None => {
                let server = TestingServer::start().await?;
                Ok(Zookeeper { connect_string: server.connect_string(), embedded: Some(server) })
            }
        }
    }

    /// The connect string.
    pub fn connect_string(&self) -> &str {
        &self.connect_string
    }

    /// A started framework on this ZooKeeper, connected (or an error after 10 s).
    pub async fn connect(&self) -> curator_core::Result<curator_core::CuratorFramework> {
        let client = curator_core::CuratorFramework::builder().connect_string(&self.connect_string).build()?;
        client.start()?;
        client.block_until_connected(std::time::Duration::from_secs(10)).await?;
        Ok(client)
    }

    /// True when the server was started here.
    pub fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// Stops an embedded server (a no-op for a named one).
    pub async fn stop(mut self) {
        if let Some(mut server) = self.embedded.take() {
            let _ = server.stop().await;
        }
    }
}

/// Logs to stderr at `info` (or `RUST_LOG`), compactly.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,zookeeper_client=warn,curator_core=warn".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).compact().try_init();
}

/// The value after `--connect` on the command line, if any.
pub fn connect_arg() -> Option<String> {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--connect" {
            return args.next();
        }
        if let Some(v) = a.strip_prefix("--connect=") {
            return Some(v.to_string());
        }
    }
    None
}
