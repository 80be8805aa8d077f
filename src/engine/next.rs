//! `advance_to_next` on a manual clock: moving time to the next deadline
//! with work, so that a test need not guess durations.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::intake::earliest;
use crate::engine::shared::Shared;

impl Shared {
    /// Manual clock: advances to the end of the next tick in which a
    /// pending timeout is due, firing what is due there (as `advance`
    /// would), and returns how far time moved. `None`, with time unmoved,
    /// if nothing pending can ever fire (none, or only saturated
    /// deadlines), on a clock that is not manual, or after a stop.
    pub(crate) fn advance_to_next(self: &Arc<Self>) -> Option<Duration> {
        self.clock.manual_target()?;
        let start = self.clock.now();
        let fired_before = self.totals().fired;
        loop {
            if self.is_shutdown() || self.pending() == 0 {
                return None;
            }
            let now = self.clock.now();
            let next = {
                let mut core = self.lock_core();
                self.refile_moved(&mut core);
                let current = core.wheel.current_tick();
                // Files what is due to be filed now; learns when held keys are.
                let arrivals = self.intake.arrivals(&mut core.holds);
                let drained = self.drain_intake(&mut core, current);
                let look = earliest(arrivals.look_by, drained.look_by);
                let more = (arrivals.more || drained.more).then_some(current + 1);
                earliest(earliest(core.wheel.next_work_tick(), look), more)
            };
            // Nothing it can reach: only saturated deadlines, which never fire.
            let next = next.filter(|&tick| tick <= self.clock.ticks_at(u64::MAX))?;
            let to = self.clock.time_of(next).max(now);
            self.advance(Duration::from_nanos(to - now));
            if self.totals().fired > fired_before {
                return Some(Duration::from_nanos(self.clock.now() - start));
            }
            if self.clock.now() == now && to > now {
                return None; // no progress: nothing more will fire
            }
        }
    }
}
