//! Unit tests of engine paths seen through a `HashedWheelTimer`: the producer's reset and cancel
//! paths, the worker's plan to sleep, the intake's lanes, the handle. Here rather than in
//! `engine/`, which never names the face.

use crate::engine::sync::Ordering::SeqCst;
use crate::timer::tests::{in_wheel, MS, PAST_THE_HOLD};
use crate::{HashedWheelTimer, TimerError};
use std::time::Duration;

mod producer {
    use super::*;

    /// A cancel of a filed timeout wakes the driver only if it plans to sleep past the end of
    /// the tick: one waking sooner takes the entry out then (invariant 6). A later reset gives
    /// the driver nothing to do until the old deadline.
    #[test]
    fn a_cancel_or_a_later_reset_wakes_the_driver_only_when_it_must() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared();
        let ts = [(); 2].map(|()| timer.new_timeout(|_| {}, MS * 100).unwrap());
        timer.advance(PAST_THE_HOLD); // both filed
        let now = shared.clock.now();
        for (t, (planned, woken)) in ts.into_iter().zip([(now, 0), (now + 1, 1)]) {
            shared.housekeeping_requested.store(false, SeqCst);
            shared.planned_wake.store(planned, SeqCst); // a tick before the wake-up
            let before = shared.unparks.load(SeqCst);
            assert!(t.cancel());
            let unparks = shared.unparks.load(SeqCst) - before;
            assert_eq!(unparks, woken, "planned {planned}");
        }
        timer.advance(Duration::ZERO);
        assert_eq!(in_wheel(&timer), 0, "both taken out");
        let t = timer.new_timeout(|_| {}, MS * 100).unwrap();
        timer.advance(PAST_THE_HOLD); // filed, 4 ms before its deadline
        let entry = shared.entry(t.key());
        let filed_tick = || shared.lock_core().wheel.filed_tick(&shared.slots, t.key());
        let filed = filed_tick();
        assert!(entry.in_wheel());
        for n in 1..=1_000u32 {
            assert!(t.reset(MS * 100 + MS * n / 100));
        }
        assert!(shared.mailbox.is_empty(), "nothing queued for the driver");
        assert_eq!(filed_tick(), filed, "still where the wheel filed it");
        timer.advance(MS * 3);
        assert_eq!(filed_tick(), filed, "untouched before the old deadline");
        timer.advance(MS);
        assert!(t.is_pending(), "found moved at the old deadline");
        let tick = shared.clock.tick_of(shared.clock.to_nanos(t.deadline()));
        assert_eq!(filed_tick(), tick, "filed again, once");
        assert!(entry.in_wheel());
    }

    /// Invariant 6 for reset timeouts: the wheel finds a filed entry by the deadline it was filed
    /// by, so a cancel after a reset (later or earlier) still takes it out within a tick, and its
    /// slot comes back. An earlier reset is queued once, and its reference comes back.
    #[test]
    fn an_earlier_reset_is_queued_once_and_reset_timeouts_give_every_reference_back() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared();
        let later = timer.new_timeout(|_| {}, MS * 100).unwrap();
        let earlier = timer.new_timeout(|_| {}, MS * 400).unwrap();
        timer.advance(PAST_THE_HOLD); // both filed
        assert!(later.reset(MS * 300));
        assert!(earlier.reset(MS * 5));
        timer.advance(Duration::ZERO); // the earlier one filed again
        assert_eq!(in_wheel(&timer), 2);
        assert!(later.cancel() && earlier.cancel());
        timer.advance(MS);
        assert_eq!(in_wheel(&timer), 0, "both out within a tick");
        drop((later, earlier));
        assert_eq!(shared.live(), 0, "both slots came back");
        timer.advance(MS * 500); // nothing left to fire or to find
        assert_eq!(timer.stats().fired, 0);
        let t = timer.new_timeout(|_| {}, MS * 500).unwrap();
        timer.advance(PAST_THE_HOLD);
        assert!(t.reset(MS * 10));
        assert_eq!(shared.mailbox.len(), 1);
        timer.advance(Duration::ZERO);
        assert!(shared.mailbox.is_empty());
        assert_eq!(
            shared.lock_core().wheel.filed_tick(&shared.slots, t.key()),
            shared.clock.tick_of(shared.clock.to_nanos(t.deadline()))
        );
        timer.advance(MS * 10);
        assert!(t.is_expired());
        drop(t);
        assert_eq!(shared.live(), 0, "every reference came back");
    }
}

