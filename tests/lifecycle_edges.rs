//! Lifecycle edges under races and hostile user code: the last handle dropped or `stop()` called
//! from places a driver runs, executors that misbehave, periodic tasks ended from every side, the
//! pending limit at its boundary, and destructors that panic. Every test is bounded: a hang shows
//! as a failure, not a stuck run.

mod common;

use common::{assert_stats_add_up, Counter, QueueExecutor};
use hashed_wheel_timer::{HashedWheelTimer, Job, Timeout, TimerError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
/// How long a test waits for what should take microseconds: a hang, not a slow machine.
const HANG: Duration = Duration::from_secs(20);

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

/// Runs `f` on a thread of its own and returns its result, failing the test if it takes `HANG`.
fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(HANG) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hang: {what}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("panicked: {what}"),
    }
}

/// Threads of this process named `name` (the kernel keeps 15 bytes of a name).
fn threads_named(name: &str) -> usize {
    let name = &name[..name.len().min(15)];
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

fn eventually(cond: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < HANG {
        if cond() {
            return true;
        }
        thread::sleep(MS);
    }
    cond()
}

// ---------------------------------------------------------------------------------------------
// stop() and the last handle's drop, from inside another timer's task
// ---------------------------------------------------------------------------------------------

/// A task of manual timer `a` advances manual timer `b`, whose task stops `a`: it runs inside a task
/// of `a`, on the thread driving `a`, so `stop` must be refused, not wait for itself.
#[test]
fn stop_from_a_task_of_another_timer_nested_in_this_timers_task_is_refused() {
    let result = within("a.stop() nested in b's task in a's task", || {
        let (a, b) = (manual(), manual());
        let got = Arc::new(Mutex::new(None));
        let (a2, b2, got2) = (a.clone(), b.clone(), got.clone());
        b.new_timeout(move |_| *got2.lock().unwrap() = Some(a2.stop()), MS)
            .unwrap();
        a.new_timeout(move |_| b2.advance(MS), MS).unwrap();
        a.advance(MS);
        let r = got.lock().unwrap().take();
        r.map(|r| r.map(|v| v.len()))
    });
    assert_eq!(result, Some(Err(TimerError::StopFromTimerTask)));
}

/// The same with `advance`: `a.advance` nested in `b`'s task in `a`'s task is the nested kind
/// (`advance`'s docs), not a second driver waiting for the first.
#[test]
fn advance_from_a_task_of_another_timer_nested_in_this_timers_task_does_not_hang() {
    let fired = within("a.advance() nested in b's task in a's task", || {
        let (a, b) = (manual(), manual());
        let later = Counter::default();
        let (a2, b2) = (a.clone(), b.clone());
        b.new_timeout(move |_| a2.advance(MS * 10), MS).unwrap();
        a.new_timeout(move |_| b2.advance(MS), MS).unwrap();
        let mut task = later.task();
        a.new_timeout(move |t| task(t), MS * 5).unwrap();
        a.advance(MS);
        later.get()
    });
    assert_eq!(fired, 1, "the later timeout fired in the outer advance");
}

/// A tokio clock's driver task runs `a`'s task, which advances manual `b`, whose task drops `a`'s
/// last handle: the drop must not wait for the driver it is running on.
#[test]
fn the_last_handle_dropped_in_another_timers_task_nested_on_a_tokio_driver_does_not_hang() {
    let dropped = within("a's last handle dropped in b's task in a's task", || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let a = {
            let _entered = rt.enter();
            HashedWheelTimer::builder().tokio_clock().build().unwrap()
        };
        let b = manual();
        let slot = Arc::new(Mutex::new(Some(a.clone())));
        let (slot2, b2) = (slot.clone(), b.clone());
        b.new_timeout(move |_| drop(slot2.lock().unwrap().take()), MS)
            .unwrap();
        let after = Counter::default();
        let mut task = after.task();
        a.new_timeout(move |_| b2.advance(MS), MS).unwrap();
        a.new_timeout(move |t| task(t), MS).unwrap();
        drop(a);
        rt.block_on(async { tokio::time::sleep(MS * 10).await });
        let gone = slot.lock().unwrap().is_none();
        (gone, after.get())
    });
    assert_eq!(dropped, (true, 0), "dropped, and nothing after it started");
}
