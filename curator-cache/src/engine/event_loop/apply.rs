//! Applying what the engine's reads and the watch brought back: one read, one deletion, one
//! `rebuild_node`, each checked against the map's newer state first.

use std::sync::Arc;

use curator_core::{zk, CuratorError};

use super::super::scope::descendants;
use super::super::EngineEvent;
use super::{Action, Engine};
use crate::child_data::ChildData;

impl Engine {
    pub(super) fn apply(&mut self, action: Action) {
        match action {
            Action::Read { path, result, received } => match result {
                Ok((data, stat)) => self.apply_read(path, data, stat, received),
                Err(zk::Error::NoNode) => {
                    tracing::trace!(path = %path, "node gone before its read; its deletion follows")
                }
                Err(err) => {
                    tracing::debug!(path = %path, error = %err, "read failed; the cache will load again");
                    self.need_sync();
                }
            },
            Action::Delete { path, zxid, received } => self.apply_delete(&path, zxid, received),
            Action::Rebuilt { id, path, result } => self.apply_rebuilt(id, path, result),
        }
    }

    /// Applies the read of a `rebuild_node` without events: the node as read (unless the map
    /// holds a newer state), or nothing if it is gone.
    fn apply_rebuilt(&mut self, id: u64, path: String, result: std::result::Result<(Vec<u8>, zk::Stat), zk::Error>) {
        // Not there: a load started since, and answers the command.
        let Some(reply) = self.node_rebuilds.remove(&id) else { return };
        let outcome = match result {
            Ok((data, stat)) => {
                let mut nodes = self.shared.nodes_mut();
                let newer =
                    nodes.get(&path).is_none_or(|old| stat.czxid != old.stat.czxid || stat.mzxid > old.stat.mzxid);
                if newer {
                    let node = ChildData { path, stat, data: self.config.cache_data.then_some(data) };
                    nodes.insert(Arc::new(node));
                }
                Ok(())
            }
            Err(zk::Error::NoNode) => {
                let mut nodes = self.shared.nodes_mut();
                let below: Vec<String> = descendants(&nodes, &path).map(|(k, _)| k.to_string()).collect();
                for key in below {
                    nodes.remove(&key);
                }
                nodes.remove(&path);
                Ok(())
            }
            Err(err) => {
                tracing::debug!(path = %path, error = %err, "rebuild read failed; the cache will load again");
                self.need_sync();
                Err(CuratorError::from_zk(&path, err))
            }
        };
        let _ = reply.send(outcome);
    }

    fn apply_read(&mut self, path: String, data: Vec<u8>, stat: zk::Stat, received: std::time::Instant) {
        let new = Arc::new(ChildData { path, stat, data: self.config.cache_data.then_some(data) });
        let mut events = Vec::with_capacity(1);
        {
            let mut nodes = self.shared.nodes_mut();
            match nodes.get(new.path()) {
                None => events.push(EngineEvent::Created(new.clone())),
                Some(old) if stat.mzxid <= old.stat.mzxid => {
                    tracing::trace!(path = %new.path, "read brings nothing new");
                    return;
                }
                Some(old) if stat.czxid != old.stat.czxid => {
                    events.push(EngineEvent::Deleted(old.clone()));
                    events.push(EngineEvent::Created(new.clone()));
                }
                Some(old) => events.push(EngineEvent::Changed(old.clone(), new.clone())),
            }
            nodes.insert(new);
        }
        for event in events {
            self.emit(event);
        }
        curator_core::metrics::cache_event_delivered(self.config.kind, received);
    }

    fn apply_delete(&mut self, path: &str, zxid: i64, received: std::time::Instant) {
        let mut removed = Vec::new();
        {
            let mut nodes = self.shared.nodes_mut();
            let Some(node) = nodes.get(path) else { return };
            if zxid >= 0 && node.stat.czxid > zxid {
                tracing::trace!(path = %path, "deletion of an older incarnation");
                return;
            }
            let below: Vec<String> = descendants(&nodes, path).rev().map(|(k, _)| k.to_string()).collect();
            for key in below {
                if let Some(node) = nodes.remove(&key) {
                    removed.push(node);
                }
            }
            if let Some(node) = nodes.remove(path) {
                removed.push(node);
            }
        }
        for node in removed {
            tracing::trace!(path = %node.path, "node deleted");
            self.emit(EngineEvent::Deleted(node));
        }
        curator_core::metrics::cache_event_delivered(self.config.kind, received);
    }
}
