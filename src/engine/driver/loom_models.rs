//! loom models of engine paths that the public API cannot reach from
//! `tests/loom.rs`: the worker thread's plan to sleep, against a producer
//! queueing a timeout or moving one earlier.
//!
//!     RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
//!         cargo test --release --lib --target-dir target/loom -- loom_models

use std::time::Duration;

use loom::thread;

use crate::engine::driver::worker::Round;
use crate::engine::driver::BUSY;
use crate::engine::sync::Ordering;
use crate::HashedWheelTimer;

const MS: Duration = Duration::from_millis(1);

/// The driver's side of one round, as both drivers run it (the worker
/// thread, and the task of a tokio clock, which waits on a `Notify` where
/// the thread parks; `unpark_worker` counts either wake-up): it files what
/// it must at tick 0, plans its sleep, publishes the plan and looks again.
/// Returns the time it would wake: `Err` to go round at once.
fn worker_round(timer: &HashedWheelTimer) -> Result<Option<u64>, ()> {
    let mut due = Vec::new();
    match crate::engine::driver::worker::round(timer.shared(), &mut due) {
        Round::Sleep(wake) => Ok(wake),
        Round::Again => Err(()),
        Round::Exit => unreachable!("not stopped"),
    }
}

/// A producer queues a timeout while the worker turns (its drain of the
/// lanes) and plans its sleep (its last look, `file_late_arrivals`, which
/// runs the same drain). Whatever the interleaving, the worker learns of
/// it in time: the producer woke it, or it goes round again, or it files
/// the timeout, or it plans to look again by the time the timeout is due
/// (a held one: when it is `HOLD` old).
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

/// A reset moves a far timeout, already filed, to 5 ms while the worker
/// plans to sleep towards the old deadline. Whatever the interleaving, the
/// worker learns of it in time: the resetter woke it, or it goes round
/// again, or it filed the timeout again by then, or it plans to wake by
/// the new deadline. And the entry's extra reference (the mailbox's)
/// comes back.
#[test]
fn loom_models_a_reset_earlier_against_the_workers_plan() {
    loom::model(|| {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let t = timer.new_timeout(|_| {}, MS * 1000).unwrap();
        timer.advance(MS * 70); // filed into the wheel
        let shared = timer.shared().clone();
        shared.planned_wake.store(BUSY, Ordering::SeqCst);
        let resetter = {
            let t = t.clone();
            thread::spawn(move || assert!(t.reset(MS * 5)))
        };
        let round = worker_round(&timer);
        resetter.join().unwrap();
        let deadline = shared.deadline_of(t.key());
        let woken = shared.unparks.load(Ordering::Relaxed) > 0;
        let refiled = shared.entry(t.key()).filed() == deadline;
        let wakes_in_time =
            matches!(round, Ok(Some(wake)) if wake <= deadline + shared.clock.time_of(1));
        assert!(
            woken || round.is_err() || refiled || wakes_in_time,
            "the worker may sleep past the new deadline: planned {round:?}, due at {deadline}"
        );
        timer.advance(MS * 10); // files and fires it
        assert!(t.is_expired());
        drop(t);
        assert_eq!(shared.live(), 0, "every reference came back");
    });
}
