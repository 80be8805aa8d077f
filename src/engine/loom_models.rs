//! loom models of engine paths that the public API cannot reach from
//! `tests/loom.rs`: the worker thread's plan to sleep, against a producer.
//!
//!     RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
//!         cargo test --release --lib --target-dir target/loom -- loom_models

use std::time::Duration;

use loom::thread;

use crate::engine::shared::BUSY;
use crate::engine::sync::Ordering;
use crate::HashedWheelTimer;

const MS: Duration = Duration::from_millis(1);

/// The worker's side of one round: it files what it must at tick 0,
/// plans to sleep for good (nothing in the wheel), publishes the plan and
/// looks again. Returns the time it would wake: `Err` to go round at once.
fn worker_round(timer: &HashedWheelTimer) -> Result<Option<u64>, ()> {
    let shared = timer.shared();
    let mut due = Vec::new();
    let drained = shared.step(0, 0, &mut due);
    let next = shared.wheel_wake(&shared.lock_core());
    let look = drained.look_by.map(|tick| shared.clock.time_of(tick));
    shared.plan_sleep(0, crate::engine::intake::earliest(next, look))
}

/// A producer queues a timeout while the worker plans its sleep. Whatever
/// the interleaving, the worker learns of it in time: the producer woke
/// it, or it goes round again, or it files the timeout, or it plans to
/// look again by the tick the timeout is due.
fn arrival_against_plan(delay: Duration) {
    loom::model(move || {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared().clone();
        shared.planned_wake.store(BUSY, Ordering::SeqCst);
        let producer = {
            let timer = timer.clone();
            thread::spawn(move || timer.new_timeout(|_| {}, delay).unwrap())
        };
        let planned = worker_round(&timer);
        let t = producer.join().unwrap();
        let deadline = shared.entry(t.key()).deadline();
        // A producer unparks only a worker whose published plan it read:
        // one that reads `BUSY` never does.
        let woken = shared.unparks.load(Ordering::Relaxed) > 0;
        let filed = shared.lock_core().wheel.len() == 1;
        let looks_in_time = matches!(planned, Ok(Some(wake)) if wake <= deadline);
        assert!(
            woken || planned.is_err() || filed || looks_in_time,
            "the worker may sleep past the deadline: planned {planned:?}, due at {deadline}"
        );
    });
}

#[test]
fn loom_models_a_held_arrival_against_the_workers_plan() {
    arrival_against_plan(MS * 1000);
}

#[test]
fn loom_models_an_urgent_arrival_against_the_workers_plan() {
    arrival_against_plan(MS * 5);
}
