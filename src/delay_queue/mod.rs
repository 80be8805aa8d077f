//! `DelayQueue`: items that come back out once their deadline passes, tokio-util's `DelayQueue`
//! on this crate's wheel, shared by handles that any thread or task may use at once.

mod key;
mod store;
mod stream;
mod waiters;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};
use std::{fmt, sync::atomic::Ordering, sync::Arc};

pub use key::{DelayKey, Expired};

use crate::engine::clock::Nanos;
use crate::engine::entry::task::{panic_message, Notice, Task, UserBox, LISTENER_IDS};
use crate::TimerError::{QueueClosed, TooManyQueues};
use crate::{current_timer, HashedWheelTimer, TimerError};
pub(crate) use store::shards;
use store::Store;
use stream::Signal;
use waiters::Seat;

/// A queue of items, each given back once its deadline has passed: tokio-util's
/// [`DelayQueue`](https://docs.rs/tokio-util/latest/tokio_util/time/struct.DelayQueue.html) on this
/// crate's wheel. Made by [`HashedWheelTimer::delay_queue`].
///
/// Use it to track many keyed deadlines: requests in flight, cache entries with a time to live,
/// idle connections, retries. [`insert`](Self::insert) an item with a delay and keep its
/// [`DelayKey`], to [`remove`](Self::remove) the item or [`reset`](Self::reset) its deadline.
/// Items whose deadline passes come out of the queue's [`Stream`](futures::Stream) of [`Expired`]
/// items, in deadline order, never early; as in tokio-util's, one inserted or reset already due
/// comes out at the next poll, before one due earlier in the same tick that the tick's end fires.
///
/// # Shared, not owned
///
/// Unlike tokio-util's, it is `Clone + Send + Sync` and every method takes `&self`: clones are
/// handles to one queue, so producers on any task or thread insert, reset and remove while a
/// consumer drains the stream, with no `Mutex` around it. Several consumers may drain it at once;
/// each item goes to exactly one of them.
///
/// A handle is one consumer: while the queue is empty it keeps the waker of each task's latest
/// poll of that handle, and drops them with the handle. Give each consuming task its own clone: up
/// to 64 tasks may share one handle (`&DelayQueue` is a stream); past that, each poll wakes the
/// oldest to poll again, busy.
///
/// # Where it differs from tokio-util's
///
/// - The stream of an empty queue is `Pending`, not finished, until the
///   queue is closed or its timer stopped (see [`poll_expired`](Self::poll_expired)).
/// - A stale key makes [`remove`](Self::remove) and [`reset`](Self::reset)
///   return `None` / `false`; they never panic.
///
/// # Memory
///
/// An item, its slot and its timeout's entry come back when it is removed or yielded; a key holds
/// nothing. Dropping the last handle [`clear`](Self::clear)s the queue.
///
/// # When the timer stops
///
/// [`stop`](HashedWheelTimer::stop) returns the items' pending timeouts among the rest; their items
/// stay in the queue, for [`remove`](Self::remove) or [`clear`](Self::clear). Running the task of
/// such a timeout (see [`Timeout::take_task`](crate::Timeout::take_task)) hands its item to the
/// stream, as its deadline would have. A `tokio_clock()` timer whose runtime is gone drops those
/// tasks instead: the stream ends, and the items stay in the queue.
///
/// # Examples
///
/// ```
/// use futures::StreamExt;
/// use hashed_wheel_timer::HashedWheelTimer;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hashed_wheel_timer::TimerError> {
/// let timer = HashedWheelTimer::builder().manual_clock().build()?;
/// let mut queue = timer.delay_queue();
/// let slow = queue.insert("request 1", Duration::from_millis(100))?;
/// let fast = queue.insert("request 2", Duration::from_millis(100))?;
/// assert_eq!(queue.remove(&fast), Some("request 2")); // its response came
///
/// timer.advance(Duration::from_millis(100));
/// let expired = queue.next().await.unwrap();
/// assert_eq!((expired.key(), *expired.get_ref()), (slow, "request 1"));
/// assert!(queue.is_empty());
/// # Ok(())
/// # }
/// ```
pub struct DelayQueue<T> {
    inner: Arc<Inner<T>>,
    /// This handle's slot among the consumers waiting (see `waiters.rs`).
    seat: Seat,
}

