//! Keys held in their lanes until their take time (`intake/lane.rs`): the driver reads each new
//! cell once into a bucket by that tick, and at that tick takes each key still in its cell and
//! files it. A cancel before that withdraws the key in its lane, so a timeout cancelled young, as
//! RPC code cancels most, costs the driver a read of its cell, never a touch of its entry.

use crate::engine::clock::Nanos;
use crate::engine::driver::{Core, Shared};
use crate::engine::intake::lane::{Lane, RING};

/// Buckets, each `Shared::held_width` ticks (one at a tick of 0.78 ms or more): they span
/// more than a take time is ahead of its push (`urgent_nanos`). A later one goes in the last and
/// is taken early: it is filed in the wheel. A bucket is taken at its first tick.
pub(crate) const HELD_TICKS: u64 = 128;

/// A held key: its lane's index, its cell, and the key packed.
pub(crate) type Held = (u32, u32, u32);

impl Shared {
    /// Reads the lanes' new cells into `core.held`, then takes and files the keys of each bucket
    /// due at `now` (on a tokio clock, the tick under way too: `expire_due_by` fires its keys due
    /// by `now`), in bucket order; with `all`, every key. Notes withdrawn cells seen.
    pub(crate) fn take_held(&self, core: &mut Core, now: Nanos, by: Option<Nanos>, all: bool) {
        let width = self.held_width;
        let first = core.held_from;
        let last = first + HELD_TICKS - 1;
        let mut late = false; // a key whose bucket was taken: the first is taken now, with it
        for lane in self.intake.lanes() {
            let (index, held) = (lane.index, &mut core.held);
            let scanned = &mut core.scanned[index as usize];
            core.saw_withdrawn |= lane.scan(scanned, &mut |cell, key, at| {
                let bucket = self.clock.tick_of(at) / width;
                late |= bucket < first;
                held[(bucket.clamp(first, last) % HELD_TICKS) as usize]
                    .push_back((index, cell, key));
            });
        }
        let tokio = u64::from(self.clock.tokio_runtime().is_some());
        let due = (self.clock.ticks_at(now) + tokio) / width;
        let through = if all {
            last
        } else {
            due.max(first * u64::from(late)) // a late key: the first bucket too
        };
        for bucket in first..=through.min(last) {
            let mut keys = std::mem::take(&mut core.held[(bucket % HELD_TICKS) as usize]);
            for (lane, cell, key) in keys.drain(..) {
                match self.intake.lane(lane).and_then(|lane| lane.take(cell, key)) {
                    Some(key) => self.file(core, key, by),
                    None => core.saw_withdrawn = true,
                }
            }
            core.held[(bucket % HELD_TICKS) as usize] = keys; // its room, for the next round
        }
        core.held_from = first.max(through + 1); // with `all`, later keys are filed at once
        for lane in self.intake.lanes() {
            let scanned = &mut core.scanned[lane.index as usize];
            *scanned = lane.advance_head(*scanned).max(*scanned);
        }
    }

    /// When the earliest key still held is taken: the end of its bucket's first tick. Withdrawn
    /// keys ahead of it are dropped on the way (each once): a bucket all withdrawn wakes no one.
    pub(crate) fn held_time(&self, core: &mut Core) -> Option<Nanos> {
        let live =
            |(lane, cell, key): Held| self.intake.lane(lane).is_some_and(|l| l.holds(cell, key));
        let bucket = (core.held_from..core.held_from + HELD_TICKS).find(|n| {
            let keys = &mut core.held[(n % HELD_TICKS) as usize];
            while keys.front().is_some_and(|&held| !live(held)) {
                keys.pop_front();
            }
            !keys.is_empty()
        })?;
        Some(self.clock.time_of(bucket * self.held_width))
    }

    /// Files the oldest half of a full `lane`, on its owner's thread, young keys too:
    /// the youngest half stays, for cancels to withdraw. Returns the earliest
    /// deadline filed (`u64::MAX`: none); `None` after a shutdown.
    pub(crate) fn file_lane(&self, lane: &Lane) -> Option<Nanos> {
        let mut core = self.lock_core();
        if self.is_shutdown() {
            return None;
        }
        let ready_by = Some(self.clock.ready_by(self.clock.now()));
        let mut earliest = u64::MAX;
        let head = lane.drain(Some(RING / 2), &mut |key| {
            earliest = earliest.min(self.entry(key).deadline());
            self.file(&mut core, key, ready_by);
        });
        let scanned = &mut core.scanned[lane.index as usize];
        *scanned = head.max(*scanned);
        Some(earliest)
    }
}
