//! `DelayKey`, the name of an item in a delay queue, and `Expired`, an item
//! the queue's stream yields.

use std::time::Instant;

/// The name of an item in a [`DelayQueue`](crate::DelayQueue), returned by
/// [`insert`](crate::DelayQueue::insert) and given back with the item by
/// the stream. tokio-util's `delay_queue::Key`.
///
/// It is `Copy` and holds nothing: the item's memory comes back when it is
/// removed or yielded, however long its key is kept. A key never comes to
/// name another item, so a stale one is harmless: `remove` gives `None`,
/// `reset` gives `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DelayKey {
    pub(crate) shard: u32,
    pub(crate) index: u32,
    /// Unique within the shard, and the queue's id in its high bits, so a
    /// key from another queue matches nothing here.
    pub(crate) generation: u64,
}

/// An item whose deadline has passed, as the stream of a
/// [`DelayQueue`](crate::DelayQueue) yields it. tokio-util's
/// `delay_queue::Expired`.
#[derive(Debug)]
pub struct Expired<T> {
    pub(crate) item: T,
    pub(crate) key: DelayKey,
    pub(crate) deadline: Instant,
}

impl<T> Expired<T> {
    /// The item.
    pub fn get_ref(&self) -> &T {
        &self.item
    }

    /// The item, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.item
    }

    /// The item, by value.
    pub fn into_inner(self) -> T {
        self.item
    }

    /// The deadline it expired at (the last one it was reset to), on the
    /// timer's clock. The stream never yields an item before it.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The key it was inserted with. It names nothing in the queue any
    /// more.
    pub fn key(&self) -> DelayKey {
        self.key
    }
}
