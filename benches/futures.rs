//! The futures' fixed costs, against `tokio::time` in the same run:
//!
//! - a sleep created, polled once (so it registers) and dropped (so it
//!   cancels);
//! - `timeout` around a future that is already ready.
//!
//! `cargo bench --bench futures -- --warm-up-time 1 --measurement-time 3`

use std::future::{ready, Future};
use std::pin::pin;
use std::task::Context;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use hashed_wheel_timer::HashedWheelTimer;

const FAR: Duration = Duration::from_secs(1);

/// Polls `future` once with a no-op waker, then drops it.
fn poll_once<F: Future>(future: F) -> bool {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    future.as_mut().poll(&mut cx).is_ready()
}

/// Benchmarks `wheel` against `tokio` under `name`, inside a runtime
/// (tokio's futures need one; the wheel's do not mind).
fn compare(
    c: &mut Criterion,
    name: &str,
    mut wheel: impl FnMut(&HashedWheelTimer) -> bool,
    mut tokio: impl FnMut() -> bool,
) {
    let timer = HashedWheelTimer::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .unwrap();
    let _in_runtime = rt.enter();
    let mut group = c.benchmark_group(name);
    group.bench_function("hashed_wheel_timer", |b| b.iter(|| wheel(&timer)));
    group.bench_function("tokio::time", |b| b.iter(&mut tokio));
    group.finish();
}

fn sleep_poll_drop(c: &mut Criterion) {
    compare(
        c,
        "sleep: create, poll once, drop",
        |timer| poll_once(timer.sleep(black_box(FAR))),
        || poll_once(tokio::time::sleep(black_box(FAR))),
    );
}

fn timeout_ready(c: &mut Criterion) {
    compare(
        c,
        "timeout around a ready future",
        |timer| poll_once(timer.timeout(black_box(FAR), ready(black_box(1)))),
        || poll_once(tokio::time::timeout(black_box(FAR), ready(black_box(1)))),
    );
}

criterion_group!(benches, sleep_poll_drop, timeout_ready);
criterion_main!(benches);
