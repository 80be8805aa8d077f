//! `Sleep`'s unit tests: registration, resets, slots, the clock reads.

use super::*;
use crate::timer::tests::{in_wheel, MS, PAST_THE_HOLD};
use tokio_test::{assert_pending, assert_ready, task};

/// The drop that fills its thread's batch cancels the whole batch: no turn needed. Invariant 6
/// for futures: a `Sleep` that re-files (every interval tick, every reset) gives the old entry's
/// slot back.
#[test]
fn the_drop_that_fills_a_batch_cancels_it_and_refiled_sleeps_give_their_slots_back() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let live = || timer.shared().live();
    for _ in 0..crate::engine::intake::lane::CANCEL_BATCH {
        assert_pending!(task::spawn(timer.sleep(MS * 10)).poll()); // filed, then dropped
    }
    assert_eq!(live(), 0, "every reference came back");
    let mut interval = timer.interval(MS * 2);
    let mut ticks = task::spawn(());
    for _ in 0..500 {
        // Take the due tick, then wait for the next: the wait files.
        while ticks.enter(|cx, _| interval.poll_tick(cx)).is_ready() {}
        timer.advance(MS * 2);
    }
    assert!(live() <= 1, "{} entries live for one interval", live());
    let mut sleep = task::spawn(timer.sleep(MS * 1000));
    assert_pending!(sleep.poll());
    let key = sleep.entry.unwrap();
    for i in 0..500u32 {
        // Alternately earlier and later: the entry's deadline moves in place, one swap as tokio's.
        let by = if i % 2 == 0 { MS * 500 } else { MS * 1000 };
        sleep.reset(timer.now() + by);
        assert_eq!(sleep.entry, Some(key), "reset {i}: the entry kept");
        let in_force = timer.shared().entry(key).deadline();
        assert_eq!(in_force, sleep.deadline_nanos, "reset {i}: moved");
        assert!(!sleep.is_woken());
        timer.advance(MS);
        assert_pending!(sleep.poll());
    }
    let entries = live();
    assert!(
        entries <= 3,
        "{entries} entries live for an interval and a sleep"
    );
    drop((interval, sleep));
    timer.advance(MS);
    assert_eq!(live(), 0, "all back once the futures are gone");
}

/// A `Sleep` reads the clock as its docs say: on real time, once at its first poll (to file its
/// entry) and not while registered; on a manual clock, at each poll.
#[test]
#[cfg(not(loom))] // `READS` counts only outside loom
fn a_sleep_reads_the_clock_only_where_time_can_be_moved() {
    use crate::engine::clock::READS;
    let reads = || READS.with(std::cell::Cell::get);
    let real = HashedWheelTimer::new();
    let manual = HashedWheelTimer::builder().manual_clock().build().unwrap();
    for (timer, registered_reads) in [(&real, 0), (&manual, 1)] {
        let mut sleep = task::spawn(timer.sleep(MS * 60_000));
        for (poll, expected) in [("first", 1), ("registered", registered_reads)] {
            let before = reads();
            assert_pending!(sleep.poll());
            assert_eq!(reads() - before, expected, "{poll} poll");
        }
    }
}

/// Dropped after an earlier reset (the driver holds a reference to refile it), a `Sleep` gives
/// every reference back. A reset to a past deadline wakes at once and files nothing; a dropped
/// `Sleep` leaves the wheel within a tick.
#[test]
fn a_reset_to_the_past_wakes_at_once_and_a_dropped_sleep_gives_its_entry_back_in_a_tick() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let shared = timer.shared();
    let mut dropped = task::spawn(timer.sleep(MS * 10));
    assert_pending!(dropped.poll());
    dropped.reset(timer.now() + MS);
    drop(dropped);
    timer.advance(MS); // a turn cancels what the drop batched
    assert_eq!(shared.live(), 0, "every reference came back");
    let mut sleep = task::spawn(timer.sleep(MS * 10));
    assert_pending!(sleep.poll());
    timer.advance(MS * 3);
    sleep.reset(timer.now() - MS);
    assert!(sleep.is_woken(), "woken with no tick");
    assert_eq!(sleep.entry, None, "nothing filed");
    assert_eq!(timer.pending_timeouts(), 0);
    timer.advance(Duration::ZERO); // takes the old entry out of its bucket
    assert_eq!(timer.shared().live(), 0);
    assert_ready!(sleep.poll());
    let mut sleep = task::spawn(timer.sleep(MS * 1000));
    assert_pending!(sleep.poll());
    // Past the time the driver holds a far timeout in its lane.
    timer.advance(PAST_THE_HOLD);
    assert_eq!(in_wheel(&timer), 1);
    drop(sleep);
    assert_eq!(timer.pending_timeouts(), 0, "uncounted at once");
    timer.advance(MS);
    assert_eq!(in_wheel(&timer), 0, "removed at the next tick");
}

/// A timer whose thread the system will not start: its `Sleep` (here in a `timeout`) waits out its
/// time on the default timer, polled only when woken, not on every turn of its executor (it spun,
/// logging each poll), and ends as if the timer had run it.
#[test]
#[cfg(not(loom))]
fn a_sleep_whose_timer_cannot_start_its_thread_waits_on_the_default_timer() {
    use crate::engine_tests::worker::eventually;
    let builder = HashedWheelTimer::builder().thread_name(crate::timer::tests::UNSPAWNABLE);
    let timer = builder.build().unwrap();
    let refused = timer.new_timeout(|_| {}, MS);
    assert!(
        matches!(refused, Err(TimerError::WorkerSpawn(_))),
        "{refused:?}"
    );
    let start = Instant::now();
    let mut timeout = task::spawn(timer.timeout(MS * 20, std::future::pending::<()>()));
    for polls in 1.. {
        if let Poll::Ready(result) = timeout.poll() {
            assert!(!result.unwrap_err().is_shutdown(), "the timer did not stop");
            break;
        }
        assert!(polls < 100, "it spins: woken at once on every poll");
        // Woken by the default timer's thread (a minute: a margin for a busy machine).
        assert!(eventually(|| timeout.is_woken()), "never woken");
    }
    assert!(start.elapsed() >= MS * 20, "never early");
    assert_ready!(
        task::spawn(timer.sleep(Duration::ZERO)).poll(),
        "a past deadline needs no thread"
    );
}
