//! The intake: how new, reset and cancelled entries reach the driver (`producer.rs` the producer
//! paths, `lane.rs` each thread's queue). A thread with no lane (past 256 live producer threads, or
//! scheduling from a thread-local destructor after giving its index back) and a re-armed periodic
//! task use the shared MPSC queue. The driver drains each lane's due keys, then the shared queue.
//!
//! **Order**: one thread's equal deadlines fire in submission order, a full ring included, except
//! across a move between the shared queue and a lane: a lane's keys of one deadline are taken in
//! one bucket, in push order, or the earlier pushed in an earlier bucket (`lane::take_time`).
//!
//! **Which lane is this thread's**: a thread takes an index from a process-wide pool on its first
//! schedule and gives it back when it exits, so a pool's threads reuse indices. Its lane in each
//! timer is the one at its index, made on first use; a new holder goes on where the last stopped.

pub(crate) mod lane;
mod producer;

use std::sync::OnceLock;

use crate::engine::entry::{key::Key, Entry};
use crate::engine::intake::lane::{unmark, Lane};
use crate::engine::sync::{lock, AtomicUsize, Ordering, Queue};

/// Lane indices: at most this many live threads queue without contention.
pub(crate) const MAX_LANES: usize = 256;

/// Every this many keys on the shared queue ask the driver to look.
pub(crate) const SHARED_LOOK_EVERY: usize = 1024;

pub(crate) struct Intake {
    /// Lane `i` is the lane of the thread holding index `i`; boxed, so an idle timer holds 8 bytes
    /// a lane, not 640 (a `Lane` is cache-padded).
    lanes: Box<[OnceLock<Box<Lane>>]>,
    /// One past the highest lane made.
    lanes_made: AtomicUsize,
    shared: Queue<Key>,
}

impl Intake {
    pub(crate) fn new() -> Intake {
        Intake {
            lanes: (0..MAX_LANES).map(|_| OnceLock::new()).collect(),
            lanes_made: AtomicUsize::new(0),
            shared: Queue::new(),
        }
    }

    pub(crate) fn lanes(&self) -> impl Iterator<Item = &Lane> {
        let made = self.lanes_made.load(Ordering::Acquire);
        (0..made as u32).filter_map(|index| self.lane(index))
    }

    /// This thread's lane, made if need be; `None` without an index.
    #[inline]
    pub(crate) fn lane_here(&self) -> Option<&Lane> {
        let index = thread_index()?;
        let lane = self.lanes.get(index)?.get();
        Some(lane.map_or_else(|| self.make_lane(index), |lane| &**lane))
    }

    #[cold]
    fn make_lane(&self, index: usize) -> &Lane {
        let lane = self.lanes[index].get_or_init(|| Box::new(Lane::new(index as u32)));
        // After the lane: a driver that reads this finds it.
        self.lanes_made.fetch_max(index + 1, Ordering::AcqRel);
        lane
    }

    /// Queues `key` on the shared queue. True every `SHARED_LOOK_EVERY`
    /// keys: ask the driver to look.
    pub(crate) fn push_shared(&self, key: Key, entry: &Entry) -> bool {
        entry.set_queue_mark(0);
        self.shared.push(key);
        self.shared.len() % SHARED_LOOK_EVERY == 0
    }

    /// The lane and cell `entry` records for its key. The mark may be stale (the driver reuses
    /// the field once it took the key), but a cell holding this key is always its place.
    #[inline(always)]
    fn place_of(&self, entry: &Entry) -> Option<(&Lane, usize)> {
        let (lane, cell) = unmark(entry.queue_mark())?;
        Some((self.lane(lane as u32)?, cell))
    }

    pub(crate) fn prefetch_cell(&self, entry: &Entry) {
        if let Some((lane, cell)) = self.place_of(entry) {
            lane.prefetch_cell(cell);
        }
    }

    #[inline(always)]
    pub(crate) fn withdraw(&self, entry: &Entry, key: Key) -> bool {
        self.place_of(entry)
            .is_some_and(|(lane, cell)| lane.withdraw(cell, key))
    }

    /// Passes to `out` every lane's keys if `all`, then up to `limit` of the shared queue's;
    /// true if it left some there. Driver or `stop()` only; the driver takes the lanes' keys
    /// when due (`Shared::take_held`).
    pub(crate) fn drain(&self, limit: usize, all: bool, mut out: impl FnMut(Key)) -> bool {
        for lane in self.lanes().filter(|_| all) {
            lane.drain(None, &mut out);
        }
        (0..limit).map_while(|_| self.shared.pop()).for_each(out);
        !self.shared.is_empty()
    }

    pub(crate) fn lane(&self, index: u32) -> Option<&Lane> {
        self.lanes.get(index as usize)?.get().map(|lane| &**lane)
    }

    /// Cells and queue places not yet drained, withdrawn cells included.
    pub(crate) fn len(&self) -> usize {
        self.shared.len() + self.lanes().map(|lane| lane.len()).sum::<usize>()
    }

    /// This thread's lane, if it has made one here.
    #[inline]
    pub(crate) fn lane_if_made(&self) -> Option<&Lane> {
        thread_index().and_then(|index| self.lane(index as u32))
    }
}

/// The process-wide pool of lane indices, a stack: those given back on top, then those never
/// handed out, lowest first. Made on first use.
type Pool = Vec<usize>;

fn fresh_pool() -> Pool {
    (0..MAX_LANES).rev().collect()
}

#[cfg(not(loom))]
static POOL: std::sync::Mutex<Option<Pool>> = std::sync::Mutex::new(None);

/// Runs `f` on the pool. (Under loom, a pool of its own per model run.)
fn with_pool<R>(f: impl FnOnce(&mut Pool) -> R) -> R {
    #[cfg(loom)]
    loom::lazy_static! {
        static ref POOL: loom::sync::Mutex<Option<Pool>> = loom::sync::Mutex::new(None);
    }
    f(lock(&POOL).get_or_insert_with(fresh_pool))
}

/// A thread's lane index, given back when the thread exits.
struct Index(Option<usize>);

impl Drop for Index {
    fn drop(&mut self) {
        // Under loom, a model's threads end as it is torn down, when its
        // pool is gone; each run starts a fresh one anyway.
        #[cfg(not(loom))]
        if let Some(index) = self.0 {
            with_pool(|pool| pool.push(index));
        }
    }
}

crate::engine::sync::thread_local! {
    static INDEX: Index = Index(with_pool(Vec::pop));
}

/// This thread's lane index, taken on first use; `None` once the thread gave it back.
#[inline]
fn thread_index() -> Option<usize> {
    INDEX.try_with(|index| index.0).ok().flatten()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pool_hands_out_given_back_indices_first_and_none_past_the_last() {
        let mut pool = super::fresh_pool();
        assert_eq!(pool.pop(), Some(0), "the lowest first");
        pool.truncate(2);
        assert_eq!(pool.pop(), Some(super::MAX_LANES - 2));
        pool.push(7);
        assert_eq!(pool.pop(), Some(7), "a thread that exited gave it back");
        assert_eq!(pool.pop(), Some(super::MAX_LANES - 1));
        assert_eq!((pool.pop(), pool.pop()), (None, None), "all taken");
    }
}
