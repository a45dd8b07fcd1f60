//! One ZooKeeper server process with its own config, data dir and log: the part that
//! [`crate::TestingServer`] and each member of a [`crate::TestingCluster`] share.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::TestingError;
use crate::four::four_letter_word_within;
use crate::process::{self, JavaProcess};

/// How long a server may take to answer `srvr` with a `Mode:` line.
pub(crate) const START_DEADLINE: Duration = Duration::from_secs(30);
/// How long a graceful stop waits before SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);
/// Lines of log quoted in errors.
const LOG_TAIL_LINES: usize = 40;
/// How long one readiness probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Server settings that end up in `zoo.cfg` (or, for those ZooKeeper reads only as Java system
/// properties, on the java command line).
#[derive(Clone, Debug)]
pub(crate) struct ServerSettings {
    pub(crate) tick_time: Duration,
    pub(crate) force_sync: bool,
    pub(crate) min_session_timeout: Option<Duration>,
    pub(crate) max_session_timeout: Option<Duration>,
    /// `znode.container.checkIntervalMs`: how often the server reaps empty containers (60 s
    /// by default).
    pub(crate) container_check_interval: Option<Duration>,
    /// More `zoo.cfg` lines (TLS, SASL).
    pub(crate) extra_cfg: Vec<String>,
    /// More `-D` options for the java command line (the JAAS file).
    pub(crate) extra_properties: Vec<String>,
    /// Dynamic reconfiguration (`reconfigEnabled`, no standalone, ACLs skipped so that any
    /// client may reconfigure; see `reconfig.rs`).
    pub(crate) reconfig: bool,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            tick_time: Duration::from_millis(500),
            force_sync: false,
            min_session_timeout: None,
            max_session_timeout: None,
            container_check_interval: None,
            extra_cfg: Vec::new(),
            extra_properties: Vec::new(),
            reconfig: false,
        }
    }
}

/// One member of an ensemble, as written into every member's `server.N=` lines.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peer {
    pub(crate) id: u32,
    pub(crate) peer_port: u16,
    pub(crate) election_port: u16,
    /// Written into the `server.N` line when reconfiguration is enabled.
    pub(crate) client_port: u16,
}

impl Peer {
    /// `N=...` of its `server.N` line: with reconfiguration, its role and client address too.
    pub(crate) fn line(&self, reconfig: bool) -> String {
        let Peer { id, peer_port, election_port, client_port } = self;
        if reconfig {
            format!("{id}=127.0.0.1:{peer_port}:{election_port}:participant;127.0.0.1:{client_port}")
        } else {
            format!("{id}=127.0.0.1:{peer_port}:{election_port}")
        }
    }
}

/// A server's files and (when running) its process.
#[derive(Debug)]
pub(crate) struct Node {
    port: u16,
    /// The temporary directory holding this node (and its peers, in an ensemble).
    base: PathBuf,
    dir: PathBuf,
    data_dir: PathBuf,
    cfg_path: PathBuf,
    log_path: PathBuf,
    /// Length of the log when the current process was spawned.
    log_offset: u64,
    /// `-D` options for the java command line.
    system_properties: Vec<String>,
    process: Option<JavaProcess>,
}

fn millis(d: Duration) -> u128 {
    d.as_millis().max(1)
}

/// The client port's listen backlog. ZooKeeper's default (50) overflows when many clients
/// connect at once (a benchmark connects 64 sessions at a time): the kernel drops the SYNs,
/// and each such connect waits out the 1 s SYN retransmission. The kernel caps it at
/// `net.core.somaxconn`.
const LISTEN_BACKLOG: u32 = 1024;