struct Inner<T> {
    timer: HashedWheelTimer,
    store: Store<T>,
    signal: Arc<Signal>,
    /// The signal's id among its timer's listeners, which the items' notices name; `None` if the
    /// timer had no id left (`TimerError::TooManyQueues`).
    listener: Option<u32>,
}

impl HashedWheelTimer {
    /// A new, empty [`DelayQueue`] on this timer (see its example). The queue keeps the timer
    /// alive.
    pub fn delay_queue<T: Send + 'static>(&self) -> DelayQueue<T> {
        self.delay_queue_with_capacity(0)
    }

    /// [`delay_queue`](Self::delay_queue), with room for `capacity` items inserted from this thread
    /// before the queue allocates (see [`DelayQueue::reserve`]).
    pub fn delay_queue_with_capacity<T: Send + 'static>(&self, capacity: usize) -> DelayQueue<T> {
        self.delay_queue_with_ids(capacity, LISTENER_IDS)
    }

    /// A queue whose listener takes one of the first `ids` ids (fewer in tests).
    pub(crate) fn delay_queue_with_ids<T>(&self, capacity: usize, ids: usize) -> DelayQueue<T> {
        let signal = Arc::new(Signal::default());
        DelayQueue {
            inner: Arc::new(Inner {
                timer: self.clone(),
                store: Store::new(capacity, self.shared().counts.limit()),
                listener: self.shared().listen(signal.clone(), ids),
                signal,
            }),
            seat: Seat::default(),
        }
    }
}

impl<T: Send + 'static> DelayQueue<T> {
    /// A new, empty queue on [`current_timer`]: tokio-util's `DelayQueue::new`.
    pub fn new() -> DelayQueue<T> {
        current_timer().delay_queue()
    }

    /// [`new`](Self::new), with room for `capacity` items, as [`reserve`](Self::reserve) makes.
    pub fn with_capacity(capacity: usize) -> DelayQueue<T> {
        current_timer().delay_queue_with_capacity(capacity)
    }

    /// Inserts `item`, to come out of the stream `delay` from now: never before, and at most a tick
    /// after. A zero delay is due at once: it wakes the consumers, and on a manual or tokio clock
    /// comes out at their next poll. Returns its key, for [`remove`](Self::remove),
    /// [`reset`](Self::reset) and [`deadline`](Self::deadline).
    ///
    /// # Errors
    ///
    /// [`TimerError::QueueClosed`] after [`close`](Self::close); as
    /// [`new_timeout`](HashedWheelTimer::new_timeout):
    /// [`TimerError::Shutdown`] after the timer stopped, [`TimerError::AtCapacity`] at its
    /// `max_pending_timeouts` (each item is one pending timeout until it fires or is removed), and
    /// [`TimerError::WorkerSpawn`]. The item is dropped.
    pub fn insert(&self, item: T, delay: Duration) -> Result<DelayKey, TimerError> {
        self.put(item, self.inner.timer.now_and_after(delay))
            .map(|(key, due)| self.wake_if(due, key))
    }

    /// [`insert`](Self::insert) with an absolute deadline on the timer's clock ([which
    /// `Instant`](crate#deadlines)). A deadline already past is due at once.
    pub fn insert_at(&self, item: T, deadline: impl Into<Instant>) -> Result<DelayKey, TimerError> {
        let at = self.inner.timer.now_and_at(deadline.into());
        self.put(item, at).map(|(key, due)| self.wake_if(due, key))
    }

    /// Stores `item` in this thread's shard and schedules its timeout at `at`, the clock's reading
    /// and the deadline, under the shard's lock (scheduling runs no user code but, at the pending
    /// limit, drops of batched cancels' wakers, their panics caught), so that the slot is filled
    /// before the stream can look for it. With the key, whether it is due, for `wake_if`.
    pub(crate) fn put(&self, item: T, at: (Nanos, Nanos)) -> Result<(DelayKey, bool), TimerError> {
        let (now, deadline) = at;
        let inner = &*self.inner;
        let mut shard = inner.store.lock_mine();
        let closed = self.is_closed(); // read under the lock a consumer's `is_empty` takes
        let Some(listener) = inner.listener.filter(|_| !closed) else {
            drop_item((shard, item)); // the lock first
            return Err(if closed { QueueClosed } else { TooManyQueues });
        };
        let key = shard.next_key();
        let notice = Task::Notice(Notice::new(listener, key.token()));
        // Due already: filed by its tick's start, so a turn now fires it, not the tick's end.
        let filed = inner.timer.shared().clock.due_by(deadline, now);
        match inner.timer.schedule_key(now, filed, notice) {
            Ok(entry) => shard.put(key, entry, deadline, item),
            Err(error) => {
                drop_item((shard, item)); // the lock first, as for a closed queue
                return Err(error);
            }
        }
        Ok((key, deadline <= now))
    }
}

