//! The intake: how new, reset and cancelled entries reach the driver.
//! `producer.rs` holds the producer paths; `lane.rs` each thread's queue.
//!
//! A thread with no lane (past 256 producers, or scheduling from a
//! thread-local destructor after letting go of its lanes) and a re-armed
//! periodic task use the shared MPSC queue. The driver drains each lane's
//! due keys, then the shared queue.
//!
//! # Order
//!
//! One thread's equal deadlines fire in submission order, a full ring
//! included, except across a move between the shared queue and a lane, or
//! when a drain stalled while the owner wrapped the ring round past
//! withdrawn cells (see `Lane::drain`).
//!
//! # Which lanes this thread owns
//!
//! A thread adopts a lane on its first schedule and lets go of it when it
//! exits, so a pool's threads reuse lanes; a lane of a timer that shut down
//! is dropped at this thread's next adoption. `LAST` caches the last
//! look-up (timer id, lane index) in a plain `Cell` with no destructor, so
//! one timer per thread costs no borrow, even while thread-locals die.

pub(crate) mod lane;
mod producer;

use std::cell::{Cell, RefCell};
use std::sync::{Arc, OnceLock};

use crossbeam_queue::SegQueue;

use crate::engine::clock::Nanos;
use crate::engine::entry::key::Key;
use crate::engine::entry::Entry;
use crate::engine::intake::lane::{unmark, Lane};
use crate::engine::sync::{AtomicBool, AtomicUsize, Mutex, Ordering};

/// Lanes per timer: at most this many threads queue without contention.
const MAX_LANES: usize = 256;

/// Every this many keys on the shared queue ask the driver to look, which
/// bounds the backlog it would find there.
const SHARED_LOOK_EVERY: usize = 1024;

/// What a drain of the intake did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Drain {
    /// Keys due to be filed were left behind: drain again now.
    pub(crate) more: bool,
    /// The time by which the driver must drain again, for keys it holds.
    pub(crate) look_by: Option<Nanos>,
}

/// The earlier of two optional times.
pub(crate) fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

pub(crate) struct Intake {
    timer_id: u64,
    lanes: Box<[OnceLock<Arc<Lane>>]>,
    /// Lanes created; each one in `lanes` below this stays there.
    lane_count: AtomicUsize,
    /// Serialises the creation of lanes.
    creating: Mutex<()>,
    shared: SegQueue<Key>,
    /// A drain found withdrawn cells since `take_saw_withdrawn`.
    saw_withdrawn: AtomicBool,
}

impl Intake {
    pub(crate) fn new(timer_id: u64) -> Intake {
        Intake {
            timer_id,
            lanes: (0..MAX_LANES).map(|_| OnceLock::new()).collect(),
            lane_count: AtomicUsize::new(0),
            creating: Mutex::new(()),
            shared: SegQueue::new(),
            saw_withdrawn: AtomicBool::new(false),
        }
    }

    fn lanes(&self) -> impl Iterator<Item = &Arc<Lane>> {
        let count = self.lane_count.load(Ordering::Acquire);
        self.lanes[..count].iter().filter_map(OnceLock::get)
    }

    /// This thread's lane, if it owns one.
    #[inline]
    pub(crate) fn own_lane(&self) -> Option<&Lane> {
        let index = lane_index(self.timer_id)? as usize;
        self.lanes.get(index)?.get().map(|lane| &**lane)
    }

    /// This thread's lane, adopting one (an exited thread's, or a new one)
    /// if it has none. `None` past 256 threads, or in a thread-local
    /// destructor after the thread let go of its lanes.
    #[inline]
    pub(crate) fn lane_here(&self) -> Option<&Lane> {
        self.own_lane().or_else(|| self.adopt_lane_here())
    }

    #[cold]
    fn adopt_lane_here(&self) -> Option<&Lane> {
        self.adopt_lane().then(|| self.own_lane()).flatten()
    }

