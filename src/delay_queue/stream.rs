//! How items come out of a delay queue: the listener its items' timeouts
//! notify on the driver, which hands the item's key to the queue's
//! `Signal`, and the stream, which takes the item out of its slot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::{collections::VecDeque, pin::Pin};

use futures::Stream;

use crate::delay_queue::{key::DelayKey, key::Expired, waiters::Waiters, DelayQueue};
use crate::engine::{driver::ShutdownHook, entry::task::Listener, sync::lock, sync::Mutex};

/// What the driver and the consumers of one queue share: the keys of items whose deadline fired, in
/// the order they fired, who waits for them, and whether the queue was closed.
#[derive(Default)]
pub(crate) struct Signal {
    fired: Mutex<VecDeque<u64>>,
    pub(crate) waiters: Waiters,
    pub(super) closed: AtomicBool,
}

impl ShutdownHook for Signal {
    /// A consumer waiting on an empty queue looks again, and ends.
    fn shut_down(&self) {
        self.waiters.wake_all();
    }
}

/// The queue's listener: on the driver, it passes the fired item's key on. It holds the signal
/// weakly, so a timeout that outlives its queue fires into nothing.
pub(crate) fn listener(signal: &Arc<Signal>) -> Arc<Listener> {
    let signal = Arc::downgrade(signal);
    Listener::new(move |key| {
        if let Some(signal) = signal.upgrade() {
            lock(&signal.fired).push_back(key);
            signal.waiters.wake_all();
        }
    })
}

impl<T> DelayQueue<T> {
    /// The next expired item: `Ready(Some)` with one whose deadline has passed, `Pending` if there
    /// is none yet (the waker is woken when there is), and `Ready(None)` once the queue is empty
    /// and [closed](DelayQueue::close), or its timer stopped; with items left, once its timer's
    /// tokio runtime is gone, as none can come out. tokio-util's `poll_expired`, whose stream ends
    /// whenever the queue is empty.
    ///
    /// Items come out in the order their deadlines fired: deadline order, and insertion order among
    /// equal deadlines inserted from one thread. Each goes to one caller; for the wakers kept, see
    /// [the type's docs](DelayQueue#shared-not-owned).
    pub fn poll_expired(&self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        if let Some(expired) = self.next_fired() {
            return Poll::Ready(Some(expired));
        }
        self.inner.signal.waiters.register(&self.seat, cx.waker());
        // Look again; then, on a manual or tokio clock, what is due at this instant comes out at
        // this poll, as tokio-util's does (an item inserted already due, say): turn the wheel
        // here if no driver is turning it, and look once more.
        let shared = self.inner.timer.shared();
        let turned = || !shared.clock.is_real() && shared.turn_here();
        // Its timer dropped the items' tasks (its tokio runtime went): none left can come out.
        let none_can_come = || shared.tasks_dropped.load(Ordering::SeqCst);
        match self
            .next_fired()
            .or_else(|| turned().then(|| self.next_fired()).flatten())
        {
            Some(expired) => Poll::Ready(Some(expired)),
            None if self.is_ending() && (self.is_empty() || none_can_come()) => Poll::Ready(None),
            None => Poll::Pending,
        }
    }

    /// Takes out the next item whose key the driver passed on, skipping keys whose items were
    /// removed meanwhile.
    fn next_fired(&self) -> Option<Expired<T>> {
        let pop = || lock(&self.inner.signal.fired).pop_front();
        while let Some(key) = pop().map(DelayKey::from) {
            let shard = self.inner.store.lock_of(&key);
            if let Some(slot) = shard.and_then(|mut shard| shard.take(&key)) {
                self.inner.timer.shared().release(slot.entry, 1); // it fired
                self.wake_if_ending(); // a consumer that found it not yet empty looks again
                return Some(self.inner.expired(key, slot));
            }
        }
        None
    }

    /// The key of the first fired item still in the queue, which the stream yields before any
    /// other: for `peek`. Keys of items removed meanwhile are dropped, as `next_fired` skips them.
    pub(super) fn peek_fired(&self) -> Option<DelayKey> {
        let fired = &self.inner.signal.fired;
        loop {
            let key = *lock(fired).front()?; // not held across the store's lock
            if self.with_slot(&key.into(), |_| ()).is_some() {
                return Some(key.into());
            }
            let mut fired = lock(fired);
            if fired.front() == Some(&key) {
                fired.pop_front();
            }
        }
    }
}

/// The expired items, as [`poll_expired`](DelayQueue::poll_expired) gives them. Use
/// [`StreamExt::next`](futures::StreamExt::next) on it.
impl<T> Stream for DelayQueue<T> {
    type Item = Expired<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.poll_expired(cx)
    }
}

/// A shared reference is a stream too.
impl<T> Stream for &DelayQueue<T> {
    type Item = Expired<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.poll_expired(cx)
    }
}
