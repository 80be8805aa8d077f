//! How late sleeps complete in a steady stream: 200 tasks (`--tasks`) on a 2-worker
//! runtime, each in a loop sleeping 1-10 ms (a service time, a backoff),
//! for 2 s a round; on `tokio::time`, on this crate's timer (real clock),
//! and on a `tokio_clock()` timer. Lateness is from the deadline to the
//! task running again, as the task sees it: mean, p50 and p99, and sleeps
//! completed (more, when each is less late). Rounds interleave the three.
//!
//! `cargo run --release --example sleep_steady [-- --rounds N --tasks N]`

use std::time::{Duration, Instant};

use hashed_wheel_timer::HashedWheelTimer;

const ROUND: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Tokio,
    Real,
    TokioClock,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Tokio => "tokio::time",
            Way::Real => "hashed_wheel_timer",
            Way::TokioClock => "hashed_wheel_timer, tokio_clock",
        }
    }
}

/// Mean, p50, p99 lateness in µs, and sleeps completed.
type Row = [f64; 4];

fn round(way: Way, tasks: u64) -> Row {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let timer = {
        let _in_runtime = rt.enter();
        let builder = HashedWheelTimer::builder();
        let builder = if way == Way::TokioClock {
            builder.tokio_clock()
        } else {
            builder
        };
        builder.build().expect("timer")
    };
    let end = Instant::now() + ROUND;
    let tasks: Vec<_> = (1..=tasks)
        .map(|seed| {
            let timer = timer.clone();
            rt.spawn(async move {
                let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let mut late = Vec::new();
                while Instant::now() < end {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let d = Duration::from_micros(1_000 + x % 9_000);
                    let deadline = Instant::now() + d;
                    match way {
                        Way::Tokio => tokio::time::sleep_until(deadline.into()).await,
                        _ => timer.sleep_until(deadline).await,
                    }
                    late.push(deadline.elapsed());
                }
                late
            })
        })
        .collect();
    let mut late: Vec<Duration> = rt.block_on(async {
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("task"));
        }
        all
    });
    late.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = late.iter().map(|d| us(*d)).sum::<f64>() / late.len() as f64;
    let pct = |p: usize| us(late[late.len() * p / 100]);
    [mean, pct(50), pct(99), late.len() as f64]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut rounds, mut tasks) = (3, 200u64);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next().and_then(|n| n.parse().ok())) {
            ("--rounds", Some(n)) => rounds = n,
            ("--tasks", Some(n)) => tasks = n as u64,
            _ => panic!("flags: --rounds N (3) --tasks N (200)"),
        }
    }
    let ways = [Way::Tokio, Way::Real, Way::TokioClock];
    let mut rows: Vec<Vec<Row>> = vec![Vec::new(); ways.len()];
    for r in 0..rounds {
        for i in 0..ways.len() {
            let i = (i + r) % ways.len(); // each way first in turn
            rows[i].push(round(ways[i], tasks));
        }
    }
    println!("{tasks} tasks each sleeping 1-10 ms in a loop, {rounds} rounds of {ROUND:?}; medians over the rounds");
    println!("| timer | mean µs late | p50 | p99 | sleeps completed |");
    println!("|---|---:|---:|---:|---:|");
    for (way, rows) in ways.iter().zip(&rows) {
        let median = |i: usize| {
            let mut column: Vec<f64> = rows.iter().map(|r| r[i]).collect();
            column.sort_by(f64::total_cmp);
            column[column.len() / 2]
        };
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} |",
            way.name(),
            median(0),
            median(1),
            median(2),
            median(3)
        );
    }
}
