//! tokio's own time tests, `tokio/tests/time_sleep.rs` and `tokio/tests/time_timeout.rs`, ported
//! to a `tokio_clock()` timer made the free functions' default with `set_default`: code written
//! for `tokio::time` should pass them as it is.
//!
//! Where tokio's test calls `time::pause()` first, the port uses `start_paused = true`, the same
//! clock from the first line. The few that tokio runs on real time stay on real time, and assert
//! no timing (each only awaits a due deadline).
//!
//! Skipped: none; every test of the two files has a meaning here.
//!
//! Ignored, where the crate differs from tokio on purpose (see each test's reason):
//! - `immediate_sleep`: its first assert, that `sleep_until(now)` is not elapsed before its first
//!   poll. `Sleep::is_elapsed` says whether the deadline has passed on the timer's clock, polled
//!   or not (its docs), where tokio's says whether its driver has fired the entry. The rest of
//!   the test (completes at once, elapsed after) is `immediate_sleep_completes_at_once`.
//! - `creating_sleep_outside_of_context`: tokio panics without a runtime; this crate's free
//!   functions work on any runtime or none (the crate docs, "Async"), on the process-wide timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Context;
use std::time::Duration;

use futures::task::noop_waker_ref;
use hashed_wheel_timer::{self as time, DefaultGuard, HashedWheelTimer, Sleep};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_test::{
    assert_elapsed, assert_pending, assert_ready, assert_ready_err, assert_ready_ok, task,
};

