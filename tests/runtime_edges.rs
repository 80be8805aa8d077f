//! The crate inside and across tokio runtimes: tokio-clock timers beside tokio's own, odd advances,
//! runtimes shut down under pending futures, defaults, futures polled in odd ways. Time moves on
//! tokio's paused clock; the few real-clock tests assert nothing tighter than 10x margins.

mod common;

use common::paused::{ms, settle, tokio_clock, within};
use common::{poll_with, CountingWaker};
use std::{future::pending, task::Poll, time::Duration};
use tokio::time::Instant;

const YEAR: Duration = Duration::from_secs(86_400 * 365);

/// A sleep and tokio's in one `select!` on auto-advance: the earlier wins, at its own instant.
#[tokio::test(start_paused = true)]
async fn select_with_tokios_sleep_takes_the_earlier_at_its_instant() {
    let timer = tokio_clock();
    for (ours, theirs) in [(10, 20), (20, 10), (7, 7), (1, 1000)] {
        let start = Instant::now();
        let ours_won = tokio::select! {
            biased;
            _ = timer.sleep(ms(ours)) => true,
            _ = tokio::time::sleep(ms(theirs)) => false,
        };
        let took = Instant::now() - start;
        assert_eq!(ours_won, ours <= theirs, "{ours} vs {theirs}");
        assert!(took >= ms(ours.min(theirs)), "early: {took:?}");
        assert!(took <= ms(ours.min(theirs) + 1), "late: {took:?}");
    }
    assert_eq!(timer.pending_timeouts(), 0);
}

/// `join!` of the crate's futures and tokio's ends when the last does, on auto-advance.
#[tokio::test(start_paused = true)]
async fn join_with_tokios_timers_ends_with_the_last() {
    let timer = tokio_clock();
    let start = Instant::now();
    let mut interval = timer.interval(ms(3));
    let (_, _, r, _) = tokio::join!(
        timer.sleep(ms(50)),
        tokio::time::sleep(ms(70)),
        timer.timeout(ms(30), pending::<()>()),
        async {
            for _ in 0..10 {
                interval.tick().await;
            }
        }
    );
    assert!(r.is_err());
    let took = Instant::now() - start;
    assert!(took >= ms(70) && took <= ms(71), "{took:?}");
}

/// Sub-millisecond advances never make a sleep early; it is ready within a tick of its deadline.
#[tokio::test(start_paused = true)]
async fn sub_millisecond_advances_are_never_early() {
    let timer = tokio_clock();
    let (counter, waker) = CountingWaker::new();
    let start = Instant::now();
    let mut sleep = timer.sleep(Duration::from_micros(2_500));
    assert!(poll_with(&mut sleep, &waker).is_pending());
    let step = Duration::from_micros(130);
    loop {
        tokio::time::advance(step).await;
        settle().await;
        let now = Instant::now() - start;
        match poll_with(&mut sleep, &waker) {
            Poll::Ready(()) => {
                assert!(now >= Duration::from_micros(2_500), "early at {now:?}");
                assert!(now <= Duration::from_micros(3_500 + 130), "late: {now:?}");
                break;
            }
            Poll::Pending => assert!(now < Duration::from_micros(3_500 + 130), "late: {now:?}"),
        }
    }
    assert!(counter.wakes() <= 2, "woken {} times", counter.wakes());
}

/// A pending sleep is not woken while time moves short of its deadline: no spin.
#[tokio::test(start_paused = true)]
async fn a_pending_sleep_is_not_woken_before_its_deadline() {
    let timer = tokio_clock();
    let (counter, waker) = CountingWaker::new();
    let mut sleep = timer.sleep(ms(100));
    let mut far = timer.sleep(Duration::MAX);
    assert!(poll_with(&mut sleep, &waker).is_pending());
    assert!(poll_with(&mut far, &waker).is_pending());
    for _ in 0..99 {
        tokio::time::advance(ms(1)).await;
        settle().await;
    }
    assert_eq!(counter.wakes(), 0);
    assert!(poll_with(&mut sleep, &waker).is_pending());
    tokio::time::advance(ms(1)).await;
    settle().await;
    assert_eq!(counter.wakes(), 1);
    assert!(poll_with(&mut sleep, &waker).is_ready());
    assert!(poll_with(&mut far, &waker).is_pending());
}

