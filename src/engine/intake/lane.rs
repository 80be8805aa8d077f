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
//! producer's core; once filed, a trip to the driver on another core. So a key stays in its cell
//! until its *take time* (`take_time`): its deadline if that is near, else once it is `HOLD` old
//! (on a `BATCH` boundary, so a steady stream of far keys wakes a sleeping driver once a `BATCH`).
//! The driver reads each new cell once (`scan`) into a bucket by that tick (`driver/held.rs`), and
//! then takes the key if it is still there (`take`): a cancel before that withdrew it, and the
//! driver never touched its entry.

use crossbeam_utils::CachePadded;

use std::time::Duration;

use crate::engine::clock::Nanos;
use crate::engine::entry::{arena::Slots, key::Key, prefetch, Entry};
use crate::engine::sync::{AtomicU32, AtomicU64, Ordering};

/// Cells per ring: a `HOLD` of schedules at 250,000 a second.
pub(crate) const RING_BITS: u32 = if cfg!(loom) { 2 } else { 14 };
pub(crate) const RING: u64 = 1 << RING_BITS;
/// Cells in use at which the owner moves the head past withdrawn ones.
const RECLAIM_AT: u64 = RING / 4 * 3;
/// How old a far key is, at least, when the driver files it.
pub(crate) const HOLD: Duration = Duration::from_millis(64);
const HOLD_NANOS: u64 = HOLD.as_nanos() as u64;
/// Far keys are taken on multiples of this: how much older than `HOLD` they get, at most.
pub(crate) const BATCH_NANOS: u64 = HOLD_NANOS / 2;

/// A key due within this long of its push (ticks of `tick_nanos`) is taken at its deadline. Any
/// other is taken when `HOLD` old, by the end of its `BATCH`: a tick or more before it is due.
pub(crate) fn urgent_nanos(tick_nanos: u64) -> u64 {
    (HOLD_NANOS + BATCH_NANOS).saturating_add(tick_nanos.saturating_mul(2))
}

/// When the driver takes a key pushed at `now`: see the module's doc.
#[inline(always)]
pub(crate) fn take_time(now: Nanos, deadline: Nanos, urgent_nanos: u64) -> Nanos {
    if deadline < now.saturating_add(urgent_nanos) {
        return deadline;
    }
    (now.saturating_add(HOLD_NANOS) / BATCH_NANOS + 1).saturating_mul(BATCH_NANOS)
}

/// Cancels a lane batches (`batch_cancel`: dropped `Sleep`s, queue removals): a cache line of keys.
pub(crate) const CANCEL_BATCH: usize = if cfg!(loom) { 2 } else { 16 };

/// How long a batched cancel waits for no drop to fill its batch: the driver takes it by then
/// (woken for it, if idle), as it files a held key. A tick would wake a busy driver each tick.
pub(crate) const BATCH_WAIT_NANOS: u64 = HOLD_NANOS;

/// Free slots a lane keeps for its owner; the rest go to the shared list.
const FREE_MAX: u32 = if cfg!(loom) { 2 } else { 4096 };

pub(crate) struct Lane {
    pub(crate) index: u32,
    /// Packed keys; 0 for an empty or withdrawn cell.
    cells: Box<[AtomicU32]>,
    /// Each cell's take time, written before its key.
    times: Box<[AtomicU64]>,
    producer: CachePadded<ProducerSide>,
    /// Oldest cell that may hold a key; only moves on (`advance_head`, `reclaim`, the drains).
    head: CachePadded<AtomicU64>,
    /// Keys whose cancels wait: the owner fills them in order, anyone takes them (`take_batch`).
    batch: CachePadded<[AtomicU32; CANCEL_BATCH]>,
}

/// The owner's alone, written with plain loads and stores. The owner is the thread holding the
/// lane's index (`intake/mod.rs`), which passes between threads only through the pool's lock.
#[derive(Default)]
struct ProducerSide {
    tail: AtomicU64,
    /// The driver's `head` as last read, to test for a full ring cheaply.
    head_seen: AtomicU64,
    /// Top of the owner's free stack, a packed key.
    free: AtomicU32,
    free_len: AtomicU32,
    /// The reading the last key was pushed with (`not_before`).
    last_now: AtomicU64,
    /// The next `batch` cell the owner fills.
    batched: AtomicU32,
}

/// The lane and cell of a queued entry's mark (`try_push`: lane index + 1, then the cell).
pub(crate) fn unmark(mark: u32) -> Option<(usize, usize)> {
    let lane = (mark >> RING_BITS).checked_sub(1)?;
    Some((lane as usize, (mark & (RING as u32 - 1)) as usize))
}

