//! More edges of the async faces, the tower layer and the default timer: user wakers whose drop
//! panics, `set_default` guards dropped out of order, the tower mirror's module paths, and
//! `Sleep` / `TimeoutFuture` promises checked exactly, on the manual clock.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use hashed_wheel_timer::{current_timer, default_timer, set_default, HashedWheelTimer};
use tokio_test::{assert_pending, assert_ready, task};

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A waker whose last drop panics, as a buggy executor's might.
struct PanicsOnDrop;

impl Wake for PanicsOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a waker panicked in drop");
        }
    }
}

/// Polls a fresh `sleep(d)` once with a waker that panics when its last clone drops, then drops
/// both: the entry holds the last clone, and the cancel waits in this thread's batch.
fn drop_a_sleep_holding_a_panicking_waker(timer: &HashedWheelTimer) {
    let waker = Waker::from(Arc::new(PanicsOnDrop));
    let mut sleep = timer.sleep(ms(50));
    let polled = Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker));
    assert!(polled.is_pending());
    drop(waker);
    drop(sleep);
}

// ---- A waker's panicking drop is the dropping thread's, not stop()'s or stats()' ----

#[test]
fn stop_after_a_dropped_sleeps_waker_panicked_in_drop_still_stops_and_wakes_the_rest() {
    let timer = manual();
    let mut other = task::spawn(timer.sleep(ms(10)));
    assert_pending!(other.poll());
    drop_a_sleep_holding_a_panicking_waker(&timer);
    let stopped = catch_unwind(AssertUnwindSafe(|| timer.stop()));
    assert!(stopped.is_ok(), "stop() panicked with a waker's panic");
    assert!(other.is_woken(), "stop() left a pending sleep unwoken");
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.cancelled), (0, 1), "{stats:?}");
}

#[test]
fn stats_after_a_dropped_sleeps_waker_panicked_in_drop_does_not_panic() {
    let timer = manual();
    drop_a_sleep_holding_a_panicking_waker(&timer);
    let stats = catch_unwind(AssertUnwindSafe(|| timer.stats()));
    let stats = stats.expect("stats() panicked with a waker's panic");
    assert_eq!((stats.scheduled, stats.cancelled, stats.pending), (1, 1, 0));
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn dropping_the_last_handle_after_a_dropped_sleeps_waker_panicked_in_drop_does_not_panic() {
    let timer = manual();
    drop_a_sleep_holding_a_panicking_waker(&timer);
    let dropped = catch_unwind(AssertUnwindSafe(move || drop(timer)));
    assert!(dropped.is_ok(), "the timer's last handle panicked in drop");
}

// ---- set_default guards ----

#[test]
fn set_default_guards_dropped_out_of_order_keep_each_timer_until_its_own_guard_drops() {
    let (a, b) = (manual(), manual());
    let guard_a = set_default(a.clone());
    let guard_b = set_default(b.clone());
    assert!(current_timer().is_same(&b));
    drop(guard_a);
    assert!(
        current_timer().is_same(&b),
        "b's guard is alive, yet b is no longer the default"
    );
    drop(guard_b);
    assert!(
        current_timer().is_same(default_timer()),
        "every guard dropped, yet a timer is still this thread's default"
    );
}

#[test]
fn set_default_guards_nested_in_order_restore_each_previous_one() {
    let (a, b) = (manual(), manual());
    let guard_a = set_default(a.clone());
    {
        let _guard_b = set_default(b.clone());
        assert!(current_timer().is_same(&b));
    }
    assert!(current_timer().is_same(&a));
    drop(guard_a);
    assert!(current_timer().is_same(default_timer()));
}

// ---- Sleep ----

#[test]
fn a_sleep_reset_after_completion_is_pending_until_its_new_deadline() {
    let timer = manual();
    let mut sleep = task::spawn(timer.sleep(ms(5)));
    assert_pending!(sleep.poll());
    timer.advance(ms(5));
    assert_ready!(sleep.poll());
    assert!(sleep.is_elapsed());
    let again = timer.now() + ms(3); // within the slack a later reset leaves alone
    sleep.reset(again);
    assert!(!sleep.is_elapsed());
    assert_eq!(sleep.deadline(), again);
    assert_pending!(sleep.poll());
    timer.advance(ms(2));
    assert_pending!(sleep.poll());
    timer.advance(ms(1));
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[test]
fn a_sleep_reset_to_the_past_before_its_first_poll_is_ready_without_an_entry() {
    let timer = manual();
    let mut sleep = task::spawn(timer.sleep(ms(50)));
    timer.advance(ms(1));
    sleep.reset(timer.now() - ms(1));
    assert!(sleep.is_elapsed());
    assert_ready!(sleep.poll());
    assert_eq!(timer.stats().scheduled, 0);
}

// ---- TimeoutFuture ----

#[test]
fn an_inner_future_ready_at_the_deadline_wins_as_in_tokio() {
    let timer = manual();
    let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
    let mut call = task::spawn(timer.timeout(ms(5), rx));
    assert_pending!(call.poll());
    timer.advance(ms(5));
    tx.send(7).unwrap();
    assert_eq!(assert_ready!(call.poll()), Ok(Ok(7)));
}

#[test]
fn a_zero_timeout_on_a_pending_future_elapses_at_its_first_poll() {
    let timer = manual();
    let mut call = task::spawn(timer.timeout(Duration::ZERO, std::future::pending::<()>()));
    let elapsed = assert_ready!(call.poll()).unwrap_err();
    assert!(!elapsed.is_shutdown());
    assert_eq!(elapsed.to_string(), "deadline has elapsed");
    let io: std::io::Error = elapsed.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(timer.stats().scheduled, 0);
}

#[test]
fn a_duration_max_timeout_neither_panics_nor_elapses() {
    let timer = manual();
    let mut call = task::spawn(timer.timeout(Duration::MAX, std::future::pending::<()>()));
    assert_pending!(call.poll());
    timer.advance(Duration::from_secs(3600 * 24 * 365));
    assert_pending!(call.poll());
    assert!(call.deadline() > timer.now());
}

#[test]
fn into_inner_gives_the_future_back_and_cancels_the_deadline() {
    let timer = manual();
    let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
    let mut call = task::spawn(timer.timeout(ms(5), rx));
    assert_pending!(call.poll());
    assert_eq!(timer.pending_timeouts(), 1);
    let mut call = call.into_inner();
    assert!(!call.get_ref().is_terminated());
    call.get_mut().close();
    let rx = call.into_inner();
    assert_eq!(timer.pending_timeouts(), 0);
    drop(tx);
    assert!(futures::executor::block_on(rx).is_err());
}

#[test]
fn an_inner_future_panicking_in_drop_still_cancels_the_deadline() {
    struct Bomb;
    impl Future for Bomb {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> std::task::Poll<()> {
            std::task::Poll::Pending
        }
    }
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("inner future panicked in drop");
        }
    }
    let timer = manual();
    let mut call = task::spawn(timer.timeout(ms(5), Bomb));
    assert_pending!(call.poll());
    assert_eq!(timer.pending_timeouts(), 1);
    assert!(catch_unwind(AssertUnwindSafe(move || drop(call))).is_err());
    assert_eq!(timer.pending_timeouts(), 0);
    let s = timer.stats();
    assert_eq!((s.scheduled, s.cancelled, s.fired), (1, 1, 0));
}

