//! `Sleep` on a manual clock: exact ticks, reset, cancellation by drop,
//! counted once, which waker is woken, and what a stopped timer does to it.

mod common;

use common::{manual, poll_with, CountingWaker};
use hashed_wheel_timer::{HashedWheelTimer, Sleep};
use std::time::Duration;
use tokio_test::task::{self, Spawn};
use tokio_test::{assert_pending, assert_ready};

const MS: Duration = Duration::from_millis(1);

/// `sleep` in a mock task, polled once: registered and pending.
fn polled(sleep: Sleep) -> Spawn<Sleep> {
    let mut sleep = task::spawn(sleep);
    assert_pending!(sleep.poll());
    sleep
}

#[test]
fn pending_before_its_tick_and_ready_at_it() {
    let timer = manual(MS);
    let mut sleep = polled(timer.sleep(MS * 5));
    timer.advance(MS * 4);
    assert!(!sleep.is_woken());
    assert!(!sleep.is_elapsed());
    assert_pending!(sleep.poll());
    timer.advance(MS);
    assert!(sleep.is_woken());
    assert!(sleep.is_elapsed());
    assert_ready!(sleep.poll());
    assert_eq!(timer.pending_timeouts(), 0);
    assert_ready!(sleep.poll(), "stays ready");
}