impl<T> DelayQueue<T> {
    /// Moves the deadline of the item `key` names to `delay` from now, later or earlier. Returns
    /// false, changing nothing, if the key names no item in the queue, or if the item's deadline
    /// has already fired (unlike tokio-util's: it is on its way out).
    pub fn reset(&self, key: &DelayKey, delay: Duration) -> bool {
        let to = self.inner.timer.shared().clock.deadline_after(delay);
        let moved = self.moved(key, true, to);
        self.wake_if(moved == Some(true), moved.is_some())
    }

    /// [`reset`](Self::reset) to an absolute deadline on the timer's clock, a `std::time::Instant`
    /// or `tokio::time::Instant` ([which to use](crate#deadlines)).
    pub fn reset_at(&self, key: &DelayKey, deadline: impl Into<Instant>) -> bool {
        let to = self.inner.timer.shared().clock.to_nanos(deadline.into());
        let moved = self.moved(key, true, to);
        self.wake_if(moved == Some(true), moved.is_some())
    }

    /// Moves the item `key` names to `to`, on the timer's clock; `None` if it could not. `Some(true)`
    /// if the caller is to wake the consumers (`wake_if`): for a deadline moved earlier if
    /// `wake_if_earlier` (as tokio-util's, for one planning by [`peek`](Self::peek); a `DelayMap`
    /// has none), or if due.
    pub(crate) fn moved(&self, key: &DelayKey, wake_if_earlier: bool, to: Nanos) -> Option<bool> {
        let shared = self.inner.timer.shared();
        let moved = self.with_slot(key, |slot| {
            // Only an earlier deadline reads the clock; one due is filed as `put` files it.
            let now = (to < slot.deadline).then(|| shared.clock.now());
            let filed = now.map_or(to, |now| shared.clock.due_by(to, now));
            shared.reset(slot.entry, filed).then(|| {
                slot.deadline = to;
                now.is_some_and(|now| wake_if_earlier || to <= now)
            })
        });
        moved.flatten()
    }

    /// Wakes the consumers if `due`, and returns `then`. Never under a lock: their wakers are user
    /// code, which may call into the queue or a `DelayMap` on it. The caller holds what it returns
    /// (a key, an item taken out, a replaced value), so a waker's panic is logged, not raised.
    pub(crate) fn wake_if<R>(&self, due: bool, then: R) -> R {
        let wake = || self.inner.signal.waiters.wake_all();
        due.then(|| caught("consumer's waker", wake));
        then
    }

    /// Takes the item `key` names out of the queue, and cancels its timeout: it will not come out
    /// of the stream. `None` if the key names no item in the queue (removed, or yielded by the
    /// stream); one whose deadline fired is in it until yielded, and exactly one of `remove` and
    /// the stream gets it. The timeout's cancel waits in this thread's batch, as a dropped
    /// [`Sleep`](crate::Sleep#cancellation)'s does: no count, nor the pending limit, shows the wait.
    pub fn remove(&self, key: &DelayKey) -> Option<T> {
        self.try_remove(key).map(Expired::into_inner)
    }

    /// [`remove`](Self::remove), giving the item as an [`Expired`] with its key and deadline (which
    /// may be still ahead): tokio-util's `try_remove`.
    pub fn try_remove(&self, key: &DelayKey) -> Option<Expired<T>> {
        let slot = self.inner.store.lock_of(key)?.take(key)?;
        self.inner.timer.shared().cancel_later(slot.entry);
        self.wake_if_ending();
        Some(self.inner.expired(*key, slot))
    }

