//! Executors against what Java's `ScheduledThreadPoolExecutor` and Netty's `HashedWheelTimer`
//! (with its task `Executor`) users expect: periodic runs on a tokio multi-thread runtime never
//! overlap, fixed delay counts from a run's end, a cancel from another thread during a run stops
//! every later one; jobs queued on a runtime that is not running or is dropped, at `stop()`; an
//! executor whose own destructor panics; a periodic task stopped during its run on an executor.
//! Time is the manual clock's: the runtime's threads only run the jobs.

mod common;

use common::{assert_stats_add_up, Logs, QueueExecutor};
use hashed_wheel_timer::{Executor, HashedWheelTimer, Job, Timeout, TokioExecutor};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

const MS: Duration = Duration::from_millis(1);

fn multi_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap()
}

/// `executor`, counting the jobs handed to it and the jobs that returned.
#[derive(Clone, Default)]
struct Tally(Arc<(AtomicUsize, AtomicUsize)>);

impl Tally {
    fn around(&self, executor: impl Executor) -> impl Executor {
        let tally = self.clone();
        move |job: Job| {
            let done = tally.clone();
            tally.0 .0.fetch_add(1, SeqCst);
            executor.execute(Box::new(move || {
                job();
                done.0 .1.fetch_add(1, SeqCst);
            }))
        }
    }

    /// Waits until every job handed off has returned.
    fn settle(&self) {
        wait_until("the jobs' end", || {
            self.0 .0.load(SeqCst) == self.0 .1.load(SeqCst)
        });
    }
}

/// Advances `timer` 300 ticks of 1 ms, letting its jobs catch up every 5: a run is late by up to
/// 5 periods, while the ticks go on.
fn advance_in_bursts(timer: &HashedWheelTimer, tally: &Tally) {
    for i in 1..=300 {
        timer.advance(MS);
        if i % 5 == 0 {
            tally.settle();
        }
    }
}

fn manual_on(executor: impl Executor) -> HashedWheelTimer {
    HashedWheelTimer::builder()
        .manual_clock()
        .executor(executor)
        .build()
        .unwrap()
}

/// Waits (up to a minute: a bound, not a timing) until `cond` holds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "waiting for {what}"
        );
        std::thread::yield_now();
    }
}

/// A periodic task's runs as it saw them: how many started and ended, whether two overlapped,
/// and each run's (due, end) on the timer's clock.
#[derive(Default)]
struct Runs {
    started: AtomicUsize,
    ended: AtomicUsize,
    running: AtomicBool,
    overlaps: AtomicUsize,
    times: Mutex<Vec<(Instant, Instant)>>,
}

impl Runs {
    /// A task that records its runs here, each taking a little while on its thread.
    fn task(self: &Arc<Self>) -> impl FnMut(&Timeout) + Send + 'static {
        let runs = self.clone();
        move |t: &Timeout| {
            runs.started.fetch_add(1, SeqCst);
            if runs.running.swap(true, SeqCst) {
                runs.overlaps.fetch_add(1, SeqCst);
            }
            for _ in 0..20 {
                std::thread::yield_now();
            }
            let end = t.timer().unwrap().now();
            runs.times
                .lock()
                .unwrap()
                .push((t.scheduled_execution_time(), end));
            runs.running.store(false, SeqCst);
            runs.ended.fetch_add(1, SeqCst);
        }
    }

    fn quiet(&self) -> bool {
        !self.running.load(SeqCst) && self.started.load(SeqCst) == self.ended.load(SeqCst)
    }
}

