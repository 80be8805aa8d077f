//! Lifecycle edges under races and hostile user code: the last handle dropped or `stop()` called
//! from places a driver runs, executors that misbehave, periodic tasks ended from every side, the
//! pending limit at its boundary, and destructors that panic. Every test is bounded: a hang shows
//! as a failure, not a stuck run.

mod common;

use common::{assert_stats_add_up, Counter, QueueExecutor};
use hashed_wheel_timer::{Executor, HashedWheelTimer, Job, Timeout, TimerError};
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

// ---------------------------------------------------------------------------------------------
// threads left behind
// ---------------------------------------------------------------------------------------------

fn named(name: &str) -> HashedWheelTimer {
    HashedWheelTimer::builder()
        .thread_name(name)
        .build()
        .unwrap()
}

/// Starts `timer`'s worker (a timeout that fires) and waits until it runs.
fn start_worker(timer: &HashedWheelTimer, name: &str) {
    let (tx, rx) = mpsc::channel();
    timer
        .new_timeout(move |_| tx.send(()).unwrap(), MS)
        .unwrap();
    rx.recv_timeout(HANG).unwrap();
    assert_eq!(threads_named(name), 1);
}

/// The last handle, captured by a task, is dropped when the task runs on a job's thread: the
/// worker does not wait for that thread, and must still end.
#[test]
fn the_worker_ends_when_the_last_handle_goes_with_a_task_on_an_executor_thread() {
    let name = "h32-exec-last";
    let timer = HashedWheelTimer::builder()
        .thread_name(name)
        // Named: a thread the worker spawns would otherwise show the worker's name.
        .executor(|job: Job| drop(thread::Builder::new().name("job".into()).spawn(job)))
        .build()
        .unwrap();
    start_worker(&timer, name);
    let (tx, rx) = mpsc::channel();
    let last = timer.clone();
    timer
        .new_timeout(
            move |_| {
                let _last = last;
                tx.send(()).unwrap();
            },
            MS,
        )
        .unwrap();
    drop(timer);
    rx.recv_timeout(HANG).unwrap();
    assert!(eventually(|| threads_named(name) == 0), "the worker ended");
}

/// The last handle, held by a task's captured value, is dropped when another thread cancels the
/// task: that thread stops and joins the worker.
#[test]
fn the_worker_ends_when_a_cancel_drops_the_last_handle() {
    let name = "h32-cancel-last";
    let timer = named(name);
    start_worker(&timer, name);
    let last = timer.clone();
    let t = timer
        .new_timeout(move |_| drop(last), Duration::from_secs(3600))
        .unwrap();
    drop(timer);
    assert_eq!(threads_named(name), 1, "the task keeps the timer alive");
    assert!(within("cancel dropping the last handle", move || t.cancel()));
    assert!(eventually(|| threads_named(name) == 0), "the worker ended");
}

/// The last handle is dropped by a fired task's captured value on the worker thread itself, and
/// another pending task's captured value panics when the worker drops it.
#[test]
fn the_worker_ends_when_its_own_task_drops_the_last_handle_and_a_drop_panics() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("bomb");
        }
    }
    let name = "h32-self-last";
    let timer = named(name);
    start_worker(&timer, name);
    let bomb = Bomb;
    timer
        .new_timeout(move |_| drop(bomb), Duration::from_secs(3600))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let last = timer.clone();
    timer
        .new_timeout(
            move |_| {
                drop(last);
                tx.send(()).unwrap();
            },
            MS,
        )
        .unwrap();
    drop(timer);
    rx.recv_timeout(HANG).unwrap();
    assert!(eventually(|| threads_named(name) == 0), "the worker ended");
}

/// `stop()` from two threads at once while the worker runs a task; afterwards the worker is gone.
#[test]
fn the_worker_is_gone_when_two_racing_stops_return() {
    let name = "h32-two-stops";
    let timer = named(name);
    start_worker(&timer, name);
    let gate = Arc::new(Barrier::new(2));
    let (g, (started, running)) = (gate.clone(), mpsc::channel());
    timer
        .new_timeout(
            move |_| {
                started.send(()).unwrap();
                g.wait();
            },
            MS,
        )
        .unwrap();
    running.recv_timeout(HANG).unwrap();
    let far: Vec<_> = (0..100)
        .map(|i| {
            timer
                .new_timeout(|_| {}, Duration::from_secs(60 + i))
                .unwrap()
        })
        .collect();
    let start = Arc::new(Barrier::new(3));
    let stops: Vec<_> = (0..2)
        .map(|_| {
            let (timer, start) = (timer.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                timer.stop().unwrap()
            })
        })
        .collect();
    start.wait();
    gate.wait(); // the task may end now
    let mut returned: Vec<Timeout> = stops.into_iter().flat_map(|s| s.join().unwrap()).collect();
    assert_eq!(threads_named(name), 0, "joined before stop returned");
    returned.sort_by_key(Timeout::deadline);
    assert_eq!(returned, far, "each returned once");
    assert_eq!(timer.pending_timeouts(), 0);
    assert_stats_add_up(&timer);
}

