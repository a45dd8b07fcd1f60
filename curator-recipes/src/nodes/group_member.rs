//! [`GroupMember`]: membership of a group, with the view of every other member.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use curator_cache::{PathChildrenCache, PathChildrenCacheEvent, StartMode};
use curator_core::{path, CreateMode, CuratorFramework, Result};
use curator_core::{Callback, EventStream, ListenerId, Listeners};
use curator_core::{LifeState, Lifecycle};

use super::persistent_node::PersistentNode;
use crate::leader::participant::validate_participant_id;

/// A change in a group's membership, as a [`GroupMember`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemberEvent {
    /// A member joined (or was there when the view was first loaded).
    Joined {
        /// The member's id.
        id: String,
        /// Its payload.
        data: Vec<u8>,
    },
    /// A member's payload changed.
    Updated {
        /// The member's id.
        id: String,
        /// Its new payload.
        data: Vec<u8>,
    },
    /// A member left (its session ended, or it closed).
    Left {
        /// The member's id.
        id: String,
    },
}

/// Membership of a group (Curator's `GroupMember`): this process's node `P/<id>`, ephemeral
/// and kept in place by a [`PersistentNode`], and a cache of `P` for the other members.
///
/// Java clients using Curator's `GroupMember` on the same path see the same members, with the
/// same payloads.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::{GroupMember, MemberEvent};
///
/// let member = GroupMember::builder(&fw, "/cluster/members", "node-3")
///     .payload(b"10.0.0.3:7000".to_vec())
///     .build()?;
/// member.start()?;
/// member.ready().await?; // registered, or refused for good (NoAuth...): then closed
/// member.add_listener(|event: &MemberEvent| {
///     if let MemberEvent::Left { id } = event {
///         tracing::info!(member = %id, "left");
///     }
/// });
/// for (id, payload) in member.current_members() {
///     tracing::info!(member = %id, bytes = payload.len(), "member");
/// }
/// member.close().await;
/// # Ok(()) }
/// ```
///
/// # After an outage
/// The member's node comes back as soon as the client has a session again, even when the
/// server brought back the old session (and its node) after a restart: see
/// [`PersistentNode`]'s rules for a node in the way.
pub struct GroupMember {
    fw: CuratorFramework,
    /// Started by `start`, closed by `close`, the drop, or a refused first registration.
    lifecycle: Lifecycle,
    /// Shared with the start's task, which waits for the first registration.
    node: Arc<PersistentNode>,
    cache: Arc<PathChildrenCache>,
    events: Arc<Listeners<MemberEvent>>,
    path: String,
    id: String,
}

impl std::fmt::Debug for GroupMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupMember").field("path", &self.path).field("id", &self.id).finish_non_exhaustive()
    }
}

/// Builder of a [`GroupMember`]; see [`GroupMember::builder`].
#[derive(Clone)]
pub struct GroupMemberBuilder {
    fw: CuratorFramework,
    path: String,
    id: String,
    payload: Option<Vec<u8>>,
    listeners: Vec<Callback<MemberEvent>>,
}

impl std::fmt::Debug for GroupMemberBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupMemberBuilder")
            .field("path", &self.path)
            .field("id", &self.id)
            .field("listeners", &self.listeners.len())
            .finish_non_exhaustive()
    }
}

