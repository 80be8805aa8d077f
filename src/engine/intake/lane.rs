//! A lane: one producer thread's way into its timer's driver, keeping a busy
//! producer's traffic on its core: a ring of key cells only its owner writes and the
//! driver drains, and a stack of free slots only the owner touches.
//!
//! A cancel that finds its key still in the ring *withdraws* it (swaps the cell to 0): the driver
//! never sees it, and the owner reuses the slot warm. A drain and a withdrawal each claim a cell by
//! one atomic swap, so a key is taken or withdrawn, never both. The owner moves the head past
//! withdrawn cells (`reclaim`), so timeouts all cancelled young never need the driver, and files a
//! ring full of live keys itself, under the core lock (`Shared::file_lane`), as Go runs timers on
//! the thread at hand.
//!
//! **Holding.** RPC code cancels most timeouts within milliseconds: in the ring, one swap on the
//! producer's core; once filed, a trip to the driver on another core. So a drain leaves a key until
//! it is `HOLD` old by its cell's *stamp* (the clock at the push, `stamp_of`), unless it is
//! *urgent* (`urgent_nanos`), and stops at the first key it holds: later keys are younger (one
//! owner pushes in time order), so a lane is filed in push order. That key's stamp plus
//! `HOLD + BATCH` is when to look again (`Drained::look_by`): a steady stream of held keys wakes a
//! sleeping driver once a `BATCH`, not once a tick.
//!
//! **Owner-only fields**, written with plain loads and stores: `tail`, `head_seen`,
//! `urgent`, `free`, `free_len`, `last_now`. The owner is the thread holding the lane's index
//! (`intake/mod.rs`), which passes between threads only through the pool's lock.

use crossbeam_utils::CachePadded;

use std::time::Duration;

use crate::engine::clock::Nanos;
use crate::engine::entry::{arena::Slots, key::Key, prefetch, Entry};
use crate::engine::sync::{AtomicU32, AtomicU64, Ordering};

/// Cells per ring: a `HOLD` of schedules at 250,000 a second.
pub(crate) const RING_BITS: u32 = if cfg!(loom) { 2 } else { 14 };
const RING: u64 = 1 << RING_BITS;
/// Cells in use at which the owner moves the head past withdrawn ones.
const RECLAIM_AT: u64 = RING / 4 * 3;
/// `Lane::drain`'s `keep`: hold no key; hold any key not yet due; hold at
/// most the youngest half (what an owner whose ring is full files).
pub(crate) const KEEP_NONE: u64 = 0;
pub(crate) const KEEP_YOUNG: u64 = u64::MAX;
pub(crate) const KEEP_HALF: u64 = RING / 2;
/// How old a key that is not urgent is, at least, when the driver files it.
pub(crate) const HOLD: Duration = Duration::from_millis(64);
const HOLD_NANOS: i64 = HOLD.as_nanos() as i64;
/// How much older than `HOLD`, at most, a look lets a key get.
const BATCH_NANOS: u64 = HOLD.as_nanos() as u64 / 2;
/// Stamps count units of 2^20 ns (1.05 ms): 32 bits wrap after 52 days.
const STAMP_SHIFT: u32 = 20;

/// Rounded down: a key looks older than it is, so is filed earlier, never later.
#[inline(always)]
pub(crate) fn stamp_of(now: Nanos) -> u32 {
    (now >> STAMP_SHIFT) as u32
}

/// How long after the driver's last turn a stamp still tells a key's age (half the 26 days):
/// past it, a turn files every key.
pub(crate) const STAMPS_TELL_AGE: u64 = 1 << (30 + STAMP_SHIFT);

/// Nanoseconds from `now` until a key stamped `stamp` is `HOLD` old, or 0.
/// Signed (a producer may read the clock after the driver): right within 26
/// days of the push, as `look_by` and `STAMPS_TELL_AGE` ensure.
fn wait(stamp: u32, now: Nanos) -> u64 {
    let units = stamp_of(now).wrapping_sub(stamp) as i32 as i64;
    let age = (units << STAMP_SHIFT) + (now & ((1 << STAMP_SHIFT) - 1)) as i64;
    (HOLD_NANOS - age).max(0) as u64
}

