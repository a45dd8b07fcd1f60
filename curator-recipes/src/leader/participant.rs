//! [`Participant`]: who takes part in an election, read from the election's nodes; and the one
//! check of a participant id, shared by [`LeaderLatch`](super::LeaderLatch),
//! [`LeaderSelector`](super::LeaderSelector) and [`GroupMember`](crate::nodes::GroupMember).

use curator_core::{path, zk, CuratorError, Result};

use crate::sequential::ContenderGroup;

/// One participant of an election, as its node announces it (Curator's `Participant`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Participant {
    /// The id the participant gave (the data of its node, as UTF-8; invalid bytes are
    /// replaced).
    pub id: String,
    /// Whether it is the leader: its node is the first in line.
    pub is_leader: bool,
}

/// Checks a participant id the caller set, for the election or group at `base` (the path
/// the error names). The id must be one node name, as a [`GroupMember`](crate::nodes::GroupMember)'s
/// is (its id *is* its node's name): not empty, no `/`, none of the characters ZooKeeper
/// refuses in a path (NUL, other control characters), not `.` or `..`. The latch and the
/// selector write the id as their node's data, where ZooKeeper would take anything, but ids are
/// checked the same way everywhere, so that one id may serve all three recipes.
///
/// An id the caller did not set is not checked: the latch's is Curator's empty id, the
/// selector's the framework's default data, both written as the node's data as Curator does.
///
/// # Errors
/// [`CuratorError::InvalidArgument`] with `base` as its path and the reason.
pub(crate) fn validate_participant_id(base: &str, id: &str) -> Result<()> {
    let refuse = |reason: &str| {
        Err(CuratorError::InvalidArgument {
            path: base.to_string(),
            reason: format!("participant id {id:?}: {reason}"),
        })
    };
    if id.is_empty() {
        return refuse("empty (leave the id unset for the recipe's default)");
    }
    if id.contains(path::SEPARATOR) {
        return refuse("contains '/' (an id must be one node name)");
    }
    match path::validate(&format!("{}{id}", path::SEPARATOR)) {
        Err(CuratorError::InvalidPath { reason, .. }) => refuse(reason),
        other => other,
    }
}

/// The participants of the election `group`, in line order (the leader first), from one listing
/// and one pipelined round of reads. A node deleted between the listing and its read is left
/// out; the first node still there is the leader, as in Curator's `getParticipants()`.
pub(crate) async fn read_participants(group: &ContenderGroup) -> Result<Vec<Participant>> {
    let nodes = group.participant_nodes(None).await?;
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let base = group.base_path().to_string();
    let datas = group
        .framework()
        .call_with_retry("election-participants", &base, |session, _| {
            let nodes = nodes.clone();
            async move {
                let client = session.client();
                // Every read is queued before any is awaited: one round trip (section 2.1).
                let reads: Vec<_> = nodes
                    .iter()
                    .map(|node| {
                        tracing::debug!(path = %node, "getData (participant)");
                        client.get_data(node)
                    })
                    .collect();
                let mut datas = Vec::with_capacity(reads.len());
                for (read, node) in futures::future::join_all(reads).await.into_iter().zip(&nodes) {
                    match read {
                        Ok((data, _)) => datas.push(Some(data)),
                        Err(zk::Error::NoNode) => datas.push(None),
                        Err(e) => return Err(CuratorError::from_zk(node, e)),
                    }
                }
                Ok(datas)
            }
        })
        .await?;
    let fw = group.framework();
    let mut participants = Vec::with_capacity(datas.len());
    for (node, data) in nodes.iter().zip(datas) {
        let Some(data) = data else { continue };
        // Decoded as any read of the framework (section 3.10): data that does not decompress
        // is BadData with its path, as Curator's getParticipants() fails.
        let data = fw.decode_data(node, data)?;
        let is_leader = participants.is_empty();
        participants.push(Participant { id: String::from_utf8_lossy(&data).into_owned(), is_leader });
    }
    Ok(participants)
}

/// The leader of the election `group`: the first participant whose node is still there, `None`
/// when nobody takes part. Curator answers a dummy participant with an empty id instead.
pub(crate) async fn read_leader(group: &ContenderGroup) -> Result<Option<Participant>> {
    Ok(read_participants(group).await?.into_iter().next())
}