/// A timer on this runtime's clock, made the free functions' timer on this thread.
fn tokio_clock() -> DefaultGuard {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    time::set_default(timer)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---- tokio/tests/time_sleep.rs ----

/// A sleep until now is not elapsed before its poll, completes at once, and is then elapsed.
#[tokio::test(start_paused = true)]
#[ignore = "deliberate difference: `Sleep::is_elapsed` reads the clock, true once the deadline \
            has passed whether or not the Sleep was polled (its docs; tests/sleep.rs \
            `a_sleep_first_polled_after_its_deadline_completes`), so a sleep until now is \
            elapsed at once; tokio's is elapsed only once its driver fired it"]
async fn immediate_sleep() {
    let _timer = tokio_clock();
    let now = Instant::now();
    let sleep = time::sleep_until(now);
    tokio::pin!(sleep);
    assert!(!sleep.is_elapsed());
    sleep.as_mut().await;
    assert_elapsed!(now, ms(0));
    assert!(sleep.is_elapsed());
}

/// `immediate_sleep` but for its first assert: a sleep until now completes at once, then elapsed.
#[tokio::test(start_paused = true)]
async fn immediate_sleep_completes_at_once() {
    let _timer = tokio_clock();
    let now = Instant::now();
    let sleep = time::sleep_until(now);
    tokio::pin!(sleep);
    sleep.as_mut().await;
    assert_elapsed!(now, ms(0));
    assert!(sleep.is_elapsed());
}

/// `is_elapsed` is false before and after a pending poll, true once awaited.
#[tokio::test(start_paused = true)]
async fn is_elapsed() {
    let _timer = tokio_clock();
    let sleep = time::sleep(ms(10));
    tokio::pin!(sleep);
    assert!(!sleep.is_elapsed());
    assert!(futures::poll!(sleep.as_mut()).is_pending());
    assert!(!sleep.is_elapsed());
    sleep.as_mut().await;
    assert!(sleep.is_elapsed());
}

/// Short sleeps (1, 10, 60 ms) complete at their deadline, within tokio's 1 ms rounding.
#[tokio::test(start_paused = true)]
async fn delayed_sleep_level_0() {
    let _timer = tokio_clock();
    for &i in &[1, 10, 60] {
        let now = Instant::now();
        let dur = ms(i);
        time::sleep_until(now + dur).await;
        assert_elapsed!(now, dur);
    }
}

/// A deadline 1 ms and 1 ns away completes within a millisecond of it.
#[tokio::test(start_paused = true)]
async fn sub_ms_delayed_sleep() {
    let _timer = tokio_clock();
    for _ in 0..5 {
        let now = Instant::now();
        let deadline = now + ms(1) + Duration::new(0, 1);
        time::sleep_until(deadline).await;
        assert_elapsed!(now, ms(1));
    }
}

/// A 60 ms sleep after a 5 ms one completes on time (the wheel's index has moved on).
#[tokio::test(start_paused = true)]
async fn delayed_sleep_wrapping_level_0() {
    let _timer = tokio_clock();
    time::sleep(ms(5)).await;
    let now = Instant::now();
    time::sleep_until(now + ms(60)).await;
    assert_elapsed!(now, ms(60));
}

/// A polled sleep reset later completes at the new deadline, not the old one.
#[tokio::test(start_paused = true)]
async fn reset_future_sleep_before_fire() {
    let _timer = tokio_clock();
    let now = Instant::now();
    let mut sleep = task::spawn(Box::pin(time::sleep_until(now + ms(100))));
    assert_pending!(sleep.poll());
    let mut sleep = sleep.into_inner();
    sleep.as_mut().reset(Instant::now() + ms(200));
    sleep.await;
    assert_elapsed!(now, ms(200));
}

/// A polled sleep reset earlier, before the driver saw it, completes at the earlier deadline.
#[tokio::test(start_paused = true)]
async fn reset_past_sleep_before_turn() {
    let _timer = tokio_clock();
    let now = Instant::now();
    let mut sleep = task::spawn(Box::pin(time::sleep_until(now + ms(100))));
    assert_pending!(sleep.poll());
    let mut sleep = sleep.into_inner();
    sleep.as_mut().reset(now + ms(80));
    sleep.await;
    assert_elapsed!(now, ms(80));
}

/// A polled sleep reset earlier after 10 ms have passed completes at the earlier deadline.
#[tokio::test(start_paused = true)]
async fn reset_past_sleep_before_fire() {
    let _timer = tokio_clock();
    let now = Instant::now();
    let mut sleep = task::spawn(Box::pin(time::sleep_until(now + ms(100))));
    assert_pending!(sleep.poll());
    let mut sleep = sleep.into_inner();
    time::sleep(ms(10)).await;
    sleep.as_mut().reset(now + ms(80));
    sleep.await;
    assert_elapsed!(now, ms(80));
}

/// A completed sleep reset to a later deadline is pending again and completes at that deadline.
#[tokio::test(start_paused = true)]
async fn reset_future_sleep_after_fire() {
    let _timer = tokio_clock();
    let now = Instant::now();
    let mut sleep = Box::pin(time::sleep_until(now + ms(100)));
    sleep.as_mut().await;
    assert_elapsed!(now, ms(100));
    sleep.as_mut().reset(now + ms(110));
    sleep.await;
    assert_elapsed!(now, ms(110));
}

/// A pending sleep reset to a deadline already passed is ready at its next poll.
#[tokio::test(start_paused = true)]
async fn reset_sleep_to_past() {
    let _timer = tokio_clock();
    let now = Instant::now();
    let mut sleep = task::spawn(Box::pin(time::sleep_until(now + ms(100))));
    assert_pending!(sleep.poll());
    time::sleep(ms(50)).await;
    assert!(!sleep.is_woken());
    sleep.as_mut().reset(now + ms(40));
    assert_ready!(sleep.poll());
}

/// tokio panics when a sleep is made outside a runtime.
#[test]
#[should_panic]
#[ignore = "deliberate difference: the free functions work with no runtime, on the process-wide \
            timer (crate docs, \"Async\"), so this makes a sleep and does not panic"]
fn creating_sleep_outside_of_context() {
    let now = Instant::now();
    let _fut = time::sleep_until(now + ms(500));
}

/// A sleep of five years (past tokio's wheel's range) completes on a paused clock.
#[tokio::test(start_paused = true)]
async fn greater_than_max() {
    const YR_5: u64 = 5 * 365 * 24 * 60 * 60 * 1000;
    let _timer = tokio_clock();
    time::sleep_until(Instant::now() + ms(YR_5)).await;
}

/// A thousand zero-length sleeps each complete.
#[tokio::test]
async fn short_sleeps() {
    let _timer = tokio_clock();
    for _ in 0..1000 {
        time::sleep(ms(0)).await;
    }
}

/// Five year-long sleeps, then one ten years away, each complete, and not early.
#[tokio::test(start_paused = true)]
async fn multi_long_sleeps() {
    let _timer = tokio_clock();
    for _ in 0..5u32 {
        time::sleep(Duration::from_secs(365 * 24 * 3600)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10 * 365 * 24 * 3600);
    time::sleep_until(deadline).await;
    assert!(Instant::now() >= deadline);
}

/// A ten-year sleep completes at its deadline, within a millisecond.
#[tokio::test(start_paused = true)]
async fn long_sleeps() {
    let _timer = tokio_clock();
    let deadline = Instant::now() + Duration::from_secs(10 * 365 * 24 * 3600);
    time::sleep_until(deadline).await;
    assert!(Instant::now() >= deadline);
    assert!(Instant::now() <= deadline + ms(1));
}

/// A completed sleep stays ready, and once reset ten minutes ahead has a new deadline and is
/// pending again.
#[tokio::test]
async fn reset_after_firing() {
    let _timer = tokio_clock();
    let timer = time::sleep(ms(1));
    tokio::pin!(timer);
    let deadline = timer.deadline();
    timer.as_mut().await;
    assert_ready!(timer
        .as_mut()
        .poll(&mut Context::from_waker(noop_waker_ref())));
    timer
        .as_mut()
        .reset(Instant::now() + Duration::from_secs(600));
    assert_ne!(deadline, timer.deadline());
    assert_pending!(timer
        .as_mut()
        .poll(&mut Context::from_waker(noop_waker_ref())));
    assert_pending!(timer
        .as_mut()
        .poll(&mut Context::from_waker(noop_waker_ref())));
}

/// `sleep(Duration::MAX)` neither panics nor hangs on a paused clock: auto-advance ends it.
#[tokio::test(start_paused = true)]
async fn exactly_max() {
    let _timer = tokio_clock();
    time::sleep(Duration::MAX).await;
}

/// A sleep too long to represent, raced against a 1 ns one, makes no panic (tokio issue 5183).
#[tokio::test(start_paused = true)]
async fn issue_5183() {
    let _timer = tokio_clock();
    let big = Duration::from_secs(u64::MAX / 10);
    tokio::select! {
        biased;
        _ = time::sleep(big) => {}
        _ = time::sleep(Duration::from_nanos(1)) => {}
    }
}

/// `sleep(Duration::MAX - 1 ms)` neither panics nor hangs on a paused clock.
#[tokio::test(start_paused = true)]
async fn no_out_of_bounds_close_to_max() {
    let _timer = tokio_clock();
    time::sleep(Duration::MAX - ms(1)).await;
}

/// Dropping a sleep reset to the deadline of another pending one, after a third fired, is fine.
#[tokio::test(start_paused = true)]
async fn drop_after_reschedule_at_new_scheduled_time() {
    use futures::poll;
    let _timer = tokio_clock();
    let start = Instant::now();
    let mut a = Box::pin(time::sleep(ms(5)));
    let mut b = Box::pin(time::sleep(ms(5)));
    let mut c = Box::pin(time::sleep(ms(10)));
    let _ = poll!(&mut a);
    let _ = poll!(&mut b);
    let _ = poll!(&mut c);
    b.as_mut().reset(start + ms(10));
    a.await;
    assert!(!b.is_elapsed() && !c.is_elapsed());
    drop(b);
}

/// A waker that drops every sleep of the timer waking it (itself among them) does not panic.
#[tokio::test(start_paused = true)]
async fn drop_from_wake() {
    let _timer = tokio_clock();
    let panicked = Arc::new(AtomicBool::new(false));
    let list: Arc<Mutex<Vec<Pin<Box<Sleep>>>>> = Arc::new(Mutex::new(Vec::new()));
    let arc_wake = Arc::new(DropWaker(panicked.clone(), list.clone()));
    let arc_wake = futures::task::waker(arc_wake);
    {
        let mut lock = list.lock().unwrap();
        for _ in 0..100 {
            let mut timer = Box::pin(time::sleep(ms(10)));
            let _ = timer.as_mut().poll(&mut Context::from_waker(&arc_wake));
            lock.push(timer);
        }
    }
    time::sleep(ms(11)).await;
    assert!(
        !panicked.load(Ordering::SeqCst),
        "panicked when dropping timers"
    );
    assert!(list.lock().unwrap().is_empty(), "the waker was never woken");

    #[derive(Clone)]
    struct DropWaker(Arc<AtomicBool>, Arc<Mutex<Vec<Pin<Box<Sleep>>>>>);

    impl futures::task::ArcWake for DropWaker {
        fn wake_by_ref(arc_self: &Arc<Self>) {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                *arc_self.1.lock().expect("panic in lock") = Vec::new()
            }));
            if result.is_err() {
                arc_self.0.store(true, Ordering::SeqCst);
            }
        }
    }
}

