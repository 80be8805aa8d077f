//! The RPC pattern on one thread, with criterion: each timeout is made
//! 200-1000 ms away, and 99 % are cancelled as a response would cancel
//! them, 1-60 "milliseconds" later, while the rest are left to fire. A
//! millisecond here is 125 timeouts made (125,000 a second), and the
//! cancels due are made once per millisecond, as `examples/compare` makes
//! them. One iteration makes one timeout and cancels, on average, one
//! older one, so the figure is the cost of a timeout's whole life with the
//! others it shares the caches with in flight. No sleeps, so the pattern
//! runs some 50 times faster than in real time, and the timer holds
//! timeouts in its lanes for less of their life (see `engine/hold.rs`):
//! `examples/compare` measures the same pattern paced in real time, as
//! whole-process CPU.
//!
//!     cargo bench --bench rpc

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures::task::noop_waker_ref;
use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Context;
use std::time::Duration;

/// Timeouts made in a millisecond, at 125,000 a second.
const PER_MS: usize = 125;
/// Milliseconds between a timeout and its cancel.
const ANSWERED_AFTER_MS: std::ops::RangeInclusive<usize> = 1..=60;
/// Buckets of cancels, one per millisecond, more than the longest wait.
const BUCKETS: usize = 64;

/// Makes timeouts with `make`, cancels them with `cancel`, in the pattern.
struct Pattern<H> {
    due: Vec<Vec<H>>,
    left_to_fire: Vec<H>,
    rng: fastrand::Rng,
    made: usize,
}

impl<H> Pattern<H> {
    fn new() -> Pattern<H> {
        Pattern {
            due: (0..BUCKETS).map(|_| Vec::new()).collect(),
            left_to_fire: Vec::new(),
            rng: fastrand::Rng::with_seed(7),
            made: 0,
        }
    }

    /// One iteration: a new timeout, and, once a "millisecond" of them
    /// is made, the cancels due then.
    #[inline(always)]
    fn step(&mut self, make: impl FnOnce(Duration) -> H, cancel: impl FnMut(H)) {
        let delay = Duration::from_millis(self.rng.u64(200..=1_000));
        let held = make(delay);
        let ms = self.made / PER_MS;
        if self.rng.u8(0..100) == 0 {
            self.left_to_fire.push(held);
        } else {
            let at = ms + self.rng.usize(ANSWERED_AFTER_MS);
            self.due[at % BUCKETS].push(held);
        }
        self.made += 1;
        if self.made % PER_MS == 0 {
            self.due[(ms + 1) % BUCKETS].drain(..).for_each(cancel);
        }
    }
}

/// A future polled once, so that it registers, as a first `.await` would.
fn registered<F: Future>(future: F) -> Pin<Box<F>> {
    let mut future = Box::pin(future);
    let mut cx = Context::from_waker(noop_waker_ref());
    assert!(future.as_mut().poll(&mut cx).is_pending());
    future
}

fn rpc_pattern(c: &mut Criterion) {
    let mut group = c.benchmark_group("rpc pattern (one timeout made, one cancelled)");
    group.throughput(Throughput::Elements(1));

    let timer = HashedWheelTimer::new();
    let mut pattern = Pattern::new();
    group.bench_function("hashed-wheel-timer new_timeout + cancel", |b| {
        b.iter(|| {
            pattern.step(
                |d| timer.new_timeout(|_: &Timeout| {}, d).unwrap(),
                |t| {
                    black_box(t.cancel());
                },
            )
        })
    });
    drop(pattern);

    let mut pattern = Pattern::new();
    group.bench_function("hashed-wheel-timer Sleep", |b| {
        b.iter(|| pattern.step(|d| registered(timer.sleep(d)), drop))
    });
    drop(pattern);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let _rt = rt.enter();
    let mut pattern = Pattern::new();
    group.bench_function("tokio::time Sleep", |b| {
        b.iter(|| pattern.step(|d| registered(tokio::time::sleep(d)), drop))
    });
    drop(pattern);

    // tokio-util's queue takes `&mut self`, so code that shares it puts it
    // behind a lock, and a task polls it for what expires.
    let queue = Arc::new(Mutex::new(tokio_util::time::DelayQueue::<()>::new()));
    let drain = rt.spawn({
        let queue = queue.clone();
        async move {
            loop {
                let expired =
                    std::future::poll_fn(|cx| queue.lock().unwrap().poll_expired(cx)).await;
                if expired.is_none() {
                    // Empty: tokio-util ends the stream until an insert.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    });
    let mut pattern = Pattern::new();
    group.bench_function("tokio-util DelayQueue (Mutex)", |b| {
        b.iter(|| {
            pattern.step(
                |d| queue.lock().unwrap().insert((), d),
                |key| {
                    black_box(queue.lock().unwrap().try_remove(&key));
                },
            )
        })
    });
    drop(pattern);
    drain.abort();
    group.finish();
}

criterion_group!(benches, rpc_pattern);
criterion_main!(benches);