    /// Queues `key`, its entry filled, made at `now` on this thread, on
    /// its `lane` (`lane_here`), or the shared queue if it has none;
    /// `urgent` if the driver must not hold it (see `lane.rs`). `None` if
    /// the lane's ring is full; else whether to ask the driver to look
    /// (`push_shared`).
    #[inline]
    pub(crate) fn push_on(
        &self,
        lane: Option<&Lane>,
        key: Key,
        entry: &Entry,
        now: Nanos,
        urgent: bool,
    ) -> Option<bool> {
        match lane {
            Some(lane) => lane.try_push(key, entry, now, urgent).then_some(false),
            None => Some(self.push_shared(key, entry)),
        }
    }

    /// Queues `key` on the shared queue. True every `SHARED_LOOK_EVERY`
    /// keys: ask the driver to look.
    pub(crate) fn push_shared(&self, key: Key, entry: &Entry) -> bool {
        entry.set_queue_mark(0);
        self.shared.push(key);
        self.shared.len() % SHARED_LOOK_EVERY == 0
    }

    /// Gives this lane-less thread a lane (see `lane_here`); false if not.
    fn adopt_lane(&self) -> bool {
        hold(|| {
            let orphan = self.lanes().find(|lane| lane.try_adopt());
            if let Some(lane) = orphan {
                return Some(lane.clone());
            }
            if self.lane_count.load(Ordering::Acquire) == MAX_LANES {
                return None; // without the lock: past 256 threads, every call
            }
            let _creating = self.creating.lock().unwrap_or_else(|p| p.into_inner());
            let index = self.lane_count.load(Ordering::Acquire);
            if index == MAX_LANES {
                return None;
            }
            let lane = Arc::new(Lane::new(index as u32, self.timer_id));
            let _ = self.lanes[index].set(lane.clone());
            self.lane_count.store(index + 1, Ordering::Release);
            Some(lane)
        })
    }

    /// `Lane::withdraw` at the place `entry` records for `key`. The mark
    /// may be stale (the driver reuses the field once it took the key), but
    /// a cell holding this key is always its place.
    #[inline(always)]
    pub(crate) fn withdraw(&self, entry: &Entry, key: Key) -> bool {
        let Some((lane, cell)) = unmark(entry.queue_mark()) else {
            return false;
        };
        let lane = self.lanes.get(lane).and_then(OnceLock::get);
        lane.is_some_and(|lane| lane.withdraw(cell, key))
    }

    /// Passes every queued key to `out`, the lanes' first, holding none
    /// back: for `stop()`, with no driver running.
    pub(crate) fn drain_all(&self, mut out: impl FnMut(Key)) {
        for lane in self.lanes() {
            lane.drain(0, true, usize::MAX, &mut out);
        }
        while let Some(key) = self.shared.pop() {
            out(key);
        }
    }

    /// Driver only: passes up to `limit` keys to `out`: each lane's due at
    /// `now` (every key with `all`), then the shared queue's.
    pub(crate) fn drain(
        &self,
        limit: usize,
        now: Nanos,
        all: bool,
        mut out: impl FnMut(Key),
    ) -> Drain {
        let mut left = limit;
        let mut result = Drain::default();
        for lane in self.lanes() {
            let drained = lane.drain(now, all, left, &mut out);
            result.look_by = earliest(result.look_by, drained.look_by);
            left -= drained.taken;
            result.more |= drained.more;
            if drained.skipped {
                self.saw_withdrawn.store(true, Ordering::Relaxed);
            }
        }
        while left > 0 {
            let Some(key) = self.shared.pop() else {
                return result;
            };
            out(key);
            left -= 1;
        }
        result.more |= !self.shared.is_empty();
        result
    }

    /// Driver only: true if a drain since the last call found cells
    /// withdrawn by cancels, the sign of producers cancelling young.
    pub(crate) fn take_saw_withdrawn(&self) -> bool {
        self.saw_withdrawn.swap(false, Ordering::Relaxed)
    }

    /// Cells and queue places not yet drained, withdrawn cells included.
    pub(crate) fn len(&self) -> usize {
        self.shared.len() + self.lanes().map(|lane| lane.len()).sum::<usize>()
    }

    /// On shutdown: owners let go of the lanes when they next adopt one.
    pub(crate) fn close(&self) {
        self.lanes().for_each(|lane| lane.close());
    }