impl Lane {
    pub(crate) fn new(index: u32) -> Lane {
        Lane {
            index,
            cells: (0..RING).map(|_| AtomicU32::new(0)).collect(),
            times: (0..RING).map(|_| AtomicU64::new(0)).collect(),
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
    /// own tick's time); this one keeps the lane in time order (`take_time` never decreases).
    #[inline(always)]
    pub(crate) fn not_before(&self, now: Nanos) -> Nanos {
        now.max(self.producer.last_now.load(Ordering::Relaxed))
    }

    /// Owner only: queues `key`, made at `now` (from `not_before`), for the driver to take at
    /// `at`; its entry keeps the cell for a cancel. False if full: the owner files the lane.
    #[inline(always)]
    pub(crate) fn try_push(&self, key: Key, entry: &Entry, now: Nanos, at: Nanos) -> bool {
        let p = &self.producer;
        p.last_now.store(now, Ordering::Relaxed);
        let tail = p.tail.load(Ordering::Relaxed);
        if tail - p.head_seen.load(Ordering::Relaxed) >= RECLAIM_AT
            && tail - self.reclaim(tail) >= RING
        {
            return false;
        }
        let cell = tail & (RING - 1);
        // Before the key is visible: the driver reuses this field.
        entry.set_queue_mark((self.index + 1) << RING_BITS | cell as u32);
        // The time first: the driver that reads the key finds it.
        self.times[cell as usize].store(at, Ordering::Relaxed);
        self.cells[cell as usize].store(key.pack(), Ordering::Release);
        p.tail.store(tail + 1, Ordering::Release);
        true
    }

    /// Owner only: `advance_head` up to `tail`, the result also into `head_seen`.
    #[cold]
    fn reclaim(&self, tail: u64) -> u64 {
        let head = self.advance_head(tail);
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

    /// Driver only: passes each key pushed after cell `*scanned` to `out` (its cell, the key
    /// packed, its take time), and moves `scanned` on; true if some cells were empty. A `reclaim`
    /// may move `head` past cells yet to read, even rewrite one after a wrap: that key may be
    /// passed twice, harmless, as one swap claims each key (`take`).
    pub(crate) fn scan(&self, scanned: &mut u64, out: &mut impl FnMut(u32, u32, Nanos)) -> bool {
        let tail = self.producer.tail.load(Ordering::Acquire);
        let mut skipped = false;
        for at in *scanned..tail {
            let cell = (at & (RING - 1)) as usize;
            match self.cells[cell].load(Ordering::Acquire) {
                0 => skipped = true,
                key => out(cell as u32, key, self.times[cell].load(Ordering::Relaxed)),
            }
        }
        *scanned = tail.max(*scanned);
        skipped
    }

    /// Driver only: `key`, if still in `cell` (not withdrawn), taken out.
    pub(crate) fn take(&self, cell: u32, key: u32) -> Option<Key> {
        // A load first: a withdrawn cell stays on its owner's core.
        let key = Key::unpack(key).filter(|_| self.holds(cell, key))?;
        self.withdraw(cell as usize, key).then_some(key)
    }

    pub(crate) fn holds(&self, cell: u32, key: u32) -> bool {
        self.cells[cell as usize].load(Ordering::Relaxed) == key
    }

    /// Driver, or the owner (`reclaim`): moves `head` past the empty cells before `upto`; returns
    /// it. A cell between `head` and `tail` that reads 0 stays empty: the owner writes one only at
    /// `tail`, after `head` passed it. It only moves on, whoever else moved it meanwhile.
    pub(crate) fn advance_head(&self, upto: u64) -> u64 {
        let start = self.head.load(Ordering::Acquire);
        let full = |at: &u64| self.cells[(at & (RING - 1)) as usize].load(Ordering::Relaxed) != 0;
        let head = (start..upto).find(full).unwrap_or(upto.max(start));
        if head == start {
            return start; // a write only if it moved: the owner reads `head` to reclaim
        }
        head.max(self.head.fetch_max(head, Ordering::AcqRel))
    }

    /// Driver, `stop()`, or the owner of a full ring (the oldest half) under the core lock: takes
    /// the keys of the oldest `cells` (`None`: all) into `out`, in order. Returns the new head.
    pub(crate) fn drain(&self, cells: Option<u64>, out: &mut impl FnMut(Key)) -> u64 {
        let start = self.head.load(Ordering::Acquire);
        let tail = self.producer.tail.load(Ordering::Acquire);
        let end = cells.map_or(tail, |cells| tail.min(start + cells));
        for at in start..end {
            let cell = &self.cells[(at & (RING - 1)) as usize];
            if cell.load(Ordering::Relaxed) != 0 {
                Key::unpack(cell.swap(0, Ordering::AcqRel)).map(&mut *out);
            }
        }
        end.max(self.head.fetch_max(end, Ordering::AcqRel))
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
