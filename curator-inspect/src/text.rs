//! The human-readable rendering of a [`Report`].

use std::fmt::Write;

use crate::report::{
    Contender, Data, ElectionRecipe, ElectionReport, LockLayout, LockReport, OrphansReport, Report, Role,
    ServicesReport,
};

/// Data longer than this many characters is cut in text output (JSON has it whole).
const DATA_SHOWN: usize = 60;

impl Report {
    /// The report as text for people: one header line, then one line per node.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        match self {
            Report::Lock(r) => lock(&mut out, r),
            Report::Election(r) => election(&mut out, r),
            Report::Services(r) => services(&mut out, r),
            Report::Orphans(r) => orphans(&mut out, r),
        }
        out
    }
}

/// `"text"` (escaped, cut) or `hex 0a0b..`.
fn data(d: &Data) -> String {
    let (shown, cut) = match d.encoding {
        "utf8" => {
            let mut s: String = d.value.chars().take(DATA_SHOWN).collect();
            let cut = s.len() < d.value.len();
            s = format!("{s:?}");
            (s, cut)
        }
        _ => {
            let s: String = d.value.chars().take(DATA_SHOWN).collect();
            let cut = s.len() < d.value.len();
            (format!("hex {s}"), cut)
        }
    };
    if cut {
        format!("{shown}… ({} bytes)", d.len)
    } else {
        shown
    }
}

fn session(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("none (persistent)")
}

fn contender(out: &mut String, c: &Contender, label: &str) {
    let role = match c.role {
        Role::Holder => label,
        Role::Waiter => "waiter",
    };
    let _ = writeln!(
        out,
        "  {:>3}. {role:<7} {:<8} token {:#x}  session {}  {}  data {}",
        c.position,
        format!("{:?}", c.kind).to_lowercase(),
        c.fencing_token,
        session(&c.session),
        c.name,
        data(&c.data)
    );
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn lock(out: &mut String, r: &LockReport) {
    let layout = match r.layout {
        LockLayout::Missing => "no node",
        LockLayout::Empty => "no contender",
        LockLayout::Mutex => "mutex (InterProcessMutex)",
        LockLayout::ReadWrite => "read-write lock (InterProcessReadWriteLock)",
        LockLayout::Semaphore => "semaphore (InterProcessSemaphoreV2 / InterProcessSemaphoreMutex)",
    };
    let _ = writeln!(
        out,
        "lock {}: {layout}; {}, {}, in order",
        r.path,
        plural(r.holders.len(), "holder", "holders"),
        plural(r.waiters.len(), "waiter", "waiters")
    );
    for c in r.holders.iter().chain(&r.waiters) {
        contender(out, c, "holder");
    }
    if !r.others.is_empty() {
        let _ = writeln!(out, "  other children: {}", r.others.join(", "));
    }
    for note in &r.notes {
        let _ = writeln!(out, "  note: {note}");
    }
}

fn election(out: &mut String, r: &ElectionReport) {
    let recipe = match r.recipe {
        ElectionRecipe::Missing => "no node",
        ElectionRecipe::Empty => "no participant",
        ElectionRecipe::LeaderLatch => "LeaderLatch",
        ElectionRecipe::MutexOrLeaderSelector => "mutex or LeaderSelector (lock- nodes: the layout cannot tell which)",
        ElectionRecipe::Mixed => "LeaderLatch (latch-) and mutex or LeaderSelector (lock-) nodes",
    };
    // A lock's holder is no leader: with lock- nodes only, say what is known.
    let ambiguous = r.recipe == ElectionRecipe::MutexOrLeaderSelector;
    let (first, nobody) = if ambiguous { ("first in line", "nobody in line") } else { ("leader", "no leader") };
    let leader = r.leader.as_deref().map(|l| format!("{first} {l:?}")).unwrap_or_else(|| nobody.into());
    let _ = writeln!(
        out,
        "election {}: {recipe}; {leader}; {}",
        r.path,
        plural(r.participants.len(), "participant", "participants")
    );
    for c in &r.participants {
        contender(out, c, if ambiguous { "first" } else { "leader" });
    }
    if !r.others.is_empty() {
        let _ = writeln!(out, "  other children: {}", r.others.join(", "));
    }
}

fn services(out: &mut String, r: &ServicesReport) {
    if !r.exists {
        let _ = writeln!(out, "services {}: no node", r.base);
        return;
    }
    let _ = writeln!(out, "services {}: {}", r.base, plural(r.services.len(), "service", "services"));
    for s in &r.services {
        let _ = writeln!(out, "  {}: {}", s.name, plural(s.instances.len(), "instance", "instances"));
        for i in &s.instances {
            if let Some(error) = &i.error {
                let shown = i.data.as_ref().map(data).unwrap_or_default();
                let _ = writeln!(out, "    {}  session {}  {error}; data {shown}", i.id, session(&i.session));
                continue;
            }
            let address = i.address.as_deref().unwrap_or("-");
            let port = i.port.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
            let mut line = format!(
                "    {}  {address}:{port}  {}  session {}",
                i.id,
                i.service_type.as_deref().unwrap_or("?"),
                session(&i.session)
            );
            if let Some(ssl) = i.ssl_port {
                let _ = write!(line, "  ssl port {ssl}");
            }
            if i.enabled == Some(false) {
                line.push_str("  disabled");
            }
            if let Some(payload) = &i.payload {
                let text = payload.to_string();
                let short: String = text.chars().take(DATA_SHOWN).collect();
                let cut = if short.len() < text.len() { "…" } else { "" };
                let _ = write!(line, "  payload {short}{cut}");
            }
            let _ = writeln!(out, "{line}");
        }
    }
}

fn orphans(out: &mut String, r: &OrphansReport) {
    if !r.exists {
        let _ = writeln!(out, "orphans {}: no node", r.path);
        return;
    }
    let _ = writeln!(
        out,
        "orphans {}: {} of {} ({} visited{})",
        r.path,
        plural(r.orphans, "orphan", "orphans"),
        plural(r.nodes.len(), "protected node", "protected nodes"),
        r.visited,
        if r.truncated { ", search cut at --max-nodes" } else { "" }
    );
    for s in &r.servers {
        match &s.error {
            None => {
                let _ = writeln!(
                    out,
                    "  server {}: {}",
                    s.server,
                    plural(s.sessions, "connected session", "connected sessions")
                );
            }
            Some(e) => {
                let _ = writeln!(out, "  server {}: liveness unknown: {e}", s.server);
            }
        }
    }
    if !r.liveness_determined {
        let _ = writeln!(
            out,
            "  liveness cannot be determined: not every server listed its connections (allow `cons` with \
             4lw.commands.whitelist); nodes not seen alive are `unknown`"
        );
    }
    for n in &r.nodes {
        let status = format!("{:?}", n.status).to_lowercase();
        let _ = writeln!(
            out,
            "  {status:<10} session {}  czxid {:#x}  {}  data {}",
            session(&n.session),
            n.czxid,
            n.path,
            data(&n.data)
        );
    }
}