/// A key due within this long of its push (ticks of `tick_nanos`) is urgent. Any
/// other, due `HOLD + BATCH` and two ticks or more after its stamp, is filed by the
/// end of the tick it is `HOLD + BATCH` old in: a tick or more before it is due.
pub(crate) fn urgent_nanos(tick_nanos: u64) -> u64 {
    (HOLD_NANOS as u64 + BATCH_NANOS).saturating_add(tick_nanos.saturating_mul(2))
}

/// Cancels a lane batches (`batch_cancel`: dropped `Sleep`s, queue removals): a cache line of keys.
pub(crate) const CANCEL_BATCH: usize = if cfg!(loom) { 2 } else { 16 };

/// How long a batched cancel waits for no drop to fill its batch: the driver takes it by then
/// (woken for it, if idle), as it files a held key. A tick would wake a busy driver each tick.
pub(crate) const BATCH_WAIT_NANOS: u64 = HOLD_NANOS as u64;

/// Free slots a lane keeps for its owner; the rest go to the shared list.
const FREE_MAX: u32 = if cfg!(loom) { 2 } else { 4096 };

pub(crate) struct Lane {
    index: u32,
    /// Packed keys; 0 for an empty or withdrawn cell.
    cells: Box<[AtomicU32]>,
    stamps: Box<[AtomicU32]>,
    producer: CachePadded<ProducerSide>,
    /// Oldest cell that may hold a key; only moves on (`drain`, `reclaim`).
    head: CachePadded<AtomicU64>,
    /// Keys whose cancels wait: the owner fills them in order, anyone takes them (`take_batch`).
    batch: CachePadded<[AtomicU32; CANCEL_BATCH]>,
}

#[derive(Default)]
struct ProducerSide {
    tail: AtomicU64,
    /// The driver's `head` as last read, to test for a full ring cheaply.
    head_seen: AtomicU64,
    /// Just past the last urgent key: the driver files up to it each look.
    urgent: AtomicU64,
    /// Top of the owner's free stack, a packed key.
    free: AtomicU32,
    free_len: AtomicU32,
    /// The reading the last key was pushed with (`not_before`).
    last_now: AtomicU64,
    /// The next `batch` cell the owner fills.
    batched: AtomicU32,
}

/// What a drain of a lane, or of the whole intake (`Intake::drain`), did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Drained {
    pub(crate) taken: usize,
    /// Some cells passed were empty: withdrawn by a cancel.
    pub(crate) skipped: bool,
    /// Keys this drain was to take were left behind: drain again now.
    pub(crate) more: bool,
    /// When to drain again, for the key it held: when it is `HOLD + BATCH` old.
    pub(crate) look_by: Option<Nanos>,
}

/// Where a queued entry sits, for a withdrawal: lane index + 1 and cell.
pub(crate) fn cell_mark(lane: u32, cell: u64) -> u32 {
    (lane + 1) << RING_BITS | cell as u32
}

pub(crate) fn unmark(mark: u32) -> Option<(usize, usize)> {
    let lane = (mark >> RING_BITS).checked_sub(1)?;
    Some((lane as usize, (mark & (RING as u32 - 1)) as usize))
}

impl Lane {
    pub(crate) fn new(index: u32) -> Lane {
        Lane {
            index,
            cells: (0..RING).map(|_| AtomicU32::new(0)).collect(),
            stamps: (0..RING).map(|_| AtomicU32::new(0)).collect(),
            producer: CachePadded::default(),
            head: CachePadded::new(AtomicU64::new(0)),
            batch: CachePadded::new(std::array::from_fn(|_| AtomicU32::new(0))),
        }
    }

