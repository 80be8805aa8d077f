//! Invariant 7 for a task's destructor: a task dropped without running (a
//! periodic task cancelled during its run, one cancelled before an
//! executor ran it, one freed by `stop()` or by the last handle) may panic
//! in `Drop`. Wherever that drop happens, the panic is caught and logged,
//! and the timer keeps firing. (Defect 1 of the outside review: on the
//! worker such a panic unwound out of its loop, and nothing fired again.)

mod common;

use common::{manual, QueueExecutor};
use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerTask};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// Panics when dropped, and counts its drops first.
struct PanicsOnDrop(Arc<AtomicUsize>);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("a captured value panicked in Drop");
    }
}

fn bomb() -> (PanicsOnDrop, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    (PanicsOnDrop(drops.clone()), drops)
}

/// Schedules a one-shot task that only holds `bomb`, `delay` away.
fn holding(timer: &HashedWheelTimer, bomb: PanicsOnDrop, delay: Duration) -> Timeout {
    let task = move |_: &Timeout| {
        let _keep = &bomb;
    };
    timer.new_timeout(task, delay).unwrap()
}

/// A periodic task that cancels itself in its first run; the run returns,
/// and the timer drops it on the thread that ran it.
fn self_cancelling(timer: &HashedWheelTimer, delay: Duration) -> Arc<AtomicUsize> {
    let (bomb, drops) = bomb();
    timer
        .schedule_at_fixed_rate(
            move |t: &Timeout| {
                let _keep = &bomb;
                t.cancel();
            },
            delay,
            MS,
        )
        .unwrap();
    drops
}

/// Waits up to a minute for a timeout of `timer` to fire on its worker.
fn still_fires(timer: &HashedWheelTimer) -> bool {
    let (tx, rx) = mpsc::channel();
    timer
        .new_timeout(move |_| tx.send(()).unwrap(), MS)
        .unwrap();
    rx.recv_timeout(Duration::from_secs(60)).is_ok()
}

