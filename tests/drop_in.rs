//! Porting from `tokio::time`, tokio-util and tower: on tokio's paused
//! clock, what is due at an instant is ready at that instant; the ambient
//! timer (`current_timer`) behind the constructors users reach for; tokio's
//! instants taken as they are; `?` from `Elapsed` into `io::Error`; and
//! builder mistakes caught at `build()`.

use std::time::Duration;

use hashed_wheel_timer::{current_timer, set_default, DelayQueue, HashedWheelTimer, TimerError};
use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};

const MS: Duration = Duration::from_millis(1);

fn paused() -> HashedWheelTimer {
    HashedWheelTimer::builder().tokio_clock().build().unwrap()
}

/// A registered `Sleep` is woken when tokio's own timers of the same
/// instant are, not after the timer's driver task gets its turn.
#[tokio::test(start_paused = true)]
async fn a_registered_sleep_is_woken_with_tokios_timers_of_its_instant() {
    let timer = paused();
    let mut sleep = task::spawn(timer.sleep(10 * MS));
    assert_pending!(sleep.poll());
    tokio::time::sleep(10 * MS).await;
    assert!(sleep.is_woken(), "woken at its deadline");
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn a_registered_timeout_is_woken_with_tokios_timers_of_its_instant() {
    let timer = paused();
    let mut call = task::spawn(timer.timeout(10 * MS, std::future::pending::<()>()));
    assert_pending!(call.poll());
    tokio::time::sleep(10 * MS).await;
    assert!(call.is_woken(), "woken at its deadline");
    assert!(assert_ready!(call.poll()).is_err());
}

#[tokio::test(start_paused = true)]
async fn a_callback_has_run_when_tokios_timers_of_its_instant_wake() {
    let timer = paused();
    let (tx, rx) = std::sync::mpsc::channel();
    timer
        .new_timeout(move |_| tx.send(()).unwrap(), 10 * MS)
        .unwrap();
    tokio::time::sleep(10 * MS).await;
    assert!(rx.try_recv().is_ok(), "it ran at its deadline");
}

/// A deadline moved into the past fires at the next turn, not a tick later.
#[test]
fn a_timeout_reset_to_the_past_fires_at_the_next_turn() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    timer.advance(5 * MS);
    let (tx, rx) = std::sync::mpsc::channel();
    let t = timer
        .new_timeout(move |_| tx.send(()).unwrap(), 60 * MS)
        .unwrap();
    timer.advance(Duration::ZERO); // filed in its bucket
    assert!(t.reset(Duration::ZERO));
    timer.advance(Duration::ZERO);
    assert!(rx.try_recv().is_ok(), "fired with no time passing");
    let past = timer.now() - 3 * MS;
    let late = timer.new_timeout_at(|_| {}, past).unwrap();
    timer.advance(Duration::ZERO);
    assert!(late.is_expired());
}

/// After `tokio::time::advance`, what came due is ready at the next poll;
/// a deadline moved to now is ready at once.
#[tokio::test(start_paused = true)]
async fn what_advance_makes_due_is_ready_at_the_next_poll() {
    let timer = paused();
    let queue = timer.delay_queue();
    queue.insert("due", 10 * MS).unwrap();
    let later = queue.insert("later", Duration::from_secs(60)).unwrap();
    let mut consumer = task::spawn(queue.clone());
    let mut sleep = task::spawn(timer.sleep(10 * MS));
    let mut call = task::spawn(timer.timeout(10 * MS, std::future::pending::<()>()));
    assert_pending!(consumer.poll_next());
    assert_pending!(sleep.poll());
    assert_pending!(call.poll());
    tokio::time::advance(10 * MS).await;
    assert!(consumer.is_woken(), "the queue's consumer");
    assert!(sleep.is_woken(), "the sleep");
    assert!(call.is_woken(), "the timeout");
    let due = assert_ready!(consumer.poll_next()).unwrap();
    assert_eq!(due.into_inner(), "due");
    assert_ready!(sleep.poll());
    assert!(assert_ready!(call.poll()).is_err());
    assert_pending!(consumer.poll_next());
    assert!(queue.reset(&later, Duration::ZERO));
    assert!(consumer.is_woken(), "due at once");
    let moved = assert_ready!(consumer.poll_next()).unwrap();
    assert_eq!(moved.into_inner(), "later");
}

