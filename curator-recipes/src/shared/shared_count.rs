//! [`SharedCount`]: a [`SharedValue`] holding an `i32`, 4 bytes big-endian (Curator's
//! `SharedCount`).

use std::sync::Arc;

use curator_core::LifeState;
use curator_core::{ConnectionState, CuratorError, CuratorFramework, Result};
use curator_core::{EventStream, ListenerId, Listeners};

use tokio::sync::watch;

use super::shared_value::{Current, SharedValue, SharedValueEvent, VersionedValue};

/// What a [`SharedCount`]'s listeners receive.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SharedCountEvent {
    /// The count changed: its newest value.
    Changed(VersionedValue<i32>),
    /// The node changed to data that is not a count (not 4 bytes):
    /// [`BadData`](CuratorError::BadData).
    Corrupted(CuratorError),
    /// The framework's connection changed.
    State(ConnectionState),
}

/// The 4 big-endian bytes of `count`, as Curator writes it ([`SharedCount::to_bytes`]).
fn to_bytes(count: i32) -> Vec<u8> {
    count.to_be_bytes().to_vec()
}

/// The count in `bytes` of the node `path` ([`SharedCount::from_bytes`]).
fn from_bytes(path: &str, bytes: &[u8]) -> Result<i32> {
    let exact: [u8; 4] = bytes.try_into().map_err(|_| CuratorError::BadData {
        path: path.to_string(),
        reason: format!("a shared count is 4 bytes, found {}", bytes.len()),
    })?;
    Ok(i32::from_be_bytes(exact))
}

/// A count every client sees (Curator's `SharedCount`): a [`SharedValue`] whose node holds 4
/// bytes big-endian, so Java clients using Curator's `SharedCount` on the same path see the
/// same count.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use curator_core::CuratorFramework;
/// use curator_recipes::{SharedCount, SharedCountEvent};
///
/// # let server = curator_test::TestingServer::start().await?;
/// let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// fw.start()?;
/// let count = SharedCount::new(&fw, "/app/workers", 4)?; // 4 if the node is new
/// let mut events = count.events();
/// count.start()?;
/// count.ready().await?; // the node made with the seed if missing, and read
/// assert_eq!(count.count()?, 4);
///
/// let seen = count.versioned_value()?;
/// assert!(count.try_set(&seen, 5).await?); // nobody wrote since we read
/// assert!(!count.try_set(&seen, 6).await?); // that version is gone
/// assert_eq!(count.count()?, 5);
/// while let Some(event) = events.next().await {
///     if let SharedCountEvent::Changed(v) = event {
///         assert_eq!(v.value, 5);
///         break;
///     }
/// }
/// count.close().await;
/// fw.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SharedCount {
    value: SharedValue,
    events: Arc<Listeners<SharedCountEvent>>,
    forward: ListenerId,
}

impl SharedCount {
    /// The 4 big-endian bytes of `count`, as Curator's `SharedCount` writes it: what to write to
    /// the node when setting it with the framework directly.
    pub fn to_bytes(count: i32) -> Vec<u8> {
        to_bytes(count)
    }

    /// The count in `bytes` read from the node `path`: exactly 4 big-endian bytes, else
    /// [`BadData`](CuratorError::BadData).
    pub fn from_bytes(path: &str, bytes: &[u8]) -> Result<i32> {
        from_bytes(path, bytes)
    }

    /// A count at `path` whose node is created with `seed` if missing. Nothing is sent before
    /// [`start`](Self::start).
    pub fn new(fw: &CuratorFramework, path: &str, seed: i32) -> Result<Self> {
        let value = SharedValue::named(fw, path, to_bytes(seed), "SharedCount")?;
        let events: Arc<Listeners<SharedCountEvent>> = Arc::new(Listeners::new());
        let (to, node) = (events.clone(), path.to_string());
        let forward = value.add_listener(move |event| {
            to.publish(match event {
                SharedValueEvent::Changed(v) => match from_bytes(&node, &v.value) {
                    Ok(count) => SharedCountEvent::Changed(VersionedValue { version: v.version, value: count }),
                    Err(err) => SharedCountEvent::Corrupted(err),
                },
                SharedValueEvent::State(state) => SharedCountEvent::State(*state),
            })
        });
        Ok(Self { value, events, forward })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.value.path()
    }

