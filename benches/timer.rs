//! Core costs of the wheel, with criterion.
//!
//!     cargo bench --bench timer
//!
//! Worker CPU and memory per pending timeout are measured by
//! `cargo run --release --example footprint`, since they are not per-call
//! costs.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hashed_wheel_timer::HashedWheelTimer;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

const FAR: Duration = Duration::from_secs(60);

fn schedule_cancel(c: &mut Criterion) {
    let mut group = c.benchmark_group("schedule+cancel");
    group.throughput(Throughput::Elements(1));

    let timer = HashedWheelTimer::new();
    group.bench_function("one thread", |b| {
        b.iter(|| {
            let t = timer.new_timeout(|_| {}, black_box(FAR)).unwrap();
            black_box(t.cancel())
        })
    });

    // Two producers at once; the figure is wall time per operation over
    // both threads, so lower than one thread's means it scales.
    group.bench_function("2 producer threads", |b| {
        b.iter_custom(|iters| {
            let per_thread = iters / 2 + 1;
            let barrier = Barrier::new(2);
            let elapsed = std::thread::scope(|s| {
                let work = || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..per_thread {
                        let t = timer.new_timeout(|_| {}, FAR).unwrap();
                        black_box(t.cancel());
                    }
                    start.elapsed()
                };
                let other = s.spawn(work);
                let mine = work();
                mine.max(other.join().unwrap())
            });
            elapsed.mul_f64(iters as f64 / (per_thread * 2) as f64)
        })
    });
    group.finish();
}

fn expire_same_tick(c: &mut Criterion) {
    let mut group = c.benchmark_group("expire");
    let n = 100_000;
    group.throughput(Throughput::Elements(n as u64));
    group.sample_size(20);
    group.bench_function("100k due in the same tick (manual clock)", |b| {
        b.iter_with_setup(
            || {
                let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
                for _ in 0..n {
                    timer.new_timeout(|_| {}, Duration::from_millis(5)).unwrap();
                }
                timer.advance(Duration::from_millis(1)); // filed into buckets
                timer
            },
            |timer| {
                timer.advance(Duration::from_millis(4));
                timer
            },
        )
    });
    group.finish();
}

/// What one tick costs the driving thread, with nothing pending and with
/// 1M timeouts pending far away (a year, so that no benchmark run reaches
/// them; 60 s away costs the same, as no bucket is visited until their
/// round). On a real clock the worker does not even wake for such ticks.
fn tick_cost(c: &mut Criterion) {
    let mut group = c.benchmark_group("tick");
    for pending in [0usize, 1_000_000] {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        for _ in 0..pending {
            timer
                .new_timeout(|_| {}, Duration::from_secs(365 * 86_400))
                .unwrap();
        }
        timer.advance(Duration::from_millis(1)); // file them
        group.bench_function(format!("advance one tick, {pending} pending"), |b| {
            b.iter(|| timer.advance(Duration::from_millis(1)))
        });
    }
    group.finish();
}

/// A queue per connection, as tokio-util's users make them: one more `DelayQueue` made and dropped
/// while 100k others live on the same timer (each queue's shutdown hook joins the timer's list).
fn queue_per_connection(c: &mut Criterion) {
    let mut group = c.benchmark_group("DelayQueue per connection");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _entered = runtime.enter(); // for tokio-util's
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let live: Vec<_> = (0..100_000).map(|_| timer.delay_queue::<u64>()).collect();
    group.bench_function("make and drop one, 100k live", |b| {
        b.iter(|| drop(black_box(timer.delay_queue::<u64>())))
    });
    let live_util: Vec<_> = (0..100_000)
        .map(|_| tokio_util::time::DelayQueue::<u64>::new())
        .collect();
    group.bench_function("tokio-util: make and drop one, 100k live", |b| {
        b.iter(|| drop(black_box(tokio_util::time::DelayQueue::<u64>::new())))
    });
    drop((live, live_util));
    group.finish();
}

criterion_group!(
    benches,
    schedule_cancel,
    expire_same_tick,
    tick_cost,
    queue_per_connection
);
criterion_main!(benches);
