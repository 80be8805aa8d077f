//! Feature `metrics`: the figures of `stats()`, published through the `metrics` facade by the
//! timer's own driver (the engine's `Publish`). The names, the `thread` label and when the gauges
//! are set are the crate docs' "Metrics" (`lib.rs`) and the README's; keep all three in step.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use metrics::SharedString;

use crate::engine::{clock::Nanos, driver::Publish, driver::Shared};

/// How often, at most, the gauges are set, on the timer's clock.
const EVERY: Nanos = 100_000_000;

pub(crate) struct Publisher {
    thread: SharedString,
    /// When the gauges were last set; `u64::MAX`: never.
    published_at: AtomicU64,
}

impl Publisher {
    pub(crate) fn new(thread_name: &str) -> Publisher {
        Publisher {
            thread: SharedString::from(thread_name.to_owned()),
            published_at: AtomicU64::new(u64::MAX),
        }
    }
}

impl Publish for Publisher {
    fn lateness(&self) -> metrics::Histogram {
        metrics::histogram!("hashed_wheel_timer_lateness_seconds", "thread" => self.thread.clone())
    }

    fn turned(&self, shared: &Shared, now: Nanos, next: Option<Nanos>) {
        // Only a driver, one at a time, and `stop()` publish: a race between
        // the two at a stop sets the gauges twice, harmlessly. Skipped only
        // if a turn comes within `EVERY` of the last publish, to publish then.
        let last = self.published_at.load(Relaxed);
        let due = last.saturating_add(EVERY);
        if last != u64::MAX && now < due && next.is_some_and(|n| n < due) {
            return;
        }
        self.published_at.store(now, Relaxed);
        let t = shared.totals();
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
            metrics::gauge!(name, "thread" => self.thread.clone()).set(value);
        }
    }
}
