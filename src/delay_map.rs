//! `DelayMap`: deadlines by the user's own key, a face over the crate's `DelayQueue`, which alone
//! schedules, resets and cancels; the queue holds a clone of each key. The stream yields a key only
//! if its map shard still names the `DelayKey` that came out of the queue, so a removed, replaced
//! or moved key's old deadline is skipped. Locks go map shard, then queue shard, never the reverse.

use std::collections::hash_map::{HashMap, RandomState};
use std::hash::{BuildHasher, Hash};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use std::{borrow::Borrow, fmt, pin::Pin, sync::Arc};

use crossbeam_utils::CachePadded;
use futures::Stream;

use crate::delay_queue::{drop_item, shards};
use crate::engine::{clock::Nanos, sync::lock, sync::Mutex, sync::MutexGuard};
use crate::{current_timer, DelayKey, DelayQueue, HashedWheelTimer, TimerError};

/// Values by key, each given back with its key once its deadline passes:
/// a cache with a time to live, sessions and leases, retry schedules, keyed by the id the
/// application already has. Made by [`HashedWheelTimer::delay_map`] or [`DelayMap::new`].
///
/// It is what code builds today from tokio-util's `DelayQueue` and a `HashMap<K, Key>` kept in step
/// beside it, in one type:
/// [`insert`](Self::insert) a key with a delay (replacing the value and deadline of a key already
/// there), [`reset`](Self::reset) its deadline, [`remove`](Self::remove) it; keys whose deadline
/// passes come out of the map's [`Stream`] of `(K, V)` pairs.
///
/// # Shared, not owned
///
/// As a [`DelayQueue`](DelayQueue#shared-not-owned): `Clone + Send + Sync`, `&self` methods, each
/// expired key to one consumer, a clone per consuming task. The keys are spread over shards (two
/// per core), each behind its own lock, so threads working on different keys seldom meet on one.
///
/// # Races
///
/// The map decides each race on a key under its shard's lock: a key comes out only with the value
/// and deadline in force, even if an older deadline fired a moment before, and stays in the map
/// until the stream yields it (see [`insert`](Self::insert), [`reset`](Self::reset),
/// [`remove`](Self::remove)).
///
/// # Keys
///
/// `K`'s `Hash`, `Eq`, `Clone` and `Drop` may run under a shard's lock, as in any `Mutex<HashMap>`;
/// of `V`'s code only `Clone`, in [`get`](Self::get). Each key is kept twice: in the map, and with
/// its deadline; for large keys use `Arc<str>` and the like. A key whose `Hash` or `Eq` panics as
/// the stream looks it up, its deadline come, is never yielded (the panic is caught): it stays for
/// [`remove`](Self::remove) and [`clear`](Self::clear), and the stream goes on with the others.
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
/// let mut sessions = timer.delay_map();
/// sessions.insert("alice", 1, Duration::from_secs(30))?;
/// sessions.insert("bob", 2, Duration::from_secs(10))?;
/// assert_eq!(sessions.insert("bob", 3, Duration::from_secs(20))?, Some(2)); // replaced
/// assert!(sessions.reset(&"alice", Duration::from_secs(5))); // earlier
///
/// timer.advance(Duration::from_secs(20));
/// assert_eq!(sessions.next().await, Some(("alice", 1)));
/// assert_eq!(sessions.next().await, Some(("bob", 3)));
/// assert!(sessions.is_empty());
/// # Ok(())
/// # }
/// ```
pub struct DelayMap<K, V> {
    queue: DelayQueue<K>,
    map: Arc<Shards<K, V>>,
}

type Map<K, V> = HashMap<K, (DelayKey, V)>;

type Shard<K, V> = CachePadded<Mutex<Map<K, V>>>;

struct Shards<K, V> {
    /// Picks a key's shard; each shard's map hashes with its own.
    hasher: RandomState,
    shards: Box<[Shard<K, V>]>,
}

impl<K: Hash + Eq, V> Shards<K, V> {
    fn lock<Q: Hash + ?Sized>(&self, key: &Q) -> MutexGuard<'_, Map<K, V>> {
        let index = self.hasher.hash_one(key) as usize & (self.shards.len() - 1);
        lock(&self.shards[index])
    }
}

/// The last handle's drop: a key or value that panics in `Drop` is caught.
impl<K, V> Drop for Shards<K, V> {
    fn drop(&mut self) {
        for shard in self.shards.iter() {
            let taken = std::mem::take(&mut *lock(shard));
            taken.into_iter().for_each(drop_item);
        }
    }
}

impl HashedWheelTimer {
    /// A new, empty [`DelayMap`] on this timer (see its example). The map keeps the timer alive.
    pub fn delay_map<K: Hash + Eq + Clone + Send + 'static, V>(&self) -> DelayMap<K, V> {
        DelayMap {
            queue: self.delay_queue(),
            map: Arc::new(Shards {
                hasher: RandomState::new(),
                shards: shards(|_| HashMap::new()),
            }),
        }
    }
}