    /// The deadline of the item `key` names, on the timer's clock: the last it was reset to. `None`
    /// if the key names no item in the queue.
    pub fn deadline(&self, key: &DelayKey) -> Option<Instant> {
        let clock = &self.inner.timer.shared().clock;
        self.with_slot(key, |slot| clock.to_instant(slot.deadline))
    }

    /// The number of items in the queue: inserted, and neither removed nor yielded. It locks each
    /// shard in turn, so under concurrent use it is a snapshot.
    pub fn len(&self) -> usize {
        self.inner.store.each().map(|shard| shard.slots.len()).sum()
    }

    /// True if [`len`](Self::len) is zero.
    pub fn is_empty(&self) -> bool {
        self.inner.store.each().all(|shard| shard.slots.is_empty())
    }

    /// How many items the queue can hold before it allocates again: the sum over its shards (a few
    /// per core; each thread inserts into one).
    pub fn capacity(&self) -> usize {
        self.inner.store.each().map(|s| s.slots.capacity()).sum()
    }

    /// Makes room for `additional` more items inserted from this thread (into its shard) without
    /// allocating, as many as the timer can hold at most, if the memory is there: a hint, which
    /// never panics nor aborts (tokio-util's panics if the capacity would overflow).
    pub fn reserve(&self, additional: usize) {
        let limit = self.inner.timer.shared().counts.limit();
        self.inner.store.lock_mine().reserve(additional, limit);
    }

    /// Gives back the memory of removed items past the last item in each shard; keys stay valid.
    /// [`compact`](Self::compact) gives back all of it.
    pub fn shrink_to_fit(&self) {
        for mut shard in self.inner.store.each() {
            shard.slots.shrink_to_fit();
        }
    }

    /// Moves items into the room removed ones left, and gives back the rest:
    /// [`capacity`](Self::capacity) becomes [`len`](Self::len). Keys stay valid (a key of a moved
    /// item finds it through a small map, kept until the item leaves). tokio-util's `compact`.
    pub fn compact(&self) {
        self.inner.store.each().for_each(|mut s| s.compact());
    }

    /// Removes every item: their timeouts are cancelled, and the items dropped (a panic in an
    /// item's `Drop` is caught and logged). An item inserted while it runs may stay.
    pub fn clear(&self) {
        self.inner.clear();
        self.wake_if_ending();
    }

    /// The key of the item that comes out next: the first of those whose deadline has fired, in
    /// the order they fired (one reset into the past comes out after those that fired before it),
    /// else the one with the earliest deadline (among equal ones, any of them, not always the one
    /// that comes out first), or `None` if empty: tokio-util's `peek`. It looks at every item,
    /// locking each shard in turn: a snapshot, for tests and occasional looks, not for a loop over
    /// a large queue.
    pub fn peek(&self) -> Option<DelayKey> {
        let firsts = self.inner.store.each().filter_map(|shard| {
            let (index, slot) = shard.slots.iter().min_by_key(|(_, slot)| slot.deadline)?;
            Some((slot.deadline, shard.key_at(index, slot)))
        });
        self.peek_fired()
            .or_else(|| firsts.min_by_key(|&(at, _)| at).map(|(_, key)| key))
    }

    /// Ends the queue's stream once it is empty: inserts fail with [`TimerError::QueueClosed`] from
    /// now on, the items already in come out as before, and then every consumer gets `None`. An
    /// insert that races the close may still get in, and comes out before the end. Reset and remove
    /// work as before. A reaper task per connection ends when the connection closes its queue:
    ///
    /// ```
    /// use futures::StreamExt;
    /// use hashed_wheel_timer::{HashedWheelTimer, TimerError};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), TimerError> {
    /// let timer = HashedWheelTimer::builder().manual_clock().build()?;
    /// let queue = timer.delay_queue();
    /// let mut reaper = queue.clone();
    /// let reaped = tokio::spawn(async move { reaper.next().await.map(|e| e.into_inner()) });
    ///
    /// queue.insert("idle connection", Duration::from_secs(30))?;
    /// queue.close();
    /// assert_eq!(queue.insert("late", Duration::ZERO), Err(TimerError::QueueClosed));
    /// timer.advance(Duration::from_secs(30));
    /// assert_eq!(reaped.await.unwrap(), Some("idle connection"));
    /// assert!(futures::executor::block_on(queue.clone().next()).is_none(), "closed and drained");
    /// # Ok(())
    /// # }
    /// ```
    pub fn close(&self) {
        self.inner.signal.closed.store(true, Ordering::SeqCst);
        self.wake_if(true, ()); // a consumer's waker that panics is logged
    }

