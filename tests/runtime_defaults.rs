//! `set_global_default` and `set_default` with tokio-clock timers whose runtimes end, then the free
//! functions on a new runtime; runtimes dropped from a timer's callback or a task's `Drop`.

mod common;

use common::paused::{ms, paused_runtime, tokio_clock};
use common::within;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

/// A global default on a paused runtime that ended: the free functions on a new paused runtime
/// still give each sleep and timeout its time, on the process-wide timer.
#[test]
fn the_free_functions_after_the_global_defaults_runtime_ended() {
    within("global", || {
        let first = paused_runtime();
        let timer = first.block_on(async { tokio_clock() });
        hashed_wheel_timer::set_global_default(timer.clone());
        first.block_on(async { hashed_wheel_timer::sleep(HOUR).await });
        drop(first);
        assert!(timer.is_shutdown());
        let second = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        second.block_on(async {
            let start = std::time::Instant::now();
            hashed_wheel_timer::sleep(ms(30)).await;
            assert!(start.elapsed() >= ms(30), "{:?}", start.elapsed());
            let r = hashed_wheel_timer::timeout(ms(30), std::future::pending::<()>()).await;
            assert!(r.is_err() && !r.unwrap_err().is_shutdown());
            assert!(start.elapsed() >= ms(60));
            let mut iv = hashed_wheel_timer::interval(ms(10));
            for _ in 0..3 {
                iv.tick().await;
            }
            assert!(start.elapsed() >= ms(80));
            let (tx, rx) = tokio::sync::oneshot::channel();
            hashed_wheel_timer::new_timeout(move |_| tx.send(()).unwrap(), ms(5)).unwrap();
            rx.await.unwrap();
        });
    });
}

/// `set_default` of a tokio-clock timer whose runtime ended, its guard still held: the free
/// functions on a new runtime neither hang nor panic.
#[test]
fn set_default_of_an_ended_runtimes_timer() {
    within("set_default", || {
        let first = paused_runtime();
        let timer = first.block_on(async { tokio_clock() });
        let _guard = hashed_wheel_timer::set_default(timer.clone());
        drop(first);
        let second = paused_runtime();
        second.block_on(async {
            // The sleep of a timer whose runtime is gone ends at once (`Sleep`'s "When the timer
            // stops"); the timeout gives its answer, a refusal is typed.
            hashed_wheel_timer::sleep(ms(30)).await;
            let r = hashed_wheel_timer::timeout(ms(30), std::future::pending::<()>()).await;
            assert!(r.unwrap_err().is_shutdown());
            assert!(hashed_wheel_timer::new_timeout(|_| {}, ms(5)).is_err());
        });
    });
}

/// A runtime dropped from a real-clock timer's callback, and from a task's `Drop` on another
/// runtime's shutdown: no panic escapes, the timers keep ticking.
#[test]
fn a_runtime_dropped_from_a_callback() {
    within("callback", || {
        let timer = hashed_wheel_timer::HashedWheelTimer::new();
        let runtime = paused_runtime();
        let inner = runtime.block_on(async { tokio_clock() });
        let pending = inner.new_timeout(|_| {}, HOUR).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let slot = std::sync::Mutex::new(Some(runtime));
        timer
            .new_timeout(
                move |_| {
                    drop(slot.lock().unwrap().take());
                    tx.send(()).unwrap();
                },
                ms(1),
            )
            .unwrap();
        rx.recv().unwrap();
        assert!(inner.is_shutdown());
        assert!(!pending.is_expired());
        common::assert_stats_add_up(&inner);
        let (tx, rx) = std::sync::mpsc::channel();
        timer
            .new_timeout(move |_| tx.send(()).unwrap(), ms(1))
            .unwrap();
        rx.recv().unwrap();
    });
}

/// A tokio-clock timer's callback, run on its runtime's task, drops another runtime: tokio refuses
/// (a panic in the callback), which the timer catches; its runtime keeps running.
#[test]
fn a_runtime_dropped_from_a_tokio_clock_callback() {
    within("tokio callback", || {
        let runtime = paused_runtime();
        let other = paused_runtime();
        runtime.block_on(async move {
            let timer = tokio_clock();
            let slot = std::sync::Mutex::new(Some(other));
            timer
                .new_timeout(move |_| drop(slot.lock().unwrap().take()), ms(1))
                .unwrap();
            tokio::time::sleep(ms(5)).await;
            timer.sleep(ms(5)).await;
        });
    });
}