/// `Duration::MAX` and a far-future instant never complete early, and do not keep the paused
/// runtime busy: tokio's own sleep beside them still auto-advances.
#[tokio::test(start_paused = true)]
async fn far_future_sleeps_let_the_paused_clock_auto_advance() {
    let timer = tokio_clock();
    let mut max = timer.sleep(Duration::MAX);
    let start = Instant::now();
    let mut far = timer.sleep_until(start + YEAR * 50);
    let mut far_done = false;
    for wait in [ms(5), YEAR, YEAR * 30, YEAR * 30] {
        tokio::select! {
            _ = &mut max => panic!("Duration::MAX completed"),
            _ = &mut far, if !far_done => far_done = Instant::now() - start >= YEAR * 50,
            _ = tokio::time::sleep(wait) => {}
        }
    }
    assert!(far_done, "early, or never");
    assert!(far.is_elapsed());
    assert_eq!(timer.pending_timeouts(), 1, "the Duration::MAX one");
}

/// A deadline too large to represent saturates at the end of the timer's time (2^61 ns, about 73
/// years): nothing saturated completes before a clock gets there, on the manual clock or tokio's
/// paused one. At the end itself a `Sleep` may complete, as tokio's `sleep(Duration::MAX)` does on
/// auto-advance (`tokio_time_sleep_suite::exactly_max`); the docs say so.
#[tokio::test(start_paused = true)]
async fn a_saturated_deadline_does_not_come_before_the_end_of_the_timers_time() {
    const END_YEARS: u32 = 73;
    let paused = tokio_clock();
    let manual = common::manual(ms(1));
    for timer in [&paused, &manual] {
        let fired = common::Counter::default();
        timer.new_timeout(fired.task(), YEAR * 10).unwrap();
        let late = timer.new_timeout(|_| {}, YEAR * 200).unwrap();
        let (_, waker) = CountingWaker::new();
        let mut max = timer.sleep(Duration::MAX);
        let mut huge = timer.sleep(YEAR * 200);
        assert!(poll_with(&mut huge, &waker).is_pending());
        let queue = timer.delay_queue();
        queue.insert("never", Duration::MAX).unwrap();
        if timer.is_manual_clock() {
            timer.advance(YEAR * (END_YEARS - 1));
        } else {
            tokio::time::advance(YEAR * (END_YEARS - 1)).await;
            settle().await;
        }
        assert_eq!(fired.get(), 1, "the 10-year timeout fired");
        assert!(!late.is_expired(), "a 200-year timeout fired at 72 years");
        assert!(
            poll_with(&mut huge, &waker).is_pending(),
            "a 200-year sleep ended"
        );
        assert!(
            poll_with(&mut max, &waker).is_pending(),
            "Duration::MAX ended"
        );
        assert!(futures::poll!(futures::StreamExt::next(&mut &queue)).is_pending());
        assert!(late.remaining() > YEAR / 2, "{:?} left", late.remaining());
    }
}

/// Threads blocked on a paused runtime's timer neither hang nor panic when it is dropped.
#[test]
fn threads_blocked_on_a_paused_runtimes_timer_end_when_it_is_dropped() {
    let runtime = common::paused::paused_runtime();
    let timer = runtime.block_on(async { tokio_clock() });
    let (tx, rx) = std::sync::mpsc::channel();
    let sleeper = std::thread::spawn({
        let (timer, tx) = (timer.clone(), tx.clone());
        move || {
            let mut sleep = timer.sleep(Duration::from_secs(3600));
            futures::executor::block_on(async {
                assert!(futures::poll!(&mut sleep).is_pending());
                tx.send(()).unwrap();
                sleep.await;
            })
        }
    });
    let caller = std::thread::spawn({
        let (timer, tx) = (timer.clone(), tx.clone());
        move || {
            let mut call = timer.timeout(Duration::from_secs(3600), pending::<()>());
            futures::executor::block_on(async {
                assert!(futures::poll!(&mut call).is_pending());
                tx.send(()).unwrap();
                call.await
            })
        }
    });
    drop(tx);
    for _ in 0..2 {
        rx.recv().unwrap();
    }
    drop(runtime);
    within(20, move || sleeper.join().unwrap()).expect("a blocked sleep hangs");
    let call = within(20, move || caller.join().unwrap()).expect("a blocked timeout hangs");
    assert!(call.unwrap_err().is_shutdown());
    assert!(timer.is_shutdown());
    common::assert_stats_add_up(&timer);
}