// ---- tokio/tests/time_timeout.rs ----

/// A ready future with a deadline of now is `Ok`.
#[tokio::test]
async fn simultaneous_deadline_future_completion() {
    let _timer = tokio_clock();
    let mut fut = task::spawn(time::timeout_at(Instant::now(), async {}));
    assert_ready_ok!(fut.poll());
}

/// A ready future with a deadline a second past is `Ok`.
#[tokio::test]
async fn completed_future_past_deadline() {
    let _timer = tokio_clock();
    let mut fut = task::spawn(time::timeout_at(Instant::now() - ms(1000), async {}));
    assert_ready_ok!(fut.poll());
}

/// A future that completes 10 ms before its deadline wakes the task and is `Ok`.
#[tokio::test(start_paused = true)]
async fn future_and_deadline_in_future() {
    let _timer = tokio_clock();
    let (tx, rx) = oneshot::channel();
    let mut fut = task::spawn(time::timeout_at(Instant::now() + ms(100), rx));
    assert_pending!(fut.poll());
    tokio::time::advance(ms(90)).await;
    assert_pending!(fut.poll());
    tx.send(()).unwrap();
    assert!(fut.is_woken());
    assert_ready_ok!(fut.poll()).unwrap();
}

/// A future that completes 10 ms before its timeout is `Ok`.
#[tokio::test(start_paused = true)]
async fn future_and_timeout_in_future() {
    let _timer = tokio_clock();
    let (tx, rx) = oneshot::channel();
    let mut fut = task::spawn(time::timeout(ms(100), rx));
    assert_pending!(fut.poll());
    tokio::time::advance(ms(90)).await;
    assert_pending!(fut.poll());
    tx.send(()).unwrap();
    assert_ready_ok!(fut.poll()).unwrap();
}

