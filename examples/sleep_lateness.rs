//! 100,000 tasks each sleep 50 ms, on the wheel and on `tokio::time`, in
//! the same run: the total time, and how late each sleep was after its
//! deadline (p50, p99), measured twice:
//!
//! - *woken*: when the timer called the task's waker;
//! - *resumed*: when the task ran again, which adds the runtime's queueing
//!   of 100,000 tasks woken together.
//!
//! A sleep whose deadline passed before its first poll (the runtime was
//! still busy spawning) counts as woken at that poll.
//!
//! `cargo run --release --example sleep_lateness`

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures::task::ArcWake;

const TASKS: usize = 100_000;
const SLEEP: Duration = Duration::from_millis(50);
const ROUNDS: usize = 5;

/// Notes when a future's waker is first woken, then wakes the task.
#[derive(Default)]
struct WakeRecorder {
    woken: OnceLock<Instant>,
    task: Mutex<Option<Waker>>,
}

impl ArcWake for WakeRecorder {
    fn wake_by_ref(this: &Arc<Self>) {
        let _ = this.woken.set(Instant::now());
        if let Some(task) = this.task.lock().expect("lock").as_ref() {
            task.wake_by_ref();
        }
    }
}

/// Polls `inner` with a waker that records when it is woken.
struct Recorded<F> {
    inner: Pin<Box<F>>,
    recorder: Arc<WakeRecorder>,
}

impl<F: Future> Future for Recorded<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        *self.recorder.task.lock().expect("lock") = Some(cx.waker().clone());
        let waker = futures::task::waker(self.recorder.clone());
        let output = self.inner.as_mut().poll(&mut Context::from_waker(&waker));
        if output.is_ready() {
            let _ = self.recorder.woken.set(Instant::now()); // ready at a poll
        }
        output
    }
}

/// One run: the total time and, sorted, how late each sleep was woken and
/// resumed.
struct Run {
    total: Duration,
    woken: Vec<Duration>,
    resumed: Vec<Duration>,
}

/// Spawns `TASKS` tasks that each await `sleep()` (which returns the
/// deadline and the future), recording how late each was.
async fn run<S, F>(sleep: S) -> Run
where
    S: Fn() -> (Instant, F),
    F: Future<Output = ()> + Send + 'static,
{
    let start = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (deadline, sleeping) = sleep();
            tokio::spawn(async move {
                let recorder = Arc::new(WakeRecorder::default());
                let inner = Box::pin(sleeping);
                Recorded {
                    inner,
                    recorder: recorder.clone(),
                }
                .await;
                let resumed = Instant::now();
                let woken = *recorder.woken.get().expect("set when ready");
                (woken - deadline, resumed - deadline)
            })
        })
        .collect();
    let (mut woken, mut resumed) = (Vec::with_capacity(TASKS), Vec::with_capacity(TASKS));
    for task in tasks {
        let (w, r) = task.await.expect("task");
        woken.push(w);
        resumed.push(r);
    }
    let total = start.elapsed();
    woken.sort();
    resumed.sort();
    Run {
        total,
        woken,
        resumed,
    }
}

/// Total; woken p50, p99; resumed p50, p99; in milliseconds.
type Row = [f64; 5];

fn row(run: Run) -> Row {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let pct = |v: &[Duration], p: usize| ms(v[(v.len() * p / 100).min(v.len() - 1)]);
    [
        ms(run.total),
        pct(&run.woken, 50),
        pct(&run.woken, 99),
        pct(&run.resumed, 50),
        pct(&run.resumed, 99),
    ]
}

fn print(name: &str, [total, w50, w99, r50, r99]: Row) {
    println!(
        "{name:<28} total {total:>6.1} ms | woken p50 {w50:>6.2} p99 {w99:>6.2} ms \
         | resumed p50 {r50:>6.2} p99 {r99:>6.2} ms"
    );
}

/// The median of each column over the rounds.
fn median(rows: &[Row]) -> Row {
    let mut out = [0.0; 5];
    for (i, cell) in out.iter_mut().enumerate() {
        let mut column: Vec<f64> = rows.iter().map(|r| r[i]).collect();
        column.sort_by(f64::total_cmp);
        *cell = column[column.len() / 2];
    }
    out
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let timer = hashed_wheel_timer::default_timer();
    let wheel = || {
        row(rt.block_on(run(|| {
            let sleep = timer.sleep(SLEEP);
            (sleep.deadline(), sleep)
        })))
    };
    let clocked = rt.block_on(async {
        hashed_wheel_timer::HashedWheelTimer::builder()
            .tokio_clock()
            .build()
            .expect("timer")
    });
    let tokio_clock = || {
        row(rt.block_on(run(|| {
            let sleep = clocked.sleep(SLEEP);
            (sleep.deadline(), sleep)
        })))
    };
    let tokio = || {
        row(rt.block_on(run(|| {
            let sleep = tokio::time::sleep(SLEEP);
            (sleep.deadline().into_std(), sleep)
        })))
    };
    println!("{TASKS} tasks each sleeping {SLEEP:?} on a multi-thread runtime, {ROUNDS} rounds");
    let (mut wheel_rows, mut clock_rows, mut tokio_rows) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        // Rotate which goes first, so none always runs warm.
        let (mut w, mut c, mut t) = (None, None, None);
        for turn in 0..3 {
            match (round + turn) % 3 {
                0 => w = Some(wheel()),
                1 => c = Some(tokio_clock()),
                _ => t = Some(tokio()),
            }
        }
        let (w, c, t) = (w.expect("ran"), c.expect("ran"), t.expect("ran"));
        print(&format!("round {round} hashed_wheel_timer"), w);
        print(&format!("round {round} ... tokio_clock"), c);
        print(&format!("round {round} tokio::time"), t);
        wheel_rows.push(w);
        clock_rows.push(c);
        tokio_rows.push(t);
    }
    print("median hashed_wheel_timer", median(&wheel_rows));
    print("median ... tokio_clock", median(&clock_rows));
    print("median tokio::time", median(&tokio_rows));
}