    /// True once [`close`](Self::close) was called on any handle.
    pub fn is_closed(&self) -> bool {
        self.inner.signal.closed.load(Ordering::SeqCst)
    }

    /// The timer the queue runs on.
    pub fn timer(&self) -> &HashedWheelTimer {
        &self.inner.timer
    }

    fn with_slot<R>(&self, key: &DelayKey, f: impl FnOnce(&mut store::Slot<T>) -> R) -> Option<R> {
        self.inner.store.lock_of(key)?.get(key).map(f)
    }

    /// Closed, or the timer stopped: the stream ends once the queue is empty.
    fn is_ending(&self) -> bool {
        self.is_closed() || self.inner.timer.is_shutdown()
    }

    /// Once ending, a consumer waits for the queue to empty: it looks again after a removal.
    fn wake_if_ending(&self) {
        self.wake_if(self.is_ending(), ());
    }
}

impl<T> Inner<T> {
    fn clear(&self) {
        let shared = self.timer.shared();
        for slots in self.store.each().map(|mut shard| shard.take_all()) {
            for (_, slot) in slots {
                shared.cancel_later(slot.entry);
                drop_item(slot.item);
            }
        }
    }

    fn expired(&self, key: DelayKey, slot: store::Slot<T>) -> Expired<T> {
        Expired {
            item: slot.item,
            key,
            deadline: self.timer.shared().clock.to_instant(slot.deadline),
        }
    }
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        self.clear();
        if let Some(id) = self.listener {
            self.timer.shared().unlisten(id);
        }
    }
}

/// Drops an item where no panic may escape, logging one.
pub(crate) fn drop_item<T>(item: T) {
    caught("item, dropped,", || drop(item));
}

/// Runs `f`, user code (a drop, or consumers' wakers), where no panic may escape: one is logged,
/// as the queue's `what` panicked.
pub(crate) fn caught(what: &str, f: impl FnOnce()) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(f)).map_err(UserBox::new) {
        let message = panic_message(&*panic);
        crate::engine::notice::warn(format_args!(
            "a DelayQueue's or DelayMap's {what} panicked: {message}"
        ));
    }
}

impl<T: Send + 'static> Default for DelayQueue<T> {
    /// [`DelayQueue::new`].
    fn default() -> DelayQueue<T> {
        DelayQueue::new()
    }
}

impl<T> Clone for DelayQueue<T> {
    /// Another handle to the same queue.
    fn clone(&self) -> DelayQueue<T> {
        DelayQueue {
            inner: self.inner.clone(),
            seat: Seat::default(),
        }
    }
}

impl<T> Drop for DelayQueue<T> {
    fn drop(&mut self) {
        self.inner.signal.waiters.leave(&self.seat);
    }
}

impl<T> fmt::Debug for DelayQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayQueue")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use futures::{FutureExt, StreamExt};

    /// An item's timer entry comes back when it is removed or yielded, and its slot is reused: the
    /// arena and the slabs stay as large as the most items ever held at once.
    #[test]
    fn entries_and_slots_come_back_on_remove_and_on_yield() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared().clone();
        let queue = timer.delay_queue();
        for round in 0..3 {
            let keys: Vec<DelayKey> = (0..1_000u32)
                .map(|i| queue.insert(i, Duration::from_millis(5)).unwrap())
                .collect();
            assert_eq!(shared.live(), 1_000, "round {round}: one entry per item");
            keys.iter()
                .step_by(2)
                .for_each(|k| assert!(queue.remove(k).is_some()));
            timer.advance(Duration::from_millis(5));
            let mut stream = &queue;
            let yielded = std::iter::from_fn(|| stream.next().now_or_never().flatten());
            assert_eq!(yielded.count(), 500);
            assert_eq!(shared.live(), 0, "round {round}: every entry came back");
            let capacity = queue.capacity();
            assert!(
                capacity <= 2_048,
                "round {round}: slots reused, capacity {capacity}"
            );
        }
    }
}
