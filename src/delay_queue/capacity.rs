//! How much room a delay queue holds: tokio-util's `capacity`, `reserve`,
//! `shrink_to_fit` and `compact`, over the queue's shards.

use crate::delay_queue::DelayQueue;

impl<T> DelayQueue<T> {
    /// How many items the queue can hold before it allocates again: the
    /// sum over its shards (a few per core; each thread inserts into one).
    pub fn capacity(&self) -> usize {
        self.inner.store.each().map(|s| s.slots.capacity()).sum()
    }

    /// Makes room for `additional` more items inserted from this thread
    /// (into its shard) without allocating.
    pub fn reserve(&self, additional: usize) {
        self.inner.store.lock_mine().slots.reserve(additional);
    }

    /// Gives back the memory of removed items past the last item in each
    /// shard; keys stay valid. [`compact`](Self::compact) gives back all of
    /// it.
    pub fn shrink_to_fit(&self) {
        for mut shard in self.inner.store.each() {
            shard.slots.shrink_to_fit();
        }
    }

    /// Moves items into the room removed ones left, and gives back the
    /// rest: [`capacity`](Self::capacity) becomes [`len`](Self::len). Keys
    /// stay valid (a key of a moved item finds it through a small map, kept
    /// until the item leaves). tokio-util's `compact`.
    pub fn compact(&self) {
        self.inner.store.each().for_each(|mut s| s.compact());
    }
}