impl GroupMemberBuilder {
    /// This member's payload (default: this host's address, as Curator).
    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.payload = Some(payload.into());
        self
    }

    /// A listener in place before the group is first loaded, so that it hears the members
    /// already there as joins (one added with [`GroupMember::add_listener`] after `start` may
    /// miss some of them).
    pub fn listener(mut self, listener: impl Fn(&MemberEvent) + Send + Sync + 'static) -> Self {
        self.listeners.push(Arc::new(listener));
        self
    }

    /// Checks the settings and makes the member, latent: nothing is sent before
    /// [`start`](GroupMember::start).
    ///
    /// # Errors
    /// A typed error: [`CuratorError::InvalidPath`] for an invalid path;
    /// [`CuratorError::InvalidArgument`] for an id that is not one node name (the check every
    /// participant id gets, as the leader recipes' do); [`CuratorError::DataTooLarge`] for a
    /// payload over the framework's limit.
    ///
    /// [`CuratorError::InvalidPath`]: curator_core::CuratorError::InvalidPath
    /// [`CuratorError::InvalidArgument`]: curator_core::CuratorError::InvalidArgument
    /// [`CuratorError::DataTooLarge`]: curator_core::CuratorError::DataTooLarge
    pub fn build(self) -> Result<GroupMember> {
        path::validate(&self.path)?;
        validate_participant_id(&self.path, &self.id)?;
        let node_path = path::make_path(&self.path, &self.id);
        path::validate(&node_path)?;
        let payload = self.payload.unwrap_or_else(|| curator_core::local_address().into_bytes());
        self.fw.check_data(&node_path, &payload)?;
        let cache = PathChildrenCache::new(&self.fw, &self.path, true)?;
        let node = PersistentNode::builder(&self.fw, &node_path).mode(CreateMode::Ephemeral).data(payload).build()?;
        let events = Arc::new(Listeners::new());
        for listener in self.listeners {
            events.add_callback(listener);
        }
        Ok(GroupMember {
            fw: self.fw,
            lifecycle: Lifecycle::new("GroupMember"),
            node: Arc::new(node),
            cache: Arc::new(cache),
            events,
            path: self.path,
            id: self.id,
        })
    }
}

fn member_event(event: &PathChildrenCacheEvent) -> Option<MemberEvent> {
    let data = |child: &curator_cache::ChildData| child.data().map(<[u8]>::to_vec).unwrap_or_default();
    Some(match event {
        PathChildrenCacheEvent::ChildAdded(c) => MemberEvent::Joined { id: c.name().to_string(), data: data(c) },
        PathChildrenCacheEvent::ChildUpdated(c) => MemberEvent::Updated { id: c.name().to_string(), data: data(c) },
        PathChildrenCacheEvent::ChildRemoved(c) => MemberEvent::Left { id: c.name().to_string() },
        _ => return None,
    })
}

impl GroupMember {
    /// A builder for member `id` of the group at `path`.
    pub fn builder(fw: &CuratorFramework, path: &str, id: &str) -> GroupMemberBuilder {
        GroupMemberBuilder {
            fw: fw.clone(),
            path: path.to_string(),
            id: id.to_string(),
            payload: None,
            listeners: Vec::new(),
        }
    }

    /// Joins the group (Curator's `start`): starts this member's node and the cache of the
    /// group, in the background; returns at once. [`ready`](Self::ready) gives the outcome of
    /// the first registration; [`wait_initialized`](Self::wait_initialized) waits for the
    /// group's first load.
    ///
    /// # Errors
    /// [`CuratorError::AlreadyStarted`], [`CuratorError::AlreadyClosed`],
    /// [`CuratorError::NoRuntime`] outside a tokio runtime, [`CuratorError::Closed`] on a
    /// closed framework ([`Lifecycle`](curator_core::Lifecycle)); nothing is sent then.
    ///
    /// [`CuratorError::AlreadyStarted`]: curator_core::CuratorError::AlreadyStarted
    /// [`CuratorError::AlreadyClosed`]: curator_core::CuratorError::AlreadyClosed
    /// [`CuratorError::NoRuntime`]: curator_core::CuratorError::NoRuntime
    /// [`CuratorError::Closed`]: curator_core::CuratorError::Closed
    pub fn start(&self) -> Result<()> {
        self.lifecycle.start(&self.fw, |started| {
            self.node.start()?;
            self.events.start(started.handle().clone());
            // The cache's events, in order, turned into member events on the runtime's worker,
            // as the service cache does: a callback would run on the blocking pool, one more
            // thread hop per event. The relay ends when the cache closes.
            let publish = self.events.clone();
            started.relay(self.cache.events(), move |event| {
                if let Some(member) = member_event(&event) {
                    publish.publish(member);
                }
            });
            let readiness = started.readiness();
            let (node, cache, events) = (self.node.clone(), self.cache.clone(), self.events.clone());
            started.spawn(async move {
                let first = async {
                    cache.start(StartMode::Normal)?;
                    node.first_outcome().await
                };
                match first.await {
                    Ok(()) => readiness.ready(),
                    Err(err) => {
                        // Closed, as the member is: nothing is left running.
                        readiness.refused(err);
                        cache.close().await;
                        events.close();
                        node.close().await;
                    }
                }
            });
            Ok(())
        })
    }

