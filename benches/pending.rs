//! A million pending timeouts: the cost of scheduling them, and the heap
//! they take, counted by the allocator.
//!
//!     cargo bench --bench pending
//!
//! The bytes are printed once per run, as criterion times only. RSS-based
//! figures (which also count the allocator's own overhead) come from
//! `cargo run --release --example footprint`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::sync::Once;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const PENDING: usize = 1_000_000;
const FAR: Duration = Duration::from_secs(60);

/// Schedules `PENDING` timeouts 60 s away on a fresh timer; with `keep`,
/// their handles are kept too. Returns the timer, the handles, and the heap
/// bytes they added.
fn fill(keep: bool) -> (HashedWheelTimer, Vec<Timeout>, isize) {
    let region = Region::new(GLOBAL);
    let mut handles = Vec::with_capacity(if keep { PENDING } else { 0 });
    let timer = HashedWheelTimer::new();
    for _ in 0..PENDING {
        let t = timer.new_timeout(|_| {}, FAR).unwrap();
        if keep {
            handles.push(t);
        }
    }
    let change = region.change();
    let bytes = change.bytes_allocated as isize - change.bytes_deallocated as isize;
    (timer, handles, bytes)
}

fn pending(c: &mut Criterion) {
    static REPORT: Once = Once::new();
    REPORT.call_once(|| {
        for keep in [false, true] {
            let (timer, handles, bytes) = fill(keep);
            assert_eq!(timer.pending_timeouts(), PENDING);
            println!(
                "heap per pending timeout, handles {}: {:.1} bytes",
                if keep { "kept" } else { "dropped" },
                bytes as f64 / PENDING as f64
            );
            drop(handles);
        }
    });

    let mut group = c.benchmark_group("1M pending");
    group.throughput(Throughput::Elements(PENDING as u64));
    group.sample_size(10);
    group.bench_function("schedule 1M timeouts 60 s away", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let filled = fill(false);
                total += start.elapsed();
                drop(filled); // stops the timer: not timed
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, pending);
criterion_main!(benches);
