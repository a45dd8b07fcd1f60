//! The methods the id, priority and delay queues share with [`DistributedQueue`], written once:
//! each hands the call to the queue it wraps.
//!
//! [`DistributedQueue`]: super::DistributedQueue

/// Adds to `impl<T: Send + Sync + 'static> $queue<T>` (a struct whose field `queue` is the wrapped
/// `DistributedQueue<T>`) its life cycle, error mode, events and put listeners.
macro_rules! delegate_to_queue {
    ($queue:ident) => {
        impl<T> std::fmt::Debug for $queue<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($queue)).field("queue", &self.queue).finish_non_exhaustive()
            }
        }

        impl<T: Send + Sync + 'static> $queue<T> {
            /// The queue's path.
            pub fn path(&self) -> &str {
                self.queue.path()
            }

            /// Starts the queue: its task creates the queue's path (and the lock path) if
            /// missing, as Curator does, and, if the queue has a consumer, takes the items
            /// ([`DistributedQueue::start`]). Returns at once.
            ///
            /// # Errors
            /// As [`DistributedQueue::start`]: the lifecycle variants, naming this type.
            ///
            /// [`DistributedQueue::start`]: super::DistributedQueue::start
            pub fn start(&self) -> curator_core::Result<()> {
                self.queue.start()
            }

            /// Waits for the queue's paths to be made ([`DistributedQueue::ready`]).
            ///
            /// # Errors
            /// As [`DistributedQueue::ready`]: the error of creating the paths, which closed
            /// the queue; the lifecycle variants, naming this type.
            ///
            /// [`DistributedQueue::ready`]: super::DistributedQueue::ready
            pub async fn ready(&self) -> curator_core::Result<()> {
                self.queue.ready().await
            }

            /// Where the queue is in its life ([`DistributedQueue::state`]).
            ///
            /// [`DistributedQueue::state`]: super::DistributedQueue::state
            pub fn state(&self) -> curator_core::LifeState {
                self.queue.state()
            }

            /// Stops taking items and waits for the queue's task to end
            /// ([`DistributedQueue::close`]). Idempotent.
            ///
            /// [`DistributedQueue::close`]: super::DistributedQueue::close
            pub async fn close(&self) {
                self.queue.close().await
            }

            /// Sets the error mode from now on (Curator's `setErrorMode`).
            pub fn set_error_mode(&self, mode: super::ErrorMode) {
                self.queue.set_error_mode(mode)
            }

            /// A stream of the queue's events from now on; it ends after
            /// [`close`](Self::close).
            pub fn events(&self) -> curator_core::EventStream<super::QueueEvent> {
                self.queue.events()
            }

            /// Adds a callback for the queue's events (run in order, off the I/O tasks).
            pub fn add_listener(
                &self,
                listener: impl Fn(&super::QueueEvent) + Send + Sync + 'static,
            ) -> curator_core::ListenerId {
                self.queue.add_listener(listener)
            }

            /// Removes a listener added with [`add_listener`](Self::add_listener).
            pub fn remove_listener(&self, id: curator_core::ListenerId) -> bool {
                self.queue.remove_listener(id)
            }

            /// Waits at most `timeout` until no put made in the background is in flight
            /// ([`DistributedQueue::flush_puts`]).
            ///
            /// [`DistributedQueue::flush_puts`]: super::DistributedQueue::flush_puts
            pub async fn flush_puts(&self, timeout: std::time::Duration) -> bool {
                self.queue.flush_puts(timeout).await
            }

            /// A stream of the outcomes of the puts made in the background from now on
            /// ([`DistributedQueue::put_events`]).
            ///
            /// [`DistributedQueue::put_events`]: super::DistributedQueue::put_events
            pub fn put_events(&self) -> curator_core::EventStream<super::QueuePutEvent<T>> {
                self.queue.put_events()
            }

            /// Adds a callback for the outcomes of the puts made in the background
            /// ([`DistributedQueue::add_put_listener`]).
            ///
            /// [`DistributedQueue::add_put_listener`]: super::DistributedQueue::add_put_listener
            pub fn add_put_listener(
                &self,
                listener: impl Fn(&super::QueuePutEvent<T>) + Send + Sync + 'static,
            ) -> curator_core::ListenerId {
                self.queue.add_put_listener(listener)
            }

            /// Removes a listener added with [`add_put_listener`](Self::add_put_listener).
            pub fn remove_put_listener(&self, id: curator_core::ListenerId) -> bool {
                self.queue.remove_put_listener(id)
            }
        }
    };
}

pub(crate) use delegate_to_queue;