    /// Keeps a vacated slot on this thread's lane. False if it has none,
    /// or it holds enough: free it to the arena.
    #[inline]
    pub(crate) fn push_free(&self, key: Key, entry: &Entry) -> bool {
        self.own_lane()
            .is_some_and(|lane| lane.push_free(key, entry))
    }

    /// Free slots the lanes hold, for the arena's accounting in tests.
    #[cfg(test)]
    pub(crate) fn free_in_lanes(&self) -> usize {
        self.lanes().map(|lane| lane.free_len()).sum()
    }
}

/// The lanes this thread owns, each handed back on drop.
struct Held(Vec<Arc<Lane>>);

impl Drop for Held {
    fn drop(&mut self) {
        forget_last();
        self.0.iter().for_each(|lane| lane.let_go());
    }
}

/// No timer has id 0.
const NONE: (u64, u32) = (0, 0);

#[cfg(not(loom))]
thread_local! {
    static HELD: RefCell<Held> = const { RefCell::new(Held(Vec::new())) };
    static LAST: Cell<(u64, u32)> = const { Cell::new(NONE) };
}

#[cfg(loom)]
loom::thread_local! {
    static HELD: RefCell<Held> = RefCell::new(Held(Vec::new()));
    static LAST: Cell<(u64, u32)> = Cell::new(NONE);
}

fn forget_last() {
    let _ = LAST.try_with(|last| last.set(NONE));
}

/// The index of this thread's lane of timer `timer_id`, if it owns one.
#[inline]
fn lane_index(timer_id: u64) -> Option<u32> {
    match LAST.try_with(Cell::get) {
        Ok((id, index)) if id == timer_id => Some(index),
        _ => lane_index_slow(timer_id),
    }
}

#[cold]
fn lane_index_slow(timer_id: u64) -> Option<u32> {
    let index = with_lane(timer_id, |lane| lane.index)?;
    let _ = LAST.try_with(|last| last.set((timer_id, index)));
    Some(index)
}

/// Runs `f` on this thread's lane of timer `timer_id`, if it owns one.
/// `f` must not run user code: it may be called from inside another `f`
/// or while a task runs.
#[inline]
fn with_lane<R>(timer_id: u64, f: impl FnOnce(&Lane) -> R) -> Option<R> {
    HELD.try_with(|held| {
        let held = held.try_borrow().ok()?;
        let lane = held.0.iter().find(|lane| lane.timer_id == timer_id)?;
        Some(f(lane))
    })
    .ok()
    .flatten()
}