impl<K: Hash + Eq + Clone + Send + 'static, V> DelayMap<K, V> {
    /// A new, empty map on [`current_timer`].
    pub fn new() -> DelayMap<K, V> {
        current_timer().delay_map()
    }

    /// Inserts `key` with `value`, to come out of the stream `delay` from now: never before, and at
    /// most a tick after. If the key is already in the map, its value and deadline are replaced,
    /// and the old value is returned: it will not come out.
    ///
    /// # Errors
    ///
    /// [`TimerError::QueueClosed`] after [`close`](Self::close), and the timer's refusals, as
    /// [`DelayQueue::insert`]'s (each key in the map is one pending timeout). Then nothing changes:
    /// a key already there keeps its value and deadline, and the offered key and value are dropped.
    pub fn insert(&self, key: K, value: V, delay: Duration) -> Result<Option<V>, TimerError> {
        self.put(key, value, self.timer().now_and_after(delay))
    }

    /// [`insert`](Self::insert) with an absolute deadline on the timer's clock (see [which instant
    /// to use](crate#deadlines)). A deadline already past is due at once.
    pub fn insert_at(
        &self,
        key: K,
        value: V,
        deadline: impl Into<Instant>,
    ) -> Result<Option<V>, TimerError> {
        self.put(key, value, self.timer().now_and_at(deadline.into()))
    }

    fn put(&self, key: K, value: V, at: (Nanos, Nanos)) -> Result<Option<V>, TimerError> {
        if self.is_closed() {
            drop_item((key, value));
            return Err(TimerError::QueueClosed);
        }
        let mut shard = self.map.lock(&key);
        shard.reserve(1); // a rehash runs `K`'s `Hash` before the deadline is filed, not after
        let slot = shard.get_mut(&key);
        let filed = self.file(&key, slot.as_ref().map(|slot| slot.0), at);
        let Ok((deadline, due)) = filed else {
            drop_item((shard, key, value)); // unlocked first, as `K`'s and `V`'s code runs
            return filed.map(|_| None);
        };
        // The map keeps the key it holds: the offered one is dropped unlocked, its panic caught.
        let Some(slot) = slot else {
            // `old` is `None` unless the key's `Hash` or `Eq` is inconsistent.
            let old = shard.insert(key, (deadline, value)).map(|(_, old)| old);
            drop(shard);
            return Ok(self.queue.wake_if(due, old)); // unlocked: a waker may use the map
        };
        let old = std::mem::replace(slot, (deadline, value)).1;
        drop_item((shard, key));
        Ok(self.queue.wake_if(due, Some(old)))
    }

    /// Files the deadline of `key` (whose shard the caller holds) at `at`, the clock's reading and
    /// the deadline: moves its deadline `old` in place; or, if it has none, or `old` has already
    /// fired and is on its way to a consumer, who will now skip it, files a fresh one. Returns the
    /// name of the deadline in force, and whether the caller is to wake the consumers once unlocked.
    fn file(
        &self,
        key: &K,
        old: Option<DelayKey>,
        at: (Nanos, Nanos),
    ) -> Result<(DelayKey, bool), TimerError> {
        match old.and_then(|old| Some((old, self.queue.moved(&old, false, at.1)?))) {
            Some(moved) => Ok(moved),
            None => self.queue.put(key.clone(), at),
        }
    }

    /// Moves the deadline of `key` to `delay` from now, later or earlier:
    /// it comes out then, never before. True if the key is in the map (not yet yielded by the
    /// stream, even if its old deadline has fired); false, changing nothing, if it is not, or if
    /// the timer was stopped. A key whose old deadline has fired takes a new one as an insert does:
    /// if the map is [closed](Self::close), or the timer at its pending limit, it keeps the old
    /// one, comes out as it would have, and this returns false.
    pub fn reset<Q: Hash + Eq + ?Sized>(&self, key: &Q, delay: Duration) -> bool
    where
        K: Borrow<Q>,
    {
        self.moved(key, self.timer().now_and_after(delay))
    }

    /// [`reset`](Self::reset) to an absolute deadline on the timer's clock (see [which instant to
    /// use](crate#deadlines)).
    pub fn reset_at<Q: Hash + Eq + ?Sized>(&self, key: &Q, deadline: impl Into<Instant>) -> bool
    where
        K: Borrow<Q>,
    {
        self.moved(key, self.timer().now_and_at(deadline.into()))
    }

    fn moved<Q: Hash + Eq + ?Sized>(&self, key: &Q, at: (Nanos, Nanos)) -> bool
    where
        K: Borrow<Q>,
    {
        let mut shard = self.map.lock(key);
        let Some((owned, &(deadline, _))) = shard.get_key_value(key) else {
            return false;
        };
        let Ok((fresh, due)) = self.file(owned, Some(deadline), at) else {
            return false;
        };
        let moved = shard.get_mut(key).map(|slot| slot.0 = fresh).is_some();
        drop(shard);
        self.queue.wake_if(due, moved)
    }
}

