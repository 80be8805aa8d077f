//! How items come out of a delay queue: the listener each shard's items'
//! timeouts notify on the driver, which hands the item's token to the
//! queue's `Signal`, and the stream, which takes the item out of its slot.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crossbeam_queue::SegQueue;
use futures::Stream;

use crate::delay_queue::key::{DelayKey, Expired};
use crate::delay_queue::waiters::Waiters;
use crate::delay_queue::DelayQueue;
use crate::engine::shutdown_hooks::ShutdownHook;
use crate::engine::task::Listener;

/// What the driver and the consumers of one queue share: the keys of items
/// whose deadline fired, in the order they fired, and who waits for them.
#[derive(Default)]
pub(crate) struct Signal {
    fired: SegQueue<(u32, u64)>,
    pub(crate) waiters: Waiters,
}

impl ShutdownHook for Signal {
    /// A consumer waiting on an empty queue looks again, and ends.
    fn shut_down(&self) {
        self.waiters.wake_all();
    }
}

/// What an item's timeout hands the shard's listener when it fires: the
/// item's slab index, and the low half of its generation, which tells a
/// reused slot from the item it held (a slot is reused 2^32 times before
/// the halves repeat).
pub(crate) fn token(key: &DelayKey) -> u64 {
    (u64::from(key.index) << 32) | (key.generation & 0xffff_ffff)
}

/// The listener of shard `shard`: on the driver, it passes the fired
/// item's shard and token on. It holds the signal weakly, so a timeout
/// that outlives its queue fires into nothing.
pub(crate) fn listener(signal: &Arc<Signal>, shard: u32) -> Arc<Listener> {
    let signal = Arc::downgrade(signal);
    Listener::new(move |token| {
        if let Some(signal) = signal.upgrade() {
            signal.fired.push((shard, token));
            signal.waiters.wake_all();
        }
    })
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
    ///
    /// On `Pending`, this handle keeps `cx`'s waker in place of the one its
    /// previous poll left (waking that one, if it would wake another task):
    /// the queue holds one waker per handle, not one per poll.
    pub fn poll_expired(&self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        if let Some(expired) = self.next_fired() {
            return Poll::Ready(Some(expired));
        }
        self.inner.signal.waiters.register(&self.seat, cx.waker());
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
        while let Some((shard, token)) = self.inner.signal.fired.pop() {
            if let Some((key, slot)) = self.inner.store.take_fired(shard, token) {
                return Some(Expired {
                    deadline: slot.timeout.deadline(),
                    item: slot.item,
                    key,
                });
            }
        }
        None
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