// ScheduledThreadPoolExecutor: "If any execution of this task takes longer than its period, then
// subsequent executions may start late, but will not concurrently execute"; a fixed-rate run is
// due a period after the previous one's due time, none skipped.
#[test]
fn fixed_rate_runs_on_a_multi_thread_runtime_never_overlap_and_none_is_skipped() {
    let rt = multi_thread_runtime();
    let tally = Tally::default();
    let timer = manual_on(tally.around(TokioExecutor::spawn(rt.handle().clone())));
    let runs = Arc::new(Runs::default());
    let p = timer.schedule_at_fixed_rate(runs.task(), MS, MS).unwrap();
    advance_in_bursts(&timer, &tally);
    assert!(p.cancel());
    wait_until("the last run's end", || runs.quiet());
    assert_eq!(runs.overlaps.load(SeqCst), 0);
    let times = runs.times.lock().unwrap();
    assert!(times.len() >= 60, "{} runs", times.len());
    assert!(
        times.windows(2).all(|w| w[1].0 - w[0].0 == MS),
        "each run due a period after the last"
    );
    assert_eq!(timer.pending_timeouts(), 0);
    assert_stats_add_up(&timer);
}

// ScheduledThreadPoolExecutor.scheduleWithFixedDelay: "with the given delay between the
// termination of one execution and the commencement of the next", wherever the run happens.
#[test]
fn fixed_delay_on_a_multi_thread_runtime_counts_from_each_runs_end() {
    let rt = multi_thread_runtime();
    let tally = Tally::default();
    let timer = manual_on(tally.around(TokioExecutor::spawn_blocking(rt.handle().clone())));
    let runs = Arc::new(Runs::default());
    let delay = MS * 3;
    let p = timer
        .schedule_with_fixed_delay(runs.task(), MS, delay)
        .unwrap();
    advance_in_bursts(&timer, &tally);
    assert!(p.cancel());
    wait_until("the last run's end", || runs.quiet());
    assert_eq!(runs.overlaps.load(SeqCst), 0);
    let times = runs.times.lock().unwrap();
    assert!(times.len() >= 30, "{} runs", times.len());
    for w in times.windows(2) {
        assert!(
            w[1].0 >= w[0].1 + delay,
            "due {:?} after an end at {:?}",
            w[1].0,
            w[0].1
        );
    }
}

// Future.cancel(false) from another thread during a run: the run in progress finishes, and no
// later one starts, however long the clock then goes on.
#[test]
fn a_cancel_from_another_thread_during_a_run_on_a_runtime_stops_every_later_run() {
    let rt = multi_thread_runtime();
    let timer = manual_on(TokioExecutor::spawn(rt.handle().clone()));
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let p = timer
        .schedule_at_fixed_rate(
            move |t: &Timeout| {
                if c.fetch_add(1, SeqCst) + 1 == 3 {
                    started_tx.send(()).unwrap();
                    go_rx.lock().unwrap().recv().unwrap();
                    assert!(t.is_cancelled() && !t.is_pending());
                    assert!(!t.cancel() && !t.reset(MS), "cancelled: nothing more to do");
                    assert_eq!(t.remaining(), Duration::ZERO);
                }
            },
            MS,
            MS,
        )
        .unwrap();
    while count.load(SeqCst) < 3 {
        timer.advance(MS); // runs 1 and 2 return before run 3 is due
        wait_until("a run's end", || {
            count.load(SeqCst) >= 3 || p.remaining() > Duration::ZERO
        });
    }
    started.recv().unwrap();
    assert!(
        p.is_pending() && !p.is_expired() && !p.is_cancelled(),
        "{p:?}"
    );
    let canceller = std::thread::spawn({
        let p = p.clone();
        move || p.cancel()
    });
    assert!(
        canceller.join().unwrap(),
        "a run in progress can be cancelled"
    );
    assert!(p.is_cancelled() && !p.is_pending() && !p.is_expired());
    assert_eq!(timer.pending_timeouts(), 0, "counted out at the cancel");
    go.send(()).unwrap();
    for _ in 0..100 {
        timer.advance(MS);
    }
    drop(rt); // waits for nothing queued: there is nothing
    assert_eq!(count.load(SeqCst), 3, "no run after the cancel");
    assert!(
        p.is_cancelled() && !p.is_panicked(),
        "the checks in run 3 held"
    );
    assert_eq!(timer.stats().cancelled, 1);
    assert_stats_add_up(&timer);
}