impl Node {
    /// Creates `base/name/{data, zoo.cfg}` (and `myid` for ensemble members). Does not start.
    pub(crate) fn create(
        base: &Path,
        name: &str,
        port: u16,
        settings: &ServerSettings,
        ensemble: Option<(u32, &[Peer])>,
    ) -> Result<Node, TestingError> {
        let dir = base.join(name);
        let data_dir = dir.join("data");
        std::fs::create_dir_all(&data_dir)
            .map_err(|e| TestingError::io(format!("create {}", data_dir.display()), e))?;
        let tick = millis(settings.tick_time);
        let mut cfg = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(cfg, "tickTime={tick}");
        let _ = writeln!(cfg, "initLimit=10");
        let _ = writeln!(cfg, "syncLimit=5");
        let _ = writeln!(cfg, "dataDir={}", data_dir.display());
        if settings.reconfig {
            // The client address is in each `server.N` line (the dynamic configuration).
            let _ = writeln!(cfg, "reconfigEnabled=true");
            let _ = writeln!(cfg, "standaloneEnabled=false");
        } else {
            let _ = writeln!(cfg, "clientPort={port}");
            let _ = writeln!(cfg, "clientPortAddress=127.0.0.1");
        }
        let _ = writeln!(cfg, "maxClientCnxns=0");
        let _ = writeln!(cfg, "clientPortListenBacklog={LISTEN_BACKLOG}");
        let _ = writeln!(cfg, "admin.enableServer=false");
        let _ = writeln!(cfg, "4lw.commands.whitelist=*");
        let _ = writeln!(cfg, "extendedTypesEnabled=true");
        let _ = writeln!(cfg, "forceSync={}", if settings.force_sync { "yes" } else { "no" });
        if let Some(min) = settings.min_session_timeout {
            let _ = writeln!(cfg, "minSessionTimeout={}", millis(min));
        }
        if let Some(max) = settings.max_session_timeout {
            let _ = writeln!(cfg, "maxSessionTimeout={}", millis(max));
        }
        for line in &settings.extra_cfg {
            let _ = writeln!(cfg, "{line}");
        }
        if let Some((id, peers)) = ensemble {
            std::fs::write(data_dir.join("myid"), format!("{id}\n"))
                .map_err(|e| TestingError::io(format!("write myid in {}", data_dir.display()), e))?;
            for p in peers {
                let _ = writeln!(cfg, "server.{}", p.line(settings.reconfig));
            }
        }
        let cfg_path = dir.join("zoo.cfg");
        std::fs::write(&cfg_path, cfg).map_err(|e| TestingError::io(format!("write {}", cfg_path.display()), e))?;
        let log_path = dir.join("zookeeper.log");
        let mut system_properties: Vec<String> = settings
            .container_check_interval
            .map(|every| format!("-Dznode.container.checkIntervalMs={}", millis(every)))
            .into_iter()
            .chain(settings.extra_properties.iter().cloned())
            .collect();
        if settings.reconfig {
            system_properties.push("-Dzookeeper.skipACL=yes".into());
        }
        Ok(Node {
            port,
            base: base.to_path_buf(),
            dir,
            data_dir,
            cfg_path,
            log_path,
            log_offset: 0,
            system_properties,
            process: None,
        })
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub(crate) fn is_spawned(&self) -> bool {
        self.process.is_some()
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(JavaProcess::pid)
    }

    /// Starts the process (without waiting for it to serve).
    pub(crate) fn spawn(&mut self, classpath: &str) -> Result<(), TestingError> {
        if self.process.is_some() {
            return Ok(());
        }
        self.log_offset = process::file_len(&self.log_path);
        self.process = Some(JavaProcess::spawn(
            &self.cfg_path,
            &self.dir,
            &self.log_path,
            classpath,
            &self.base,
            &self.system_properties,
        )?);
        Ok(())
    }

    /// Whether the latest start failed because a port was taken.
    pub(crate) fn clashed(&self) -> bool {
        process::log_says_port_clash(&self.log_path, self.log_offset)
    }

    fn log_tail(&self) -> String {
        process::log_tail(&self.log_path, LOG_TAIL_LINES)
    }

    /// Whether this server answers `srvr` with a `Mode:` line, and `conf` shows our data dir
    /// (so that it is our process answering, not some other server that took the port).
    pub(crate) async fn serving(&self) -> bool {
        match four_letter_word_within(&self.addr(), "srvr", PROBE_TIMEOUT).await {
            Ok(srvr) if srvr.lines().any(|l| l.starts_with("Mode: ")) => {}
            _ => return false,
        }
        let data = self.data_dir.to_string_lossy();
        matches!(four_letter_word_within(&self.addr(), "conf", PROBE_TIMEOUT).await,
                 Ok(conf) if conf.contains(data.as_ref()))
    }

    /// The `Mode:` of `srvr` (`standalone`, `leader`, `follower`...), if it answers.
    pub(crate) async fn mode(&self) -> Option<String> {
        let srvr = four_letter_word_within(&self.addr(), "srvr", PROBE_TIMEOUT).await.ok()?;
        srvr.lines().find_map(|l| l.strip_prefix("Mode: ")).map(|m| m.trim().to_string())
    }

    /// Waits until the process serves. On failure the process is killed and the error quotes
    /// the log.
    pub(crate) async fn wait_ready(&mut self, deadline: Duration) -> Result<(), TestingError> {
        let end = Instant::now() + deadline;
        let mut pause = Duration::from_millis(20);
        loop {
            let Some(process) = self.process.as_mut() else {
                return Err(TestingError::NotRunning { addr: self.addr() });
            };
            if let Some(status) = process.exited()? {
                self.process = None;
                return Err(TestingError::Exited {
                    addr: self.addr(),
                    status: status.to_string(),
                    log: self.log_path.display().to_string(),
                    log_tail: self.log_tail(),
                });
            }
            if self.serving().await {
                tracing::debug!(addr = %self.addr(), "ZooKeeper is serving");
                return Ok(());
            }
            let now = Instant::now();
            if now >= end {
                self.kill().await?;
                return Err(TestingError::StartTimeout {
                    addr: self.addr(),
                    waited: deadline,
                    log: self.log_path.display().to_string(),
                    log_tail: self.log_tail(),
                });
            }
            tokio::time::sleep(pause.min(end - now)).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// SIGKILL and wait until gone. No-op when not running.
    pub(crate) async fn kill(&mut self) -> Result<(), TestingError> {
        if let Some(mut p) = self.process.take() {
            if let Err(e) = p.kill().await {
                self.process = Some(p);
                return Err(e);
            }
        }
        Ok(())
    }

    /// SIGTERM, wait, SIGKILL after a grace period. No-op when not running.
    pub(crate) async fn stop(&mut self) -> Result<(), TestingError> {
        if let Some(mut p) = self.process.take() {
            if let Err(e) = p.terminate(STOP_GRACE).await {
                self.process = Some(p);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Sends a signal to the running process.
    pub(crate) fn signal(&self, sig: libc::c_int) -> Result<(), TestingError> {
        match &self.process {
            Some(p) => p.signal(sig),
            None => Err(TestingError::NotRunning { addr: self.addr() }),
        }
    }

    /// Freezes the process and waits until all its threads are stopped (see `JavaProcess::freeze`).
    pub(crate) fn freeze(&self) -> Result<(), TestingError> {
        match &self.process {
            Some(p) => p.freeze(),
            None => Err(TestingError::NotRunning { addr: self.addr() }),
        }
    }

    /// Starts the process again (same port, same data) and waits until it serves; retries while
    /// the port is still taken.
    pub(crate) async fn start_again(&mut self, classpath: &str, deadline: Duration) -> Result<(), TestingError> {
        let end = Instant::now() + deadline;
        loop {
            self.spawn(classpath)?;
            let left = end.saturating_duration_since(Instant::now());
            match self.wait_ready(left).await {
                Ok(()) => return Ok(()),
                Err(e) if self.clashed() && Instant::now() + Duration::from_millis(500) < end => {
                    tracing::info!(addr = %self.addr(), "port still taken, retrying: {e}");
                    self.kill().await?;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}
