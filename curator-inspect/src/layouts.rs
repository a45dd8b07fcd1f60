//! Reading Curator's layouts (docs/architecture.md sections 5, 14 and 15) into reports. The
//! node names are the recipes' own constants; every read goes through [`Reader`].

use std::collections::VecDeque;

use curator_core::path;
use curator_core::zk;
use curator_discovery::ServiceInstance;
use curator_recipes::LEADER_LATCH_NAME;
use curator_recipes::{
    LEASE_NAME, MUTEX_LOCK_NAME, READ_LOCK_NAME, SEMAPHORE_LEASE_PARENT, SEMAPHORE_LOCK_PARENT, WRITE_LOCK_NAME,
};
use futures::future::join_all;

use crate::read::Reader;
use crate::report::{
    session_hex, Contender, ContenderKind, Data, ElectionRecipe, ElectionReport, Instance, Liveness, LockLayout,
    LockReport, OrphansReport, ProtectedNode, Role, ServerAnswer, Service, ServicesReport,
};
use crate::InspectError;

/// A child named as a contender: its kind and sequence number.
struct Named {
    name: String,
    kind: ContenderKind,
    sequence: i64,
}

/// The children of a recipe path that are contender nodes, by the first of `names` each
/// contains (with its kind), ordered by sequence number then name; and the other children.
fn classify(children: &[String], names: &[(&str, ContenderKind)]) -> (Vec<Named>, Vec<String>) {
    let (mut named, mut others) = (Vec::new(), Vec::new());
    for child in children {
        let found = names.iter().find_map(|(n, kind)| path::sequence_after(child, n).map(|seq| (*kind, seq)));
        match found {
            Some((kind, sequence)) => named.push(Named { name: child.clone(), kind, sequence }),
            None => others.push(child.clone()),
        }
    }
    named.sort_by(|a, b| (a.sequence, &a.name).cmp(&(b.sequence, &b.name)));
    (named, others)
}

/// Reads each named node under `parent` (one pipelined round) and makes it a [`Contender`]
/// with the role `role(index, named)` gives. Nodes gone since the listing are left out.
async fn contenders(
    reader: &Reader,
    parent: &str,
    named: &[Named],
    role: impl Fn(usize, &Named) -> Role,
) -> Result<Vec<Contender>, InspectError> {
    let reads = named.iter().map(|n| {
        let node_path = path::make_path(parent, &n.name);
        async move { reader.data(&node_path).await.map(|read| (node_path, read)) }
    });
    let results = join_all(reads).await;
    let mut out = Vec::new();
    for (index, (n, result)) in named.iter().zip(results).enumerate() {
        let (node_path, read) = result?;
        let Some((data, stat)) = read else { continue };
        out.push(Contender {
            position: 0,
            role: role(index, n),
            kind: n.kind,
            name: n.name.clone(),
            path: node_path,
            sequence: n.sequence,
            protected_id: path::protected_id(&n.name).map(str::to_string),
            fencing_token: stat.czxid,
            session: session_hex(stat.ephemeral_owner),
            data: Data::of(&data),
        });
    }
    for (i, c) in out.iter_mut().enumerate() {
        c.position = i + 1;
    }
    Ok(out)
}