/// A runtime shut down three ways under pending futures, consumers, intervals, callbacks: no panic,
/// nothing counted twice.
#[test]
fn a_runtime_shut_down_under_pending_futures_and_callbacks() {
    for how in 0..3 {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let timer = runtime.block_on(async { tokio_clock() });
        let queue = timer.delay_queue();
        let fired = common::Counter::default();
        let callbacks: Vec<_> = (0..10)
            .map(|i| {
                timer
                    .new_timeout(fired.task(), ms(50) * (i % 2) * 1000)
                    .unwrap()
            })
            .collect();
        for i in 0..8u64 {
            queue.insert(i, ms(i * 400)).unwrap();
        }
        let (tx, rx) = std::sync::mpsc::channel();
        for task in 0..8u64 {
            let (timer, queue, tx) = (timer.clone(), queue.clone(), tx.clone());
            runtime.spawn(async move {
                let mut interval = timer.interval(ms(7));
                interval.tick().await;
                tx.send(()).unwrap();
                match task % 4 {
                    0 => timer.sleep(Duration::from_secs(3600)).await,
                    1 => {
                        let _ = timer
                            .timeout(Duration::from_secs(3600), pending::<()>())
                            .await;
                    }
                    2 => while futures::StreamExt::next(&mut &queue).await.is_some() {},
                    _ => loop {
                        interval.tick().await;
                    },
                }
            });
        }
        for _ in 0..8 {
            rx.recv().unwrap();
        }
        match how {
            0 => runtime.shutdown_timeout(Duration::from_secs(5)),
            1 => runtime.shutdown_background(),
            _ => drop(runtime),
        }
        let waited = within(10, {
            let timer = timer.clone();
            // `shutdown_background` shuts it down on another thread: wait for its end.
            move || while !timer.is_shutdown() || timer.pending_timeouts() > 0 {}
        });
        assert!(
            waited.is_some(),
            "way {how}: the timer outlived its runtime"
        );
        assert!(fired.get() <= 5, "way {how}: {} fired", fired.get());
        common::assert_stats_add_up(&timer);
        assert_eq!(timer.pending_timeouts(), 0, "way {how}");
        assert_eq!(
            callbacks.iter().filter(|t| t.is_expired()).count(),
            fired.get(),
            "way {how}"
        );
    }
}

/// `spawn_blocking` and nested `block_on` use a tokio-clock timer of a real-time runtime.
#[test]
fn spawn_blocking_and_nested_block_on_use_a_tokio_clock_timer() {
    for multi in [false, true] {
        let runtime = if multi {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap()
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let timer = runtime.block_on(async { tokio_clock() });
        let done = runtime.block_on({
            let timer = timer.clone();
            async move {
                let blocking = tokio::task::spawn_blocking(move || {
                    let (tx, rx) = std::sync::mpsc::channel();
                    timer
                        .new_timeout(move |_| tx.send(()).unwrap(), ms(5))
                        .unwrap();
                    rx.recv_timeout(Duration::from_secs(20))
                        .expect("callback ran");
                    let sleep = timer.sleep(ms(5));
                    let deadline = sleep.deadline();
                    futures::executor::block_on(sleep);
                    assert!(timer.now() >= deadline, "never early");
                    let nested = tokio::runtime::Handle::current();
                    nested.block_on(async {
                        timer.sleep(ms(5)).await;
                        let r = timer.timeout(ms(5), pending::<()>()).await;
                        assert!(r.is_err());
                        let mut iv = timer.interval(ms(2));
                        iv.tick().await;
                        iv.tick().await;
                    });
                    true
                });
                tokio::time::timeout(Duration::from_secs(20), blocking).await
            }
        });
        assert!(done.expect("no hang").unwrap(), "multi: {multi}");
    }
}

/// A `LocalSet` on a paused runtime: local tasks sleep and tick on a timer made inside it.
#[tokio::test(start_paused = true)]
async fn a_local_set_runs_the_timers_futures_on_the_paused_clock() {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let timer = tokio_clock();
            let start = Instant::now();
            let rc = std::rc::Rc::new(std::cell::Cell::new(0));
            let tasks: Vec<_> = (1..=5u64)
                .map(|i| {
                    let (timer, rc) = (timer.clone(), rc.clone());
                    tokio::task::spawn_local(async move {
                        timer.sleep(ms(i * 10)).await;
                        rc.set(rc.get() + 1);
                        Instant::now() - start
                    })
                })
                .collect();
            let mut iv = timer.interval(ms(4));
            for _ in 0..5 {
                iv.tick().await;
            }
            assert_eq!(Instant::now() - start, ms(16));
            for (i, task) in tasks.into_iter().enumerate() {
                let took = task.await.unwrap();
                let want = ms(10 * (i as u64 + 1));
                assert!(took >= want && took <= want + ms(1), "{took:?}");
            }
            assert_eq!(rc.get(), 5);
        })
        .await;
}