#[test]
fn the_worker_survives_a_periodic_task_that_panics_when_dropped() {
    let timer = HashedWheelTimer::new();
    let drops = self_cancelling(&timer, Duration::ZERO);
    assert!(still_fires(&timer), "the worker keeps firing");
    assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
    assert!(still_fires(&timer), "and again");
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn advance_survives_a_periodic_task_that_panics_when_dropped() {
    let timer = manual(MS);
    let drops = self_cancelling(&timer, MS);
    let later = timer.new_timeout(|_| {}, MS * 2).unwrap();
    timer.advance(MS * 2); // must not unwind out of advance
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(later.is_expired(), "the same advance went on firing");
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn a_task_dropped_unrun_by_the_executor_path_is_caught() {
    let executor = QueueExecutor::default();
    let timer = executor.timer(MS);
    let (bomb, drops) = bomb();
    let periodic = timer
        .schedule_at_fixed_rate(
            move |_: &Timeout| {
                let _keep = &bomb;
            },
            MS,
            MS,
        )
        .unwrap();
    timer.advance(MS);
    assert_eq!(executor.len(), 1, "its first run is handed off");
    assert!(periodic.cancel(), "cancelled before the run starts");
    executor.run_all(); // the job finds it cancelled and drops the task
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let after = timer.new_timeout(|_| {}, MS).unwrap();
    timer.advance(MS);
    executor.run_all();
    assert!(after.is_expired());
}

/// A hook that panics (and drops nothing that panics too: a destructor
/// panicking while a panic unwinds aborts the process, whatever a library
/// does).
struct PanickingHook(Arc<AtomicUsize>);

impl TimerTask for PanickingHook {
    fn run(self: Box<Self>, _: &Timeout) {}
    fn cancelled(self: Box<Self>, _: &Timeout) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("the cancelled hook panicked");
    }
}

#[test]
fn a_panicking_cancelled_hook_or_drop_does_not_escape_cancel() {
    let timer = manual(MS);
    let hook_calls = Arc::new(AtomicUsize::new(0));
    let t = timer
        .new_timeout_task(PanickingHook(hook_calls.clone()), MS * 5)
        .unwrap();
    let (plain, plain_drops) = bomb();
    let u = holding(&timer, plain, MS * 5);
    timer.advance(MS); // both filed in the wheel
    assert!(t.cancel(), "the cancel still wins");
    assert!(u.cancel());
    assert!(t.is_cancelled() && u.is_cancelled());
    assert_eq!(hook_calls.load(Ordering::SeqCst), 1);
    assert_eq!(plain_drops.load(Ordering::SeqCst), 1);
    timer.advance(MS * 10);
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn stopped_tasks_that_panic_when_dropped_are_freed_with_their_handles() {
    let timer = manual(MS);
    let (bomb, drops) = bomb();
    holding(&timer, bomb, Duration::from_secs(60));
    let stopped = timer.stop().unwrap();
    assert_eq!(stopped.len(), 1);
    drop(stopped); // the last reference frees the task here
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn dropping_the_last_timer_handle_frees_every_task_even_if_one_panics() {
    let timer = HashedWheelTimer::new();
    let (first, first_drops) = bomb();
    let (second, second_drops) = bomb();
    for bomb in [first, second] {
        holding(&timer, bomb, Duration::from_secs(60));
    }
    drop(timer); // must not unwind out of the drop
    assert_eq!(first_drops.load(Ordering::SeqCst), 1);
    assert_eq!(second_drops.load(Ordering::SeqCst), 1);
}

/// A waker's data whose first drop panics; the others do nothing.
struct PanicsOnceOnDrop;

impl std::task::Wake for PanicsOnceOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for PanicsOnceOnDrop {
    fn drop(&mut self) {
        static PANICKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !PANICKED.swap(true, Ordering::SeqCst) {
            panic!("a waker panicked in Drop");
        }
    }
}

/// A batch of dropped `Sleep`s (16) is cancelled and counted before any of
/// their wakers is dropped: a waker that panics in `Drop` leaves no timeout
/// counted pending, and the timer keeps firing.
#[test]
fn a_batch_of_dropped_sleeps_is_counted_before_a_waker_panics_in_drop() {
    use std::future::Future;
    let timer = manual(MS);
    let mut sleeps: Vec<_> = (0..64).map(|_| timer.sleep(MS * 500)).collect();
    for sleep in &mut sleeps {
        // Each entry holds the last reference to its own waker.
        let waker = std::task::Waker::from(Arc::new(PanicsOnceOnDrop));
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(std::pin::Pin::new(sleep).poll(&mut cx).is_pending());
    }
    assert_eq!(timer.pending_timeouts(), 64);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(sleeps)));
    assert!(
        dropped.is_err(),
        "the waker's panic reaches the thread that dropped it"
    );
    assert_eq!(
        timer.pending_timeouts(),
        0,
        "every dropped Sleep is cancelled and uncounted"
    );
    let stats = timer.stats();
    assert_eq!(stats.cancelled, 64);
    let fired = Arc::new(AtomicUsize::new(0));
    let count = fired.clone();
    let task = move |_: &Timeout| {
        count.fetch_add(1, Ordering::SeqCst);
    };
    timer.new_timeout(task, MS).unwrap();
    timer.advance(MS * 2);
    assert_eq!(fired.load(Ordering::SeqCst), 1, "the timer keeps firing");
}

/// A waker that panics when dropped.
struct WakerPanicsOnDrop;

impl std::task::Wake for WakerPanicsOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for WakerPanicsOnDrop {
    fn drop(&mut self) {
        panic!("a waker panicked in Drop");
    }
}

/// A pending `Sleep` polled with `WakerPanicsOnDrop`'s waker, then dropped (its cancel waits in this
/// thread's batch, and the driver's next turn drops the waker) or forgotten.
fn drop_a_sleep_holding_a_panicking_waker(timer: &HashedWheelTimer, drop_it: bool) {
    use std::future::Future;
    let mut sleep = timer.sleep(Duration::from_secs(3600));
    let waker = std::task::Waker::from(Arc::new(WakerPanicsOnDrop));
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

/// Two wakers that panic in `Drop` in one batch of cancels: each is dropped on its own, so the
/// second panic does not come while the first unwinds (which aborts the process), and the turn
/// catches the first.
#[test]
fn two_wakers_that_panic_in_one_batch_cost_no_abort() {
    let timer = manual(MS);
    drop_a_sleep_holding_a_panicking_waker(&timer, true);
    drop_a_sleep_holding_a_panicking_waker(&timer, true);
    let advance = std::panic::AssertUnwindSafe(|| timer.advance(MS));
    assert!(std::panic::catch_unwind(advance).is_ok());
    assert_eq!(timer.pending_timeouts(), 0);
}
