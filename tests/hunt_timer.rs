//! Defects found by the review of the timer's public faces, one test each.

mod common;

use common::manual;
use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// What a `stop()` returned.
type Stopped = Arc<Mutex<Option<Result<Vec<Timeout>, TimerError>>>>;

/// Calls `stop()` on its timer when dropped, and keeps what it returned.
struct StopOnDrop(HashedWheelTimer, Stopped);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        *self.1.lock().unwrap() = Some(self.0.stop());
    }
}

/// A periodic task that cancels itself is dropped by the driver after its run. A `stop()` in its
/// `Drop` ran in the middle of `advance`'s turn, without waiting for it: it returned nothing,
/// and the timeout due in the same tick was then set aside, stopped but returned by no `stop()`
/// (invariant 3). From the driver it is refused, as from the worker thread.
#[test]
fn stop_from_a_tasks_drop_on_the_driver_is_refused_and_loses_nothing() {
    let timer = manual(MS);
    let stopped = Arc::new(Mutex::new(None));
    let guard = StopOnDrop(timer.clone(), stopped.clone());
    let task = move |t: &Timeout| {
        let _keep = &guard;
        t.cancel();
    };
    timer
        .schedule_at_fixed_rate(task, MS * 5, MS * 100)
        .unwrap();
    let same_tick = timer.new_timeout(|_| {}, MS * 5).unwrap();
    timer.advance(MS * 20);
    let stopped = stopped.lock().unwrap().take();
    assert_eq!(stopped, Some(Err(TimerError::StopFromTimerTask)));
    assert!(same_tick.is_expired(), "{same_tick:?}");
    assert_eq!(timer.stop().unwrap(), vec![]);
}

/// A waker that panics when dropped.
struct PanicsOnDrop;

impl std::task::Wake for PanicsOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("a waker panicked in Drop");
    }
}

/// A pending `Sleep` polled with `PanicsOnDrop`'s waker, then dropped (its cancel waits in this
/// thread's batch, and the driver's next turn drops the waker) or forgotten.
fn drop_a_sleep_holding_a_panicking_waker(timer: &HashedWheelTimer, drop_it: bool) {
    use std::future::Future;
    let mut sleep = timer.sleep(Duration::from_secs(3600));
    let waker = std::task::Waker::from(Arc::new(PanicsOnDrop));
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(std::pin::Pin::new(&mut sleep).poll(&mut cx).is_pending());
    drop(waker); // the entry holds the last reference
    if drop_it {
        drop(sleep);
    } else {
        std::mem::forget(sleep);
    }
}

/// Invariant 7 for a batched cancel's waker: the turn that took the batch dropped the waker
/// uncaught, so the panic unwound out of `advance`, and out of the worker thread, which died:
/// nothing fired again. (The turn before a fire takes the batches.)
#[test]
fn the_driver_survives_a_waker_that_panics_when_a_batched_cancel_drops_it() {
    let timer = manual(MS);
    drop_a_sleep_holding_a_panicking_waker(&timer, true);
    let advance = std::panic::AssertUnwindSafe(|| timer.advance(MS));
    let advanced = std::panic::catch_unwind(advance);
    assert!(advanced.is_ok(), "the panic unwound out of advance");

    let timer = HashedWheelTimer::new();
    drop_a_sleep_holding_a_panicking_waker(&timer, true);
    let (tx, rx) = std::sync::mpsc::channel();
    timer.new_timeout(move |_| tx.send(()), MS).unwrap();
    let fired = rx.recv_timeout(Duration::from_secs(10));
    assert!(fired.is_ok(), "the worker thread died");
}

/// `stop()` wakes each pending future. A waker that panicked (here in its `Drop`, as `wake`
/// consumed it) unwound out of `stop()` half-way: the futures after it were never woken, and
/// hung, and the timeouts it had stopped were returned by no call.
#[test]
fn stop_wakes_every_future_and_returns_every_timeout_if_a_waker_panics() {
    let timer = manual(MS);
    drop_a_sleep_holding_a_panicking_waker(&timer, false);
    let mut other = tokio_test::task::spawn(timer.sleep(Duration::from_secs(3600)));
    assert!(other.poll().is_pending());
    let t = timer
        .new_timeout(|_| {}, Duration::from_secs(3600))
        .unwrap();
    let stop = std::panic::AssertUnwindSafe(|| timer.stop());
    let stopped = std::panic::catch_unwind(stop).expect("stop() panicked");
    assert_eq!(stopped, Ok(vec![t]));
    assert!(other.is_woken(), "never woken");
}

/// Invariant 6: a task that owns the timer's last handle (the cycle `HashedWheelTimer`'s docs
/// describe) shuts it down when it runs. The timeouts due in its tick then end stopped, unrun;
/// their tasks stayed in the arena until every `Timeout` handle was gone, so a channel sender
/// one of them held was never dropped, and its receiver hung.
#[test]
fn a_task_dropping_the_last_handle_drops_the_tasks_of_its_tick() {
    for tokio_clock in [false, true] {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(tokio_clock) // the real clock's worker waits in real time
            .build()
            .unwrap();
        let _entered = runtime.enter();
        let builder = HashedWheelTimer::builder();
        let builder = if tokio_clock {
            builder.tokio_clock()
        } else {
            builder
        };
        let timer = builder.build().unwrap();
        let last = timer.clone();
        let at = timer.now() + MS * 50; // one deadline: one tick, on the real clock too
        timer.new_timeout_at(move |_| drop(last), at).unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let same_tick = timer.new_timeout_at(move |_| drop(tx), at).unwrap();
        drop(timer);
        let ended = runtime.block_on(tokio::time::timeout(Duration::from_secs(10), rx));
        assert!(ended.is_ok(), "tokio_clock {tokio_clock}: {same_tick:?}");
    }
}
