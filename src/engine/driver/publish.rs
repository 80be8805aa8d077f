//! Feature `metrics`: the driver sets the gauges at a turn's end, at most
//! once per 100 ms of the timer's clock but always before it idles and at
//! `stop()`, and records each fire's lateness (`fire`). Names: the README's
//! "Metrics"; the label `thread` is the timer's thread name.

use std::time::Duration;

use crate::engine::clock::Nanos;
use crate::engine::driver::Shared;
use crate::engine::sync::Ordering::Relaxed;

impl Shared {
    /// Looked up once per turn that fires: a recorder installed late is found.
    pub(crate) fn lateness_metric(&self) -> metrics::Histogram {
        let thread = self.config.thread_name.clone();
        metrics::histogram!("hashed_wheel_timer_lateness_seconds", "thread" => thread)
    }

    pub(crate) fn publish(&self, now: Nanos, always: bool) {
        let last = self.published_at.load(Relaxed);
        if !always && last != u64::MAX && now < last.saturating_add(100_000_000) {
            return;
        }
        self.published_at.store(now, Relaxed);
        let t = self.totals();
        let busy = Duration::from_nanos(t.driver_busy_nanos).as_secs_f64();
        for (name, value) in [
            ("hashed_wheel_timer_pending", t.pending as f64),
            ("hashed_wheel_timer_scheduled", t.scheduled as f64),
            ("hashed_wheel_timer_fired", t.fired as f64),
            ("hashed_wheel_timer_cancelled", t.cancelled as f64),
            ("hashed_wheel_timer_stopped", t.stopped as f64),
            ("hashed_wheel_timer_driver_wakeups", t.driver_wakeups as f64),
            ("hashed_wheel_timer_driver_busy_seconds", busy),
        ] {
            let thread = self.config.thread_name.clone();
            metrics::gauge!(name, "thread" => thread).set(value);
        }
    }
}