    /// Waits for the outcome of the first registration: `Ok` once this member's node was
    /// first made, or its first attempt failed in a way retrying may mend (no connection
    /// within the retry policy: the node keeps trying in the background).
    ///
    /// # Errors
    /// The refusal of the first registration, which closed the member
    /// ([`CuratorError::is_permanent`]: [`CuratorError::NoAuth`] for an ACL that refuses the
    /// client..., which Curator only logs), or the error of starting the group's cache;
    /// [`CuratorError::NotStarted`] before [`start`](Self::start);
    /// [`CuratorError::AlreadyClosed`] when closed before a first outcome.
    ///
    /// [`CuratorError::is_permanent`]: curator_core::CuratorError::is_permanent
    /// [`CuratorError::NoAuth`]: curator_core::CuratorError::NoAuth
    /// [`CuratorError::NotStarted`]: curator_core::CuratorError::NotStarted
    /// [`CuratorError::AlreadyClosed`]: curator_core::CuratorError::AlreadyClosed
    pub async fn ready(&self) -> Result<()> {
        self.lifecycle.ready().await
    }

    /// Where the member is in its life: [`LifeState::Closed`] after [`close`](Self::close)
    /// or a refused first registration.
    pub fn state(&self) -> LifeState {
        self.lifecycle.state()
    }

    /// The members and their payloads, as the cache sees them, with this member always
    /// included (with its current payload) even before its node is seen.
    pub fn current_members(&self) -> BTreeMap<String, Vec<u8>> {
        let mut members: BTreeMap<String, Vec<u8>> = self
            .cache
            .current_data()
            .into_iter()
            .map(|child| (self.id_from_path(child.path()), child.data().map(<[u8]>::to_vec).unwrap_or_default()))
            .collect();
        members.entry(self.id.clone()).or_insert_with(|| self.node.data());
        members
    }

    /// The member id of a member node's path (its last segment).
    pub fn id_from_path(&self, path: &str) -> String {
        path::node_name(path).to_string()
    }

    /// This member's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sets this member's payload (kept across re-registrations).
    pub fn set_this_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        self.node.set_data(data)
    }

    /// Waits up to `timeout` for this member's node to be first registered; true once done.
    pub async fn wait_for_registration(&self, timeout: Duration) -> bool {
        self.node.wait_for_initial_create(timeout).await
    }

    /// Waits until the group's first load is done.
    pub async fn wait_initialized(&self) -> Result<()> {
        self.cache.wait_initialized().await
    }

    /// Calls `listener` for every join, leave and payload change from now on, in order. To hear
    /// the members present at start as joins too, give the listener to the builder
    /// ([`GroupMemberBuilder::listener`]).
    pub fn add_listener(&self, listener: impl Fn(&MemberEvent) + Send + Sync + 'static) -> ListenerId {
        self.events.add_callback(Arc::new(listener))
    }

    /// Removes a listener.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.events.remove(id)
    }

    /// The changes to come, as a stream.
    pub fn events(&self) -> EventStream<MemberEvent> {
        self.events.stream()
    }

    /// Leaves the group: stops the cache and deletes this member's node (see
    /// [`PersistentNode::close`]). Idempotent.
    pub async fn close(&self) {
        self.lifecycle.close();
        self.cache.close().await;
        self.events.close();
        self.node.close().await;
    }
}

impl Drop for GroupMember {
    /// Leaves the group in the background: the node is deleted by its keeper (see
    /// [`close`](Self::close)).
    fn drop(&mut self) {
        self.lifecycle.close();
        // The cache stops when its last handle goes: this one now, the start's task's once it
        // has the first outcome (which the node's close below brings about at once).
        self.events.close();
        self.node.close_in_background();
    }
}