/// A thread consuming a queue of a paused runtime's timer, an item pending, when the runtime is
/// dropped: the item's task is dropped unrun and `stop()` returns nothing, so the item can never
/// come out; the stream ends (it waited for the queue to empty, for good), and the item stays in
/// the queue for `remove`.
#[test]
fn a_thread_consuming_a_delay_queue_ends_when_its_runtime_is_dropped() {
    let runtime = common::paused::paused_runtime();
    let timer = runtime.block_on(async { tokio_clock() });
    let queue = timer.delay_queue();
    let key = queue.insert(1u32, Duration::from_secs(3600)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let consumer = std::thread::spawn({
        let queue = queue.clone();
        move || {
            futures::executor::block_on(async {
                let mut stream = &queue;
                let mut next = futures::StreamExt::next(&mut stream);
                assert!(futures::poll!(&mut next).is_pending());
                tx.send(()).unwrap();
                next.await.map(|e| e.into_inner())
            })
        }
    });
    rx.recv().unwrap();
    drop(runtime);
    assert!(timer.stop().unwrap().is_empty(), "nothing handed back");
    let out = within(20, move || consumer.join().unwrap()).expect("the queue's consumer hangs");
    assert_eq!(out, None, "the stream ends");
    assert_eq!(queue.remove(&key), Some(1), "nothing is lost");
}

/// A sleep keeps the timer it was made on: made under one `set_default`, polled under another.
#[test]
fn a_sleep_made_under_one_default_waits_on_it_under_another() {
    let (a, b) = (common::manual(ms(1)), common::manual(ms(1)));
    let (counter, waker) = CountingWaker::new();
    let guard = hashed_wheel_timer::set_default(a.clone());
    let mut sleep = hashed_wheel_timer::sleep(ms(5));
    let mut call = hashed_wheel_timer::timeout(ms(5), pending::<()>());
    drop(guard);
    let _b = hashed_wheel_timer::set_default(b.clone());
    assert!(poll_with(&mut sleep, &waker).is_pending());
    assert!(poll_with(&mut call, &waker).is_pending());
    assert_eq!((a.pending_timeouts(), b.pending_timeouts()), (2, 0));
    b.advance(ms(10));
    assert!(poll_with(&mut sleep, &waker).is_pending());
    assert_eq!(counter.wakes(), 0);
    a.advance(ms(5));
    assert_eq!(counter.wakes(), 2);
    assert!(poll_with(&mut sleep, &waker).is_ready());
    assert!(poll_with(&mut call, &waker).is_ready());
}

/// No-op waker polls, polls after completion, a reset after completion: never early, no hang.
#[tokio::test(start_paused = true)]
async fn noop_waker_polls_polls_after_completion_and_reset_after_completion() {
    let timer = tokio_clock();
    let start = Instant::now();
    let mut sleep = timer.sleep(ms(10));
    assert!(poll_with(&mut sleep, futures::task::noop_waker_ref()).is_pending());
    (&mut sleep).await;
    assert_eq!(Instant::now() - start, ms(10));
    assert!(poll_with(&mut sleep, futures::task::noop_waker_ref()).is_ready());
    (&mut sleep).await;
    sleep.reset(Instant::now() + ms(7));
    assert!(poll_with(&mut sleep, futures::task::noop_waker_ref()).is_pending());
    (&mut sleep).await;
    let took = Instant::now() - start;
    assert!(took >= ms(17) && took <= ms(18), "{took:?}");
    let mut interval = timer.interval(ms(3));
    assert!(poll_with(
        &mut Box::pin(interval.tick()),
        futures::task::noop_waker_ref()
    )
    .is_ready());
    interval.tick().await;
    assert_eq!(Instant::now() - start, took + ms(3));
}

/// A pending interval and queue consumer are not woken short of their deadline: no spin.
#[tokio::test(start_paused = true)]
async fn a_pending_interval_and_queue_consumer_are_not_woken_early() {
    let timer = tokio_clock();
    let (counter, waker) = CountingWaker::new();
    let mut interval = timer.interval(ms(50));
    let queue = timer.delay_queue();
    queue.insert(7u8, ms(50)).unwrap();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(interval.poll_tick(&mut cx).is_ready());
    assert!(interval.poll_tick(&mut cx).is_pending());
    assert!(queue.poll_expired(&mut cx).is_pending());
    for _ in 0..49 {
        tokio::time::advance(ms(1)).await;
        settle().await;
    }
    assert_eq!(counter.wakes(), 0);
    tokio::time::advance(ms(1)).await;
    settle().await;
    assert!(counter.wakes() >= 1);
    assert!(interval.poll_tick(&mut cx).is_ready());
    assert!(matches!(queue.poll_expired(&mut cx), Poll::Ready(Some(_))));
}

/// A deadline and a sleep due at one instant, ours around tokio's or theirs around ours: the inner
/// future wins.
#[tokio::test(start_paused = true)]
async fn at_one_instant_the_inner_future_wins_both_ways() {
    let timer = tokio_clock();
    for wait in [1, 10, 1000] {
        let ours = timer.timeout(ms(wait), tokio::time::sleep(ms(wait))).await;
        assert_eq!(ours, Ok(()), "{wait} ms: ours around tokio's");
        let theirs = tokio::time::timeout(ms(wait), timer.sleep(ms(wait))).await;
        assert!(theirs.is_ok(), "{wait} ms: tokio's around ours");
    }
}

/// A queue of a paused runtime's timer consumed on another runtime: out at its deadline.
#[test]
fn a_queue_of_a_paused_runtime_is_consumed_on_another_runtime() {
    let paused = common::paused::paused_runtime();
    let timer = paused.block_on(async { tokio_clock() });
    let queue = timer.delay_queue();
    queue.insert("a", Duration::from_secs(60)).unwrap();
    let other = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let consumer = other.spawn({
        let queue = queue.clone();
        async move {
            futures::StreamExt::next(&mut &queue)
                .await
                .map(|e| e.into_inner())
        }
    });
    paused.block_on(async {
        tokio::time::advance(Duration::from_secs(59)).await;
        settle().await;
    });
    std::thread::sleep(ms(50));
    assert!(!consumer.is_finished(), "out a second early");
    paused.block_on(async {
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
    });
    let got =
        other.block_on(async { tokio::time::timeout(Duration::from_secs(20), consumer).await });
    assert_eq!(got.expect("no hang").unwrap(), Some("a"));
}

/// An interval of a paused runtime's timer, ticked on a plain thread after that runtime was
/// dropped: `tick()` goes on a period apart on the real clock (no spin, never early); `try_tick`
/// and the stream end at once after the tick that was due.
#[test]
fn an_interval_outliving_its_paused_runtime_ticks_a_period_apart() {
    let runtime = common::paused::paused_runtime();
    let timer = runtime.block_on(async { tokio_clock() });
    let mut interval = timer.interval(ms(20));
    let mut other = timer.interval(ms(20));
    drop(runtime);
    let ticked = within(20, move || {
        futures::executor::block_on(async {
            let start = std::time::Instant::now();
            for _ in 0..5 {
                interval.tick().await;
            }
            let took = start.elapsed();
            assert!(other.try_tick().await.is_ok(), "the first tick was due");
            assert!(other.try_tick().await.is_err());
            assert!(futures::StreamExt::next(&mut other).await.is_none());
            took
        })
    });
    let took = ticked.expect("no hang");
    assert!(took >= ms(80), "5 ticks in {took:?}: early");
}

/// A plain thread blocked on a paused runtime's timer while the runtime auto-advances: its sleep
/// ends at its own virtual instant, its callback runs there, never early.
#[tokio::test(start_paused = true)]
async fn a_plain_thread_waits_on_the_paused_clock_through_auto_advance() {
    let timer = tokio_clock();
    let start = Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn({
        let timer = timer.clone();
        move || {
            let tx2 = tx.clone();
            let clock = timer.clone();
            timer
                .new_timeout(
                    move |_| tx2.send(("callback", clock.now())).unwrap(),
                    ms(25),
                )
                .unwrap();
            let mut sleep = timer.sleep(ms(40));
            futures::executor::block_on(async {
                assert!(futures::poll!(&mut sleep).is_pending());
                ready_tx.send(()).unwrap();
                sleep.await;
            });
            tx.send(("sleep", timer.now())).unwrap();
        }
    });
    // Both filed before the runtime may auto-advance; no tokio timer here, or auto-advance would
    // jump past the thread's answer, made off the runtime.
    ready_rx.recv().unwrap();
    let mut got = Vec::new();
    while let Some(m) = rx.recv().await {
        got.push(m);
    }
    thread.join().unwrap();
    let at = |what: &str| got.iter().find(|m| m.0 == what).map(|m| m.1);
    let callback = at("callback").expect("the callback ran") - start.into_std();
    let sleep = at("sleep").expect("the sleep ended") - start.into_std();
    assert!(callback >= ms(25) && callback <= ms(26), "{callback:?}");
    assert!(sleep >= ms(40) && sleep <= ms(41), "{sleep:?}");
}