/// `lock PATH`: mutex, read-write lock or semaphore, whichever layout is found.
pub(crate) async fn lock(
    reader: &Reader,
    lock_path: &str,
    max_leases: Option<usize>,
) -> Result<LockReport, InspectError> {
    let mut report = LockReport {
        path: lock_path.to_string(),
        layout: LockLayout::Missing,
        holders: Vec::new(),
        waiters: Vec::new(),
        others: Vec::new(),
        notes: Vec::new(),
    };
    let Some((children, _)) = reader.children(lock_path).await? else {
        report.notes.push(format!("no node at {lock_path}: nothing is held there (or the path is wrong)"));
        return Ok(report);
    };
    let has = |name: &str| children.iter().any(|c| c == name);
    if has(SEMAPHORE_LEASE_PARENT) || has(SEMAPHORE_LOCK_PARENT) {
        report.layout = LockLayout::Semaphore;
        report.others = children
            .iter()
            .filter(|c| c.as_str() != SEMAPHORE_LEASE_PARENT && c.as_str() != SEMAPHORE_LOCK_PARENT)
            .cloned()
            .collect();
        semaphore(reader, lock_path, max_leases, &mut report).await?;
        return Ok(report);
    }
    let (named, others) = classify(
        &children,
        &[
            (WRITE_LOCK_NAME, ContenderKind::Write),
            (READ_LOCK_NAME, ContenderKind::Read),
            (MUTEX_LOCK_NAME, ContenderKind::Mutex),
        ],
    );
    report.others = others;
    let read_write = named.iter().any(|n| n.kind != ContenderKind::Mutex);
    report.layout = match (named.is_empty(), read_write) {
        (true, _) => LockLayout::Empty,
        (false, true) => LockLayout::ReadWrite,
        (false, false) => LockLayout::Mutex,
    };
    if read_write && named.iter().any(|n| n.kind == ContenderKind::Mutex) {
        report.notes.push("mutex (lock-) nodes beside read-write lock nodes: ordered with them".into());
    }
    let holds = holders_of(&named);
    let all = contenders(reader, lock_path, &named, |i, _| if holds[i] { Role::Holder } else { Role::Waiter }).await?;
    split_roles(all, &mut report);
    Ok(report)
}

/// Which of the ordered contenders hold. A mutex or write node holds when first; read nodes
/// hold while no write node is before them (Curator's read predicate). A read node with the
/// sequence number of the first write node is one taken under that write lock (Curator 5.5+,
/// docs/architecture.md section 5) and holds with it.
fn holders_of(named: &[Named]) -> Vec<bool> {
    let mut holds = vec![false; named.len()];
    let Some(first) = named.first() else { return holds };
    if first.kind != ContenderKind::Read
        || named.iter().any(|n| n.kind != ContenderKind::Read && n.sequence == first.sequence)
    {
        // An exclusive node is first (perhaps tied with read nodes taken under it).
        let seq = first.sequence;
        for (i, n) in named.iter().enumerate() {
            if n.sequence != seq {
                break;
            }
            // Of several exclusive nodes with one sequence (never made by a recipe), the first holds.
            let earlier_exclusive = named[..i].iter().any(|m| m.kind != ContenderKind::Read);
            holds[i] = n.kind == ContenderKind::Read || !earlier_exclusive;
        }
        return holds;
    }
    for (i, n) in named.iter().enumerate() {
        if n.kind != ContenderKind::Read {
            break;
        }
        holds[i] = true;
    }
    holds
}

/// Moves contenders into the report's holders and waiters, keeping their order.
fn split_roles(all: Vec<Contender>, report: &mut LockReport) {
    for c in all {
        match c.role {
            Role::Holder => report.holders.push(c),
            Role::Waiter => report.waiters.push(c),
        }
    }
}

/// A semaphore: leases under `P/leases`, takers under `P/locks`.
async fn semaphore(
    reader: &Reader,
    lock_path: &str,
    max_leases: Option<usize>,
    report: &mut LockReport,
) -> Result<(), InspectError> {
    let leases_path = path::make_path(lock_path, SEMAPHORE_LEASE_PARENT);
    let locks_path = path::make_path(lock_path, SEMAPHORE_LOCK_PARENT);
    let lease_children = reader.children(&leases_path).await?.map(|(c, _)| c).unwrap_or_default();
    let lock_children = reader.children(&locks_path).await?.map(|(c, _)| c).unwrap_or_default();
    let (leases, lease_others) = classify(&lease_children, &[(LEASE_NAME, ContenderKind::Lease)]);
    let (takers, taker_others) = classify(&lock_children, &[(MUTEX_LOCK_NAME, ContenderKind::Taker)]);
    report.others.extend(lease_others.into_iter().map(|o| format!("{SEMAPHORE_LEASE_PARENT}/{o}")));
    report.others.extend(taker_others.into_iter().map(|o| format!("{SEMAPHORE_LOCK_PARENT}/{o}")));
    let leases = contenders(reader, &leases_path, &leases, |i, _| match max_leases {
        Some(max) if i >= max => Role::Waiter,
        _ => Role::Holder,
    })
    .await?;
    if max_leases.is_none() && !takers.is_empty() && !leases.is_empty() {
        report.notes.push(
            "the newest lease may still wait for a lease to be returned (its taker holds the takers' lock); \
             give --max-leases to decide"
                .into(),
        );
    }
    let takers = contenders(reader, &locks_path, &takers, |_, _| Role::Waiter).await?;
    if report.others.is_empty() && leases.is_empty() && takers.is_empty() {
        report.layout = LockLayout::Empty;
    }
    let lease_count = leases.len();
    split_roles(leases, report);
    for mut t in takers {
        t.position += lease_count;
        report.waiters.push(t);
    }
    Ok(())
}

