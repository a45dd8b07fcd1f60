//! The multi-read load: every node in scope read with batched getData and getChildren
//! requests, level by level, several batches in flight.
//!
//! A batch is capped by count ([`BATCH_OPS`]) and by an estimate of its reply size
//! ([`BATCH_BYTES`], well under the server's packet limit). The estimate takes a node's data
//! length from the map when the node was cached before, and an average otherwise; a first load
//! learns that average from a small probe batch before it sends full ones.
//!
//! Replies are taken in the order sent and each child list in name order, so nodes come out of
//! the queue breadth first, siblings by name: the order a first load reports them in. A first
//! load hands each batch's nodes to `progress` as they arrive (the engine adds them to the cache
//! and says so), so that the client's work overlaps the server's reading of the next batches.

use std::collections::VecDeque;
use std::sync::Arc;

use curator_core::zk;
use curator_core::{CuratorError, CuratorFramework, Result};
use futures::stream::FuturesOrdered;
use futures::StreamExt;

use super::{shown_data, EngineConfig, NodeMap, Scope, Shared};
use crate::child_data::ChildData;

/// Most operations in one multi-read.
const BATCH_OPS: usize = 1000;
/// Most estimated reply bytes of one multi-read (the server's packet limit is about 1 MB).
const BATCH_BYTES: usize = 512 * 1024;
/// Multi-reads in flight at once during a load, once node sizes are known.
const BATCHES_IN_FLIGHT: usize = 4;
/// Data reads to learn the size of nodes from before sending full batches.
const PROBE_OPS: usize = 32;
/// Reply bytes of a stat and a result header in a multi-read.
const STAT_BYTES: usize = 80;
/// Reply bytes per child name, as a guess.
const NAME_BYTES: usize = 48;
/// First guess of a node's data length.
pub(super) const INITIAL_AVG_DATA: usize = 256;

enum Op {
    Data(String),
    Children(String),
}

impl Op {
    fn path(&self) -> &str {
        match self {
            Op::Data(p) | Op::Children(p) => p,
        }
    }
}

/// The nodes of one reply, in order, for a first load's progressive install.
pub(super) type Progress<'a> = &'a mut (dyn FnMut(&[Arc<ChildData>]) + Send);

/// Reads every node in scope with multi-reads: data first, then the children of nodes that
/// have some, level by level, several batches in flight. `progress`, if given, gets each reply's
/// nodes as they arrive, breadth first. Data is decoded as `fw` reads it ([`shown_data`]).
pub(super) async fn load(
    fw: &CuratorFramework,
    client: &zk::Client,
    config: &EngineConfig,
    shared: &Shared,
    avg_data_len: &mut usize,
    mut progress: Option<Progress<'_>>,
) -> Result<NodeMap> {
    let scope = &config.scope;
    let mut map = NodeMap::new();
    let mut queue = VecDeque::from([Op::Data(scope.root.clone())]);
    if scope.lists(&scope.root, 0) {
        queue.push_back(Op::Children(scope.root.clone()));
    }
    let mut in_flight = FuturesOrdered::new();
    let mut arrived = Vec::new();
    let (mut data_bytes, mut data_reads) = (0usize, 0usize);
    // Sizes are known for nodes cached before; otherwise learn them from a small batch first.
    let sizes_known = shared.nodes().len() > 1;
    loop {
        let probing = !sizes_known && data_reads <= 1;
        let (window, max_ops) = if probing { (1, PROBE_OPS) } else { (BATCHES_IN_FLIGHT, BATCH_OPS) };
        while in_flight.len() < window && !queue.is_empty() {
            let ops = take_batch(&mut queue, &map, shared, *avg_data_len, max_ops);
            let mut reader = client.new_multi_reader();
            for op in &ops {
                let added = match op {
                    Op::Data(p) => reader.add_get_data(p),
                    Op::Children(p) => reader.add_get_children(p),
                };
                added.map_err(|e| CuratorError::from_zk(op.path(), e))?;
            }
            let commit = reader.commit();
            in_flight.push_back(async move { (ops, commit.await) });
        }
        let Some((ops, result)) = in_flight.next().await else { break };
        let results = result.map_err(|e| CuratorError::from_zk(&scope.root, e))?;
        if results.len() != ops.len() {
            return Err(CuratorError::IllegalState(format!(
                "a multi-read of {} operations answered {} results",
                ops.len(),
                results.len()
            )));
        }
        for (op, result) in ops.into_iter().zip(results) {
            match (op, result) {
                (Op::Data(path), zk::MultiReadResult::Data { data, stat }) => {
                    data_bytes += data.len();
                    data_reads += 1;
                    let depth = scope.depth(&path).unwrap_or(0);
                    if depth > 0 && stat.num_children > 0 && scope.lists(&path, depth) {
                        queue.push_back(Op::Children(path.clone()));
                    }
                    let data = config.cache_data.then(|| shown_data(fw, &path, data));
                    let node = Arc::new(ChildData { path, stat, data });
                    if progress.is_some() {
                        arrived.push(node.clone());
                    }
                    map.insert(node);
                }
                (Op::Children(path), zk::MultiReadResult::Children { mut children }) => {
                    children.sort_unstable();
                    for name in children {
                        let child = Scope::child_path(&path, &name);
                        if scope.accepts(&child) {
                            queue.push_back(Op::Data(child));
                        }
                    }
                }
                (_, zk::MultiReadResult::Error { err: zk::Error::NoNode }) => {}
                (op, zk::MultiReadResult::Error { err }) => return Err(CuratorError::from_zk(op.path(), err)),
                (op, other) => {
                    return Err(CuratorError::IllegalState(format!(
                        "unexpected multi-read result for {}: {other:?}",
                        op.path()
                    )))
                }
            }
        }
        if let Some(progress) = progress.as_mut() {
            if !arrived.is_empty() {
                progress(&arrived);
                arrived.clear();
            }
        }
        if let Some(avg) = data_bytes.checked_div(data_reads) {
            *avg_data_len = avg;
        }
    }
    Ok(map)
}

/// Takes the next batch off the queue: at most `max_ops` operations and about [`BATCH_BYTES`]
/// of reply, from known sizes where the node was cached before and the average otherwise.
fn take_batch(
    queue: &mut VecDeque<Op>,
    loaded: &NodeMap,
    shared: &Shared,
    avg_data_len: usize,
    max_ops: usize,
) -> Vec<Op> {
    let cached = shared.nodes();
    let mut ops = Vec::new();
    let mut bytes = 0usize;
    while let Some(op) = queue.front() {
        let estimate = match op {
            Op::Data(p) => {
                let known = cached.get(p).map(|n| usize::try_from(n.stat.data_length).unwrap_or(0));
                p.len() + STAT_BYTES + known.unwrap_or(avg_data_len)
            }
            Op::Children(p) => {
                let children = loaded.get(p).map_or(0, |n| usize::try_from(n.stat.num_children).unwrap_or(0));
                16 + children * NAME_BYTES
            }
        };
        if !ops.is_empty() && (ops.len() >= max_ops || bytes + estimate > BATCH_BYTES) {
            break;
        }
        bytes += estimate;
        if let Some(op) = queue.pop_front() {
            ops.push(op);
        }
    }
    ops
}