/// A task that counts its drops.
struct Drops(Arc<AtomicUsize>);

impl Drop for Drops {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A one-shot and a periodic task that count their runs and drops, due at 1 ms.
fn counted_pair(
    timer: &HashedWheelTimer,
    runs: &Arc<AtomicUsize>,
    drops: &Arc<AtomicUsize>,
) -> [Timeout; 2] {
    let (r, d) = (runs.clone(), Drops(drops.clone()));
    let one = timer
        .new_timeout(
            move |_: &Timeout| {
                let _keep = &d;
                r.fetch_add(1, SeqCst);
            },
            MS,
        )
        .unwrap();
    let (r, d) = (runs.clone(), Drops(drops.clone()));
    let every = timer
        .schedule_with_fixed_delay(
            move |_: &Timeout| {
                let _keep = &d;
                r.fetch_add(1, SeqCst);
            },
            MS,
            MS,
        )
        .unwrap();
    [one, every]
}

// shutdownNow(): "returns a list of the tasks that were awaiting execution"; Netty's stop()
// returns what never ran. Jobs queued on a current-thread runtime nobody drives: each is returned
// once, and when the runtime runs its queue at last, none runs.
#[test]
fn jobs_queued_on_a_runtime_not_running_at_stop_are_returned_once_and_never_run() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let timer = manual_on(TokioExecutor::spawn(rt.handle().clone()));
    let (runs, drops) = (Arc::default(), Arc::default());
    let pair = counted_pair(&timer, &runs, &drops);
    timer.advance(MS * 5);
    assert!(pair.iter().all(|t| !t.is_cancelled() && !t.is_stopped()));
    let mut stopped = timer.stop().unwrap();
    stopped.sort_by_key(|t| t.is_periodic());
    assert_eq!(stopped, pair, "both handed off, neither started");
    assert!(timer.stop().unwrap().is_empty(), "returned once");
    rt.block_on(async {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    });
    assert_eq!(runs.load(SeqCst), 0, "taken back: the jobs run nothing");
    assert!(pair.iter().all(Timeout::is_stopped));
    for t in &pair {
        t.take_task().expect("its task, in place").run(t);
    }
    assert_eq!(runs.load(SeqCst), 2, "each runs once, by hand");
    drop(rt);
    drop((pair, stopped));
    assert_eq!(drops.load(SeqCst), 2, "every task dropped once");
    assert_eq!(timer.pending_timeouts(), 0);
    assert_stats_add_up(&timer);
}

// A runtime dropped with jobs in its queue drops them: each timeout ends stopped, counted once,
// its task kept for take_task and dropped with the last handle; the timer goes on.
#[test]
fn jobs_queued_on_a_runtime_dropped_end_stopped_and_their_tasks_are_dropped() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let timer = manual_on(TokioExecutor::spawn(rt.handle().clone()));
    let (runs, drops) = (Arc::default(), Arc::default());
    let pair = counted_pair(&timer, &runs, &drops);
    timer.advance(MS * 5);
    drop(rt);
    assert!(
        pair.iter().all(|t| t.is_stopped() && !t.is_pending()),
        "{pair:?}"
    );
    assert_eq!(timer.pending_timeouts(), 0);
    assert_stats_add_up(&timer);
    assert_eq!(
        (runs.load(SeqCst), drops.load(SeqCst)),
        (0, 0),
        "kept for take_task"
    );
    drop(pair);
    assert_eq!(drops.load(SeqCst), 2, "dropped with the last handle");
    assert!(
        timer.stop().unwrap().is_empty(),
        "already ended: not returned again"
    );
}

/// An executor whose destructor panics: user code, as a task's destructor is.
struct PanicsOnDrop(QueueExecutor);