/// `election PATH`: `LeaderLatch` (`latch-`) or `LeaderSelector` (`lock-`) participants; the
/// first by sequence number leads. `lock-` nodes may as well be a mutex's: the report says so.
pub(crate) async fn election(reader: &Reader, election_path: &str) -> Result<ElectionReport, InspectError> {
    let mut report = ElectionReport {
        path: election_path.to_string(),
        recipe: ElectionRecipe::Missing,
        leader: None,
        participants: Vec::new(),
        others: Vec::new(),
    };
    let Some((children, _)) = reader.children(election_path).await? else { return Ok(report) };
    let (named, others) =
        classify(&children, &[(LEADER_LATCH_NAME, ContenderKind::Latch), (MUTEX_LOCK_NAME, ContenderKind::Mutex)]);
    report.others = others;
    let latch = named.iter().any(|n| n.kind == ContenderKind::Latch);
    let lock = named.iter().any(|n| n.kind == ContenderKind::Mutex);
    report.recipe = match (latch, lock) {
        (false, false) => ElectionRecipe::Empty,
        (true, false) => ElectionRecipe::LeaderLatch,
        (false, true) => ElectionRecipe::MutexOrLeaderSelector,
        (true, true) => ElectionRecipe::Mixed,
    };
    report.participants =
        contenders(reader, election_path, &named, |i, _| if i == 0 { Role::Holder } else { Role::Waiter }).await?;
    // The first node read leads (one listed first may have gone since).
    if let Some(first) = report.participants.first_mut() {
        first.role = Role::Holder;
        report.leader = Some(first.data.value.clone());
    }
    Ok(report)
}

/// `services BASE`: services are the children of the base, instances their children, each
/// holding Curator's instance JSON.
pub(crate) async fn services(reader: &Reader, base: &str) -> Result<ServicesReport, InspectError> {
    let mut report = ServicesReport { base: base.to_string(), exists: false, services: Vec::new() };
    let Some((names, _)) = reader.children(base).await? else { return Ok(report) };
    report.exists = true;
    for name in names {
        let service_path = path::make_path(base, &name);
        let Some((ids, _)) = reader.children(&service_path).await? else { continue };
        let reads = ids.iter().map(|id| {
            let instance_path = path::make_path(&service_path, id);
            async move { reader.data(&instance_path).await.map(|read| (id.clone(), instance_path, read)) }
        });
        let mut instances = Vec::new();
        for result in join_all(reads).await {
            let (id, instance_path, read) = result?;
            let Some((data, stat)) = read else { continue };
            instances.push(instance(id, instance_path, &data, &stat));
        }
        report.services.push(Service { name, instances });
    }
    Ok(report)
}

/// One instance node read as Curator's JSON; a node that is not one is shown with its data.
fn instance(id: String, instance_path: String, data: &[u8], stat: &zk::Stat) -> Instance {
    let mut out = Instance {
        id,
        path: instance_path,
        session: session_hex(stat.ephemeral_owner),
        address: None,
        port: None,
        ssl_port: None,
        service_type: None,
        enabled: None,
        registration_time_utc: None,
        payload: None,
        error: None,
        data: None,
    };
    match ServiceInstance::<serde_json::Value>::from_json(data) {
        Ok(i) => {
            out.address = i.address;
            out.port = i.port;
            out.ssl_port = i.ssl_port;
            out.service_type = Some(i.service_type.as_str().to_string());
            out.enabled = Some(i.enabled);
            out.registration_time_utc = Some(i.registration_time_utc);
            out.payload = i.payload;
        }
        Err(e) => {
            out.error = Some(format!("not a service instance: {e}"));
            out.data = Some(Data::of(data));
        }
    }
    out
}

