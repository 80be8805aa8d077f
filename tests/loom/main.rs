//! loom models of the races that matter, on manual-clock timers: the
//! thread calling `advance` plays the worker.
//!
//!     RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom
#![cfg(loom)]

use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError};
use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::thread;
use std::sync::Arc;
use std::time::Duration;

mod delay_queues;
mod lanes;
mod sleeps;
mod timeouts;

const TICK: Duration = Duration::from_millis(1);

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

/// `loom::model`, with room for 4,000 branches on one path rather than
/// 1,000, for models with many fires or schedules in a row.
fn model_long(f: impl Fn() + Sync + Send + 'static) {
    let mut model = loom::model::Builder::new();
    model.max_branches = 4_000;
    model.check(f);
}

/// A timeout whose task counts its runs.
fn counted(timer: &HashedWheelTimer, delay: Duration) -> (Timeout, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let t = timer
        .new_timeout(
            move |_: &Timeout| {
                counter.fetch_add(1, SeqCst);
            },
            delay,
        )
        .unwrap();
    (t, runs)
}