    /// Owner only: puts `key` in the batch; true once it is full, to cancel now.
    /// Every cell past `batched` is empty: only the owner fills one, and only in order.
    #[inline(always)]
    pub(crate) fn batch_cancel(&self, key: Key) -> bool {
        let at = self.producer.batched.load(Ordering::Relaxed) as usize;
        self.batch[at].store(key.pack(), Ordering::Release);
        let next = (at + 1) % CANCEL_BATCH;
        self.producer.batched.store(next as u32, Ordering::Relaxed);
        next == 0
    }

    /// True if a cancel waits in the batch: for the driver's plan, after its fence.
    pub(crate) fn has_batch(&self) -> bool {
        self.batch.iter().any(|c| c.load(Ordering::Relaxed) != 0)
    }

    /// Takes the batch's keys, each by one swap, so once: by the owner, the driver or a reader.
    pub(crate) fn take_batch(&self) -> [Option<Key>; CANCEL_BATCH] {
        std::array::from_fn(|i| {
            let cell = &self.batch[i];
            // A load first: cells mostly empty stay on the owner's core.
            (cell.load(Ordering::Relaxed) != 0)
                .then(|| Key::unpack(cell.swap(0, Ordering::AcqRel)))
                .flatten()
        })
    }

    pub(crate) fn prefetch_cell(&self, cell: usize) {
        self.cells.get(cell).map(prefetch);
    }

    /// Owner only: the later of `now` and the last key's reading. A caller may push with a
    /// reading older than the last (on a manual clock, a task that `advance` runs late reads its
    /// own tick's time); this one keeps the lane in time order, and the key's urgency true to the
    /// stamp the driver will read.
    #[inline(always)]
    pub(crate) fn not_before(&self, now: Nanos) -> Nanos {
        now.max(self.producer.last_now.load(Ordering::Relaxed))
    }

    /// Owner only: queues `key`, made at `now` (from `not_before`); its entry keeps the cell for
    /// a cancel. False if full: the owner files the lane (`Shared::file_lane`).
    #[inline(always)]
    pub(crate) fn try_push(&self, key: Key, entry: &Entry, now: Nanos, urgent: bool) -> bool {
        let p = &self.producer;
        p.last_now.store(now, Ordering::Relaxed);
        let tail = p.tail.load(Ordering::Relaxed);
        if tail - p.head_seen.load(Ordering::Relaxed) >= RECLAIM_AT
            && tail - self.reclaim(tail) >= RING
        {
            return false;
        }
        let cell = tail & (RING - 1);
        let mark = cell_mark(self.index, cell);
        // Before the key is visible: the driver reuses this field.
        entry.set_queue_mark(mark);
        // Stamp first: the driver that reads the key finds it. Release: a
        // driver reading this stamp sees `head` past the cell's last key, if
        // the owner moved it on to write here again (see `drain`).
        self.stamps[cell as usize].store(stamp_of(now), Ordering::Release);
        self.cells[cell as usize].store(key.pack(), Ordering::Release);
        p.tail.store(tail + 1, Ordering::Release);
        if urgent {
            // After `tail`: a driver reading this, then `tail`, finds it.
            p.urgent.store(tail + 1, Ordering::Release);
        }
        true
    }

    /// Owner only: moves `head` past the oldest empty cells; returns it, also
    /// into `head_seen`. A cell between `head` and `tail` that reads 0 stays
    /// empty: the owner writes one only at `tail`, after `head` passed it.
    #[cold]
    fn reclaim(&self, tail: u64) -> u64 {
        let start = self.head.load(Ordering::Acquire);
        let mut head = start;
        while head < tail && self.cells[(head & (RING - 1)) as usize].load(Ordering::Relaxed) == 0 {
            head += 1;
        }
        if head > start {
            // The driver may have moved it on meanwhile: never back.
            head = head.max(self.head.fetch_max(head, Ordering::AcqRel));
        }
        self.producer.head_seen.store(head, Ordering::Relaxed);
        head
    }