/// `orphans PATH`: every protected node (`_c_<uuid>-...`) in the subtree of `PATH`, at most
/// `max_nodes` nodes visited (breadth first), each judged against the sessions the servers
/// have connections for.
pub(crate) async fn orphans(reader: &Reader, root: &str, max_nodes: usize) -> Result<OrphansReport, InspectError> {
    let mut report = OrphansReport {
        path: root.to_string(),
        exists: false,
        liveness_determined: false,
        servers: Vec::new(),
        visited: 0,
        truncated: false,
        orphans: 0,
        nodes: Vec::new(),
    };
    // The servers are asked first: a session connected then and gone by the time its node is
    // read is judged alive (never an orphan by mistake).
    let answers = reader.connected_sessions().await;
    report.liveness_determined = answers.iter().all(|a| a.sessions.is_some());
    report.servers = answers
        .iter()
        .map(|a| ServerAnswer {
            server: a.server.clone(),
            answered: a.sessions.is_some(),
            sessions: a.sessions.as_ref().map_or(0, |s| s.len()),
            error: a.error.clone(),
        })
        .collect();
    let mut queue = VecDeque::from([root.to_string()]);
    let mut first = true;
    while let Some(node_path) = queue.pop_front() {
        if report.visited >= max_nodes {
            report.truncated = true;
            break;
        }
        report.visited += 1;
        let listing = reader.children(&node_path).await?;
        if first {
            report.exists = listing.is_some();
            first = false;
        }
        let Some((children, stat)) = listing else { continue };
        let name = path::node_name(&node_path);
        if let Some(id) = path::protected_id(name) {
            let data = reader.data(&node_path).await?.map(|(d, _)| d).unwrap_or_default();
            let status = if stat.ephemeral_owner == 0 {
                Liveness::Persistent
            } else if answers.iter().any(|a| a.sessions.as_ref().is_some_and(|s| s.contains(&stat.ephemeral_owner))) {
                Liveness::Alive
            } else if report.liveness_determined {
                Liveness::Orphan
            } else {
                Liveness::Unknown
            };
            report.nodes.push(ProtectedNode {
                path: node_path.clone(),
                protected_id: id.to_string(),
                session: session_hex(stat.ephemeral_owner),
                status,
                czxid: stat.czxid,
                ctime: stat.ctime,
                data: Data::of(&data),
            });
        }
        queue.extend(children.iter().map(|c| path::make_path(&node_path, c)));
    }
    report.nodes.sort_by(|a, b| a.path.cmp(&b.path));
    report.orphans = report.nodes.iter().filter(|n| n.status == Liveness::Orphan).count();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(list: &[(&str, ContenderKind, i64)]) -> Vec<Named> {
        list.iter().map(|(n, k, s)| Named { name: n.to_string(), kind: *k, sequence: *s }).collect()
    }

    #[test]
    fn readers_before_the_first_writer_hold() {
        use ContenderKind::{Read, Write};
        let n = named(&[("a", Read, 1), ("b", Read, 2), ("c", Write, 3), ("d", Read, 4)]);
        assert_eq!(holders_of(&n), vec![true, true, false, false]);
        let n = named(&[("a", Write, 1), ("b", Read, 2)]);
        assert_eq!(holders_of(&n), vec![true, false]);
        // A read node taken under the write lock carries the write node's sequence.
        let n = named(&[("a", Read, 1), ("b", Write, 1), ("c", Read, 2)]);
        assert_eq!(holders_of(&n), vec![true, true, false]);
        assert!(holders_of(&[]).is_empty());
    }

    #[test]
    fn classify_orders_by_sequence_and_keeps_strangers() {
        let children: Vec<String> =
            ["_c_x-lock-0000000002", "garbage", "_c_y-lock-0000000001"].iter().map(|s| s.to_string()).collect();
        let (named, others) = classify(&children, &[(MUTEX_LOCK_NAME, ContenderKind::Mutex)]);
        assert_eq!(named.iter().map(|n| n.sequence).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(others, vec!["garbage"]);
    }
}
