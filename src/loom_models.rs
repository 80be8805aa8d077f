//! loom models of engine paths the public API cannot reach from `tests/loom/`: a driver's plan to
//! sleep, against a producer queueing a timeout or moving one earlier. How to run them: see
//! ARCHITECTURE.md, "Testing each layer".

use std::time::Duration;

use loom::thread;

use crate::engine::driver::{worker::Round, BUSY};
use crate::engine::entry::task::Task;
use crate::engine::intake::lane::BATCH_WAIT_NANOS;
use crate::engine::sync::Ordering;
use crate::{timer::tests::MS, HashedWheelTimer};

/// A driver's round from `BUSY`, as the thread and a tokio task both run it, against `other` on a
/// thread of its own: the time it would wake (`Err`: round again), whether it was woken
/// (`unparks` counts either's wake-up), and what `other` returned.
fn round_against<T: Send + 'static>(
    timer: &HashedWheelTimer,
    other: impl FnOnce() -> T + Send + 'static,
) -> (Result<Option<u64>, ()>, bool, T) {
    let shared = timer.shared();
    shared.planned_wake.store(BUSY, Ordering::SeqCst);
    let other = thread::spawn(other);
    let round = match crate::engine::driver::worker::round(shared, &mut Vec::new()) {
        Round::Sleep(wake) => Ok(wake),
        Round::Again => Err(()),
        Round::Exit => unreachable!("not stopped"),
    };
    let out = other.join().unwrap();
    (round, shared.unparks.load(Ordering::Relaxed) > 0, out)
}

/// A producer queues a timeout while the driver turns and plans its sleep
/// (`file_late_arrivals`). It learns in time: woken, round again, the timeout
/// filed, or a plan to look by its deadline (a held one's: by its take time).
fn arrival_against_plan(delay: Duration) {
    loom::model(move || {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let producer = timer.clone();
        let (planned, woken, t) =
            round_against(&timer, move || producer.new_timeout(|_| {}, delay).unwrap());
        let shared = timer.shared();
        let deadline = shared.entry(t.key()).deadline();
        // A producer wakes only a driver whose published plan it read: one
        // that reads `BUSY` never does.
        let filed = shared.lock_core().wheel.len(&shared.slots) == 1;
        let looks_in_time = matches!(planned, Ok(Some(wake)) if wake <= deadline);
        assert!(
            woken || planned.is_err() || filed || looks_in_time,
            "the worker may sleep past the deadline: planned {planned:?}, due at {deadline}"
        );
    });
}

/// A held and an urgent arrival (`arrival_against_plan`); then a reset moves a filed timeout to
/// 5 ms while the driver plans to sleep towards the old deadline. It learns in time (woken, round
/// again, filed again, or waking by the new deadline); the mailbox's reference returns.
#[test]
fn loom_models_a_held_and_an_urgent_arrival_and_a_reset_earlier_against_the_workers_plan() {
    arrival_against_plan(MS * 1000);
    arrival_against_plan(MS * 5);
    loom::model(|| {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let t = timer.new_timeout(|_| {}, MS * 1000).unwrap();
        timer.advance(MS * 70); // filed into the wheel
        let resetter = t.clone();
        let (round, woken, ()) = round_against(&timer, move || assert!(resetter.reset(MS * 5)));
        let shared = timer.shared();
        let deadline = shared.entry(t.key()).deadline();
        let filed = shared.lock_core().wheel.filed_tick(&shared.slots, t.key());
        let refiled = filed == shared.clock.tick_of(deadline);
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

/// A cancel waits in its thread's batch (a dropped `Sleep`) while the driver turns and plans its
/// sleep. Invariant 6: the driver learns of it (woken, round again, or a plan to wake within
/// `BATCH_WAIT_NANOS`), or its turn took the batch.
#[test]
fn loom_models_a_batched_cancel_and_a_cancel_of_a_filed_timeout_against_the_workers_plan() {
    loom::model(|| {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared().clone();
        let (round, woken, ()) = round_against(&timer, move || {
            // On this thread's lane: the batch's.
            let key = shared.schedule(0, 1_000_000_000, Task::Wake(None)).unwrap();
            shared.cancel_later(key);
        });
        let taken = !timer.shared().intake.lanes().any(|lane| lane.has_batch());
        let by = BATCH_WAIT_NANOS + MS.as_nanos() as u64;
        let wakes_in_time = matches!(round, Ok(Some(wake)) if wake <= by);
        assert!(
            woken || taken || round.is_err() || wakes_in_time,
            "the batched cancel may wait until the deadline: planned {round:?}"
        );
    });
    // A thread cancels a filed timeout while the driver turns and plans its sleep towards that
    // timeout's deadline. Invariant 6: the entry leaves the wheel within a tick of the cancel (this
    // round took it out, the driver was woken or rounds again, or it plans to wake within a tick).
    loom::model(|| {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let t = timer.new_timeout(|_| {}, MS * 1000).unwrap();
        timer.advance(MS * 70); // filed into the wheel
        let (round, woken, ()) = round_against(&timer, move || assert!(t.cancel()));
        let shared = timer.shared();
        let removed = shared.lock_core().wheel.len(&shared.slots) == 0;
        let tick_end = shared.clock.now() + shared.clock.time_of(1);
        let wakes_in_time = matches!(round, Ok(Some(wake)) if wake <= tick_end);
        assert!(
            woken || removed || round.is_err() || wakes_in_time,
            "the cancelled entry may stay until its deadline: planned {round:?}"
        );
        timer.advance(MS * 1000);
        assert_eq!(shared.live(), 0, "every reference came back");
    });
}
