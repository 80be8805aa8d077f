//! The async faces (`TimeoutFuture`, `Interval`, the tower layer) at their edges, beside
//! `tokio::time`'s and tower's on one paused current-thread runtime, with the crate's timer a
//! `tokio_clock()` one made the free functions' default: wakers of a future moved between tasks,
//! inner futures that panic, drops mid-way, and the tower layer against tower's own. The random
//! comparisons of ticks and deadlines are in `tests/async_faces_vs_tokio.rs`, what happens after
//! a stop in `tests/async_faces_after_stop.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use hashed_wheel_timer::{self as hwt, HashedWheelTimer};
use tokio::time::{self as tt, Instant};

mod common;
use common::paused::{ms, tokio_clock, GUARD};

// ---- Wakers: a future moved between tasks ----

#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls `poll` once with each of `wakers` (task indices), pending each time; advances past the
/// deadline; returns how often each task was woken, and whether the last poll is then ready.
async fn wake_pattern(
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<()>,
    tasks: &[usize],
    advance: Duration,
) -> (Vec<usize>, bool) {
    let counts: Vec<Arc<Count>> = (0..3).map(|_| Arc::default()).collect();
    let wakers: Vec<Waker> = counts.iter().map(|c| Waker::from(c.clone())).collect();
    for (i, &t) in tasks.iter().enumerate() {
        let pending = poll(&mut Context::from_waker(&wakers[t])).is_pending();
        assert!(pending, "poll {i} of {tasks:?} ready before {advance:?}");
    }
    tt::advance(advance).await;
    let woken = counts.iter().map(|c| c.0.load(Ordering::SeqCst)).collect();
    let last = *tasks.last().unwrap();
    (
        woken,
        poll(&mut Context::from_waker(&wakers[last])).is_ready(),
    )
}

const MOVES: [&[usize]; 6] = [
    &[0, 1],
    &[0, 1, 0],
    &[0, 0, 1],
    &[0, 1, 2],
    &[0, 1, 1, 2, 0],
    &[2],
];

/// A `TimeoutFuture` and an `Interval` polled by one task, then another: only the last poller is
/// woken, once, as with tokio's.
#[tokio::test(start_paused = true)]
async fn only_the_last_poller_is_woken() {
    let timer = tokio_clock();
    let _guard = hwt::set_default(timer.clone());
    for tasks in MOVES {
        for advance in [ms(1), ms(7), ms(100)] {
            let d = ms(7);
            let mut theirs = Box::pin(tt::timeout(d, std::future::pending::<()>()));
            let t = wake_pattern(|cx| theirs.as_mut().poll(cx).map(drop), tasks, advance).await;
            let mut ours = Box::pin(hwt::timeout(d, std::future::pending::<()>()));
            let o = wake_pattern(|cx| ours.as_mut().poll(cx).map(drop), tasks, advance).await;
            assert_eq!(o, t, "timeout, polled by {tasks:?}, advanced {advance:?}");
            let mut theirs = tt::interval(d);
            theirs.tick().await;
            let t = wake_pattern(|cx| theirs.poll_tick(cx).map(drop), tasks, advance).await;
            let mut ours = hwt::interval(d);
            ours.tick().await;
            let o = wake_pattern(|cx| ours.poll_tick(cx).map(drop), tasks, advance).await;
            assert_eq!(o, t, "interval, polled by {tasks:?}, advanced {advance:?}");
        }
    }
    for reset in [ms(2), ms(30)] {
        // Reset between the two tasks' polls, to earlier and to later.
        let mut theirs = tt::interval(ms(10));
        let mut ours = hwt::interval(ms(10));
        theirs.tick().await;
        ours.tick().await;
        let wakers: Vec<(Arc<Count>, Waker)> = (0..2)
            .map(|_| {
                let c = Arc::new(Count::default());
                (c.clone(), Waker::from(c))
            })
            .collect();
        let cx = |i: usize| Context::from_waker(&wakers[i].1);
        assert!(theirs.poll_tick(&mut cx(0)).is_pending());
        assert!(ours.poll_tick(&mut cx(0)).is_pending());
        theirs.reset_after(reset);
        ours.reset_after(reset);
        assert!(theirs.poll_tick(&mut cx(1)).is_pending());
        assert!(ours.poll_tick(&mut cx(1)).is_pending());
        tt::advance(reset).await;
        assert_eq!(wakers[0].0 .0.load(Ordering::SeqCst), 0, "reset {reset:?}");
        assert!(
            wakers[1].0 .0.load(Ordering::SeqCst) >= 1,
            "reset {reset:?}"
        );
        assert!(theirs.poll_tick(&mut cx(1)).is_ready());
        assert!(ours.poll_tick(&mut cx(1)).is_ready());
    }
}

