//! [`Cleanup`]: what makes an acquire cancel safe.

use std::sync::Arc;

use curator_core::CuratorFramework;
use tokio::sync::watch;

/// Where an acquire reports the path of its node while it is known (a latch's `our_path()`):
/// the acquire sets it, and an abandoned acquire's [`Cleanup`] clears it once its delete is done.
pub(crate) type NodeReporter = Arc<watch::Sender<Option<String>>>;

/// Deletes an abandoned acquire's node when dropped while armed: by its path once known, else
/// every child of the recipe's path with our protected prefix (the create's outcome is
/// unknown). The delete runs as tracked background work, so that `close()` waits for it.
#[derive(Debug)]
pub(crate) struct Cleanup {
    fw: CuratorFramework,
    parent: String,
    prefix: String,
    path: Option<String>,
    armed: bool,
    /// Cleared (if it still names our node) once the delete is done.
    reporter: Option<NodeReporter>,
}

impl Cleanup {
    /// An armed cleanup for nodes under `parent` named with `prefix`.
    pub(crate) fn new(fw: &CuratorFramework, parent: &str, prefix: &str) -> Self {
        Self {
            fw: fw.clone(),
            parent: parent.to_string(),
            prefix: prefix.to_string(),
            path: None,
            armed: true,
            reporter: None,
        }
    }

    /// An armed cleanup for the node at `path`, whose name is known before it is created (a
    /// barrier member's `P/<uuid>`): no prefix search is ever needed.
    pub(crate) fn of_node(fw: &CuratorFramework, path: &str) -> Self {
        let parent = curator_core::path::parent(path).to_string();
        Self {
            fw: fw.clone(),
            parent,
            prefix: String::new(),
            path: Some(path.to_string()),
            armed: true,
            reporter: None,
        }
    }

    /// Clears `reporter` (if it still names our node) once an abandoned node's delete is done,
    /// so that whoever reported the path can wait for it to go instead of deleting it again.
    pub(crate) fn reporting(&mut self, reporter: NodeReporter) {
        self.reporter = Some(reporter);
    }

    /// Our node exists at `path`: delete that one rather than searching by prefix.
    pub(crate) fn known(&mut self, path: &str) {
        self.path = Some(path.to_string());
        self.armed = true;
    }

    /// The node is handed over to its holder, or none of ours exists (no create was sent, or
    /// the server refused every one): leave it alone.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }

    /// A node of ours may exist from now on (a create is about to be sent): delete it if
    /// abandoned.
    pub(crate) fn arm(&mut self) {
        self.armed = true;
    }

    /// Whether a node of ours may exist (see [`arm`](Self::arm)).
    pub(crate) fn is_armed(&self) -> bool {
        self.armed
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let fw = self.fw.clone();
        let parent = std::mem::take(&mut self.parent);
        let prefix = std::mem::take(&mut self.prefix);
        let known = self.path.take();
        let reporter = self.reporter.take();
        self.fw.spawn_background(async move {
            tracing::debug!(parent = %parent, prefix = %prefix, path = ?known, "abandoned node: deleting it");
            let result = match &known {
                Some(p) => fw.delete().guaranteed().quietly().for_path(p).await,
                None => fw.delete_protected(&parent, &prefix, None).await,
            };
            if let Err(err) = result {
                // An unknown outcome: the guaranteed delete goes on in the background.
                if !err.outcome_unknown() {
                    fw.report_unhandled(&format!("could not delete an abandoned recipe node under {parent}"), &err);
                }
            }
            if let (Some(reporter), Some(path)) = (reporter, known) {
                reporter.send_if_modified(|reported| {
                    let ours = reported.as_deref() == Some(path.as_str());
                    if ours {
                        *reported = None;
                    }
                    ours
                });
            }
        });
    }
}