impl Executor for PanicsOnDrop {
    fn execute(&self, job: Job) {
        self.0.execute(job)
    }
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("the executor panicked in Drop");
    }
}

/// True if `f` unwound.
fn unwinds(f: impl FnOnce()) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err()
}

// Invariant 7 and "a panic in user Drop reaches no caller": the executor is dropped with the
// timer's last reference, which a `Timeout` handle, a job, the worker or the builder may hold.
// Each drop is caught and logged, as a task's is.
#[test]
fn an_executor_whose_drop_panics_is_caught_wherever_the_timer_lets_it_go() {
    let logs = Logs::default();
    tracing::subscriber::with_default(logs.subscriber(), || {
        let builder = HashedWheelTimer::builder().executor(PanicsOnDrop(QueueExecutor::default()));
        assert!(!unwinds(|| drop(builder)), "a builder dropped unbuilt");
        let refused = HashedWheelTimer::builder()
            .executor(PanicsOnDrop(QueueExecutor::default()))
            .ticks_per_wheel(0);
        assert!(
            !unwinds(|| assert!(refused.build().is_err())),
            "a build that fails"
        );
        // The last reference in a `Timeout` handle.
        let queue = QueueExecutor::default();
        let timer = manual_on(PanicsOnDrop(queue.clone()));
        let t = timer.new_timeout(|_| {}, MS).unwrap();
        assert!(!unwinds(|| drop(timer)));
        assert!(
            !unwinds(|| drop(t)),
            "the timer's last reference, in a handle"
        );
        // The last reference in a job, run after the timer is gone.
        let timer = manual_on(PanicsOnDrop(queue.clone()));
        timer.new_timeout(|_| {}, MS).unwrap();
        timer.advance(MS);
        drop(timer);
        let job = queue.take().unwrap();
        assert!(!unwinds(job), "the timer's last reference, in a job");
        // The real clock's timer, dropped after its worker handed a job off.
        let timer = HashedWheelTimer::builder()
            .executor(PanicsOnDrop(queue.clone()))
            .build()
            .unwrap();
        timer.new_timeout(|_| {}, MS).unwrap();
        wait_until("the job", || queue.len() == 1);
        queue.run_all();
        assert!(!unwinds(|| drop(timer)), "the real clock's timer");
    });
    assert_eq!(
        logs.count("the executor panicked in Drop"),
        5,
        "{}",
        logs.text()
    );
}

// stop() docs: a periodic task whose run is in progress "ends is_stopped"; on the thread that
// advances the clock its task is kept in place for take_task, as a task returned by `stop()` or
// one whose job an executor dropped is. On an executor, the same.
#[test]
fn a_periodic_task_stopped_during_its_run_on_an_executor_keeps_its_task() {
    let queue = QueueExecutor::default();
    let timer = manual_on(queue.clone());
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let p = timer
        .schedule_at_fixed_rate(
            move |_: &Timeout| {
                if c.fetch_add(1, SeqCst) == 0 {
                    started_tx.send(()).unwrap();
                    go_rx.lock().unwrap().recv().unwrap();
                }
            },
            MS,
            MS,
        )
        .unwrap();
    timer.advance(MS);
    let run = std::thread::spawn(queue.take().expect("the first run's job"));
    started.recv().unwrap();
    assert!(timer.stop().unwrap().is_empty(), "its run is in progress");
    assert!(p.is_stopped() && !p.is_pending());
    go.send(()).unwrap();
    run.join().unwrap();
    assert!(p.is_stopped());
    let task = p
        .take_task()
        .expect("the task is kept, as when the run is not on an executor");
    task.run(&p);
    assert_eq!(count.load(SeqCst), 2);
    assert_eq!((timer.pending_timeouts(), timer.stats().stopped), (0, 1));
    assert_stats_add_up(&timer);
}