/// A `Duration::MAX` timeout is still pending ten years on, and `Ok` when its future completes.
#[tokio::test(start_paused = true)]
async fn very_large_timeout() {
    let _timer = tokio_clock();
    let (tx, rx) = oneshot::channel();
    let mut fut = task::spawn(time::timeout(Duration::MAX, rx));
    assert_pending!(fut.poll());
    tokio::time::advance(Duration::from_secs(86400 * 365 * 10)).await;
    assert_pending!(fut.poll());
    tx.send(()).unwrap();
    assert_ready_ok!(fut.poll()).unwrap();
}

/// A never-ready future with a deadline of now is `Err(Elapsed)` after a 1 ms advance.
#[tokio::test(start_paused = true)]
async fn deadline_now_elapses() {
    let _timer = tokio_clock();
    let mut fut = task::spawn(time::timeout_at(
        Instant::now(),
        futures::future::pending::<()>(),
    ));
    tokio::time::advance(ms(1)).await;
    assert_ready_err!(fut.poll());
}

/// A never-ready future's task is woken once its deadline passes, and the poll is `Err`.
#[tokio::test(start_paused = true)]
async fn deadline_future_elapses() {
    let _timer = tokio_clock();
    let pending = futures::future::pending::<()>();
    let mut fut = task::spawn(time::timeout_at(Instant::now() + ms(300), pending));
    assert_pending!(fut.poll());
    tokio::time::advance(ms(301)).await;
    assert!(fut.is_woken());
    assert_ready_err!(fut.poll());
}

/// A future that always has more work (tokio's coop budget makes it yield) still times out.
#[tokio::test]
async fn timeout_is_not_exhausted_by_future() {
    let _timer = tokio_clock();
    let fut = time::timeout(ms(1), async {
        let mut buffer = [0u8; 1];
        loop {
            use tokio::io::AsyncReadExt;
            let _ = tokio::io::empty().read(&mut buffer).await;
        }
    });
    assert!(fut.await.is_err());
}
