//! Timers while a tokio worker is stuck: on a 2-worker runtime, one worker
//! blocked for 2 s (a task that never yields), 100 sleeps of 10 ms spawned
//! on the runtime, through tokio's timer and through this crate's. Then
//! every worker blocked, and 100 callbacks of this crate's timer.
//!
//!     cargo run --release --example stuck_worker
//!     RUSTFLAGS="--cfg tokio_unstable" cargo run --release --example stuck_worker
//!
//! The second adds tokio's alternative timer (`enable_alt_timer()`), whose
//! wheels are per worker. A real-clock timer of this crate drives its wheel
//! on its own thread, so its wake-ups reach whichever worker is free, and
//! its callbacks need no worker at all. A `tokio_clock()` timer's driver is
//! a task on the runtime: it stalls while all workers are stuck, and while
//! the one that last woke it is (it waits in that worker's LIFO slot, which
//! other workers do not steal).

use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use hashed_wheel_timer::HashedWheelTimer;
use tokio::runtime::{Builder, Runtime};

const SLEEPS: usize = 100;
const SLEEP: Duration = Duration::from_millis(10);
const BLOCKED_FOR: Duration = Duration::from_secs(2);

#[derive(Clone, Copy)]
enum Timer {
    Tokio,
    #[cfg(tokio_unstable)]
    TokioAlt,
    Wheel,
    WheelTokioClock,
}

fn runtime(timer: Timer) -> Runtime {
    let mut builder = Builder::new_multi_thread();
    builder.worker_threads(2).enable_all();
    #[cfg(tokio_unstable)]
    if matches!(timer, Timer::TokioAlt) {
        builder.enable_alt_timer();
    }
    let _ = timer;
    builder.build().expect("a runtime")
}

/// Blocks `workers` workers of `rt` for `BLOCKED_FOR`; returns once they are.
fn block_workers(rt: &Runtime, workers: usize) {
    let started = Arc::new(Barrier::new(workers + 1));
    for _ in 0..workers {
        let started = started.clone();
        rt.spawn(async move {
            started.wait();
            std::thread::sleep(BLOCKED_FOR);
        });
    }
    started.wait();
}

/// How long after it was made each of `SLEEPS` sleeps woke, sorted. With
/// `from_blocker`, the task that then blocks its worker spawns them and
/// yields until it has polled one, so some register on that worker.
fn sleeps_with_one_worker_blocked(timer: Timer, from_blocker: bool) -> Vec<Duration> {
    let rt = runtime(timer);
    let wheel = match timer {
        Timer::WheelTokioClock => {
            let _in_runtime = rt.enter();
            HashedWheelTimer::builder()
                .tokio_clock()
                .build()
                .expect("a timer")
        }
        _ => HashedWheelTimer::new(),
    };
    let spawn_sleep = move |wheel: HashedWheelTimer| {
        tokio::spawn(async move {
            let made = Instant::now();
            match timer {
                Timer::Wheel | Timer::WheelTokioClock => wheel.sleep(SLEEP).await,
                _ => tokio::time::sleep(SLEEP).await,
            }
            made.elapsed()
        })
    };
    let sleeps: Vec<_> = if from_blocker {
        let (handed, handles) = mpsc::channel();
        rt.spawn(async move {
            let sleeps: Vec<_> = (0..SLEEPS).map(|_| spawn_sleep(wheel.clone())).collect();
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
            handed.send(sleeps).expect("the main thread waits");
            std::thread::sleep(BLOCKED_FOR);
        });
        handles
            .recv()
            .expect("the blocking task hands its sleeps over")
    } else {
        block_workers(&rt, 1);
        let _in_runtime = rt.enter();
        (0..SLEEPS).map(|_| spawn_sleep(wheel.clone())).collect()
    };
    let mut woke: Vec<_> = sleeps
        .into_iter()
        .map(|sleep| rt.block_on(sleep).expect("a sleep task"))
        .collect();
    rt.shutdown_background();
    woke.sort();
    woke
}

/// How long after it was made each of `SLEEPS` callbacks ran, sorted.
fn callbacks_with_every_worker_blocked() -> Vec<Duration> {
    let rt = runtime(Timer::Wheel);
    let timer = HashedWheelTimer::new();
    block_workers(&rt, 2);
    let (fired, fires) = mpsc::channel();
    let made = Instant::now();
    for _ in 0..SLEEPS {
        let fired = fired.clone();
        timer
            .new_timeout(
                move |_| fired.send(made.elapsed()).unwrap_or_default(),
                SLEEP,
            )
            .expect("a timeout");
    }
    let mut ran: Vec<_> = fires.iter().take(SLEEPS).collect();
    rt.shutdown_background();
    ran.sort();
    ran
}

fn row(name: &str, times: &[Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let early = times.iter().filter(|t| **t < SLEEP).count();
    println!(
        "| {name} | {:.1} | {:.1} | {:.1} | {early} |",
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1]),
    );
}

fn main() {
    let cases = [
        (false, "from outside"),
        (true, "by the task that then blocks"),
    ];
    for (from_blocker, spawned) in cases {
        println!("{SLEEPS} sleeps of {SLEEP:?} spawned {spawned}, one of 2 workers blocked for {BLOCKED_FOR:?}:");
        println!("| timer | first woke, ms | median, ms | last, ms | early |");
        println!("|---|---:|---:|---:|---:|");
        let sleeps = |timer| sleeps_with_one_worker_blocked(timer, from_blocker);
        row("tokio::time::sleep", &sleeps(Timer::Tokio));
        #[cfg(tokio_unstable)]
        row("tokio::time::sleep, alt timer", &sleeps(Timer::TokioAlt));
        row("hashed_wheel_timer sleep", &sleeps(Timer::Wheel));
        row(
            "hashed_wheel_timer sleep, tokio_clock",
            &sleeps(Timer::WheelTokioClock),
        );
        println!();
    }
    println!("{SLEEPS} callbacks of {SLEEP:?}, both workers blocked for {BLOCKED_FOR:?}:");
    println!("| timer | first ran, ms | median, ms | last, ms | early |");
    println!("|---|---:|---:|---:|---:|");
    row(
        "hashed_wheel_timer new_timeout",
        &callbacks_with_every_worker_blocked(),
    );
}
