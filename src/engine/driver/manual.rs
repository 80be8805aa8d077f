//! The manual clock's drivers: `advance` and `advance_to_next` turn the
//! wheel on the caller's thread at each time something is due.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::clock::{later, saturating_nanos, Nanos};
use crate::engine::driver::Shared;
use crate::engine::sync::{AtomicU64, Ordering};

impl Shared {
    /// `HashedWheelTimer::advance`, turning at each time with work on the way; true if any fired,
    /// or if it only moved the clock (nested, or its driver waits for this thread).
    pub(crate) fn advance(self: &Arc<Self>, by: Duration) -> bool {
        let Some(target) = self.clock.manual_target() else {
            crate::engine::notice::warn(format_args!(
                "advance() does nothing on a timer with a real clock, or a tokio clock \
                 (move that one with tokio::time::advance)"
            ));
            return false;
        };
        let by = saturating_nanos(by);
        let waiting = self.wait_for_driver(); // `None`: its driver waits for this thread
        if self.is_nested() || waiting.is_none() {
            // In a task of a running `advance` (see its docs): move the clock now.
            let to = later(self.clock.now(), by);
            self.clock.set_manual(to);
            target.fetch_max(to, Ordering::AcqRel);
            return true; // for `advance_to_next`: one move
        }
        self.drive(|| {
            self.advancing.store(true, Ordering::SeqCst);
            let fired = self.drive_to(target, by);
            self.advancing.store(false, Ordering::SeqCst);
            fired
        })
    }

    /// Turns now, at each time a turn asks for, and at the target; after a
    /// firing turn, again at once: a task may have scheduled something sooner.
    fn drive_to(self: &Arc<Self>, target: &AtomicU64, by: Nanos) -> bool {
        target.fetch_max(later(self.clock.now(), by), Ordering::AcqRel);
        let mut due = Vec::new();
        let mut fired = false;
        while !self.is_shutdown() {
            let now = self.clock.now();
            let turn = self.turn(now, &mut due);
            fired |= turn.ran; // not for an entry a reset moved later: it is not due
            if turn.fired {
                continue;
            }
            let target = target.load(Ordering::Acquire);
            if now >= target {
                break;
            }
            self.clock
                .set_manual(turn.next.map_or(target, |next| next.min(target)));
        }
        self.clock.set_manual(target.load(Ordering::Acquire));
        fired
    }

    /// `HashedWheelTimer::advance_to_next`; in a task of an outer `advance`, one move of the clock.
    pub(crate) fn advance_to_next(self: &Arc<Self>) -> Option<Duration> {
        self.clock.manual_target()?;
        let start = self.clock.now();
        loop {
            let now = self.clock.now();
            let due = self.next_due_time()?;
            if self.advance(Duration::from_nanos(due.saturating_sub(now))) {
                return Some(Duration::from_nanos(self.clock.now() - start));
            }
        }
    }

    /// The end of the tick of the earliest pending deadline, every arrival
    /// filed first; `None` if nothing pending can fire, or after a stop.
    fn next_due_time(&self) -> Option<Nanos> {
        if self.is_shutdown() {
            return None;
        }
        self.cancel_batched(); // dropped `Sleep`s' cancels, as a turn takes them first
        let mut core = self.lock_core();
        let now = self.clock.now();
        while self.prepare(&mut core, now, true) {}
        if !core.ready.is_empty() {
            return Some(now);
        }
        let tick = core
            .wheel
            .next_due_tick(&self.slots, |at| self.clock.tick_of(at))?;
        // Only saturated deadlines are past the last reachable tick.
        (tick <= self.clock.ticks_at(u64::MAX)).then(|| self.clock.time_of(tick))
    }
}
