//! loom models of engine paths the public API cannot reach from `tests/loom.rs`: a driver's plan to
//! sleep, against a producer queueing a timeout or moving one earlier.
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

/// A driver's round, as the thread and a tokio task both run it (`unparks`
/// counts either's wake-up): the time it would wake; `Err`: round again.
fn worker_round(timer: &HashedWheelTimer) -> Result<Option<u64>, ()> {
    let mut due = Vec::new();
    match crate::engine::driver::worker::round(timer.shared(), &mut due) {
        Round::Sleep(wake) => Ok(wake),
        Round::Again => Err(()),
        Round::Exit => unreachable!("not stopped"),
    }
}

/// A producer queues a timeout while the driver turns and plans its sleep
/// (`file_late_arrivals`). It learns in time: woken, round again, the timeout
/// filed, or a plan to look by its deadline (a held one's: at `HOLD` old).
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
        // A producer wakes only a driver whose published plan it read: one
        // that reads `BUSY` never does.
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

/// A reset moves a filed timeout to 5 ms while the driver plans to sleep
/// towards the old deadline. It learns in time (woken, round again, filed
/// again, or waking by the new deadline); the mailbox's reference returns.
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
        let deadline = shared.entry(t.key()).deadline();
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