/// Makes `adopt`'s lane this thread's, if this thread can hold one more.
/// `adopt` is called only then, and must hand over an owned lane.
fn hold(adopt: impl FnOnce() -> Option<Arc<Lane>>) -> bool {
    HELD.try_with(|held| {
        let Ok(mut held) = held.try_borrow_mut() else {
            return false;
        };
        held.0.retain(|lane| {
            let closed = lane.is_closed();
            if closed {
                forget_last();
                lane.let_go();
            }
            !closed
        });
        match adopt() {
            Some(lane) => {
                held.0.push(lane);
                true
            }
            None => false,
        }
    })
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use crate::HashedWheelTimer;
    use std::time::Duration;

    #[test]
    #[cfg_attr(miri, ignore = "3072 entries: too slow under Miri")]
    fn every_so_many_keys_on_the_shared_queue_ask_the_worker_to_look() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared();
        let looks = (0..3 * super::SHARED_LOOK_EVERY)
            .filter(|_| {
                let task = crate::engine::entry::task::Task::Wake(None);
                let key = shared.slots.insert(1_000, task, 1).unwrap();
                // As a thread with no lane queues it.
                shared.intake.push_shared(key, shared.entry(key))
            })
            .count();
        assert_eq!(looks, 3, "once per SHARED_LOOK_EVERY keys");
        assert_eq!(shared.intake.len(), 3 * super::SHARED_LOOK_EVERY);
    }

    #[test]
    fn a_thread_that_exits_hands_its_lane_to_the_next() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let intake = &timer.shared().intake;
        for _ in 0..3 {
            // A native join: the thread's locals, its lane too, are dropped.
            let timer = timer.clone();
            std::thread::spawn(move || timer.new_timeout(|_| {}, Duration::from_secs(1)).unwrap())
                .join()
                .unwrap();
        }
        assert_eq!(intake.lanes().count(), 1, "one lane, adopted in turn");
        assert_eq!(intake.len(), 3, "all three queued on it");
        timer.advance(Duration::from_secs(1));
        assert_eq!(timer.pending_timeouts(), 0);
    }

    #[test]
    fn a_dropped_timers_lane_is_freed_at_this_threads_next_adoption() {
        let old = HashedWheelTimer::builder().manual_clock().build().unwrap();
        drop(old.new_timeout(|_| {}, Duration::from_secs(1)).unwrap());
        let lane = std::sync::Arc::downgrade(old.shared().intake.lanes().next().unwrap());
        drop(old);
        assert!(lane.upgrade().is_some(), "this thread still holds it");
        let new = HashedWheelTimer::builder().manual_clock().build().unwrap();
        drop(new.new_timeout(|_| {}, Duration::from_secs(1)).unwrap());
        assert!(lane.upgrade().is_none(), "let go when adopting another");
    }

    #[test]
    fn threads_at_once_get_lanes_of_their_own() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let barrier = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    timer.new_timeout(|_| {}, Duration::from_secs(1)).unwrap();
                    barrier.wait(); // all three alive at once
                });
            }
        });
        assert_eq!(timer.shared().intake.lanes().count(), 3);
    }

    #[cfg(target_os = "linux")] // thread-locals are destroyed last to first
    #[test]
    fn a_schedule_after_the_thread_let_go_of_its_lane_takes_the_shared_queue() {
        use std::cell::RefCell;
        use std::sync::{Arc, Mutex};
        type Out = Arc<Mutex<Option<crate::Timeout>>>;
        struct Late(HashedWheelTimer, Out);
        impl Drop for Late {
            fn drop(&mut self) {
                let t = self.0.new_timeout(|_| {}, Duration::from_secs(1));
                *self.1.lock().unwrap() = t.ok();
            }
        }
        thread_local! {
            static LATE: RefCell<Option<Late>> = const { RefCell::new(None) };
        }
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let out = Out::default();
        let (t, o) = (timer.clone(), out.clone());
        std::thread::spawn(move || {
            // Set first, so destroyed after the thread's lanes are let go.
            LATE.with(|late| *late.borrow_mut() = Some(Late(t.clone(), o)));
            for _ in 0..2 {
                // The first adopts a lane, the second finds it.
                drop(t.new_timeout(|_| {}, Duration::from_secs(1)).unwrap());
            }
        })
        .join()
        .unwrap();
        let intake = &timer.shared().intake;
        let late = out
            .lock()
            .unwrap()
            .take()
            .expect("scheduled from the destructor");
        assert_eq!(
            intake.lanes().next().unwrap().len(),
            2,
            "not on the lane let go"
        );
        assert_eq!(intake.shared.len(), 1, "on the shared queue");
        timer.advance(Duration::from_secs(1));
        assert!(late.is_expired());
    }

    #[test]
    #[cfg_attr(miri, ignore = "260 threads: too slow under Miri")]
    fn producers_past_the_last_lane_use_the_shared_queue() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let threads = super::MAX_LANES + 4;
        let barrier = std::sync::Barrier::new(threads);
        let ts: Vec<_> = std::thread::scope(|s| {
            let spawned: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let t = timer.new_timeout(|_| {}, Duration::from_millis(1));
                        barrier.wait(); // all alive at once
                        t.unwrap()
                    })
                })
                .collect();
            spawned.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let intake = &timer.shared().intake;
        assert_eq!(intake.lanes().count(), super::MAX_LANES);
        assert_eq!(intake.len(), threads, "4 of them in the shared queue");
        timer.advance(Duration::from_millis(1));
        assert!(ts.iter().all(crate::Timeout::is_expired), "none lost");
    }
}
