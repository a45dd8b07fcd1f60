//! # curator-inspect
//!
//! `curator-inspect --connect host:port COMMAND PATH`: reads what Curator's recipes (Java's
//! and ours: the layouts are the same, docs/architecture.md section 5) left under a path and
//! shows it, as text for people or, with `--json`, as one JSON document for scripts.
//!
//! | command | shows |
//! |---|---|
//! | `lock PATH [--max-leases N]` | the holders, then the waiters, in sequence order, of an `InterProcessMutex` (or `QueuedMutex`), an `InterProcessReadWriteLock` (which are readers and which writers) or a semaphore (`InterProcessSemaphoreV2`, `InterProcessSemaphoreMutex`); each with its fencing token (the node's czxid, section 8.4), owner session and data |
//! | `election PATH` | the leader and the participants, in order, of a `LeaderLatch` or `LeaderSelector`, with their ids (the nodes' data); `lock-` nodes are reported as "mutex or LeaderSelector" (a `LeaderSelector` is a mutex: the layout cannot tell) |
//! | `services BASE` | the services under a discovery base path and their instances: address, port, type, payload |
//! | `orphans PATH` | the protected nodes (`_c_<uuid>-...`, sections 5 and 7) in the subtree of `PATH` and whether their owning session is alive |
//!
//! ## It never writes
//!
//! Every request goes through one private module, `read`, whose only calls on the framework
//! are `get_children` and `get_data` (no create, delete, set or watch); the
//! framework it builds has no namespace (a namespace's node is created on first use). Besides
//! those it sends the `cons` four-letter word, a read, to each server of the connect string.
//!
//! ## Exit codes
//!
//! 0: the report was printed (a path with no node is a report, not an error); 2: bad
//! arguments (clap's usage errors, an invalid path or connect string); 1: no connection within
//! `--timeout`, or a read failed, with a one-line message on stderr.
//!
//! ## What `orphans` reports
//!
//! Every node in the subtree of `PATH` (breadth first, at most `--max-nodes`, default 10,000)
//! whose name has Curator's protected prefix `_c_` + UUID + `-`, with a `status`:
//! - `alive`: an ephemeral node whose owning session (`ephemeralOwner`) has a connection on one
//!   of the servers, per their answer to `cons`;
//! - `orphan`: an ephemeral node whose owning session has no connection on any server, and
//!   every server of the connect string answered. Its owner crashed or is cut off: the server
//!   deletes the node when the session expires (within the session timeout), unless the
//!   owner reconnects in time. A client in the middle of a reconnection can show as an orphan
//!   for that moment;
//! - `unknown`: as `orphan`, but some server did not answer `cons` (unreachable, or the
//!   command not in its `4lw.commands.whitelist`): its session may be connected there.
//!   `liveness_determined` is then false, and the text output says so;
//! - `persistent`: a persistent protected node (`ephemeralOwner` 0): ZooKeeper records no owner,
//!   so its liveness cannot be judged. Such nodes are left by a protected create whose outcome
//!   stayed unknown and whose cleanup never ran.
//!
//! The servers are asked before the tree is read, so a session seen connected is never
//! reported as an orphan by a race; only nodes with status `orphan` are counted in `orphans`.
//!
//! ## The JSON document
//!
//! One object, with `kind` saying which command made it; field names are stable (new fields
//! may be added). Sessions are strings as ZooKeeper prints them (`"0x100007f3c2a0001"`), `null`
//! for a persistent node; fencing tokens and zxids are numbers. A node's `data` is
//! `{"encoding": "utf8" | "hex", "value": "...", "len": bytes}`: UTF-8 when it is printable
//! text, else lower-case hex. A *contender* is
//! `{"position": 1.., "role": "holder" | "waiter", "kind": "mutex" | "read" | "write" | "lease" |
//! "taker" | "latch", "name", "path", "sequence", "protected_id" (or null),
//! "fencing_token", "session", "data"}`.
//!
//! - `lock`: `{"kind": "lock", "path", "layout": "missing" | "empty" | "mutex" | "read_write" |
//!   "semaphore", "holders": [contender], "waiters": [contender], "others": [child names that
//!   are not contender nodes], "notes": [strings]}`. For a semaphore, `holders` are the leases
//!   (with `--max-leases N`, the first N; the rest are waiters), and `waiters` then lists the
//!   takers in line for the semaphore's own lock (`kind` `taker`; the first of them is taking a
//!   lease now).
//! - `election`: `{"kind": "election", "path", "recipe": "missing" | "empty" | "leader_latch" |
//!   "mutex_or_leader_selector" | "mixed", "leader": id or null, "participants": [contender],
//!   "others"}`; the first participant (`role` `holder`) leads. `lock-` nodes (`kind` `mutex`)
//!   are a `LeaderSelector`'s or a mutex's, which the layout cannot tell apart: then `recipe` is
//!   `mutex_or_leader_selector` and `leader` is the first in line's data.
//! - `services`: `{"kind": "services", "base", "exists", "services": [{"name", "instances":
//!   [{"id", "path", "session", "address", "port", "ssl_port", "service_type", "enabled",
//!   "registration_time_utc", "payload", "error", "data"}]}]}`; `error` and `data` are set only
//!   for a node that is not a service instance (then the other fields are null).
//! - `orphans`: `{"kind": "orphans", "path", "exists", "liveness_determined", "servers":
//!   [{"server", "answered", "sessions", "error"}], "visited", "truncated", "orphans": count,
//!   "nodes": [{"path", "protected_id", "session", "status": "alive" | "orphan" | "unknown" |
//!   "persistent", "czxid", "ctime", "data"}]}`.
//!
//! In code: [`inspect`] returns the [`Report`]; [`run`] is the whole program (arguments in,
//! output written, exit code out).
#![warn(missing_docs)]

