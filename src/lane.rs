//! A lane: one producer thread's private way into its timer's worker.
//!
//! A busy producer that queued every timeout on one shared MPSC queue, and
//! drew every slot from one shared free list, would pay a cache miss per
//! timeout on lines the worker or another producer just wrote. A lane keeps
//! that traffic on the producer's core:
//!
//! - a ring of cells holding keys, written only by its owner thread and
//!   read by the worker a batch at a time;
//! - a stack of free slots that only the owner pushes and pops.
//!
//! A cancel that reaches a timeout still in a ring *withdraws* it: it swaps
//! the cell's key for 0, and the worker never touches the entry. The owner
//! then reuses the slot at once, warm in its cache. Cells are claimed by one
//! compare-and-swap on each side, so a key is withdrawn or taken, never
//! both. Before a ring fills, its owner moves the ring's head past the
//! withdrawn cells itself: a producer whose timeouts are all cancelled
//! young never needs the worker at all.
//!
//! # Owner-only fields
//!
//! `tail`, `head_seen`, `free` and `free_len` are written only by the
//! thread that owns the lane (see `local.rs`), so they are plain loads and
//! stores, not read-modify-writes. Ownership passes to another thread only
//! through `owned` (release on hand-back, acquire on adoption).

use crossbeam_utils::CachePadded;

use crate::entry::Entry;
use crate::slots::{Key, Slots};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Cells per ring: enough for a tick's worth of schedules at full speed.
pub(crate) const RING_BITS: u32 = if cfg!(loom) { 2 } else { 14 };
const RING: u64 = 1 << RING_BITS;
/// Free slots a lane keeps for its owner; the rest go to the shared list.
const FREE_MAX: u32 = if cfg!(loom) { 2 } else { 4096 };

pub(crate) struct Lane {
    /// This lane's place in its timer's list of lanes.
    pub(crate) index: u32,
    /// The timer this lane feeds.
    pub(crate) timer_id: u64,
    /// Packed keys; 0 for an empty or withdrawn cell.
    cells: Box<[AtomicU32]>,
    producer: CachePadded<ProducerSide>,
    /// The oldest cell that may still hold a key. The worker moves it on
    /// as it drains; the owner moves it past empty cells (`reclaim`). Only
    /// ever forwards.
    head: CachePadded<AtomicU64>,
    /// Set by the owner when the ring is half full, cleared by the worker
    /// once it has drained the lane: one wake-up per half ring.
    drain_asked: AtomicBool,
    /// True while a thread owns the lane.
    owned: AtomicBool,
    /// Set when the timer shuts down: owners let go of the lane.
    closed: AtomicBool,
}

struct ProducerSide {
    /// The next cell the owner writes.
    tail: AtomicU64,
    /// The worker's `head` as last read, to test for a full ring cheaply.
    head_seen: AtomicU64,
    /// Top of the owner's free stack, a packed key.
    free: AtomicU32,
    free_len: AtomicU32,
    /// Timeouts this lane's owners counted as pending, less those they
    /// uncounted; wrapping, as others uncount elsewhere.
    net_pending: AtomicU64,
}

/// What `Lane::drain` did.
pub(crate) struct Drained {
    /// Keys passed to `out`.
    pub(crate) taken: usize,
    /// Some cells passed were empty: withdrawn by a cancel.
    pub(crate) skipped: bool,
    /// Keys were left behind.
    pub(crate) more: bool,
}

/// Where a queued entry sits, for a withdrawal: lane index + 1 and cell.
pub(crate) fn cell_mark(lane: u32, cell: u64) -> u32 {
    (lane + 1) << RING_BITS | cell as u32
}

/// The lane index and cell that `cell_mark` packed, if it packed any.
pub(crate) fn unmark(mark: u32) -> Option<(usize, usize)> {
    let lane = (mark >> RING_BITS).checked_sub(1)?;
    Some((lane as usize, (mark & (RING as u32 - 1)) as usize))
}

impl Lane {
    pub(crate) fn new(index: u32, timer_id: u64) -> Lane {
        Lane {
            index,
            timer_id,
            cells: (0..RING).map(|_| AtomicU32::new(0)).collect(),
            producer: CachePadded::new(ProducerSide {
                tail: AtomicU64::new(0),
                head_seen: AtomicU64::new(0),
                free: AtomicU32::new(0),
                free_len: AtomicU32::new(0),
                net_pending: AtomicU64::new(0),
            }),
            head: CachePadded::new(AtomicU64::new(0)),
            drain_asked: AtomicBool::new(false),
            owned: AtomicBool::new(true),
            closed: AtomicBool::new(false),
        }
    }