// ---------------------------------------------------------------------------------------------
// executors that call back into the timer, drop jobs, panic
// ---------------------------------------------------------------------------------------------

/// An executor that runs each job inline (on the thread advancing the manual clock) and whose jobs
/// call back into the timer: schedule, cancel, reset, stop. Everything adds up.
#[test]
fn an_inline_executors_jobs_call_back_into_the_timer() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(|job: Job| job())
        .build()
        .unwrap();
    let ran = Counter::default();
    let victim = timer.new_timeout(|_| {}, MS * 50).unwrap();
    let stop_result = Arc::new(Mutex::new(None));
    let (v, sr, r) = (victim.clone(), stop_result.clone(), ran.clone());
    let first = timer
        .new_timeout(
            move |t: &Timeout| {
                let timer = t.timer().unwrap();
                let mut task = r.task();
                timer.new_timeout(move |t| task(t), Duration::ZERO).unwrap();
                assert!(v.cancel());
                assert!(!t.reset(MS), "a fired timeout cannot be reset");
                *sr.lock().unwrap() = Some(timer.stop().map(|v| v.len()));
            },
            MS,
        )
        .unwrap();
    let periodic = timer
        .schedule_with_fixed_delay(ran.task(), MS, MS * 2)
        .unwrap();
    within("advance", {
        let timer = timer.clone();
        move || timer.advance(MS * 10)
    });
    assert_eq!(
        *stop_result.lock().unwrap(),
        Some(Err(TimerError::StopFromTimerTask))
    );
    assert!(first.is_expired() && victim.is_cancelled() && periodic.is_pending());
    assert_eq!(ran.get(), 1 + 5, "the zero-delay one, and runs at 1, 3, 5, 7, 9");
    assert_stats_add_up(&timer);
    let s = timer.stats();
    assert_eq!((s.scheduled, s.fired, s.cancelled), (4, 2, 1));
    assert_eq!(timer.stop().unwrap(), vec![periodic.clone()]);
    assert!(periodic.is_stopped());
    assert_stats_add_up(&timer);
}

/// An executor that drops every other job unrun, one that panics after queueing, and one that runs
/// the job and then panics: nothing is lost, nothing counted twice, and `stop()` returns the
/// queued ones.
#[test]
fn hostile_executors_lose_nothing() {
    let queue = QueueExecutor::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let (q, c) = (queue.clone(), calls.clone());
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(move |job: Job| match c.fetch_add(1, Ordering::SeqCst) % 4 {
            0 => drop(job),
            1 => {
                q.execute(job);
                panic!("after queueing");
            }
            2 => {
                job();
                panic!("after running");
            }
            _ => q.execute(job),
        })
        .build()
        .unwrap();
    let ran = Counter::default();
    let ts: Vec<_> = (0..40)
        .map(|i| {
            let mut task = ran.task();
            timer.new_timeout(move |t| task(t), MS * (1 + i % 5)).unwrap()
        })
        .collect();
    timer.advance(MS * 5);
    assert_eq!(calls.load(Ordering::SeqCst), 40);
    assert_eq!(ran.get(), 10, "those run inline");
    assert!(queue.run_all() >= 10);
    assert_eq!(ran.get(), 30, "and the queued ones");
    let dropped = ts.iter().filter(|t| t.is_stopped()).count();
    assert_eq!(dropped, 10, "dropped jobs end stopped");
    assert_eq!(timer.pending_timeouts(), 0);
    assert_stats_add_up(&timer);
    // Again, with the queued jobs left to `stop()`.
    let ts: Vec<_> = (0..40)
        .map(|i| {
            let mut task = ran.task();
            timer.new_timeout(move |t| task(t), MS * (1 + i % 5)).unwrap()
        })
        .collect();
    timer.advance(MS * 5);
    let returned = timer.stop().unwrap();
    assert_eq!(returned.len(), 20, "the queued jobs");
    queue.run_all();
    assert_eq!(ran.get(), 40, "queued jobs returned by stop() never run");
    assert!(returned.iter().all(Timeout::is_stopped));
    assert_eq!(ts.iter().filter(|t| t.is_stopped()).count(), 30);
    assert_stats_add_up(&timer);
}
