//! `Interval` and `Sleep` of a `tokio_clock()` timer that stops, on a paused current-thread
//! runtime: a late loop still ends on `try_tick` and the stream, and a wait that moved on to the
//! runtime's clock keeps its deadline through resets, into the past too. Beside
//! `tests/async_faces_vs_tokio.rs` (which also stops the timer mid-way) and
//! `tests/async_faces_edges.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use hashed_wheel_timer::{self as hwt, MissedTickBehavior};
use proptest::prelude::*;
use tokio::time::{self as tt, Instant};

mod common;
use common::paused::{ms, paused_runtime, tokio_clock, GUARD};

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

// ---- After a stop ----

/// After a stop, a loop that is late (its work outlasts the period) still ends, as the docs
/// promise: `try_tick` gives the ticks due by the stop, then `Shutdown` for good, and the stream
/// ends for good, whatever the missed-tick behaviour.
#[tokio::test(start_paused = true)]
async fn a_late_loop_ends_after_a_stop() {
    use futures::StreamExt;
    use MissedTickBehavior::{Burst, Delay, Skip};
    for (behavior, stream) in [
        (Burst, false),
        (Delay, false),
        (Skip, false),
        (Burst, true),
        (Delay, true),
    ] {
        let timer = tokio_clock();
        let start = Instant::now();
        let mut iv = timer.interval(ms(10));
        iv.set_missed_tick_behavior(behavior);
        iv.tick().await;
        tt::advance(ms(25)).await; // ticks due at 10 and 20 before the stop
        timer.stop().unwrap();
        let mut oks = Vec::new();
        for _ in 0..50 {
            let next = if stream {
                iv.next().await.ok_or(hwt::TimerError::Shutdown)
            } else {
                tt::timeout(GUARD, iv.try_tick())
                    .await
                    .expect("try_tick hung")
            };
            match next {
                Ok(due) => oks.push(due - start.into_std()),
                Err(e) => {
                    assert!(e.is_shutdown(), "{e:?}");
                    break;
                }
            }
            tt::advance(ms(15)).await; // the work: longer than the period
        }
        let expected = if behavior == Burst {
            vec![ms(10), ms(20)]
        } else {
            vec![ms(10)]
        };
        assert_eq!(
            oks, expected,
            "{behavior:?}, stream {stream}: Ok after the stop"
        );
        // For good: later polls, however late, do not tick again.
        for _ in 0..3 {
            tt::advance(ms(35)).await;
            if stream {
                assert_eq!(iv.next().await, None, "{behavior:?}: the stream came back");
            } else {
                assert!(
                    iv.try_tick().await.is_err(),
                    "{behavior:?}: try_tick came back"
                );
            }
        }
    }
}

/// After a stop, a `Sleep` or an `Interval` reset into the past (before the stop), then ahead,
/// completes at its new deadline, not late by how far back the first reset went.
#[tokio::test(start_paused = true)]
async fn a_reset_into_the_past_after_a_stop_does_not_delay_the_next() {
    let timer = tokio_clock();
    let start = Instant::now();
    tt::advance(ms(1000)).await;
    let mut sleep = timer.sleep(ms(50));
    let mut iv = timer.interval(ms(10));
    iv.tick().await;
    timer.stop().unwrap();
    // Polled after the stop: the waits move to the runtime's clock.
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    assert!(Pin::new(&mut sleep).poll(&mut cx).is_pending());
    assert!(iv.poll_tick(&mut cx).is_pending());
    sleep.reset(start); // a second before the stop
    iv.reset_at(start);
    assert!(Pin::new(&mut sleep).poll(&mut cx).is_ready());
    assert_eq!(iv.tick().await, start.into_std());
    let t0 = Instant::now();
    sleep.reset(t0 + ms(20));
    iv.reset_at(t0 + ms(30));
    tt::timeout(GUARD, &mut sleep)
        .await
        .expect("the sleep hung");
    assert_eq!(t0.elapsed(), ms(20), "the sleep completed late");
    let due = tt::timeout(GUARD, iv.tick())
        .await
        .expect("the interval hung");
    assert_eq!(due, (t0 + ms(30)).into_std());
    assert_eq!(t0.elapsed(), ms(30), "the tick completed late");
}

#[derive(Clone, Copy, Debug)]
enum SleepOp {
    Advance(u64),
    /// Reset to now plus this many microseconds (less 200 ms: into the past too).
    Reset(u64),
    Poll,
    Stop,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A `Sleep` reset, polled and advanced at random, its timer stopped on the way: every poll is
    /// ready exactly when its deadline has passed (a paused clock is read at each poll), and
    /// awaited at the end it completes at its deadline's millisecond, before and after the stop.
    #[test]
    fn a_sleep_keeps_its_deadline_across_a_stop(ops in prop::collection::vec(prop_oneof![
        3 => (0..30_000u64).prop_map(SleepOp::Advance),
        3 => (0..400_000u64).prop_map(SleepOp::Reset),
        3 => Just(SleepOp::Poll),
        1 => Just(SleepOp::Stop),
    ], 1..40)) {
        paused_runtime().block_on(async {
            let timer = tokio_clock();
            let mut sleep = timer.sleep(ms(100));
            let waker = Waker::from(Arc::new(Noop));
            let mut cx = Context::from_waker(&waker);
            for (i, op) in ops.iter().enumerate() {
                match *op {
                    SleepOp::Advance(us) => tt::advance(Duration::from_micros(us)).await,
                    SleepOp::Reset(us) => {
                        let now = Instant::now();
                        sleep.reset(now + Duration::from_micros(us) - ms(200));
                    }
                    SleepOp::Poll => {
                        let due = sleep.deadline() <= Instant::now().into_std();
                        let ready = Pin::new(&mut sleep).poll(&mut cx).is_ready();
                        assert_eq!(ready, due, "op {i} of {ops:?}");
                    }
                    SleepOp::Stop => {
                        let _ = timer.stop();
                    }
                }
            }
            let deadline = Instant::from_std(sleep.deadline());
            let before = Instant::now();
            let tokios = tokio::spawn(async move {
                tt::sleep_until(deadline).await;
                Instant::now()
            });
            let awaited = tt::timeout(GUARD, &mut sleep).await;
            assert!(awaited.is_ok(), "the sleep hung: {ops:?}");
            let done = Instant::now();
            if deadline <= before {
                assert_eq!(done, before, "not at once: {ops:?}");
            } else {
                let tokios = tokios.await.unwrap();
                assert!(done >= deadline, "early: {ops:?}");
                assert!(done <= tokios + ms(1), "{:?} after tokio's: {ops:?}", done - tokios);
            }
        });
    }
}