/// Runs `f` on a thread of its own; fails if it has not returned within a minute (a hang).
fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    let got = rx.recv_timeout(Duration::from_secs(60));
    got.unwrap_or_else(|_| panic!("hung: {what}"))
}

// advance() docs: "Called from a task that this advance is running, it stands for a task that
// takes `by` to run". An executor may wait in `execute` until its job returns (rayon's `install`,
// a thread per job joined): the job runs on another thread, but the `advance` that handed it off
// is running it all the same, and cannot go on until it returns. Such a job's `advance` and
// `advance_to_next` move the clock at once, as in a task run inline, and the outer `advance`
// fires what fell due; they used to wait for the outer one, which waited for them.
#[test]
fn advance_from_a_job_its_executor_waits_for_does_not_hang() {
    let (clock_moved, fired, to_next) = within("advance in a job that execute waits for", || {
        let timer = manual_on(|job: Job| std::thread::spawn(job).join().unwrap());
        let start = timer.now();
        let slow = timer
            .new_timeout(|t: &Timeout| t.timer().unwrap().advance(MS * 30), MS)
            .unwrap();
        let moved = Arc::new(Mutex::new(None));
        let m = moved.clone();
        let next = timer
            .new_timeout(
                move |t: &Timeout| *m.lock().unwrap() = Some(t.timer().unwrap().advance_to_next()),
                MS * 5,
            )
            .unwrap();
        let probe = Arc::new(Mutex::new(None));
        let at = probe.clone();
        let late = timer
            .new_timeout(
                move |t: &Timeout| *at.lock().unwrap() = Some(t.timer().unwrap().now()),
                MS * 60,
            )
            .unwrap();
        timer.advance(MS);
        assert!(slow.is_expired() && next.is_expired() && late.is_expired());
        let fired = probe.lock().unwrap().map(|at| at - start);
        let to_next = moved.lock().unwrap().take();
        (timer.now() - start, fired, to_next)
    });
    assert_eq!(
        to_next,
        Some(Some(MS * 29)),
        "the second job ran at 31 ms, and moved the clock to the deadline at 60 ms"
    );
    assert_eq!(
        clock_moved,
        MS * 60,
        "1 ms, 30 ms in one job, 29 in the other"
    );
    assert_eq!(
        fired,
        Some(MS * 60),
        "the outer advance went on to what fell due meanwhile"
    );
}

// A `tokio_clock()` timer whose jobs run on its own current-thread runtime, dropped with the jobs
// it handed off maybe still queued (and its driver task with them), paused or not. The README: the
// timer "shuts down with it: ... pending callbacks are dropped unrun". Each timeout ran or ended
// stopped, counted once; each task is dropped once; `stop()` has nothing left to return.
#[test]
fn a_runtime_dropped_with_its_timers_driver_and_jobs_queued_loses_nothing() {
    for paused in [false, true] {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(paused)
            .build()
            .unwrap();
        let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (timer, pair) = rt.block_on(async {
            let here = TokioExecutor::spawn(tokio::runtime::Handle::current());
            let timer = HashedWheelTimer::builder()
                .tokio_clock()
                .executor(here)
                .build()
                .unwrap();
            let pair = counted_pair(&timer, &runs, &drops);
            timer.sleep(MS).await; // woken in the turn that hands both off
            (timer, pair)
        });
        drop(rt);
        let ended = |t: &Timeout| (t.is_stopped() || t.is_expired()) && !t.is_panicked();
        assert!(
            pair.iter().all(ended),
            "each ran or ended stopped: {pair:?}"
        );
        assert!(runs.load(SeqCst) <= 2 && !pair[0].is_pending() && !pair[1].is_pending());
        assert_eq!(timer.pending_timeouts(), 0);
        assert_stats_add_up(&timer);
        assert!(timer.stop().unwrap().is_empty());
        drop(pair);
        assert_eq!(
            drops.load(SeqCst),
            2,
            "each task dropped once; paused: {paused}"
        );
    }
}