pub(crate) mod worker {
    use super::*;
    use crate::engine::driver::{BUSY, IDLE};

    /// Polls `cond` for up to a minute; for tests that watch the worker.
    pub(crate) fn eventually(cond: impl Fn() -> bool) -> bool {
        (0..60_000).any(|_| {
            cond() || {
                std::thread::sleep(MS);
                false
            }
        })
    }

    /// Invariant 4 while the worker sleeps far ahead (a round, 5.12 s at
    /// 10 ms ticks, or to a timeout 60 s away): an earlier one still wakes it.
    #[test]
    fn a_worker_sleeping_far_ahead_still_fires_an_earlier_timeout_in_time() {
        let timer = HashedWheelTimer::builder()
            .tick_duration(MS * 10)
            .build()
            .unwrap();
        let sleeping_far = || {
            let planned = timer.shared().planned_wake.load(SeqCst);
            // Later than the 20 ms timeout below: it must wake the worker.
            let later = timer.shared().clock.now() + 40_000_000;
            planned != BUSY && planned != IDLE && planned > later
        };
        let cancelled_young = eventually(|| {
            for _ in 0..100 {
                let t = timer.new_timeout(|_| {}, Duration::from_secs(60)).unwrap();
                t.cancel();
            }
            sleeping_far()
        });
        assert!(cancelled_young, "the worker sleeps far ahead");
        let (tx, rx) = std::sync::mpsc::channel();
        let start = std::time::Instant::now();
        timer
            .new_timeout(move |_| tx.send(()).unwrap(), MS * 20)
            .unwrap();
        rx.recv_timeout(Duration::from_secs(60)).expect("it fired");
        let took = start.elapsed();
        assert!(took < Duration::from_secs(2), "fired after {took:?}");
    }

    /// Invariant 4 for resets: a timeout reset earlier within its tick, another
    /// due in the next, fires at most a tick late. 10 s ticks: the plan is read
    /// long before anything is due; deadlines within 4 ticks are not held.
    #[test]
    fn a_reset_earlier_within_its_tick_keeps_the_worker_plan_within_a_tick() {
        let tick = Duration::from_secs(10);
        let timer = HashedWheelTimer::builder()
            .tick_duration(tick)
            .build()
            .unwrap();
        let shared = timer.shared();
        let start = timer.now();
        // The later first: the earlier one then wakes a worker that sleeps
        // towards it, so both are filed before the worker sleeps again.
        let _next_tick = timer
            .new_timeout_at(|_| {}, start + tick * 35 / 10)
            .unwrap();
        let reset = timer
            .new_timeout_at(|_| {}, start + tick * 29 / 10)
            .unwrap();
        let planned = || shared.planned_wake.load(SeqCst);
        let filed_and_asleep = || in_wheel(&timer) == 2 && planned() != BUSY && planned() != IDLE;
        assert!(eventually(filed_and_asleep), "filed both, asleep");
        let to = start + tick * 21 / 10;
        assert!(reset.reset_at(to));
        let due = shared.clock.to_nanos(to);
        // `planned_wake` is the wake-up less a tick: at most a tick late.
        // Read until the worker settles: it may be between two rounds.
        let in_time = || planned() != BUSY && planned() <= due;
        assert!(
            eventually(in_time),
            "plans to wake {:?} after the reset deadline",
            Duration::from_nanos(planned().saturating_add(shared.config.tick_nanos) - due)
        );
    }
}

mod intake {
    use super::*;
    use crate::engine::entry::task::Task;
    use crate::engine::intake::SHARED_LOOK_EVERY;