impl<K: Hash + Eq, V> DelayMap<K, V> {
    /// Takes `key` and its value out of the map, and cancels its deadline:
    /// the value will not come out of the stream. `None` if the key is not in the map (never
    /// inserted, removed, or yielded); a key whose deadline fired but not yet yielded is still in
    /// it.
    pub fn remove<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let (owned, (deadline, value)) = self.map.lock(key).remove_entry(key)?;
        // Outside the map's lock, where a key's panic is caught: the stream finds the key gone.
        drop_item((owned, self.queue.remove(&deadline)));
        Some(value)
    }

    /// The deadline of `key`, on the timer's clock: the last it was given. `None` if the key is not
    /// in the map, or if a consumer is yielding it at this moment.
    pub fn get_deadline<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<Instant>
    where
        K: Borrow<Q>,
    {
        self.queue.deadline(&self.map.lock(key).get(key)?.0)
    }

    /// A clone of the value of `key`, if it is in the map, made under its shard's lock.
    pub fn get<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        V: Clone,
    {
        self.map.lock(key).get(key).map(|slot| slot.1.clone())
    }

    /// True if `key` is in the map: inserted, and neither removed nor yielded by the stream.
    pub fn contains_key<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.map.lock(key).contains_key(key)
    }

    /// The number of keys in the map. It locks each shard in turn, so under concurrent use it is a
    /// snapshot.
    pub fn len(&self) -> usize {
        self.map.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// True if [`len`](Self::len) is zero.
    pub fn is_empty(&self) -> bool {
        self.map.shards.iter().all(|s| lock(s).is_empty())
    }

    /// How many keys the map holds before it allocates again: the sum over its shards, each a
    /// `HashMap` (the queue beside it has its own, [`DelayQueue::capacity`]).
    pub fn capacity(&self) -> usize {
        self.map.shards.iter().map(|s| lock(s).capacity()).sum()
    }

    /// Gives back the memory removed keys left, in the map's shards and in its queue
    /// ([`DelayQueue::compact`]); keys in the map are kept, with their deadlines.
    pub fn shrink_to_fit(&self) {
        self.map.shards.iter().for_each(|s| lock(s).shrink_to_fit());
        self.queue.compact();
    }

    /// Removes every key: their deadlines are cancelled, and the keys and values dropped. A key
    /// inserted while it runs may stay.
    pub fn clear(&self) {
        for shard in self.map.shards.iter() {
            let taken = std::mem::take(&mut *lock(shard));
            for (key, (deadline, value)) in taken {
                drop_item((key, value, self.queue.remove(&deadline)));
            }
        }
    }

    /// Ends the stream once the map is empty, as [`DelayQueue::close`] (inserts fail); a reset of a
    /// key whose deadline has fired then fails (see [`reset`](Self::reset)).
    pub fn close(&self) {
        self.queue.close();
    }

    /// True once [`close`](Self::close) was called on any handle.
    pub fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }

    /// The timer the map runs on.
    pub fn timer(&self) -> &HashedWheelTimer {
        self.queue.timer()
    }

    /// The next expired key and its value, as [`DelayQueue::poll_expired`] gives items: deadline
    /// order, each key once, to one consumer; `Ready(None)` once the map is empty and
    /// [closed](Self::close), or its timer stopped.
    pub fn poll_expired(&self, cx: &mut Context<'_>) -> Poll<Option<(K, V)>> {
        while let Some(expired) = ready!(self.queue.poll_expired(cx)) {
            let look_up = AssertUnwindSafe(|| {
                let mut shard = self.map.lock(expired.get_ref());
                let found = shard.remove_entry(expired.get_ref());
                (shard, found)
            });
            match catch_unwind(look_up).map_err(drop_item) {
                Ok((shard, Some((key, (deadline, value))))) if deadline == expired.key() => {
                    drop_item((shard, expired)); // the queue's clone of the key, unlocked
                    return Poll::Ready(Some((key, value)));
                }
                Ok((mut shard, Some((key, newer)))) => {
                    drop_item((shard.insert(key, newer), shard, expired));
                }
                // Removed, or yielded; or its `Hash` or `Eq` panicked: it stays ("Keys" above).
                other => drop_item((other, expired)),
            }
        }
        Poll::Ready(None)
    }
}

/// The expired pairs, as [`poll_expired`](DelayMap::poll_expired) gives them. Use
/// [`StreamExt::next`](futures::StreamExt::next) on it.
impl<K: Hash + Eq, V> Stream for DelayMap<K, V> {
    type Item = (K, V);

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<(K, V)>> {
        self.poll_expired(cx)
    }
}

/// A shared reference is a stream too.
impl<K: Hash + Eq, V> Stream for &DelayMap<K, V> {
    type Item = (K, V);

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<(K, V)>> {
        self.poll_expired(cx)
    }
}

impl<K: Hash + Eq + Clone + Send + 'static, V> Default for DelayMap<K, V> {
    /// [`DelayMap::new`].
    fn default() -> DelayMap<K, V> {
        DelayMap::new()
    }
}

impl<K, V> Clone for DelayMap<K, V> {
    /// Another handle to the same map, a consumer of its own.
    fn clone(&self) -> DelayMap<K, V> {
        DelayMap {
            queue: self.queue.clone(),
            map: self.map.clone(),
        }
    }
}

impl<K: Hash + Eq, V> fmt::Debug for DelayMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayMap")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}