// The warning for a job an executor drops unrun says its timeout "is now stopped": true for a task
// that would have run, but a periodic task cancelled while its run waited on the executor lost
// nothing and ends cancelled. No warning for that one.
#[test]
fn an_executor_dropping_a_cancelled_periodic_run_warns_of_nothing() {
    let logs = Logs::default();
    let queue = QueueExecutor::default();
    let timer = manual_on(queue.clone());
    let cancelled = timer.schedule_at_fixed_rate(|_| {}, MS, MS).unwrap();
    let dropped = timer.schedule_at_fixed_rate(|_| {}, MS, MS).unwrap();
    timer.advance(MS);
    assert_eq!(queue.len(), 2);
    assert!(cancelled.cancel());
    tracing::subscriber::with_default(logs.subscriber(), || {
        drop(queue.take()); // the cancelled task's run
        drop(queue.take());
    });
    assert!(cancelled.is_cancelled() && dropped.is_stopped());
    assert_eq!(logs.count("without running it"), 1, "{}", logs.text());
    assert_eq!(timer.stats().cancelled, 1);
    assert_stats_add_up(&timer);
}

/// A waker whose last drop, on a thread that sets `block_on`, waits for `until` and then 100 ms.
struct DropBlocks {
    in_drop: mpsc::Sender<()>,
    until: Mutex<mpsc::Receiver<()>>,
}

impl std::task::Wake for DropBlocks {
    fn wake(self: Arc<Self>) {}
}

impl Drop for DropBlocks {
    fn drop(&mut self) {
        let _ = self.in_drop.send(());
        let _ = self
            .until
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(100));
    }
}

// `advance` from a job on an executor that does not wait for it, while another thread's
// `DelayQueue` poll holds the driver for a brief turn (here made long: the turn drops a dropped
// `Sleep`'s waker, whose drop waits). The job's `advance` is not nested in any advance: it waits
// for that turn and fires what falls due. It used to take any held driver lock for an advance
// running its task, and only moved the clock: the timeout due on the way did not fire.
#[test]
fn advance_from_a_job_while_a_queue_poll_turns_fires_what_falls_due() {
    let fired_by_the_job = within("advance in a job against a queue poll's turn", || {
        let timer = manual_on(|job: Job| drop(std::thread::spawn(job)));
        let due = timer.new_timeout(|_| {}, MS * 3).unwrap();
        let (in_drop_tx, in_drop) = mpsc::channel();
        let (advancing, advancing_rx) = mpsc::channel();
        let (result_tx, result) = mpsc::channel();
        let in_drop = Mutex::new(in_drop);
        let job = move |t: &Timeout| {
            in_drop.lock().unwrap().recv().unwrap(); // the queue's turn holds the driver
            advancing.send(()).unwrap();
            t.timer().unwrap().advance(MS * 5);
            result_tx.send(due.is_expired()).unwrap();
        };
        timer.new_timeout(job, MS).unwrap();
        timer.advance(MS); // hands the job to its thread, which waits for the turn below
        let waker = std::task::Waker::from(Arc::new(DropBlocks {
            in_drop: in_drop_tx,
            until: Mutex::new(advancing_rx),
        }));
        let mut sleep = Box::pin(timer.sleep(Duration::from_secs(3600)));
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(std::future::Future::poll(sleep.as_mut(), &mut cx).is_pending());
        drop((sleep, waker)); // its cancel waits in this thread's batch, with the entry's waker
        let queue = timer.delay_queue::<()>();
        std::thread::spawn(move || {
            let mut cx = std::task::Context::from_waker(futures::task::noop_waker_ref());
            assert!(queue.poll_expired(&mut cx).is_pending()); // turns: takes the batch
        });
        result.recv().unwrap()
    });
    assert!(fired_by_the_job, "the job's advance only moved the clock");
}
