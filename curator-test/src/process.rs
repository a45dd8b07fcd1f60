//! Java child processes that never outlive the test binary.
//!
//! Three layers make sure of that:
//! 1. [`JavaProcess`]'s `Drop` sends SIGKILL and reaps the process.
//! 2. A libc `atexit` hook kills every live child when the binary exits normally (statics such as
//!    [`crate::TestingServer::shared`] are never dropped).
//! 3. If the binary dies abruptly (SIGKILL, abort), a watchdog kills java within about a second:
//!    java is started as `sh -c '(watchdog) & exec java ...'`, so java keeps the shell's pid (our
//!    child, the pid we signal) while a background watchdog shell polls our pid and kills java once we
//!    are gone. `PR_SET_PDEATHSIG` is not used: it fires when the spawning *thread* exits.

use std::collections::HashSet;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, Once, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::TestingError;

/// Environment variable that replaces the default classpath.
pub const CLASSPATH_ENV: &str = "ZOOKEEPER_CLASSPATH";

/// Environment variable naming the test run: every server started here carries
/// `-Dcurator.test.run=<its value>` (`none` when unset) on its java command line, so that a
/// check for leftover servers (`scripts/test`) can look at the servers its own run started and
/// at nothing else, such as a ZooKeeper the tests did not start.
pub const RUN_ENV: &str = "CURATOR_TEST_RUN";

const JAVA_DIR: &str = "/usr/share/java";
/// The jars of Debian's `zookeeper` package that a server needs (as in `bench/zk.sh`, with
/// slf4j-simple instead of slf4j-nop so that the server's log is kept for error reports).
const DEFAULT_JARS: &[&str] = &[
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "metrics-core.jar",
    "snappy-java.jar",
    "commons-io.jar",
    "commons-cli.jar",
    "netty-handler.jar",
    "netty-transport.jar",
    "netty-common.jar",
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
];

/// The shell wrapper. `$1` is our pid, `$2` a directory to delete after an abrupt death (may be
/// empty), the rest is the java command line. A background watchdog checks every second whether
/// java (`$$`, which `exec` hands to java) still lives and whether we do; when we are gone it
/// kills java and deletes the directory (nobody else will). The watchdog is its own `sh -c` so
/// that its command line does not mention `QuorumPeerMain` (`pgrep -f QuorumPeerMain` finds
/// only servers).
const WRAPPER: &str = r#"p="$1"; d="$2"; shift 2
sh -c 'me="$1"; p="$2"; d="$3"
while kill -0 "$me" 2>/dev/null; do
  if ! kill -0 "$p" 2>/dev/null; then
    kill -9 "$me" 2>/dev/null
    if [ -n "$d" ] && [ -d "$d" ]; then rm -rf "$d"; fi
    exit 0
  fi
  sleep 1
done' curator-test-watchdog "$$" "$p" "$d" </dev/null >/dev/null 2>&1 &
exec "$@""#;

/// The classpath to run ZooKeeper with, or [`TestingError::NotInstalled`].
pub(crate) fn classpath() -> Result<String, TestingError> {
    match std::env::var(CLASSPATH_ENV) {
        Ok(cp) if !cp.trim().is_empty() => {
            let any_exists = cp.split(':').filter(|e| !e.is_empty()).any(|entry| {
                let entry = entry.strip_suffix("/*").unwrap_or(entry);
                Path::new(entry).exists()
            });
            if any_exists {
                Ok(cp)
            } else {
                tracing::warn!(classpath = %cp, "{CLASSPATH_ENV} names nothing that exists");
                Err(TestingError::NotInstalled)
            }
        }
        _ => {
            let main = Path::new(JAVA_DIR).join("zookeeper.jar");
            if !main.exists() {
                return Err(TestingError::NotInstalled);
            }
            let jars: Vec<String> =
                DEFAULT_JARS.iter().map(|j| format!("{JAVA_DIR}/{j}")).filter(|j| Path::new(j).exists()).collect();
            Ok(jars.join(":"))
        }
    }
}

/// `$JAVA_HOME/bin/java`, else `java` from `PATH`, else [`TestingError::NotInstalled`].
fn java_binary() -> Result<PathBuf, TestingError> {
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let java = Path::new(&home).join("bin/java");
        if java.exists() {
            return Ok(java);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("java"))
        .find(|java| java.is_file())
        .ok_or(TestingError::NotInstalled)
}

// ---------------------------------------------------------------------------------------------
// Registry of live children, for the atexit hook.

static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static CLEANUP_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static ATEXIT: Once = Once::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn install_atexit() {
    ATEXIT.call_once(|| {
        // SAFETY: `atexit` only records a function pointer; `kill_all_at_exit` is an
        // `extern "C" fn()` that never unwinds.
        let rc = unsafe { libc::atexit(kill_all_at_exit) };
        if rc != 0 {
            tracing::warn!("atexit registration failed; relying on Drop and the watchdog");
        }
    });
}