    /// Starts following the node, in the background: the node is created with the seed if
    /// missing, then read (the count's life is its value's: see [`SharedValue::start`]).
    /// Returns at once; [`ready`](Self::ready) waits for the first read.
    ///
    /// # Errors
    /// As [`SharedValue::start`], the lifecycle variants naming `SharedCount`.
    pub fn start(&self) -> Result<()> {
        let events = self.events.clone();
        self.value.start_with(|started| self.events.start(started.handle().clone()), move || events.close())
    }

    /// Waits for the node's first read (see [`SharedValue::ready`]).
    ///
    /// # Errors
    /// As [`SharedValue::ready`]: the refusal of the create or the first read, which closed
    /// the count; the lifecycle variants naming `SharedCount`.
    pub async fn ready(&self) -> Result<()> {
        self.value.ready().await
    }

    /// Where the count is in its life: [`LifeState::Closed`] after [`close`](Self::close) or
    /// a refused first step.
    pub fn state(&self) -> LifeState {
        self.value.state()
    }

    /// The local copy of the count; [`BadData`](CuratorError::BadData) when the node holds
    /// something else than 4 bytes.
    pub fn count(&self) -> Result<i32> {
        from_bytes(self.path(), &self.value.value())
    }

    /// The local copy with its version, for [`try_set`](Self::try_set).
    pub fn versioned_value(&self) -> Result<VersionedValue<i32>> {
        let v = self.value.versioned_value();
        Ok(VersionedValue { version: v.version, value: from_bytes(self.path(), &v.value)? })
    }

    /// A reader of the local copy that can wait for it to change (Curator's
    /// `SharedCountReader`), for the recipes the count sizes.
    pub(crate) fn reader(&self) -> CountReader {
        CountReader { path: self.path().to_string(), copy: self.value.subscribe() }
    }

    /// Sets the count whatever it was (applied once, decided by the handle's write tag after a
    /// lost reply: see [`SharedValue::set`]).
    pub async fn set(&self, count: i32) -> Result<()> {
        self.value.set(to_bytes(count)).await
    }

    /// Sets `count` only if the node is still at `previous`; false (and the local copy read
    /// again) if anyone wrote since. True only for this call's own write and false only when
    /// it was not applied, also after a lost reply: the write carries the handle's write tag
    /// ([`OutcomeUnknown`](curator_core::CuratorError::OutcomeUnknown) only if the tag cannot
    /// tell). See [`SharedValue::try_set`].
    pub async fn try_set(&self, previous: &VersionedValue<i32>, count: i32) -> Result<bool> {
        let previous = VersionedValue { version: previous.version, value: to_bytes(previous.value) };
        self.value.try_set(&previous, to_bytes(count)).await
    }

    /// Calls `listener` with every event, in order, on the blocking pool.
    pub fn add_listener(&self, listener: impl Fn(&SharedCountEvent) + Send + Sync + 'static) -> ListenerId {
        self.events.add_callback(Arc::new(listener))
    }

    /// Removes a listener.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.events.remove(id)
    }

    /// A stream of the events from now on.
    pub fn events(&self) -> EventStream<SharedCountEvent> {
        self.events.stream()
    }

    /// Stops following the node; the listeners end after the events already queued.
    /// Idempotent ([`Lifecycle`](curator_core::Lifecycle)).
    pub async fn close(&self) {
        self.value.remove_listener(self.forward);
        self.value.close().await;
        self.events.close();
    }
}

impl Drop for SharedCount {
    fn drop(&mut self) {
        self.events.close();
    }
}

/// Follows a [`SharedCount`]'s local copy (Curator's `SharedCountReader`); it keeps the last
/// copy once the count is dropped.
#[derive(Debug, Clone)]
pub(crate) struct CountReader {
    path: String,
    copy: watch::Receiver<Current>,
}

impl CountReader {
    /// The count now, marking it seen for [`changed`](Self::changed);
    /// [`BadData`](CuratorError::BadData) when the node holds something else than 4 bytes.
    pub(crate) fn count(&mut self) -> Result<i32> {
        from_bytes(&self.path, &self.copy.borrow_and_update().value)
    }

    /// Waits until the copy changes after the last [`count`](Self::count); never returns once
    /// the count is dropped.
    pub(crate) async fn changed(&mut self) {
        if self.copy.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
