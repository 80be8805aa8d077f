//! What a timer costs while it waits: memory per pending timeout, and the
//! worker's CPU and wake-ups when idle and with 1M timeouts pending 60 s
//! away (Linux: reads /proc).
//!
//!     cargo run --release --example footprint

#[path = "support/proc.rs"]
mod proc;

use hashed_wheel_timer::HashedWheelTimer;
use std::thread;
use std::time::{Duration, Instant};

const PENDING: usize = 1_000_000;
const WINDOW: Duration = Duration::from_secs(5);
const NAME: &str = "footprint-wheel";

fn main() {
    let timer = HashedWheelTimer::builder()
        .thread_name(NAME)
        .build()
        .unwrap();

    // Start the worker, then let it go idle.
    let t = timer.new_timeout(|_| {}, Duration::ZERO).unwrap();
    while !t.is_expired() {
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(100));
    let idle = measure_worker(WINDOW);
    println!(
        "idle, {:?}:                        worker CPU {:.4} % of a core, {} wake-ups",
        WINDOW,
        idle.cpu_percent(),
        idle.wakeups
    );

    // 1M pending, 60 s away (spread over 60.0-60.5 s), handles dropped: what
    // the timer itself holds per timeout.
    let rss_before = proc::rss_bytes();
    let start = Instant::now();
    for i in 0..PENDING {
        let delay = Duration::from_secs(60) + Duration::from_micros(i as u64 % 500_000);
        timer.new_timeout(|_| {}, delay).unwrap();
    }
    let schedule_time = start.elapsed();
    thread::sleep(Duration::from_millis(500)); // let the worker file them
    let rss_after = proc::rss_bytes();
    println!(
        "scheduling {PENDING} pending:           {:.1} ns per schedule (one thread)",
        schedule_time.as_nanos() as f64 / PENDING as f64
    );
    println!(
        "memory with {PENDING} pending:          {:.1} bytes per pending timeout (RSS {} -> {} MiB)",
        (rss_after - rss_before) as f64 / PENDING as f64,
        rss_before >> 20,
        rss_after >> 20
    );
    let busy = measure_worker(WINDOW);
    println!(
        "{PENDING} pending 60 s away, {:?}:   worker CPU {:.4} % of a core, {} wake-ups (tick {:?})",
        WINDOW,
        busy.cpu_percent(),
        busy.wakeups,
        timer.tick_duration()
    );
    assert_eq!(timer.pending_timeouts(), PENDING);
    let start = Instant::now();
    let stopped = timer.stop().unwrap();
    println!(
        "stop() returned {} timeouts in {:.1} ms",
        stopped.len(),
        start.elapsed().as_secs_f64() * 1e3
    );
}

struct WorkerUse {
    cpu: Duration,
    wakeups: u64,
    window: Duration,
}

impl WorkerUse {
    fn cpu_percent(&self) -> f64 {
        self.cpu.as_secs_f64() / self.window.as_secs_f64() * 100.0
    }
}

fn measure_worker(window: Duration) -> WorkerUse {
    let tid = proc::thread_id(NAME).expect("the worker thread is running");
    let stats = || {
        let cpu = proc::thread_cpu(&tid).expect("schedstat");
        (cpu, proc::thread_wakeups(&tid).expect("status"))
    };
    let (cpu0, wake0) = stats();
    let start = Instant::now();
    thread::sleep(window);
    let (cpu1, wake1) = stats();
    WorkerUse {
        cpu: cpu1 - cpu0,
        wakeups: wake1 - wake0,
        window: start.elapsed(),
    }
}
