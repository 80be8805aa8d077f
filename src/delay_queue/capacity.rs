//! How much room a delay queue holds: tokio-util's `capacity`, `reserve`,
//! `shrink_to_fit` and `compact`, over the queue's shards.

use crate::delay_queue::DelayQueue;

impl<T> DelayQueue<T> {
    /// How many items the queue can hold before it allocates again: the
    /// sum over its shards (a few per core; each thread inserts into one).
    pub fn capacity(&self) -> usize {
        self.inner
            .store
            .each()
            .map(|shard| shard.slots.capacity())
            .sum()
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
        self.inner
            .store
            .each()
            .for_each(|mut shard| shard.slots.shrink_to_fit());
    }

    /// Moves items into the room removed ones left, and gives back the
    /// rest: [`capacity`](Self::capacity) becomes [`len`](Self::len). Keys
    /// stay valid (a key of a moved item finds it through a small map, kept
    /// until the item leaves). tokio-util's `compact`.
    ///
    /// ```
    /// use hashed_wheel_timer::HashedWheelTimer;
    /// use std::time::Duration;
    ///
    /// let timer = HashedWheelTimer::builder().manual_clock().build()?;
    /// let queue = timer.delay_queue_with_capacity(1_000);
    /// assert!(queue.capacity() >= 1_000);
    /// let keys: Vec<_> = (0..1_000).map(|i| queue.insert(i, Duration::from_secs(1))).collect::<Result<_, _>>()?;
    /// for key in &keys[..999] {
    ///     queue.remove(key);
    /// }
    /// queue.compact();
    /// assert_eq!((queue.len(), queue.capacity()), (1, 1));
    /// assert_eq!(queue.remove(&keys[999]), Some(999), "its key still finds it");
    /// # Ok::<(), hashed_wheel_timer::TimerError>(())
    /// ```
    pub fn compact(&self) {
        self.inner
            .store
            .each()
            .for_each(|mut shard| shard.compact());
    }
}