#[tokio::test(start_paused = true)]
async fn delay_queue_new_and_with_capacity_use_the_current_timer() {
    let timer = paused();
    let _guard = set_default(timer.clone());
    assert!(current_timer().is_same(&timer));
    let queue: DelayQueue<u8> = DelayQueue::new();
    assert!(queue.timer().is_same(&timer));
    let queue: DelayQueue<u8> = DelayQueue::with_capacity(100);
    assert!(queue.timer().is_same(&timer));
    assert!(queue.capacity() >= 100);
    drop(_guard);
    assert!(!current_timer().is_same(&timer), "the default again");
}

/// tokio-util's `try_remove`: the item as an `Expired`, once.
#[test]
fn try_remove_gives_the_item_with_its_key_and_deadline() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let queue = timer.delay_queue();
    let key = queue.insert("x", 5 * MS).unwrap();
    let removed = queue.try_remove(&key).expect("in the queue");
    assert_eq!(removed.key(), key);
    assert_eq!(removed.deadline(), timer.now() + 5 * MS);
    assert_eq!(removed.into_inner(), "x");
    assert!(queue.try_remove(&key).is_none());
    assert_eq!(timer.pending_timeouts(), 0, "its timeout cancelled");
}

/// tower's `TimeoutLayer::new(d)` and `Timeout::new(inner, d)`, mirrored,
/// run on the timer `set_default` installed.
#[cfg(feature = "tower")]
#[test]
fn the_tower_mirror_runs_on_the_current_timer() {
    use hashed_wheel_timer::tower::timeout::{error::Elapsed, Timeout, TimeoutLayer};
    use tower::{service_fn, Layer, Service};
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let _guard = set_default(timer.clone());
    let never = || service_fn(|()| std::future::pending::<Result<(), std::convert::Infallible>>());
    let mut layered = TimeoutLayer::new(10 * MS).layer(never());
    let mut wrapped = Timeout::new(never(), 10 * MS);
    let mut calls = [task::spawn(layered.call(())), task::spawn(wrapped.call(()))];
    for call in &mut calls {
        assert_pending!(call.poll());
    }
    timer.advance(10 * MS);
    for call in &mut calls {
        assert!(call.is_woken(), "on the manual timer");
        assert!(assert_ready!(call.poll()).unwrap_err().is::<Elapsed>());
    }
}

/// Ported from tower's `tower-timeout/tests/timeout.rs` (tower's one
/// timeout test), with a oneshot in place of `tower-test`'s mock: a
/// response in time passes, and one the paused clock's 200 ms outlast
/// fails with tower's `Elapsed` at its first poll.
#[cfg(feature = "tower")]
#[tokio::test(start_paused = true)]
async fn tower_timeout_test_ported() {
    use hashed_wheel_timer::tower::timeout::{error::Elapsed, Timeout, TimeoutLayer};
    use tower::{service_fn, Layer, Service, ServiceExt};
    let _guard = set_default(paused());
    let layer = TimeoutLayer::new(Duration::from_millis(100));
    let (answer, answered) = tokio::sync::oneshot::channel::<&str>();
    let answered = std::sync::Mutex::new(Some(answered));
    let mut service: Timeout<_> = layer.layer(service_fn(move |request: &'static str| {
        let next = answered.lock().unwrap().take();
        async move {
            match (request, next) {
                ("hello", Some(rx)) => Ok::<_, std::convert::Infallible>(rx.await.unwrap()),
                _ => std::future::pending().await,
            }
        }
    }));
    let response = service.ready().await.unwrap().call("hello");
    answer.send("world").unwrap();
    assert_eq!(response.await.unwrap(), "world");
    let mut response = task::spawn(service.ready().await.unwrap().call("two"));
    tokio::time::advance(Duration::from_millis(200)).await;
    let err = assert_ready!(response.poll()).unwrap_err();
    assert!(err.is::<Elapsed>(), "tower's own error: {err}");
}