    /// Makes the caller the owner of a lane nobody owns, of a timer still
    /// running. False if it cannot.
    pub(crate) fn try_adopt(&self) -> bool {
        !self.owned.load(Ordering::Relaxed)
            && !self.is_closed()
            && self
                .owned
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Owner only: hands the lane back, for another thread to adopt.
    pub(crate) fn let_go(&self) {
        self.owned.store(false, Ordering::Release);
    }

    /// The timer shut down: owners let go of the lane when they next look.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Owner only: adds `delta` (wrapping) to the pending count.
    #[inline(always)]
    pub(crate) fn count(&self, delta: u64) {
        let net = &self.producer.net_pending;
        net.store(
            net.load(Ordering::Relaxed).wrapping_add(delta),
            Ordering::Release,
        );
    }

    /// This lane's share of the pending count, wrapping.
    pub(crate) fn net_pending(&self) -> u64 {
        self.producer.net_pending.load(Ordering::Acquire)
    }

    /// Owner only: queues `key` in the next cell. `None` if the ring is
    /// full; otherwise whether the worker should be woken to drain it.
    #[inline(always)]
    pub(crate) fn push(&self, key: Key, entry: &Entry) -> Option<bool> {
        let p = &self.producer;
        let tail = p.tail.load(Ordering::Relaxed);
        let mut head = p.head_seen.load(Ordering::Relaxed);
        if tail - head >= RING {
            head = self.reclaim(tail);
            if tail - head >= RING {
                return None;
            }
        }
        let cell = tail & (RING - 1);
        let mark = cell_mark(self.index, cell);
        // Before the key is visible: the worker reuses this field.
        entry.set_queue_mark(mark);
        self.cells[cell as usize].store(key.pack(), Ordering::Release);
        p.tail.store(tail + 1, Ordering::Release);
        Some(tail + 1 - head >= RING / 2 && self.ask_for_drain(tail + 1))
    }

    /// Owner only, with the ring half full by its last look at `head`:
    /// true if the worker should be woken to drain it. Once per drain.
    #[cold]
    fn ask_for_drain(&self, tail: u64) -> bool {
        let head = self.reclaim(tail);
        tail - head >= RING / 2
            && !self.drain_asked.load(Ordering::Relaxed)
            && !self.drain_asked.swap(true, Ordering::AcqRel)
    }

    /// Owner only: moves `head` past the oldest cells that hold no key,
    /// withdrawn or already drained, so that a producer whose timeouts are
    /// cancelled before the worker sees them never needs the worker to
    /// make room. Returns `head` as it leaves it, also kept in `head_seen`.
    ///
    /// Only the owner writes cells, and only at `tail`, so a cell between
    /// `head` and `tail` that reads 0 was emptied for good: it is written
    /// again only after `head` has passed it and the ring wrapped round.
    #[cold]
    fn reclaim(&self, tail: u64) -> u64 {
        let start = self.head.load(Ordering::Acquire);
        let mut head = start;
        while head < tail && self.cells[(head & (RING - 1)) as usize].load(Ordering::Relaxed) == 0 {
            head += 1;
        }
        if head > start {
            // The worker may have moved it on meanwhile: never back.
            head = head.max(self.head.fetch_max(head, Ordering::AcqRel));
        }
        self.producer.head_seen.store(head, Ordering::Relaxed);
        head
    }

    /// Any thread: takes `key` back out of `cell` if the worker has not
    /// taken it yet. True if it did; the caller then holds the reference
    /// the queue held.
    #[inline(always)]
    pub(crate) fn withdraw(&self, cell: usize, key: Key) -> bool {
        self.cells.get(cell).is_some_and(|c| {
            c.compare_exchange(key.pack(), 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Worker only: takes up to `limit` keys, oldest first, into `out`.
    ///
    /// The owner may move `head` on meanwhile (see `reclaim`), past cells
    /// this drain has yet to read, and even write one of them again after
    /// wrapping round. Such a key is taken early, which is harmless: every
    /// key is claimed by one swap, by the worker or by a withdrawal.
    pub(crate) fn drain(&self, limit: usize, out: &mut impl FnMut(Key)) -> Drained {
        let tail = self.producer.tail.load(Ordering::Acquire);
        let start = self.head.load(Ordering::Acquire);
        let mut head = start;
        let mut taken = 0;
        while head < tail && taken < limit {
            let cell = &self.cells[(head & (RING - 1)) as usize];
            // Skip a withdrawn cell without a read-modify-write.
            if cell.load(Ordering::Relaxed) != 0 {
                if let Some(key) = Key::unpack(cell.swap(0, Ordering::AcqRel)) {
                    out(key);
                    taken += 1;
                }
            }
            head += 1;
        }
        let passed = head - start;
        let head = head.max(self.head.fetch_max(head, Ordering::AcqRel));
        if head == tail {
            self.drain_asked.store(false, Ordering::Release);
        }
        Drained {
            taken,
            skipped: passed > taken as u64,
            more: head < tail,
        }
    }

    /// True if the ring may hold keys the worker has not looked at.
    pub(crate) fn is_empty(&self) -> bool {
        self.producer.tail.load(Ordering::Acquire) == self.head.load(Ordering::Acquire)
    }

    /// Cells between the worker and the owner, withdrawn ones included.
    #[cfg(test)]
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

    /// Owner only: keeps a vacated slot for the owner's next schedule.
    /// False if the stack is full: the caller frees it to the shared list.
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

    /// Free slots held here, for the arena's accounting in tests.
    #[cfg(test)]
    pub(crate) fn free_len(&self) -> usize {
        self.producer.free_len.load(Ordering::Acquire) as usize
    }
}