    /// Any thread: takes `key` back out of `cell` if the driver has not.
    /// True if it did: the caller then holds the queue's reference.
    #[inline(always)]
    pub(crate) fn withdraw(&self, cell: usize, key: Key) -> bool {
        self.cells.get(cell).is_some_and(|cell| {
            cell.compare_exchange(key.pack(), 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Driver only: passes to `out` up to `limit` keys, oldest first: those `HOLD`
    /// old, before the last urgent key, or older than the `keep` newest cells. A
    /// `reclaim` may move `head` past cells yet to read, even rewrite one after a
    /// wrap: that key is taken early, harmless, as one swap claims each key.
    pub(crate) fn drain(
        &self,
        now: Nanos,
        keep: u64,
        limit: usize,
        out: &mut impl FnMut(Key),
    ) -> Drained {
        // `urgent` before `tail`: the tail read is at least as far.
        let urgent = self.producer.urgent.load(Ordering::Acquire);
        let tail = self.producer.tail.load(Ordering::Acquire);
        let due = urgent.max(tail.saturating_sub(keep));
        let start = self.head.load(Ordering::Acquire);
        let mut head = start;
        let mut taken = 0;
        let mut look_by = None;
        while head < tail && taken < limit {
            let at = (head & (RING - 1)) as usize;
            let cell = &self.cells[at];
            // Skip a withdrawn cell without a read-modify-write.
            if cell.load(Ordering::Acquire) != 0 {
                if head >= due {
                    let wait = wait(self.stamps[at].load(Ordering::Acquire), now);
                    if wait > 0 {
                        look_by = Some(now.saturating_add(wait + BATCH_NANOS));
                        break; // every key after it is younger
                    }
                }
                if let Some(key) = Key::unpack(cell.swap(0, Ordering::AcqRel)) {
                    out(key);
                    taken += 1;
                }
            }
            head += 1;
        }
        let skipped = head - start > taken as u64;
        let held_at = head;
        // The owner may have moved `head` past empty cells meanwhile.
        let head = if head > start {
            head.max(self.head.fetch_max(head, Ordering::AcqRel))
        } else {
            self.head.load(Ordering::Acquire)
        };
        // Past the key this drain held: it was withdrawn, and the stamp read may be a younger
        // key's, written after wrapping round. Older keys after it may be due: look again now.
        let moved = look_by.is_some() && head > held_at;
        Drained {
            taken,
            skipped,
            more: moved || (look_by.is_none() && head < tail),
            look_by,
        }
    }

    /// Cells not yet drained, withdrawn ones included.
    pub(crate) fn len(&self) -> usize {
        let tail = self.producer.tail.load(Ordering::Acquire);
        tail.saturating_sub(self.head.load(Ordering::Acquire)) as usize
    }

    /// Owner only: a free slot from the owner's stack.
    #[inline(always)]
    pub(crate) fn pop_free<'s>(&self, slots: &'s Slots) -> Option<(Key, &'s Entry)> {
        let p = &self.producer;
        let key = Key::unpack(p.free.load(Ordering::Relaxed))?;
        let entry = slots.get(key);
        let next = entry.next_link();
        p.free.store(next.map_or(0, Key::pack), Ordering::Relaxed);
        p.free_len
            .store(p.free_len.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
        Some((key, entry))
    }

    /// Owner only: keeps a vacated slot; false if full (free it to the arena).
    #[inline(always)]
    pub(crate) fn push_free(&self, key: Key, entry: &Entry) -> bool {
        let p = &self.producer;
        let len = p.free_len.load(Ordering::Relaxed);
        if len >= FREE_MAX {
            return false;
        }
        entry.set_next_link(Key::unpack(p.free.load(Ordering::Relaxed)));
        p.free.store(key.pack(), Ordering::Relaxed);
        p.free_len.store(len + 1, Ordering::Relaxed);
        true
    }

    #[cfg(test)]
    pub(crate) fn free_len(&self) -> usize {
        self.producer.free_len.load(Ordering::Acquire) as usize
    }
}

#[cfg(test)]
#[path = "lane_tests.rs"]
mod tests;
