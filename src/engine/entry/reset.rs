//! An entry's side of a reset (see `engine/reset.rs` for the timer's).
//!
//! The wheel finds an entry by its `deadline`, so only the driver changes
//! it, and only where the entry is in no bucket. A reset writes the new
//! deadline to the entry's cell of the reset table and marks the entry
//! `MOVED` (`PENDING` + `RESET`). The driver *adopts* it, copying it into
//! `deadline`, when it files the entry from the intake, takes it out of its
//! bucket to move it earlier, or finds it due by the old deadline but not
//! by the new one (then files it again: a reset to later costs the driver
//! nothing until the old deadline).
//!
//! A reset and the driver's look each hold `LOCKED`, so the driver decides
//! "due or not" on a deadline no reset changes under it: a fire and a reset
//! have one winner. The driver never waits: an entry it finds `LOCKED` is
//! looked at again next tick.

use super::{Entry, EXPIRED, LOCKED, MOVED, PENDING, RESET, RUNNING};
use crate::engine::clock::Nanos;
use crate::engine::sync::{spin, AtomicU64, Ordering};

/// What the driver's look at an entry due by its filing deadline found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fire {
    /// It fired: the caller owns its task.
    Won,
    /// It was cancelled or stopped meanwhile.
    Lost,
    /// A reset moved it past now, or is moving it: file it again (by
    /// `deadline`, which holds the new deadline, or the old one while a
    /// reset holds the entry, to be looked at again next tick).
    Moved,
}

impl Entry {
    /// A reset: moves a pending one-shot entry's deadline to `to`, written
    /// to `cell`, its reset table cell. Returns the deadline it is filed
    /// by; `None`, changing nothing, if it is not pending.
    pub(crate) fn try_reset(&self, to: Nanos, cell: &AtomicU64) -> Option<Nanos> {
        let mut claimed = false;
        spin(|| {
            let current = self.state.load(Ordering::Acquire);
            match current {
                PENDING | MOVED => {
                    claimed = self.transition(current, LOCKED);
                    claimed
                }
                LOCKED => false, // another reset, or the driver: a few instructions
                _ => true,
            }
        });
        if !claimed {
            return None;
        }
        let filed = self.deadline.load(Ordering::Relaxed);
        cell.store(to, Ordering::Relaxed);
        // Back to its filing deadline: nothing for the driver to adopt.
        let state = if to == filed { PENDING } else { MOVED };
        self.state.store(state, Ordering::Release);
        Some(filed)
    }

    /// The driver, at `now`, on an entry due by its filing deadline: fires
    /// it (`PENDING -> EXPIRED`, or `RUNNING` if periodic) unless a reset
    /// moved its deadline past `now`. One swap for an entry never reset.
    pub(crate) fn fire_due(&self, now: Nanos, cell: impl FnOnce() -> Nanos) -> Fire {
        let to = if self.is_periodic() { RUNNING } else { EXPIRED };
        match self
            .state
            .compare_exchange(PENDING, to, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Fire::Won,
            Err(MOVED) if self.transition(MOVED, LOCKED) => {
                // Out of the wheel: `deadline` may take the new one.
                let deadline = cell();
                self.deadline.store(deadline, Ordering::Release);
                if deadline <= now {
                    self.state.store(to, Ordering::Release);
                    return Fire::Won;
                }
                self.state.store(PENDING, Ordering::Release);
                Fire::Moved
            }
            // A reset holds it, or took it between our two reads.
            Err(MOVED | LOCKED) => Fire::Moved,
            Err(_) => Fire::Lost,
        }
    }

    /// The driver, on an entry in no bucket, or about to take it out of
    /// one with `take_out`: adopts the deadline a reset moved it to, so
    /// that `deadline` is where to file it. Does nothing (and returns false)
    /// if no reset moved it, or one holds it now: that reset then tells the
    /// driver again if it must (see `engine/reset.rs`).
    pub(crate) fn adopt_reset(
        &self,
        cell: impl FnOnce() -> Nanos,
        take_out: impl FnOnce(),
    ) -> bool {
        if self.state.load(Ordering::Relaxed) != MOVED || !self.transition(MOVED, LOCKED) {
            return false;
        }
        take_out();
        self.deadline.store(cell(), Ordering::Release);
        self.state.store(PENDING, Ordering::Release);
        true
    }

    /// The deadline in force: the one a reset moved it to, read by `cell`,
    /// or else `deadline`. Waits out a reset in progress. (A cancel keeps
    /// the `RESET` flag, so a cancelled entry's reads right too.)
    pub(crate) fn deadline_in_force(&self, cell: impl FnOnce() -> Nanos) -> Nanos {
        let mut state = LOCKED;
        spin(|| {
            state = self.state.load(Ordering::Acquire);
            state != LOCKED
        });
        if state & RESET != 0 {
            cell()
        } else {
            self.deadline()
        }
    }
}