// ---- tower ----

#[cfg(feature = "tower")]
mod tower_mirror {
    use super::*;
    // tower's paths: `tower::timeout::future::ResponseFuture`, `error::Elapsed`.
    use hashed_wheel_timer::tower::timeout::{
        error::Elapsed, future::ResponseFuture, Timeout, TimeoutLayer,
    };
    use tower::{service_fn, Layer, Service};

    #[test]
    fn the_response_future_is_where_towers_is() {
        let timer = manual();
        let _guard = set_default(timer.clone());
        let mut svc = Timeout::new(
            service_fn(|()| std::future::pending::<Result<(), std::convert::Infallible>>()),
            ms(5),
        );
        let call: ResponseFuture<_> = svc.call(());
        let mut call = task::spawn(call);
        assert_pending!(call.poll());
        timer.advance(ms(5));
        assert!(assert_ready!(call.poll()).unwrap_err().is::<Elapsed>());
    }

    /// tower's `TimeoutLayer::new` is a `const fn`: a layer can be a constant.
    const LAYER: TimeoutLayer = TimeoutLayer::new(Duration::from_millis(5));

    #[test]
    fn a_const_layer_wraps_each_service_on_the_timer_current_then() {
        let timer = manual();
        let _guard = set_default(timer.clone());
        let pending = || std::future::pending::<Result<(), std::convert::Infallible>>();
        let mut svc = LAYER.layer(service_fn(move |()| pending()));
        let mut call = task::spawn(svc.call(()));
        assert_pending!(call.poll());
        timer.advance(ms(5));
        assert!(call.is_woken(), "on the timer set_default installed");
        assert!(assert_ready!(call.poll()).unwrap_err().is::<Elapsed>());
    }
}

#[test]
fn a_sleep_moved_by_a_stop_can_still_be_reset_either_way() {
    let timer = manual();
    let mut sleep = task::spawn(timer.sleep(Duration::from_secs(3600)));
    assert_pending!(sleep.poll());
    timer.advance(ms(10));
    timer.stop().unwrap();
    assert!(sleep.is_woken());
    assert_pending!(sleep.poll()); // waits out the hour on the default timer
    assert!(!sleep.is_elapsed());
    sleep.reset(timer.now()); // its own timer's now: due
    assert!(
        sleep.is_elapsed(),
        "reset to its timer's now is not elapsed"
    );
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    sleep.reset(timer.now() + Duration::from_secs(3600));
    assert!(!sleep.is_elapsed());
    assert_pending!(sleep.poll());
    // A second after the move (the poll after the stop) on the default timer's real clock, not
    // 20 ms: a thread held off the CPU that long found it ready at the next poll (a loaded run).
    sleep.reset(timer.now() + ms(1000));
    assert_pending!(sleep.poll());
    // Woken by the default timer's thread: wait for it (a minute at most), not a fixed 400 ms.
    let waited = std::time::Instant::now();
    while !sleep.is_woken() && waited.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(ms(1));
    }
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

