//! How items come out of a delay queue: its `Signal`, the listener its items' timeouts notify on the
//! driver with the item's token, and the stream, which takes the item out of its slot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::{collections::VecDeque, pin::Pin};

use futures::Stream;

use crate::delay_queue::store::Shard;
use crate::delay_queue::{key::DelayKey, key::Expired, waiters::Waiters, DelayQueue};
use crate::engine::{driver::Listener, sync::lock, sync::Mutex, sync::MutexGuard};

/// What the driver and the consumers of one queue share: the tokens of items whose deadline fired
/// (`DelayKey::token`), in the order they fired, who waits for them, and whether the queue was
/// closed.
#[derive(Default)]
pub(crate) struct Signal {
    fired: Mutex<VecDeque<u64>>,
    pub(crate) waiters: Waiters,
    pub(super) closed: AtomicBool,
}

/// The queue's listener: on the driver, it passes the fired item's token on.
impl Listener for Signal {
    fn hear(&self, token: u64) {
        lock(&self.fired).push_back(token);
        self.waiters.wake_all();
    }

    /// A consumer waiting on an empty queue looks again, and ends.
    fn shut_down(&self) {
        self.waiters.wake_all();
    }
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

    /// Takes out the next item whose token the driver passed on, skipping tokens whose items were
    /// removed meanwhile.
    fn next_fired(&self) -> Option<Expired<T>> {
        let pop = || lock(&self.inner.signal.fired).pop_front();
        while let Some(token) = pop() {
            let taken =
                |(mut shard, key): (MutexGuard<'_, Shard<T>>, _)| Some((key, shard.take(&key)?));
            if let Some((key, slot)) = self.fired_key(token).and_then(taken) {
                self.inner.timer.shared().release(slot.entry, 1); // it fired
                self.wake_if_ending(); // a consumer that found it not yet empty looks again
                return Some(self.inner.expired(key, slot));
            }
        }
        None
    }

    /// The key of the first fired item still in the queue, which the stream yields before any
    /// other: for `peek`. Tokens of items removed meanwhile are dropped, as `next_fired` skips them.
    pub(super) fn peek_fired(&self) -> Option<DelayKey> {
        let fired = &self.inner.signal.fired;
        loop {
            let token = *lock(fired).front()?; // not held across the store's lock
            if let Some((_, key)) = self.fired_key(token) {
                return Some(key);
            }
            let mut fired = lock(fired);
            if fired.front() == Some(&token) {
                fired.pop_front();
            }
        }
    }

    /// The fired item `token` names, if it is in the queue: its shard, locked, and its key.
    fn fired_key(&self, token: u64) -> Option<(MutexGuard<'_, Shard<T>>, DelayKey)> {
        let shared = self.inner.timer.shared();
        let shard = self.inner.store.lock_of(&DelayKey::from_token(token))?;
        let key = shard.fired_key(token, |entry| shared.entry(entry).task_gone())?;
        Some((shard, key))
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