/// Every function that takes a deadline takes tokio's `Instant` as it is.
#[tokio::test(start_paused = true)]
async fn tokio_instants_are_taken_as_they_are() {
    let timer = paused();
    let start = Instant::now();
    timer.sleep_until(start + 5 * MS).await;
    assert_eq!(Instant::now(), start + 5 * MS);
    let err = timer
        .timeout_at(start + 10 * MS, std::future::pending::<()>())
        .await;
    assert!(err.is_err());
    assert_eq!(Instant::now(), start + 10 * MS);
    let mut sleep = timer.sleep(Duration::from_secs(60));
    sleep.reset(start + 15 * MS);
    sleep.await;
    assert_eq!(Instant::now(), start + 15 * MS);
    let mut interval = timer.interval_at(start + 20 * MS, 5 * MS);
    interval.tick().await;
    assert_eq!(Instant::now(), start + 20 * MS);
    let t = timer.new_timeout_at(|_| {}, start + 30 * MS).unwrap();
    assert!(t.reset_at(start + 25 * MS));
    let queue = timer.delay_queue();
    let key = queue.insert_at("x", start + 40 * MS).unwrap();
    assert!(queue.reset_at(&key, start + 35 * MS));
    tokio::time::sleep_until(start + 35 * MS).await;
    assert!(t.is_expired());
    let mut consumer = task::spawn(());
    let out = consumer.enter(|cx, _| queue.poll_expired(cx));
    assert_eq!(assert_ready!(out).unwrap().into_inner(), "x");
    let deadline = timer.sleep(5 * MS).deadline();
    assert_eq!(
        Instant::from_std(deadline),
        Instant::now() + 5 * MS,
        "back as tokio's"
    );
    let free = hashed_wheel_timer::sleep_until(Instant::now() + MS);
    drop(free); // the free functions take them too
}

#[test]
fn elapsed_converts_into_io_error_for_the_question_mark() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    async fn read(timer: &HashedWheelTimer) -> std::io::Result<u8> {
        let never = std::future::pending::<std::io::Result<u8>>();
        let byte = timer.timeout(MS, never).await??;
        Ok(byte)
    }
    let mut call = task::spawn(read(&timer));
    assert_pending!(call.poll());
    timer.advance(MS);
    let err = assert_ready!(call.poll()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(err.to_string(), "deadline has elapsed");
}

#[test]
fn both_test_clocks_are_refused_at_build() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _in = runtime.enter();
    for builder in [
        HashedWheelTimer::builder().manual_clock().tokio_clock(),
        HashedWheelTimer::builder().tokio_clock().manual_clock(),
    ] {
        assert_eq!(builder.build().err(), Some(TimerError::ClockConflict));
    }
    let twice = HashedWheelTimer::builder().manual_clock().manual_clock();
    assert!(twice.build().is_ok(), "the same clock twice is one clock");
}

#[test]
fn a_tokio_clock_on_a_runtime_without_time_is_refused_at_build() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let _in = runtime.enter();
    let built = HashedWheelTimer::builder().tokio_clock().build();
    assert_eq!(built.err(), Some(TimerError::TokioTimeDisabled));
}

/// Futures count against `max_pending_timeouts` but are not refused: a
/// `Sleep` past the limit still completes at its deadline.
#[test]
fn futures_past_the_pending_limit_are_counted_and_still_complete() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(1)
        .build()
        .unwrap();
    let _held = timer.new_timeout(|_| {}, Duration::from_secs(60)).unwrap();
    let refused = timer.new_timeout(|_| {}, MS);
    assert!(refused.unwrap_err().is_at_capacity());
    let mut sleep = task::spawn(timer.sleep(MS));
    assert_pending!(sleep.poll());
    assert_eq!(timer.pending_timeouts(), 2, "the sleep counts");
    timer.advance(MS);
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}