// ---- Sleep against a model: no lost wake-up through resets, polls and task moves ----

#[derive(Default)]
struct Count(std::sync::atomic::AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Poll(usize),
    Reset(i64),
    Advance(u64),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0..3usize).prop_map(Op::Poll),
        (-5..60i64).prop_map(Op::Reset),
        (0..25u64).prop_map(Op::Advance),
    ]
}

/// Runs `ops` on a sleep of `timer` (manual, or on the current paused runtime's clock); the
/// task that polled last while pending must be woken once the deadline has passed.
async fn model(timer: HashedWheelTimer, first: u64, ops: Vec<Op>) -> Result<(), String> {
    let counts: Vec<Arc<Count>> = (0..3).map(|_| Arc::default()).collect();
    let wakers: Vec<Waker> = counts.iter().map(|c| Waker::from(c.clone())).collect();
    let woken = |i: usize| counts[i].0.load(std::sync::atomic::Ordering::SeqCst);
    let mut sleep = timer.sleep(ms(first));
    // The task that polled last while pending, and its wake count then.
    let mut waiting: Option<(usize, usize)> = None;
    for op in ops {
        match op {
            Op::Poll(t) => {
                let cx = &mut Context::from_waker(&wakers[t]);
                let ready = Pin::new(&mut sleep).poll(cx).is_ready();
                if ready != (sleep.deadline() <= timer.now()) {
                    return Err(format!("ready: {ready} at {:?}", timer.now()));
                }
                waiting = (!ready).then(|| (t, woken(t)));
            }
            Op::Reset(d) if d < 0 => sleep.reset(timer.now() - ms(d.unsigned_abs())),
            Op::Reset(d) => sleep.reset(timer.now() + ms(d as u64)),
            Op::Advance(d) if timer.is_manual_clock() => timer.advance(ms(d)),
            Op::Advance(d) => {
                tokio::time::advance(ms(d)).await;
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            }
        }
        match waiting {
            Some((t, before)) if sleep.deadline() <= timer.now() && woken(t) == before => {
                return Err(format!("task {t} not woken, due at {:?}", timer.now()));
            }
            _ => {}
        }
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    #[test]
    fn a_sleep_is_ready_exactly_when_due_and_its_last_poller_is_woken(
        first in 0..40u64,
        ops in proptest::collection::vec(op(), 1..30),
        paused in proptest::bool::ANY,
    ) {
        let result = if paused {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .unwrap();
            runtime.block_on(async {
                let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
                model(timer, first, ops).await
            })
        } else {
            futures::executor::block_on(model(manual(), first, ops))
        };
        proptest::prop_assert_eq!(result, Ok(()));
    }
}

#[test]
fn a_guard_held_in_a_thread_local_drops_its_timer_cleanly_at_thread_exit() {
    use std::cell::RefCell;
    thread_local! {
        static HELD: RefCell<Option<hashed_wheel_timer::DefaultGuard>> = const { RefCell::new(None) };
    }
    for polled in [false, true] {
        let joined = std::thread::spawn(move || {
            let timer = manual();
            if polled {
                let mut sleep = task::spawn(timer.sleep(ms(5)));
                assert_pending!(sleep.poll());
                drop(sleep);
                let _t = timer.new_timeout(|_| {}, ms(5)).unwrap();
            }
            HELD.with(|held| *held.borrow_mut() = Some(set_default(timer)));
        })
        .join();
        assert!(joined.is_ok());
    }
}

/// A saturated deadline on the manual clock never comes (the wheel never fires it there, as a
/// `Duration::MAX` callback never runs): a `Sleep` or `TimeoutFuture` of `Duration::MAX` must not
/// read as elapsed, or complete when polled, once the clock stops at the end of time, with no
/// wake-up to say so (a task awaiting it would wait for good). A long but representable one does
/// complete, and is woken.
#[test]
fn a_saturated_sleep_on_the_manual_clock_neither_completes_nor_waits_unwoken() {
    let timer = manual();
    let mut saturated = task::spawn(timer.sleep(Duration::MAX));
    let mut timeout = task::spawn(timer.timeout(Duration::MAX, std::future::pending::<()>()));
    let year = Duration::from_secs(365 * 86_400);
    let mut long = task::spawn(timer.sleep(year * 70));
    assert_pending!(saturated.poll());
    assert_pending!(timeout.poll());
    assert_pending!(long.poll());
    timer.advance(Duration::MAX);
    assert!(long.is_woken() && long.is_elapsed());
    assert_ready!(long.poll());
    let woken = (saturated.is_woken(), timeout.is_woken());
    assert_eq!((saturated.is_elapsed(), woken), (false, (false, false)));
    assert_pending!(saturated.poll());
    assert_pending!(timeout.poll());
    let fresh = timer.sleep(Duration::MAX);
    assert!(!fresh.is_elapsed());
    assert_pending!(task::spawn(fresh).poll());
}