extern "C" fn kill_all_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        // Another thread may hold the lock while the process exits: do not block on it.
        let pids: Vec<u32> = match LIVE.try_lock() {
            Ok(g) => g.clone(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().clone(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        for &pid in &pids {
            // SAFETY: plain syscalls on pids that are our own unreaped children.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
        let end = std::time::Instant::now() + Duration::from_secs(3);
        for &pid in &pids {
            loop {
                let mut status = 0;
                // SAFETY: as above.
                let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
                if r != 0 || std::time::Instant::now() >= end {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let dirs: Vec<PathBuf> = match CLEANUP_DIRS.try_lock() {
            Ok(g) => g.clone(),
            Err(_) => Vec::new(),
        };
        for d in dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    });
}

/// Removes `dir` when the binary exits (for temp dirs owned by statics, which never drop).
pub(crate) fn remove_at_exit(dir: PathBuf) {
    install_atexit();
    lock(&CLEANUP_DIRS).push(dir);
}

// ---------------------------------------------------------------------------------------------
// Ports.

static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A free 127.0.0.1 port, never the same twice in this process.
pub(crate) fn free_port() -> Result<u16, TestingError> {
    for _ in 0..100 {
        let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(|e| TestingError::io("bind 127.0.0.1:0", e))?;
        let port = listener.local_addr().map_err(|e| TestingError::io("local_addr of 127.0.0.1:0", e))?.port();
        let mut handed = lock(&HANDED_OUT);
        if handed.get_or_insert_with(HashSet::new).insert(port) {
            return Ok(port);
        }
    }
    Err(TestingError::Internal("could not find a fresh free port in 100 tries".into()))
}

// ---------------------------------------------------------------------------------------------
// The process.

/// A running `QuorumPeerMain`.
#[derive(Debug)]
pub(crate) struct JavaProcess {
    child: Child,
    pid: u32,
    reaped: Option<ExitStatus>,
}

impl JavaProcess {
    /// Starts `java ... QuorumPeerMain cfg` with output to `log`. If the test binary dies
    /// abruptly, the watchdog deletes `orphan_dir` after killing java.
    pub(crate) fn spawn(
        cfg: &Path,
        log_dir: &Path,
        log: &Path,
        classpath: &str,
        orphan_dir: &Path,
        system_properties: &[String],
    ) -> Result<JavaProcess, TestingError> {
        install_atexit();
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| TestingError::io(format!("open {}", log.display()), e))?;
        let err = out.try_clone().map_err(|e| TestingError::io("dup log file", e))?;
        let java = java_binary()?;
        let run = std::env::var(RUN_ENV).ok().filter(|run| !run.is_empty()).unwrap_or_else(|| "none".into());
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(WRAPPER)
            .arg("sh")
            .arg(std::process::id().to_string())
            .arg(orphan_dir)
            .arg(&java)
            .arg("-Xmx256m")
            .arg("-XX:+UseSerialGC")
            .arg("-XX:TieredStopAtLevel=1")
            .arg("-Djava.net.preferIPv4Stack=true")
            .arg(format!("-Dzookeeper.log.dir={}", log_dir.display()))
            .arg("-Dzookeeper.admin.enableServer=false")
            .arg("-Dzookeeper.extendedTypesEnabled=true")
            .arg("-Dzookeeper.4lw.commands.whitelist=*")
            .arg("-Dzookeeper.jmx.log4j.disable=true")
            .arg(format!("-Dcurator.test.run={run}"))
            .args(system_properties)
            .arg("-cp")
            .arg(classpath)
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(cfg)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // Hold the registry lock across spawn so that the atexit hook never misses a child.
        let mut live = lock(&LIVE);
        let child = cmd.spawn().map_err(|e| TestingError::io("spawn sh (for java)", e))?;
        let pid = child.id();
        live.push(pid);
        drop(live);
        tracing::debug!(pid, cfg = %cfg.display(), "started ZooKeeper");
        Ok(JavaProcess { child, pid, reaped: None })
    }

    /// The pid of java.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// `Some(status)` once the process has exited (and is reaped).
    pub(crate) fn exited(&mut self) -> Result<Option<ExitStatus>, TestingError> {
        if let Some(status) = self.reaped {
            return Ok(Some(status));
        }
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.mark_reaped(status);
                Ok(Some(status))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(TestingError::io(format!("waitpid {}", self.pid), e)),
        }
    }

    fn mark_reaped(&mut self, status: ExitStatus) {
        self.reaped = Some(status);
        lock(&LIVE).retain(|&p| p != self.pid);
    }

    /// Sends `sig` unless the process is already reaped.
    pub(crate) fn signal(&self, sig: libc::c_int) -> Result<(), TestingError> {
        if self.reaped.is_some() {
            return Ok(());
        }
        // SAFETY: a plain syscall; the pid is our unreaped child so it cannot have been reused.
        let rc = unsafe { libc::kill(self.pid as libc::pid_t, sig) };
        if rc == 0 {
            Ok(())
        } else {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ESRCH) {
                Ok(())
            } else {
                Err(TestingError::io(format!("kill({}, {sig})", self.pid), e))
            }
        }
    }

    /// Freezes the process (SIGSTOP) and returns once every one of its threads is stopped.
    ///
    /// `kill` only queues the signal: a JVM thread already on another core can still answer a
    /// request for a moment. A caller that then checks "a paused server answers nothing" (or a
    /// chaos fault that must be silent from its first instant) needs the stop to have happened, so
    /// this polls `/proc/PID/task/*/stat` until each thread's state is `T`, for up to
    /// [`STOP_DEADLINE`].
    pub(crate) fn freeze(&self) -> Result<(), TestingError> {
        self.signal(libc::SIGSTOP)?;
        if self.reaped.is_some() {
            return Ok(());
        }
        let end = std::time::Instant::now() + STOP_DEADLINE;
        loop {
            match all_threads_stopped(self.pid) {
                Ok(true) => return Ok(()),
                // The process is gone (killed meanwhile): nothing is left to answer.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(TestingError::io(format!("/proc/{}/task", self.pid), e)),
                Ok(false) if std::time::Instant::now() >= end => {
                    return Err(TestingError::io(
                        format!("SIGSTOP {}", self.pid),
                        std::io::Error::new(std::io::ErrorKind::TimedOut, "threads still running after SIGSTOP"),
                    ))
                }
                Ok(false) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// Waits up to `deadline` for the process to exit.
    pub(crate) async fn wait_exit(&mut self, deadline: Duration) -> Result<Option<ExitStatus>, TestingError> {
        let end = Instant::now() + deadline;
        let mut pause = Duration::from_millis(2);
        loop {
            if let Some(status) = self.exited()? {
                return Ok(Some(status));
            }
            let now = Instant::now();
            if now >= end {
                return Ok(None);
            }
            tokio::time::sleep(pause.min(end - now)).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// SIGKILL, then wait until it is gone.
    pub(crate) async fn kill(&mut self) -> Result<ExitStatus, TestingError> {
        self.signal(libc::SIGKILL)?;
        match self.wait_exit(Duration::from_secs(10)).await? {
            Some(status) => Ok(status),
            None => Err(TestingError::timeout(
                format!("process {} to die after SIGKILL", self.pid),
                Duration::from_secs(10),
            )),
        }
    }

    /// SIGTERM (and SIGCONT, in case it is paused); SIGKILL after `grace`.
    pub(crate) async fn terminate(&mut self, grace: Duration) -> Result<ExitStatus, TestingError> {
        self.signal(libc::SIGTERM)?;
        self.signal(libc::SIGCONT)?;
        if let Some(status) = self.wait_exit(grace).await? {
            return Ok(status);
        }
        tracing::warn!(pid = self.pid, "ZooKeeper ignored SIGTERM for {grace:?}; sending SIGKILL");
        self.kill().await
    }

    /// Blocking SIGKILL and reap, for `Drop`.
    fn kill_blocking(&mut self) {
        if self.reaped.is_some() {
            return;
        }
        let _ = self.signal(libc::SIGKILL);
        match self.child.wait() {
            Ok(status) => self.mark_reaped(status),
            Err(e) => tracing::warn!(pid = self.pid, "could not reap ZooKeeper: {e}"),
        }
    }
}

impl Drop for JavaProcess {
    fn drop(&mut self) {
        self.kill_blocking();
    }
}

/// The last `lines` lines of a log file (or a note saying it could not be read).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            let start = all.len().saturating_sub(lines);
            all[start..].join("\n")
        }
        Err(e) => format!("<could not read {}: {e}>", path.display()),
    }
}

/// The length of a file, 0 if it does not exist.
pub(crate) fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Whether the part of a log from byte `from` on says the server could not bind a port.
pub(crate) fn log_says_port_clash(path: &Path, from: u64) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
    String::from_utf8_lossy(&bytes[from..]).contains("Address already in use")
}

/// How long [`JavaProcess::freeze`] waits for every thread to be stopped.
const STOP_DEADLINE: Duration = Duration::from_secs(5);

/// Whether every thread of `pid` is stopped (state `T` or `t` in `/proc/PID/task/TID/stat`).
fn all_threads_stopped(pid: u32) -> std::io::Result<bool> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let stat = match std::fs::read_to_string(task?.path().join("stat")) {
            Ok(stat) => stat,
            // A thread that exited between the listing and the read is not running.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        // The state follows the command name, which is in parentheses and may contain spaces.
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
        if !matches!(state, Some('T' | 't')) {
            return Ok(false);
        }
    }
    Ok(true)
}