#[test]
fn it_is_woken_at_the_end_of_the_tick_its_deadline_falls_in() {
    let timer = manual(MS * 10);
    let mut sleep = polled(timer.sleep(MS * 15));
    timer.advance(MS * 14);
    assert_pending!(sleep.poll());
    timer.advance(MS);
    // The deadline has passed: a poll now is ready, though the wheel only
    // wakes the task when tick 2 (10..20 ms) ends.
    assert!(!sleep.is_woken());
    timer.advance(MS * 5);
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[test]
fn it_registers_on_first_poll_not_on_creation() {
    let timer = manual(MS);
    let mut sleep = task::spawn(timer.sleep(MS * 5));
    assert_eq!(timer.pending_timeouts(), 0);
    assert_pending!(sleep.poll());
    assert_eq!(timer.pending_timeouts(), 1);
    assert_pending!(sleep.poll());
    assert_eq!(timer.pending_timeouts(), 1, "a second poll files nothing");
}

#[test]
fn a_sleep_already_due_when_first_polled_is_ready_without_an_entry() {
    let timer = manual(MS);
    let mut zero = task::spawn(timer.sleep(Duration::ZERO));
    assert_ready!(zero.poll());
    let mut late = task::spawn(timer.sleep(MS * 3));
    timer.advance(MS * 3);
    assert_ready!(late.poll());
    let mut past = task::spawn(timer.sleep_until(timer.now() - MS));
    assert_ready!(past.poll());
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn sleep_until_completes_at_that_instant() {
    let timer = manual(MS);
    let at = timer.now() + MS * 7;
    let mut sleep = task::spawn(timer.sleep_until(at));
    assert_eq!(sleep.deadline(), at);
    assert_pending!(sleep.poll());
    timer.advance(MS * 6);
    assert_pending!(sleep.poll());
    timer.advance(MS);
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[test]
fn reset_moves_the_deadline_earlier() {
    let timer = manual(MS);
    let mut sleep = polled(timer.sleep(MS * 10));
    let earlier = timer.now() + MS * 3;
    sleep.reset(earlier);
    assert_eq!(sleep.deadline(), earlier);
    assert_eq!(timer.pending_timeouts(), 1, "the old entry was swapped");
    timer.advance(MS * 2);
    assert!(!sleep.is_woken());
    timer.advance(MS);
    assert!(sleep.is_woken(), "woken with no poll since the reset");
    assert_ready!(sleep.poll());
    timer.advance(MS * 10);
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn reset_moves_the_deadline_later() {
    let timer = manual(MS);
    let mut sleep = polled(timer.sleep(MS * 3));
    sleep.reset(timer.now() + MS * 10);
    timer.advance(MS * 3);
    // The old entry fires and wakes the task, which files the new one.
    assert_pending!(sleep.poll());
    assert_eq!(timer.pending_timeouts(), 1);
    timer.advance(MS * 6);
    assert_pending!(sleep.poll());
    timer.advance(MS);
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn pushing_the_deadline_back_repeatedly_files_nothing_new() {
    let timer = manual(MS);
    let mut sleep = polled(timer.sleep(MS * 5));
    let mut refiled = 0;
    for i in 1..=100 {
        timer.advance(MS);
        if sleep.is_woken() {
            // The entry for an older deadline fired: the poll files anew.
            assert_pending!(sleep.poll());
            refiled += 1;
        }
        sleep.reset(timer.now() + MS * 5);
        assert_eq!(timer.pending_timeouts(), 1, "after reset {i}");
    }
    // Each new entry is due 4 ms after it is filed (the deadline set one
    // tick before): 25 entries in 100 ms, not one per reset.
    assert!(refiled <= 25, "{refiled} entries filed for 100 resets");
    timer.advance(MS * 4);
    assert_pending!(sleep.poll());
    timer.advance(MS * 5);
    assert_ready!(sleep.poll());
}

#[test]
fn reset_after_completion_makes_it_pending_again() {
    let timer = manual(MS);
    let mut sleep = polled(timer.sleep(MS * 2));
    timer.advance(MS * 2);
    assert_ready!(sleep.poll());
    sleep.reset(timer.now() + MS * 4);
    assert!(!sleep.is_elapsed());
    assert_pending!(sleep.poll());
    timer.advance(MS * 4);
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[test]
fn reset_to_the_past_is_ready_at_once() {
    let timer = manual(MS);
    let mut sleep = polled(timer.sleep(MS * 20));
    timer.advance(MS * 5);
    sleep.reset(timer.now() - MS);
    assert_ready!(sleep.poll());
}

#[test]
fn drop_cancels() {
    let timer = manual(MS);
    let sleep = polled(timer.sleep(MS * 5));
    assert_eq!(timer.pending_timeouts(), 1);
    drop(sleep);
    assert_eq!(timer.pending_timeouts(), 0);
    timer.advance(MS * 10);
    assert_eq!(timer.pending_timeouts(), 0, "counted once");

    let unpolled = timer.sleep(MS);
    drop(unpolled);
    assert_eq!(timer.pending_timeouts(), 0);
}

/// Invariant 5 for futures. A timeout kept pending throughout makes a
/// second uncount show: the count is never below 0, so without it an
/// extra uncount would read as the 0 expected.
#[test]
fn futures_leave_the_pending_count_exactly_once() {
    let timer = manual(MS);
    let _marker = timer.new_timeout(|_| {}, MS * 100_000).unwrap();
    let counted = || timer.pending_timeouts();
    // Fired, polled to completion, dropped.
    let mut fired = polled(timer.sleep(MS));
    timer.advance(MS);
    assert_ready!(fired.poll());
    drop(fired);
    assert_eq!(counted(), 1, "fired then dropped");
    // Fired, dropped without another poll.
    let unpolled = polled(timer.sleep(MS));
    timer.advance(MS);
    drop(unpolled);
    assert_eq!(counted(), 1, "fired, dropped unpolled");
    // Cancelled by its drop, after a reset that moved its entry earlier.
    let mut swapped = polled(timer.sleep(MS * 10));
    swapped.reset(timer.now() + MS * 5);
    assert_eq!(counted(), 2, "one entry for it, before and after");
    drop(swapped);
    assert_eq!(counted(), 1, "reset then dropped");
    // An interval over many ticks.
    let mut interval = timer.interval(MS * 2);
    let mut ticks = task::spawn(());
    for _ in 0..50 {
        while ticks.enter(|cx, _| interval.poll_tick(cx)).is_ready() {}
        timer.advance(MS * 2);
    }
    while ticks.enter(|cx, _| interval.poll_tick(cx)).is_ready() {}
    assert_eq!(counted(), 2, "one entry for it, tick after tick");
    drop(interval);
    assert_eq!(counted(), 1, "an interval, dropped");
    // Stopped: woken, not returned, and uncounted once. (An hour: it
    // must still wait when polled after the move, even under Miri.)
    let mut stopped = polled(timer.sleep(MS * 3_600_000));
    let returned = timer.stop().unwrap();
    assert_eq!(returned.len(), 1, "only the marker is returned");
    assert!(stopped.is_woken());
    assert_pending!(stopped.poll(), "waits on, on the default timer");
    assert_eq!(counted(), 0, "the marker, by stop; the sleep, once");
    drop(stopped);
    assert_eq!(counted(), 0);
}

#[test]
fn only_the_task_that_polled_last_is_woken_once() {
    let timer = manual(MS);
    let (a, waker_a) = CountingWaker::new();
    let (b, waker_b) = CountingWaker::new();
    let mut sleep = timer.sleep(MS * 5);
    assert!(poll_with(&mut sleep, &waker_a).is_pending());
    // Registered: a's next polls need not look at the entry, b's must.
    assert!(poll_with(&mut sleep, &waker_a).is_pending());
    assert!(poll_with(&mut sleep, &waker_b).is_pending());
    assert!(poll_with(&mut sleep, &waker_b).is_pending());
    timer.advance(MS * 5);
    assert_eq!((a.wakes(), b.wakes()), (0, 1));
    assert!(poll_with(&mut sleep, &waker_b).is_ready());
    timer.advance(MS * 5);
    assert_eq!((a.wakes(), b.wakes()), (0, 1));
}

/// A fired `Sleep` reset to later before its task polls it (as an interval's tick does) files a
/// new entry at that poll: its entry is spent, however recently its task registered there.
#[test]
fn a_fired_sleep_reset_later_before_its_poll_is_woken_at_the_new_deadline() {
    let timer = manual(MS);
    let mut sleep = polled(timer.sleep(MS * 5));
    assert_pending!(sleep.poll()); // a second poll: the entry holds this task's waker
    timer.advance(MS * 5);
    assert!(sleep.is_woken());
    sleep.enter(|_, mut sleep| sleep.as_mut().reset(timer.now() + MS * 10));
    assert_pending!(sleep.poll());
    assert_eq!(timer.pending_timeouts(), 1, "a new entry");
    timer.advance(MS * 10);
    assert!(sleep.is_woken(), "woken at the new deadline");
    assert_ready!(sleep.poll());
}

#[test]
fn it_is_unpin_send_and_sync() {
    fn check<T: Unpin + Send + Sync + 'static>() {}
    check::<Sleep>();
}

/// The memory row of `examples/compare` keeps a `Sleep` per pending
/// timeout: 56 bytes (64 until session 45).
#[test]
fn a_sleep_is_56_bytes() {
    assert_eq!(std::mem::size_of::<Sleep>(), 56);
}

#[test]
fn it_keeps_its_timer_alive() {
    let timer = manual(MS);
    let mut sleep = polled(timer.sleep(MS * 5));
    let clock = timer.clone();
    drop(timer);
    assert!(!clock.is_shutdown());
    clock.advance(MS * 5);
    assert_ready!(sleep.poll());
}

#[test]
fn a_huge_duration_saturates_and_never_fires() {
    let timer = manual(MS);
    let mut sleep = task::spawn(timer.sleep(Duration::MAX));
    assert!(sleep.deadline() > timer.now());
    assert_pending!(sleep.poll());
    timer.advance(Duration::from_secs(86_400 * 365));
    assert!(!sleep.is_woken());
    assert_pending!(sleep.poll());
}

#[test]
fn max_pending_timeouts_counts_sleeps_but_does_not_refuse_them() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(1)
        .build()
        .unwrap();
    let _t = timer.new_timeout(|_| {}, MS * 5).unwrap();
    let mut sleep = polled(timer.sleep(MS * 5));
    assert_eq!(timer.pending_timeouts(), 2);
    let refused = timer.new_timeout(|_| {}, MS).unwrap_err();
    assert!(refused.is_at_capacity());
    timer.advance(MS * 5);
    assert_ready!(sleep.poll());
}

#[test]
fn stop_wakes_a_pending_sleep_and_it_waits_out_its_time_on_the_default_timer() {
    let timer = manual(MS);
    let mut sleep = polled(timer.sleep(MS * 50));
    // Registered: a poll by this task would not look at the entry but for the stop.
    assert_pending!(sleep.poll());
    let callback = timer.new_timeout(|_| {}, MS * 50).unwrap();
    let never_ran = timer.stop().unwrap();
    assert_eq!(never_ran, vec![callback], "futures are woken, not returned");
    assert_eq!(timer.pending_timeouts(), 0);
    assert!(sleep.is_woken());
    assert_pending!(sleep.poll(), "no busy loop: it waits on");
    assert!(!sleep.is_elapsed());
    // The 50 ms it had left, in real time, on the default timer, which
    // wakes this task: 100 times that for a loaded machine.
    let started = std::time::Instant::now();
    while !sleep.is_woken() {
        assert!(started.elapsed() < MS * 5_000, "not woken after the stop");
        std::thread::sleep(MS);
    }
    assert_ready!(sleep.poll());
    assert!(timer.is_shutdown());
}

#[test]
fn a_sleep_made_or_first_polled_after_stop_waits_out_its_time() {
    let timer = manual(MS);
    let made_before = timer.sleep(MS * 50);
    timer.stop().unwrap();
    let mut made_before = task::spawn(made_before);
    assert_pending!(made_before.poll());
    let mut made_after = task::spawn(timer.sleep(MS * 50));
    assert_pending!(made_after.poll());
    assert_eq!(timer.pending_timeouts(), 0);
    futures::executor::block_on(made_before.into_inner().deadline_reached());
    futures::executor::block_on(made_after.into_inner().deadline_reached());
}

#[test]
fn reset_after_stop_does_not_hang() {
    let timer = manual(MS);
    let mut sleep = polled(timer.sleep(MS * 10));
    timer.stop().unwrap();
    sleep.reset(timer.now() + MS);
    assert!(sleep.is_woken());
    futures::executor::block_on(sleep.into_inner().deadline_reached());
}

/// Completes once the sleep does, and says it elapsed.
trait DeadlineReached {
    fn deadline_reached(self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;
}

impl DeadlineReached for Sleep {
    fn deadline_reached(mut self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(async move {
            (&mut self).await;
            assert!(self.is_elapsed(), "it waited out its deadline");
        })
    }
}

#[test]
fn dropping_the_last_timer_handle_wakes_nothing_it_does_not_own() {
    // A Sleep holds a handle, so the timer lives while it does; dropping
    // the user's handles must neither stop the timer nor wake the sleep.
    let timer = HashedWheelTimer::new();
    let (counter, waker) = CountingWaker::new();
    let mut sleep = timer.sleep(Duration::from_secs(3600));
    assert!(poll_with(&mut sleep, &waker).is_pending());
    drop(timer);
    assert_eq!(counter.wakes(), 0);
    drop(sleep);
}

/// Defect 4 of the outside review: with the timestamp-counter clock, a zero
/// delay was built from an upper bound on now, a microsecond or so ahead,
/// so the first poll was pending and completed a whole tick later.
#[test]
fn a_zero_delay_is_ready_at_the_first_poll_on_every_clock() {
    let clocks = [HashedWheelTimer::new(), manual(MS)];
    for timer in &clocks {
        for _ in 0..1_000 {
            let mut zero = task::spawn(timer.sleep(Duration::ZERO));
            assert_ready!(zero.poll(), "sleep(ZERO) on {timer:?}");
            let mut call = task::spawn(timer.timeout(Duration::ZERO, std::future::pending::<()>()));
            assert!(
                assert_ready!(call.poll()).is_err(),
                "timeout(ZERO, pending) elapses at its first poll"
            );
            let mut iv = timer.interval(MS);
            let mut first = task::spawn(iv.tick());
            assert_ready!(first.poll(), "an interval's first tick is at once");
        }
        assert_eq!(timer.pending_timeouts(), 0, "no entry was filed");
    }
    let mut free = task::spawn(hashed_wheel_timer::sleep(Duration::ZERO));
    assert_ready!(free.poll(), "the default timer too");
}

/// A `sleep(d)` first polled after `d` has passed, on real time, takes an
/// entry due already, and the driver's next turn fires it.
#[test]
fn a_sleep_first_polled_after_its_deadline_completes() {
    let timer = HashedWheelTimer::new();
    let sleep = timer.sleep(MS);
    std::thread::sleep(MS * 5);
    assert!(sleep.is_elapsed());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        futures::executor::block_on(sleep);
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("woken by the driver's next turn");
}

/// A dropped `Sleep`'s cancel may wait in its thread's batch, but the next
/// turn cancels it before it fires anything: its task is never woken, and
/// it is counted cancelled, not fired.
#[test]
fn a_turn_cancels_a_dropped_sleep_before_its_deadline_fires_it() {
    let timer = manual(MS);
    let mut sleep = timer.sleep(MS * 5);
    let (wakes, waker) = CountingWaker::new();
    assert!(poll_with(&mut sleep, &waker).is_pending());
    // A turn first: with `metrics`, a turn's end may read the counts, which take the batches.
    timer.advance(MS);
    drop(sleep);
    timer.advance(MS * 10);
    assert_eq!(wakes.wakes(), 0, "the dropped sleep's task was woken");
    let stats = timer.stats();
    assert_eq!((stats.cancelled, stats.fired, stats.pending), (1, 0, 0));
}

/// Invariant 6 on an idle timer, real clock: a dropped `Sleep`'s cancel
/// waits in its thread's batch, and the drop wakes the timer's thread,
/// asleep until the only deadline, an hour away, to take it within 64 ms:
/// the entry lets go of the task's waker. A minute is the margin.
#[test]
fn an_idle_timer_takes_a_batched_cancel() {
    let timer = HashedWheelTimer::new();
    let mut sleep = timer.sleep(Duration::from_secs(3600));
    let (wakes, waker) = CountingWaker::new();
    assert!(poll_with(&mut sleep, &waker).is_pending());
    drop(waker);
    // Filed once older than the intake's hold (64-96 ms); then it sleeps.
    std::thread::sleep(Duration::from_secs(1));
    drop(sleep);
    let let_go = (0..60_000).any(|_| {
        std::thread::sleep(MS);
        std::sync::Arc::strong_count(&wakes) == 1
    });
    assert!(let_go, "the cancelled entry still holds the waker");
}

/// `stop()` cancels what dropped `Sleep`s left in the batches before it
/// stops the rest: the dropped ones count as cancelled, not stopped.
#[test]
fn stop_counts_a_dropped_sleep_cancelled() {
    let timer = manual(MS);
    let sleep = polled(timer.sleep(MS * 5));
    drop(sleep);
    assert!(timer.stop().unwrap().is_empty());
    let stats = timer.stats();
    assert_eq!((stats.cancelled, stats.stopped, stats.pending), (1, 0, 0));
}
