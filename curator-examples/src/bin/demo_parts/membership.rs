//! Part 2: workers join a group with `GroupMember` (an ephemeral node kept in place by a
//! `PersistentNode`); a coordinator, itself a member, sees joins and leaves as they happen,
//! including a member whose session is expired on purpose: its node comes back on its new
//! session with no code of ours.

use std::time::Duration;

use curator_core::{CuratorError, CuratorFramework, Result};
use curator_recipes::{GroupMember, MemberEvent};
use tokio::sync::mpsc;

use super::Checks;

const MEMBERS: &str = "/members";
const WORKERS: usize = 6;
const EXPIRED: usize = 3;
const COORDINATOR: &str = "coordinator";

/// What the coordinator was told.
#[derive(Debug)]
enum Seen {
    Joined(String),
    Left(String),
}

async fn join(fw: &CuratorFramework, worker: usize) -> Result<GroupMember> {
    let member = GroupMember::builder(fw, MEMBERS, &format!("worker-{worker}"))
        .payload(format!("worker {worker}, pid {}", std::process::id()))
        .build()?;
    member.start()?;
    member.ready().await?;
    Ok(member)
}
/// Waits for the coordinator to be told `want`, printing what it reports meanwhile.
async fn expect(rx: &mut mpsc::UnboundedReceiver<Seen>, mut want: impl FnMut(&Seen) -> bool) -> bool {
    let wait = async {
        while let Some(seen) = rx.recv().await {
            if want(&seen) {
                return true;
            }
        }
        false
    };
    tokio::time::timeout(Duration::from_secs(30), wait).await.unwrap_or(false)
}

pub(crate) async fn run(connect: &str, namespace: &str, checks: &mut Checks) -> Result<()> {
    let observer = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
    let coordinator = GroupMember::builder(&observer, MEMBERS, COORDINATOR).build()?;
    coordinator.start()?;
    coordinator.ready().await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    coordinator.add_listener(move |event: &MemberEvent| match event {
        MemberEvent::Joined { id, data } if id != COORDINATOR => {
            tracing::info!("  + joined: {id} ({})", String::from_utf8_lossy(data));
            let _ = tx.send(Seen::Joined(id.clone()));
        }
        MemberEvent::Left { id } => {
            tracing::info!("  - left:   {id}");
            let _ = tx.send(Seen::Left(id.clone()));
        }
        _ => {}
    });

    let mut frameworks = Vec::new();
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let fw = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
        workers.push(join(&fw, worker).await?);
        frameworks.push(fw);
    }
    let mut joined = 0;
    let all_joined = expect(&mut rx, |s| {
        joined += usize::from(matches!(s, Seen::Joined(_)));
        joined == WORKERS
    })
    .await;
    checks.record("the coordinator saw every member join", all_joined, format!("{WORKERS} members"));

    // Expire one member's session on purpose: its node goes with the session, and its
    // GroupMember puts it back on the framework's new session by itself.
    let session = frameworks[EXPIRED].session().await?;
    tracing::info!("expiring worker-{EXPIRED}'s session {:#x} on purpose", session.id());
    curator_test::expire_session(connect, session.client().session())
        .await
        .map_err(|e| CuratorError::IllegalState(format!("expire_session: {e}")))?;
    drop(session);
    let name = format!("worker-{EXPIRED}");
    let left = expect(&mut rx, |s| matches!(s, Seen::Left(n) if *n == name)).await;
    checks.record("the expired member's leave was seen", left, name.clone());
    let rejoined = expect(&mut rx, |s| matches!(s, Seen::Joined(n) if *n == name)).await;
    checks.record("it rejoined on its new session by itself", rejoined, name);

    // Two members leave for good.
    for member in workers.drain(..2) {
        member.close().await;
    }
    let mut gone = 0;
    let left = expect(&mut rx, |s| {
        gone += usize::from(matches!(s, Seen::Left(_)));
        gone == 2
    })
    .await;
    checks.record("members that close are seen leaving", left, "worker-0, worker-1");

    let mut listed = observer.get_children().for_path(MEMBERS).await?;
    listed.sort();
    let members: Vec<String> = coordinator.current_members().into_keys().collect();
    tracing::info!("members now: {}", members.join(", "));
    checks.record(
        "the coordinator's view equals the server's listing",
        members == listed,
        format!("{} members", listed.len()),
    );
    for member in workers {
        member.close().await;
    }
    coordinator.close().await;
    for fw in frameworks {
        fw.close().await;
    }
    observer.close().await;
    Ok(())
}