    #[test]
    #[cfg_attr(miri, ignore = "3072 entries: too slow under Miri")]
    fn every_so_many_keys_on_the_shared_queue_ask_the_worker_to_look() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared();
        let looks = (0..3 * SHARED_LOOK_EVERY)
            .filter(|_| {
                let task = Task::Wake(None);
                // Counted and queued as a thread with no lane does.
                shared.counts.reserve(&task).unwrap();
                let key = shared.slots.insert(1_000, task, 1).unwrap();
                shared.intake.push_shared(key, shared.entry(key))
            })
            .count();
        assert_eq!(looks, 3, "once per SHARED_LOOK_EVERY keys");
        assert_eq!(shared.intake.len(), 3 * SHARED_LOOK_EVERY);
    }

    #[test]
    fn threads_at_once_get_lanes_of_their_own() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let barrier = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    timer.new_timeout(|_| {}, Duration::from_secs(1)).unwrap();
                    barrier.wait(); // all three alive at once
                });
            }
        });
        assert_eq!(timer.shared().intake.lanes().count(), 3);
    }

    /// A key pushed with a reading older than the lane's last (on a manual clock, by a task that
    /// `advance` runs late) takes the last reading (`not_before`), by which it is near and taken
    /// when due. By its own reading it is far, and would be held behind the younger key until
    /// that one is `HOLD` old: filed 4 ms after its deadline.
    #[test]
    fn a_key_pushed_with_an_older_reading_keeps_the_lane_in_time_order() {
        const MS: u64 = 1_000_000;
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared();
        timer.advance(Duration::from_millis(50));
        let now = shared.clock.now();
        let far = shared
            .schedule(now, now + 10_000 * MS, Task::Wake(None))
            .unwrap();
        let stale = shared
            .schedule(now - 50 * MS, now + 60 * MS, Task::Wake(None))
            .unwrap();
        timer.advance(Duration::from_millis(62));
        assert!(
            !shared.entry(stale).is_waiting(),
            "a tick after its deadline, it has fired"
        );
        assert!(shared.entry(far).is_waiting());
        drop(shared.cancel(far, 1));
        shared.release(stale, 1);
    }
}

/// A delay queue's listener id comes back when the queue drops, for the next one: with a queue
/// dropped for each one made, the registry stays as large as the queues that live. Past the ids a
/// notice can name, a queue takes no items: `TooManyQueues`, not a panic.
#[test]
fn queue_ids_come_back_and_run_out_into_an_error() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let listeners = || crate::engine::sync::lock(&timer.shared().listeners).len();
    let mut live: Vec<_> = (0..64).map(|_| timer.delay_queue::<u8>()).collect();
    for i in 0..1_000 {
        live.swap_remove(i % 64);
        live.push(timer.delay_queue());
        assert_eq!(listeners(), 64, "one id a live queue");
    }
    let last = timer.delay_queue_with_ids(0, 65);
    assert!(last.insert(1, MS).is_ok(), "the 65th id");
    let over = timer.delay_queue_with_ids(0, 65);
    assert_eq!(over.insert(2, MS), Err(TimerError::TooManyQueues));
    drop(live.pop());
    let again = timer.delay_queue_with_ids(0, 65);
    assert!(again.insert(3, MS).is_ok(), "a dropped queue's id");
}

mod handle {
    use super::*;
    use std::sync::Arc;

    /// Each handle holds a count of its timer's memory, which outlives the timer's last
    /// `HashedWheelTimer`, its id held too; the last handle's drop frees both.
    #[test]
    fn a_handle_keeps_its_timer_and_its_id_until_the_last_one_drops() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = Arc::downgrade(timer.shared());
        let first = timer.new_timeout(|_| {}, MS * 1000).unwrap();
        let second = first.clone();
        assert_eq!(shared.strong_count(), 3, "the timer's, and a handle's each");
        drop((timer, first));
        let reached = second.cancel() && second.timer().is_none();
        assert!(reached, "reached after the timer");
        let other = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let theirs = other.new_timeout(|_| {}, MS * 1000).unwrap();
        assert_eq!(theirs.key(), second.key(), "the first key of each timer");
        assert!(theirs != second, "their ids differ");
        assert!(theirs.timer().is_some());
        drop(second);
        assert_eq!(shared.strong_count(), 0, "the last handle freed it");
        assert!(theirs.cancel() && !theirs.is_expired());
    }
}
