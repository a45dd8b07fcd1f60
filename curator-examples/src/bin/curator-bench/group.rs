//! Membership scenario `group_leave`: how long a leave takes to reach the rest of the group.
//!
//! `--members M` members and `--observers O` observers (100 and 5 by default), each on its own
//! framework (its own session), all `GroupMember`s of `<path>/group`: members as `m-<i>`,
//! observers as `obs-<j>` with a listener that notes when each `Left { id }` arrives. Once every
//! observer sees all M members, the members leave one at a time by ending their session: the
//! sample starts just before the member's `CuratorFramework::close()` (the server deletes its
//! ephemeral node) and ends when the last observer reports it gone; the next member leaves only
//! then. With `--leave member` a member leaves by `GroupMember::close()` instead (its node is
//! deleted, the session stays), and the sample starts just before that call. Besides the
//! contract's keys the line carries the first observer's latency, each observer's own p50/p99,
//! and how long the leaving call itself took.

use std::time::{Duration, Instant};

use curator_core::{CuratorError, CuratorFramework, Result};
use curator_recipes::{GroupMember, MemberEvent};
use serde_json::json;
use tokio::sync::mpsc;

use crate::args::Args;
use crate::report::{line, micros, percentile, round};

/// How long the group may take to be seen whole, and a leave to reach every observer.
const WARM_DEADLINE: Duration = Duration::from_secs(120);
const LEAVE_DEADLINE: Duration = Duration::from_secs(30);

/// A leave as one observer saw it: (observer, member id, when its listener ran).
type Seen = (usize, String, Instant);

fn member_id(i: usize) -> String {
    format!("m-{i:03}")
}

/// Starts one member per framework, concurrently.
async fn join(fws: &[CuratorFramework], dir: &str, id: impl Fn(usize) -> String) -> Result<Vec<GroupMember>> {
    futures::future::try_join_all(
        fws.iter()
            .enumerate()
            .map(|(i, fw)| GroupMember::builder(fw, dir, &id(i)).payload(format!("bench {}", id(i))).build())
            .map(|member| async move {
                let member = member?;
                member.start()?;
                member.ready().await?;
                Ok::<_, CuratorError>(member)
            }),
    )
    .await
}

/// True once every observer's view holds all `ids`.
fn all_seen(observers: &[GroupMember], ids: &[String]) -> bool {
    observers.iter().all(|o| {
        let view = o.current_members();
        ids.iter().all(|id| view.contains_key(id))
    })
}

pub(crate) async fn group_leave(args: &Args) -> Result<Vec<String>> {
    let (m, o) = (args.members.max(1), args.observers.max(1));
    let by_session = match args.leave.as_str() {
        "session" => true,
        "member" => false,
        other => return Err(CuratorError::IllegalState(format!("--leave {other}: want session or member"))),
    };
    let dir = format!("{}/group", args.path);
    let ids: Vec<String> = (0..m).map(member_id).collect();

    let observer_fws = crate::clients(args, o).await?;
    crate::ensure_path(&observer_fws[0], &dir).await?;
    let observers = join(&observer_fws, &dir, |j| format!("obs-{j}")).await?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Seen>();
    for (j, observer) in observers.iter().enumerate() {
        let tx = tx.clone();
        observer.add_listener(move |event: &MemberEvent| {
            if let MemberEvent::Left { id } = event {
                let _ = tx.send((j, id.clone(), Instant::now()));
            }
        });
    }
    drop(tx);

    let member_fws = crate::clients(args, m).await?;
    let mut members: Vec<Option<GroupMember>> =
        join(&member_fws, &dir, member_id).await?.into_iter().map(Some).collect();
    let warm = curator_test::eventually(WARM_DEADLINE, || async { all_seen(&observers, &ids) }).await;
    if !warm {
        return Err(CuratorError::IllegalState(format!("the observers did not see all {m} members")));
    }
    while rx.try_recv().is_ok() {}

    let mut all = Vec::with_capacity(m);
    let mut first = Vec::with_capacity(m);
    let mut closes = Vec::with_capacity(m);
    let mut per_observer = vec![Vec::with_capacity(m); o];
    let started = Instant::now();
    let mut last = started;
    for ((fw, member), id) in member_fws.iter().zip(&mut members).zip(&ids) {
        let t0 = Instant::now();
        if by_session {
            fw.close().await;
        } else if let Some(member) = member.take() {
            member.close().await;
        }
        closes.push(micros(t0.elapsed()));
        let mut seen: Vec<Option<Instant>> = vec![None; o];
        let wait = async {
            while seen.iter().any(Option::is_none) {
                let Some((j, left, at)) = rx.recv().await else { return false };
                if left == *id {
                    seen[j].get_or_insert(at);
                } else {
                    tracing::warn!(observer = j, member = %left, expected = %id, "unexpected leave");
                }
            }
            true
        };
        if !tokio::time::timeout(LEAVE_DEADLINE, wait).await.unwrap_or(false) {
            let missing: Vec<usize> = (0..o).filter(|j| seen[*j].is_none()).collect();
            return Err(CuratorError::IllegalState(format!("observers {missing:?} never saw {id} leave")));
        }
        let times: Vec<Instant> = seen.into_iter().flatten().collect();
        let (Some(earliest), Some(latest)) = (times.iter().min(), times.iter().max()) else { continue };
        first.push(micros(earliest.saturating_duration_since(t0)));
        all.push(micros(latest.saturating_duration_since(t0)));
        for (j, at) in times.iter().enumerate() {
            per_observer[j].push(micros(at.saturating_duration_since(t0)));
        }
        last = *latest;
    }
    let wall = last.saturating_duration_since(started);

    let per_p50: Vec<f64> = per_observer.iter_mut().map(|s| round(percentile(s, 50.0))).collect();
    let per_p99: Vec<f64> = per_observer.iter_mut().map(|s| round(percentile(s, 99.0))).collect();
    let extra = json!({
        "members": m,
        "observers": o,
        "leave": args.leave,
        "first_observer_p50_us": round(percentile(&mut first, 50.0)),
        "first_observer_p99_us": round(percentile(&mut first, 99.0)),
        "per_observer_p50_us": per_p50,
        "per_observer_p99_us": per_p99,
        "close_p50_us": round(percentile(&mut closes, 50.0)),
        "close_p99_us": round(percentile(&mut closes, 99.0)),
    });
    let result = line("group_leave", m + o, m, wall, &mut all, extra);

    drop(members);
    futures::future::join_all(member_fws.iter().map(|fw| fw.close())).await;
    for observer in observers {
        observer.close().await;
    }
    for fw in &observer_fws {
        fw.close().await;
    }
    Ok(vec![result])
}
