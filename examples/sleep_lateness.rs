//! 100,000 tasks each sleep 50 ms, on the wheel and on `tokio::time`, in
//! the same run: total time, and how late each sleep completed after its
//! deadline (p50, p99, max).
//!
//! `cargo run --release --example sleep_lateness`

use std::future::Future;
use std::time::{Duration, Instant};

const TASKS: usize = 100_000;
const SLEEP: Duration = Duration::from_millis(50);

/// Spawns `TASKS` tasks that each run `sleep` and report how late it
/// completed. Returns the total time and the sorted lateness.
async fn run<S, F>(sleep: S) -> (Duration, Vec<Duration>)
where
    S: Fn() -> (Instant, F),
    F: Future<Output = ()> + Send + 'static,
{
    let start = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (deadline, sleeping) = sleep();
            tokio::spawn(async move {
                sleeping.await;
                Instant::now().saturating_duration_since(deadline)
            })
        })
        .collect();
    let mut late = Vec::with_capacity(TASKS);
    for task in tasks {
        late.push(task.await.expect("task"));
    }
    let total = start.elapsed();
    late.sort();
    (total, late)
}

fn report(name: &str, (total, late): (Duration, Vec<Duration>)) {
    let pct = |p: usize| late[(late.len() * p / 100).min(late.len() - 1)];
    println!(
        "{name:<20} total {:>7.1} ms   lateness p50 {:>6.3} ms  p99 {:>6.3} ms  max {:>6.3} ms",
        total.as_secs_f64() * 1e3,
        pct(50).as_secs_f64() * 1e3,
        pct(99).as_secs_f64() * 1e3,
        late[late.len() - 1].as_secs_f64() * 1e3,
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let timer = hashed_wheel_timer::default_timer();
    println!("{TASKS} tasks each sleeping {SLEEP:?} on a multi-thread runtime");
    for round in 1..=2 {
        println!("round {round}");
        let wheel = rt.block_on(run(|| {
            let sleep = timer.sleep(SLEEP);
            (sleep.deadline(), sleep)
        }));
        report("hashed_wheel_timer", wheel);
        let tokio = rt.block_on(run(|| {
            let sleep = tokio::time::sleep(SLEEP);
            (sleep.deadline().into_std(), sleep)
        }));
        report("tokio::time", tokio);
    }
}
