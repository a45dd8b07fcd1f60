//! A leader proclaims (etcd's `Election.Proclaim`): the holder of a term publishes a value in
//! the election's value node, `P/proclaimed`, with a guarded write; observers pair it with the
//! term by its fencing token (docs/architecture.md section 15.3: why the value is not in the
//! leader's own node, and what Apache Curator peers see of it).

use curator_core::{path, CreateMode, CuratorError, Result};

use super::leadership::Leadership;

/// The name of an election's value node, the child of the election's path where its leader
/// proclaims a value ([`Leadership::proclaim`]). Its name has neither `latch-` nor `lock-` in it,
/// so no participant, ours or Apache Curator's, takes it for a contender; Curator's
/// `getParticipants()` lists it last, as a participant that does not lead, with its data as id,
/// and while it is the only child (nobody takes part) Curator's `getLeader()` names it. The value
/// is not in the leader's own node because Curator reads that node's data as the leader's id
/// (docs/architecture.md section 15.3).
pub const PROCLAIMED_NODE_NAME: &str = "proclaimed";

/// How many times a proclaim goes from a set to a create and back when the value node comes and
/// goes between them (someone deletes it from outside).
const ATTEMPTS: usize = 3;

impl Leadership {
    /// Publishes `value` as this term's value, for every
    /// [`LeaderObserver::observe`](super::LeaderObserver::observe) of the election (etcd's
    /// `Election.Proclaim`): the leader's address, its epoch's configuration.
    ///
    /// The value goes to the election's value node, `<election path>/`[`PROCLAIMED_NODE_NAME`]
    /// (persistent, made on the first proclaim and written over by every later one, of this term
    /// or the next), as `<fencing token>:<value>` (no line break, so that a Curator
    /// `getParticipants()` printed one per line stays one line): observers show it only while the node of the
    /// term that wrote it leads. The write is guarded by the term ([`HeldNode::set_data`],
    /// docs/architecture.md section 8.7): it commits only while our election node exists, so
    /// only the holder of the current term can proclaim, and a deposed leader cannot, even
    /// before it learns it was deposed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use futures::StreamExt;
    /// use curator_recipes::{LeaderLatch, LeaderObserver};
    ///
    /// let observer = LeaderObserver::new(&fw, "/services/indexer/leader")?;
    /// observer.start()?;
    /// let mut values = std::pin::pin!(observer.observe());
    /// let latch = LeaderLatch::new(&fw, "/services/indexer/leader", "indexer-1")?;
    /// latch.start()?;
    /// let term = latch.await_leadership().await?;
    /// term.proclaim("10.0.0.7:9000").await?;
    /// loop {
    ///     let seen = values.next().await.expect("the observer runs");
    ///     if seen.value.as_deref() == Some(&b"10.0.0.7:9000"[..]) {
    ///         assert_eq!(seen.leader.token, term.fencing_token());
    ///         assert_eq!(seen.leader.id, "indexer-1");
    ///         break;
    ///     }
    /// }
    /// observer.close().await;
    /// latch.close().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`CuratorError::OwnNodeLost`] (our election node's path) once the term may be lost: known
    /// before sending ([`is_held`](crate::HeldNode::is_held) false: the
    /// connection suspended under [`ErrorPolicy::Standard`](curator_core::ErrorPolicy::Standard),
    /// the session lost) or refused by the server (our node is gone); nothing is written.
    /// [`CuratorError::NotHeld`] once the term was given up (step down, close, the selector's
    /// function returned). [`CuratorError::OutcomeUnknown`] when a reply was lost: the write may
    /// have been applied while we led, and is not sent again on a guess (docs/architecture.md
    /// section 4.4); proclaiming the same value again is harmless. The server's refusals
    /// of the write itself otherwise (`NoAuth` on the election's path, a value over the server's
    /// size limit).
    ///
    /// [`HeldNode::set_data`]: crate::HeldNode::set_data
    pub async fn proclaim(&self, value: impl Into<Vec<u8>>) -> Result<()> {
        let node = path::make_path(path::parent(self.path()), PROCLAIMED_NODE_NAME);
        let data = encode(self.fencing_token(), &value.into());
        tracing::debug!(path = %node, token = self.fencing_token(), len = data.len(), "proclaim");
        for _ in 0..ATTEMPTS {
            match self.set_data(&node, data.clone()).await {
                Ok(_) => return Ok(()),
                Err(CuratorError::NoNode { path }) if path == node => {}
                Err(err) => return Err(err),
            }
            match self.create(&node, data.clone(), CreateMode::Persistent).await {
                Ok(_) => return Ok(()),
                Err(CuratorError::NodeExists { path }) if path == node => {}
                Err(err) => return Err(err),
            }
        }
        Err(CuratorError::IllegalState(format!(
            "the value node {node} came and went {ATTEMPTS} times while {} proclaimed",
            self.path()
        )))
    }
}

/// The value node's data for a value proclaimed in the term `token`.
fn encode(token: i64, value: &[u8]) -> Vec<u8> {
    let mut data = format!("{token}:").into_bytes();
    data.extend_from_slice(value);
    data
}

/// The term's token and the value in a value node's `data`; `None` for data no proclaim wrote.
pub(crate) fn decode(data: &[u8]) -> Option<(i64, &[u8])> {
    let colon = data.iter().position(|b| *b == b':')?;
    let token = std::str::from_utf8(&data[..colon]).ok()?.parse().ok()?;
    Some((token, &data[colon + 1..]))
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};

    #[test]
    fn the_value_carries_its_term() {
        let data = encode(4_294_967_301, b"a:b\n");
        assert_eq!(data, b"4294967301:a:b\n");
        assert_eq!(decode(&data), Some((4_294_967_301, &b"a:b\n"[..])));
        assert_eq!(decode(&encode(7, b"")), Some((7, &b""[..])));
        assert_eq!(decode(b"no token"), None);
        assert_eq!(decode(b"x:value"), None);
    }
}
