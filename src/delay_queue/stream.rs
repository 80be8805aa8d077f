//! How items come out of a delay queue: the callback each item's timeout
//! runs on the driver, which hands the item's key to the queue's `Signal`,
//! and the stream, which takes the item out of its slot.

use std::any::Any;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use crossbeam_queue::SegQueue;
use futures::Stream;

use crate::delay_queue::key::{DelayKey, Expired};
use crate::delay_queue::waiters::Waiters;
use crate::delay_queue::DelayQueue;
use crate::engine::shutdown_hooks::ShutdownHook;
use crate::engine::task::Callback;

/// What the driver and the consumers of one queue share: the keys of items
/// whose deadline fired, in the order they fired, and who waits for them.
#[derive(Default)]
pub(crate) struct Signal {
    fired: SegQueue<DelayKey>,
    pub(crate) waiters: Waiters,
}

impl ShutdownHook for Signal {
    /// A consumer waiting on an empty queue looks again, and ends.
    fn shut_down(&self) {
        self.waiters.wake_all();
    }
}

/// The task of an item's timeout: on the driver, it passes the key on. It
/// holds the signal weakly, so a timeout that outlives its queue fires
/// into nothing.
pub(crate) struct Fired {
    pub(crate) signal: Weak<Signal>,
    pub(crate) key: DelayKey,
}

impl Callback for Fired {
    #[inline]
    fn run(self: Box<Self>, _: &dyn Any) {
        if let Some(signal) = self.signal.upgrade() {
            signal.fired.push(self.key);
            signal.waiters.wake_all();
        }
    }

    fn cancelled(self: Box<Self>, _: &dyn Any) {}

    fn runs_in_place(&self) -> bool {
        true
    }
}

impl<T> DelayQueue<T> {
    /// The next expired item: `Ready(Some)` with one whose deadline has
    /// passed, `Pending` if there is none yet (the waker is woken when
    /// there is), and `Ready(None)` only once the timer has stopped and
    /// the queue is empty. tokio-util's `poll_expired`.
    ///
    /// Items come out in the order their deadlines fired: deadline order,
    /// and insertion order among equal deadlines inserted from one thread.
    /// Each item comes out once, to one caller, however many poll.
    pub fn poll_expired(&self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        if let Some(expired) = self.next_fired() {
            return Poll::Ready(Some(expired));
        }
        self.inner.signal.waiters.register(cx.waker());
        if let Some(expired) = self.next_fired() {
            return Poll::Ready(Some(expired));
        }
        if self.inner.timer.is_shutdown() && self.is_empty() {
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    /// Takes out the next item whose key the driver passed on, skipping
    /// keys whose items were removed meanwhile.
    fn next_fired(&self) -> Option<Expired<T>> {
        while let Some(key) = self.inner.signal.fired.pop() {
            let slot = self
                .inner
                .store
                .lock_of(&key)
                .and_then(|mut s| s.take(&key));
            if let Some(slot) = slot {
                return Some(Expired {
                    deadline: slot.timeout.deadline(),
                    item: slot.item,
                    key,
                });
            }
        }
        None
    }

    /// The shutdown hook to register for this queue.
    pub(crate) fn hook(signal: &Arc<Signal>) -> Arc<dyn ShutdownHook> {
        signal.clone()
    }
}

/// The expired items, as [`poll_expired`](DelayQueue::poll_expired) gives
/// them. Use [`StreamExt::next`](futures::StreamExt::next) on it.
impl<T> Stream for DelayQueue<T> {
    type Item = Expired<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.poll_expired(cx)
    }
}

/// A shared reference is a stream too, for consumers that keep the queue
/// borrowed.
impl<T> Stream for &DelayQueue<T> {
    type Item = Expired<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.poll_expired(cx)
    }
}