/// A `TimeoutFuture` and an `Interval` first polled in one tokio task, then awaited in another:
/// the second completes at tokio's time.
#[tokio::test(start_paused = true)]
async fn moved_between_tasks_completes() {
    let timer = tokio_clock();
    let _guard = hwt::set_default(timer.clone());
    let start = Instant::now();
    let mut fut = Box::pin(hwt::timeout(ms(20), std::future::pending::<()>()));
    let mut iv = hwt::interval_at(start + ms(15), ms(10));
    let a = tokio::spawn(async move {
        std::future::poll_fn(|cx| {
            assert!(fut.as_mut().poll(cx).is_pending());
            assert!(iv.poll_tick(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        (fut, iv)
    });
    let (fut, mut iv) = a.await.unwrap();
    let b = tokio::spawn(async move {
        assert_eq!(iv.tick().await, (start + ms(15)).into_std());
        assert_eq!(start.elapsed(), ms(15));
        assert!(fut.await.is_err());
        start.elapsed()
    });
    let done = tt::timeout(GUARD, b).await.expect("the moved futures hung");
    assert_eq!(done.unwrap(), ms(20));
}

// ---- Panics and drops ----

fn assert_counts_add_up(timer: &HashedWheelTimer, what: &str) {
    let s = timer.stats();
    assert_eq!(s.pending, 0, "{what}: {s:?}");
    assert_eq!(timer.pending_timeouts(), 0, "{what}");
    assert_eq!(
        s.scheduled,
        s.fired + s.cancelled + s.stopped,
        "{what}: {s:?}"
    );
}

/// A timeout whose inner future panics (at its first poll, or later, with the deadline's entry
/// filed, or at the poll the deadline is also due) loses nothing: its entry goes, the counts add
/// up, and later timeouts, sleeps and intervals on the timer work.
#[tokio::test(start_paused = true)]
async fn a_panicking_inner_future_poisons_nothing() {
    let timer = tokio_clock();
    let _guard = hwt::set_default(timer.clone());
    for (i, (panic_after, deadline)) in [(0, 5), (3, 5), (5, 5), (5, 3), (8, 5)]
        .into_iter()
        .enumerate()
    {
        let task = tokio::spawn(hwt::timeout(ms(deadline), async move {
            if panic_after > 0 {
                tt::sleep(ms(panic_after)).await;
            }
            panic!("inner future {i} panics");
        }));
        let result = tt::timeout(GUARD, task).await.expect("hung");
        if panic_after > deadline {
            assert!(result.unwrap().is_err(), "case {i}: the deadline first");
        } else {
            assert!(result.unwrap_err().is_panic(), "case {i}");
        }
        assert_counts_add_up(&timer, &format!("case {i}"));
        // Polled by hand: the panic unwinds through the poll, and the future is dropped later.
        let mut fut = Box::pin(hwt::timeout(ms(deadline), async move {
            tt::sleep(ms(panic_after)).await;
            panic!("inner future {i} panics");
        }));
        let waker = Waker::from(Arc::new(Count::default()));
        let mut cx = Context::from_waker(&waker);
        if panic_after > 0 {
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            tt::advance(ms(panic_after)).await;
        }
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = fut.as_mut().poll(&mut cx);
        }));
        assert!(polled.is_err() || panic_after > deadline, "case {i}");
        drop(fut);
        assert_counts_add_up(&timer, &format!("case {i}, by hand"));
        // The timer still works.
        let start = Instant::now();
        assert!(hwt::timeout(ms(4), std::future::pending::<()>())
            .await
            .is_err());
        assert_eq!(start.elapsed(), ms(4));
        assert_eq!(hwt::timeout(ms(4), hwt::sleep(ms(2))).await, Ok(()));
        let mut iv = hwt::interval(ms(3));
        iv.tick().await;
        iv.tick().await;
        assert_eq!(start.elapsed(), ms(9));
        drop(iv);
        assert_counts_add_up(&timer, &format!("case {i}, after"));
    }
}

/// Dropped mid-way (a timeout, an interval between ticks, an `into_inner`), nothing stays
/// pending; `get_ref`, `get_mut` and `deadline` look at it without changing it.
#[tokio::test(start_paused = true)]
async fn dropped_mid_way_leaves_nothing() {
    let timer = tokio_clock();
    let _guard = hwt::set_default(timer.clone());
    let start = Instant::now();
    let mut fut = Box::pin(hwt::timeout(ms(10), tt::sleep(ms(20))));
    let waker = Waker::from(Arc::new(Count::default()));
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    assert_eq!(timer.pending_timeouts(), 1);
    assert_eq!(fut.deadline(), (start + ms(10)).into_std());
    assert_eq!(fut.get_ref().deadline(), start + ms(20));
    tt::advance(ms(5)).await;
    drop(fut);
    assert_counts_add_up(&timer, "dropped timeout");
    let mut iv = hwt::interval(ms(10));
    iv.tick().await;
    assert!(iv.poll_tick(&mut Context::from_waker(&waker)).is_pending());
    assert_eq!(timer.pending_timeouts(), 1);
    drop(iv);
    assert_counts_add_up(&timer, "dropped interval");
    let mut fut = hwt::timeout(ms(10), Box::pin(tt::sleep(ms(20))));
    assert!(Pin::new(&mut fut)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    let inner = fut.into_inner();
    assert_counts_add_up(&timer, "into_inner");
    inner.await;
    assert_eq!(start.elapsed(), ms(25));
    // Many dropped at random points, some after their deadline, none polled to the end.
    for i in 0..200u64 {
        let mut fut = Box::pin(hwt::timeout(ms(i % 13), tt::sleep(ms(i % 7))));
        if i % 3 != 0 {
            let _ = fut.as_mut().poll(&mut Context::from_waker(&waker));
        }
        tt::advance(Duration::from_micros(i * 37 % 5000)).await;
        if i % 5 == 0 {
            let _ = fut.as_mut().poll(&mut Context::from_waker(&waker));
        }
        // And intervals, dropped with a tick pending, fired and not taken, or reset.
        let mut iv = hwt::interval(Duration::from_micros(100 + i * 53 % 4000));
        let mut cx = Context::from_waker(&waker);
        while iv.poll_tick(&mut cx).is_ready() {}
        match i % 4 {
            0 => iv.reset_immediately(),
            1 => iv.reset_after(ms(i % 9)),
            _ => {}
        }
        tt::advance(Duration::from_micros(i * 71 % 6000)).await;
        if i % 3 == 0 {
            let _ = iv.poll_tick(&mut cx);
        }
    }
    assert_counts_add_up(&timer, "many");
}

// ---- The tower layer against tower's ----

#[cfg(feature = "tower")]
mod tower_layer {
    use super::*;
    use common::paused::paused_runtime;
    use proptest::prelude::*;

    #[derive(Debug, PartialEq)]
    struct Refused(u64);

    impl std::fmt::Display for Refused {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "refused {}", self.0)
        }
    }

    impl std::error::Error for Refused {}

    /// What a call came to: a response, the inner error, or tower's `Elapsed`; and when.
    #[derive(Debug, PartialEq)]
    enum Answer {
        Ok(u64),
        Refused(u64),
        Elapsed,
    }

    fn answer(result: Result<u64, tower::BoxError>) -> Answer {
        match result {
            Ok(v) => Answer::Ok(v),
            Err(e) => match e.downcast::<Refused>() {
                Ok(r) => Answer::Refused(r.0),
                Err(e) => {
                    assert!(e.is::<tower::timeout::error::Elapsed>(), "{e:?}");
                    assert!(e.is::<hwt::tower::timeout::error::Elapsed>(), "{e:?}");
                    assert_eq!(e.to_string(), "request timed out");
                    Answer::Elapsed
                }
            },
        }
    }

    /// Answers request `(delay_us, fail)` after `delay_us`, with an error if `fail`.
    fn slow_service(
    ) -> impl tower::Service<(u64, bool), Response = u64, Error = Refused, Future: Send> + Clone
    {
        tower::service_fn(|(delay, fail): (u64, bool)| async move {
            tt::sleep(Duration::from_micros(delay)).await;
            if fail {
                Err(Refused(delay))
            } else {
                Ok(delay)
            }
        })
    }

    /// Calls `svc` with each request in its own task, all at once; answers in request order.
    async fn call_all<S>(svc: S, requests: &[(u64, bool)]) -> Vec<(Answer, Duration)>
    where
        S: tower::Service<(u64, bool), Response = u64, Error = tower::BoxError>
            + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
    {
        use tower::ServiceExt;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for &request in requests {
            let call = svc.clone().oneshot(request);
            tasks.push(tokio::spawn(async move {
                (answer(call.await), start.elapsed())
            }));
        }
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(
                tt::timeout(GUARD, task)
                    .await
                    .expect("a call hung")
                    .unwrap(),
            );
        }
        answers
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// Services answering after random delays, some with errors, under a deadline: this crate's
        /// layer (with an explicit timer, and tower's drop-in on the current timer) answers as
        /// tower's, at the same time, with the same error types.
        #[test]
        fn tower_layer_matches_towers(
            timeout_ms in 0..30u64,
            requests in prop::collection::vec((0..40_000u64, any::<bool>()), 1..8),
            grid in any::<bool>(),
        ) {
            use tower::Layer;
            let requests: Vec<_> = requests
                .into_iter()
                .map(|(us, fail)| (if grid { us / 1000 * 1000 } else { us }, fail))
                .collect();
            paused_runtime().block_on(async {
                let timer = tokio_clock();
                let _guard = hwt::set_default(timer.clone());
                let d = ms(timeout_ms);
                let theirs = call_all(tower::timeout::TimeoutLayer::new(d).layer(slow_service()), &requests).await;
                let ours = call_all(hwt::TimeoutLayer::new(timer.clone(), d).layer(slow_service()), &requests).await;
                let drop_in = call_all(hwt::tower::timeout::TimeoutLayer::new(d).layer(slow_service()), &requests).await;
                assert_eq!(ours, theirs, "{requests:?}");
                assert_eq!(drop_in, theirs, "{requests:?}");
                drop(_guard);
                assert_counts_add_up(&timer, "tower");
            });
        }
    }

    /// A service that is not ready for a while, then ready or failed: `poll_ready` passes through, the
    /// error boxed as tower's is.
    #[derive(Clone)]
    struct Reluctant {
        polls_left: usize,
        fail: bool,
    }

    impl tower::Service<u64> for Reluctant {
        type Response = u64;
        type Error = Refused;
        type Future = std::future::Ready<Result<u64, Refused>>;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Refused>> {
            if self.polls_left > 0 {
                self.polls_left -= 1;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(if self.fail { Err(Refused(7)) } else { Ok(()) })
        }

        fn call(&mut self, request: u64) -> Self::Future {
            std::future::ready(Ok(request))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn poll_ready_passes_through_as_towers() {
        use tower::{Layer, Service, ServiceExt};
        let timer = tokio_clock();
        let _guard = hwt::set_default(timer.clone());
        for (polls_left, fail) in [(0, false), (3, false), (0, true), (2, true)] {
            let inner = Reluctant { polls_left, fail };
            let mut theirs = tower::timeout::TimeoutLayer::new(ms(1)).layer(inner.clone());
            let mut ours = hwt::TimeoutLayer::new(timer.clone(), ms(1)).layer(inner.clone());
            let mut drop_in = hwt::tower::timeout::TimeoutLayer::new(ms(1)).layer(inner);
            let t = theirs.ready().await.map(drop).map_err(|e| e.to_string());
            let o = ours.ready().await.map(drop).map_err(|e| e.to_string());
            let d = drop_in.ready().await.map(drop).map_err(|e| e.to_string());
            assert_eq!((&o, &d), (&t, &t), "{polls_left} {fail}");
            if !fail {
                // Ready at once: the deadline costs no entry.
                let scheduled = timer.stats().scheduled;
                assert_eq!(answer(ours.call(5).await), Answer::Ok(5));
                assert_eq!(answer(drop_in.call(6).await), Answer::Ok(6));
                assert_eq!(answer(theirs.call(7).await), Answer::Ok(7));
                assert_eq!(timer.stats().scheduled, scheduled);
            }
        }
    }
}