use std::ffi::OsString;
use std::io::Write;
use std::time::Duration;

use clap::{Parser, Subcommand};
use curator_core::CuratorError;

mod layouts;
mod read;
mod report;
mod text;

// The public surface, flat (docs/architecture.md section 1.1); api/curator-inspect.txt lists it.
pub use report::{
    session_hex, Contender, ContenderKind, Data, ElectionRecipe, ElectionReport, Instance, Liveness, LockLayout,
    LockReport, OrphansReport, ProtectedNode, Report, Role, ServerAnswer, Service, ServicesReport,
};

/// The command line.
#[derive(Debug, Clone, Parser)]
#[command(name = "curator-inspect", version, about = "Shows what Curator's recipes keep in ZooKeeper; never writes")]
pub struct Cli {
    /// The ensemble: `host:port[,host:port...]`, optionally with a chroot (`/path`).
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: String,
    /// Print one JSON document instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Seconds to wait for the connection, and for each server's answer to `cons`.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// What to inspect.
    #[command(subcommand)]
    pub command: Command,
}

/// What to inspect.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Holders and waiters of a mutex, read-write lock or semaphore.
    Lock {
        /// The lock's path (the path given to the recipe).
        path: String,
        /// For a semaphore: its number of leases, so that leases beyond it show as waiting.
        #[arg(long, value_name = "N")]
        max_leases: Option<usize>,
    },
    /// The leader and participants of a LeaderLatch or LeaderSelector.
    Election {
        /// The election's path.
        path: String,
    },
    /// Services and instances under a service-discovery base path.
    Services {
        /// The discovery's base path.
        base: String,
    },
    /// Protected nodes in a subtree whose owning session is no longer connected.
    Orphans {
        /// The root of the subtree to search.
        path: String,
        /// Visit at most this many nodes.
        #[arg(long, value_name = "N", default_value_t = 10_000)]
        max_nodes: usize,
    },
}

impl Command {
    fn path(&self) -> &str {
        match self {
            Command::Lock { path, .. } | Command::Election { path } | Command::Orphans { path, .. } => path,
            Command::Services { base } => base,
        }
    }
}

/// Why the inspector could not report.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// Bad arguments (exit code 2).
    #[error("bad arguments: {0}")]
    BadArguments(String),
    /// No connection (exit code 1).
    #[error("cannot connect to {connect}: {source}")]
    Connect {
        /// The connect string.
        connect: String,
        /// The framework's error.
        source: CuratorError,
    },
    /// A read failed (exit code 1).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path read.
        path: String,
        /// The framework's error.
        source: CuratorError,
    },
}

impl InspectError {
    /// The process exit code for this error: 2 for bad arguments, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            InspectError::BadArguments(_) => 2,
            InspectError::Connect { .. } | InspectError::Read { .. } => 1,
        }
    }
}

/// Connects, reads what `cli` asks for, and closes. Reads only (see the crate docs).
pub async fn inspect(cli: &Cli) -> Result<Report, InspectError> {
    let path = cli.command.path();
    curator_core::path::validate(path).map_err(|e| InspectError::BadArguments(e.to_string()))?;
    let reader = read::Reader::connect(&cli.connect, Duration::from_secs(cli.timeout)).await?;
    let report = match &cli.command {
        Command::Lock { path, max_leases } => layouts::lock(&reader, path, *max_leases).await.map(Report::Lock),
        Command::Election { path } => layouts::election(&reader, path).await.map(Report::Election),
        Command::Services { base } => layouts::services(&reader, base).await.map(Report::Services),
        Command::Orphans { path, max_nodes } => layouts::orphans(&reader, path, *max_nodes).await.map(Report::Orphans),
    };
    reader.close().await;
    report
}

/// The whole program: parses `args` (the program name first), inspects, writes the report
/// (text, or JSON with `--json`) to `out` and any error to `err`, and returns the exit code.
pub async fn run(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0, usage errors to stderr with 2.
            let code = e.exit_code();
            let rendered = e.render();
            let sink: &mut dyn Write = if e.use_stderr() { err } else { out };
            let _ = write!(sink, "{rendered}");
            return code;
        }
    };
    match inspect(&cli).await {
        Ok(report) => {
            let written = if cli.json {
                serde_json::to_string_pretty(&report).map_err(std::io::Error::other).and_then(|s| writeln!(out, "{s}"))
            } else {
                write!(out, "{}", report.to_text())
            };
            match written {
                Ok(()) => 0,
                Err(e) => {
                    let _ = writeln!(err, "curator-inspect: cannot write the report: {e}");
                    1
                }
            }
        }
        Err(e) => {
            let _ = writeln!(err, "curator-inspect: {e}");
            e.exit_code()
        }
    }
}
