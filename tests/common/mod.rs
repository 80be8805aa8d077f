//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod paused;

use hashed_wheel_timer::{DelayQueue, Expired, HashedWheelTimer, Timeout};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio_test::task;

/// How long a test waits for what should take microseconds: a hang, not a slow machine (nor Miri).
pub const HANG: Duration = Duration::from_secs(if cfg!(miri) { 1200 } else { 20 });

/// Runs `f` on a thread of its own and returns its result, failing the test if it takes `HANG`.
pub fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(HANG) {
        Ok(r) => r,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("hang: {what}"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("panicked: {what}"),
    }
}

pub fn manual(tick: Duration) -> HashedWheelTimer {
    HashedWheelTimer::builder()
        .manual_clock()
        .tick_duration(tick)
        .build()
        .expect("valid settings")
}

/// Records, for each labelled timeout, the timer time at which it fired.
#[derive(Clone, Default)]
pub struct Fired(Arc<Mutex<Vec<(usize, Instant)>>>);

impl Fired {
    pub fn schedule(&self, timer: &HashedWheelTimer, label: usize, delay: Duration) -> Timeout {
        let fired = self.clone();
        timer
            .new_timeout(
                move |t: &Timeout| {
                    fired
                        .0
                        .lock()
                        .unwrap()
                        .push((label, t.timer().unwrap().now()))
                },
                delay,
            )
            .expect("scheduled")
    }

    pub fn labels(&self) -> Vec<usize> {
        self.0.lock().unwrap().iter().map(|f| f.0).collect()
    }

    pub fn times(&self) -> Vec<(usize, Instant)> {
        self.0.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// An executor that only queues jobs: the test decides when, and in which
/// order, each one runs, as if on threads of its own.
#[derive(Clone, Default)]
pub struct QueueExecutor(Arc<Mutex<std::collections::VecDeque<hashed_wheel_timer::Job>>>);

impl hashed_wheel_timer::Executor for QueueExecutor {
    fn execute(&self, job: hashed_wheel_timer::Job) {
        self.0.lock().unwrap().push_back(job);
    }
}

impl QueueExecutor {
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Takes the oldest job without running it.
    pub fn take(&self) -> Option<hashed_wheel_timer::Job> {
        self.0.lock().unwrap().pop_front()
    }

    /// Runs every queued job, oldest first, including jobs queued meanwhile.
    /// Returns how many ran.
    pub fn run_all(&self) -> usize {
        let mut ran = 0;
        while let Some(job) = self.take() {
            job();
            ran += 1;
        }
        ran
    }

    /// A manual-clock timer (tick `tick`) that hands its callbacks here.
    pub fn timer(&self, tick: Duration) -> HashedWheelTimer {
        HashedWheelTimer::builder()
            .manual_clock()
            .tick_duration(tick)
            .executor(self.clone())
            .build()
            .expect("valid settings")
    }
}

/// Counts the runs of the tasks it makes.
#[derive(Clone, Default)]
pub struct Counter(Arc<std::sync::atomic::AtomicUsize>);

impl Counter {
    /// A periodic task that counts its runs.
    pub fn task(&self) -> impl FnMut(&Timeout) + Send + 'static {
        let count = self.0.clone();
        move |_| {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A periodic task that counts its runs and panics with `message` in
    /// run number `run` (from 1).
    pub fn task_panicking_in_run(
        &self,
        run: usize,
        message: &'static str,
    ) -> impl FnMut(&Timeout) + Send + 'static {
        let count = self.0.clone();
        move |_| {
            if count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == run {
                panic!("{message}");
            }
        }
    }

    pub fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Captures, as text, what `tracing` logs through its `subscriber`.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// A subscriber that writes here; set it as the default of a thread.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
        let writer = self.clone();
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Occurrences of `needle` in what was logged.
    pub fn count(&self, needle: &str) -> usize {
        self.text().matches(needle).count()
    }
}

/// A waker that counts its wake-ups, to tell which task a future woke.
#[derive(Default)]
pub struct CountingWaker(std::sync::atomic::AtomicUsize);

impl CountingWaker {
    pub fn new() -> (Arc<CountingWaker>, std::task::Waker) {
        let counter = Arc::new(CountingWaker::default());
        let waker = futures::task::waker(counter.clone());
        (counter, waker)
    }

    pub fn wakes(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl futures::task::ArcWake for CountingWaker {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Polls `future` once with `waker`.
pub fn poll_with<F: std::future::Future + Unpin>(
    future: &mut F,
    waker: &std::task::Waker,
) -> std::task::Poll<F::Output> {
    let mut cx = std::task::Context::from_waker(waker);
    std::pin::Pin::new(future).poll(&mut cx)
}

/// One poll of the queue's stream, on a test task.
pub fn poll<T: Send + 'static>(
    t: &mut task::Spawn<()>,
    queue: &DelayQueue<T>,
) -> Poll<Option<Expired<T>>> {
    t.enter(|cx, _| queue.poll_expired(cx))
}

/// Every item ready now, in the order the stream gives them.
pub fn drain<T: Send + 'static>(queue: &DelayQueue<T>) -> Vec<Expired<T>> {
    let mut t = task::spawn(());
    let mut out = Vec::new();
    while let Poll::Ready(Some(e)) = poll(&mut t, queue) {
        out.push(e);
    }
    out
}

/// The totals add up (DESIGN.md invariant 5): every timeout scheduled has fired, been cancelled
/// or stopped, or is pending, and `pending_timeouts()` agrees.
pub fn assert_stats_add_up(timer: &HashedWheelTimer) {
    let s = timer.stats();
    assert_eq!(
        s.scheduled,
        s.fired + s.cancelled + s.stopped + s.pending as u64,
        "{s:?}"
    );
    assert_eq!(s.pending, timer.pending_timeouts());
}

/// Takes what a queue's stream yields now, without waiting.
pub fn drain_now<T>(queue: &DelayQueue<T>) -> Vec<T> {
    use futures::{FutureExt, StreamExt};
    let mut stream = queue;
    std::iter::from_fn(|| stream.next().now_or_never().flatten())
        .map(|e| e.into_inner())
        .collect()
}
