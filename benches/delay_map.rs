//! `DelayMap` against what users write today, tokio-util's `DelayQueue`
//! and a `HashMap` of its keys behind one `Mutex`, in CPU per operation:
//! the whole process's CPU time (`getrusage`: the callers, the timer's
//! driver, and the runtime thread whose task drains the expired keys)
//! over the operations made, from 1 and from 2 threads, each thread on
//! keys of its own. An operation is, at random, an insert (half; it
//! replaces the key's value and deadline if the key is there), a reset
//! (three in ten) or a remove (two in ten), of one of 10,000 keys, due
//! 100-1,000 ms ahead; keys not touched again expire, and the task drains
//! them as they do.
//!
//!     cargo bench --bench delay_map
//!
//! Criterion's "time" here is CPU time per operation.

#[path = "../examples/support/proc.rs"]
mod proc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures::StreamExt;
use hashed_wheel_timer::{DelayMap, HashedWheelTimer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::runtime::Handle;

const KEYS: u64 = 10_000;

/// What each map does with one operation.
trait Keyed: Clone + Send + Sync {
    fn insert(&self, key: u64, value: u64, delay: Duration);
    fn reset(&self, key: u64, delay: Duration);
    fn remove(&self, key: u64);
}

impl Keyed for DelayMap<u64, u64> {
    fn insert(&self, key: u64, value: u64, delay: Duration) {
        DelayMap::insert(self, key, value, delay).unwrap();
    }
    fn reset(&self, key: u64, delay: Duration) {
        DelayMap::reset(self, &key, delay);
    }
    fn remove(&self, key: u64) {
        DelayMap::remove(self, &key);
    }
}

/// tokio-util's queue and the map of its keys, kept in step under a lock.
#[derive(Default)]
struct Users {
    queue: tokio_util::time::DelayQueue<u64>,
    keys: HashMap<u64, (tokio_util::time::delay_queue::Key, u64)>,
}

#[derive(Clone)]
struct TokioUtil(Arc<Mutex<Users>>);

impl Keyed for TokioUtil {
    fn insert(&self, key: u64, value: u64, delay: Duration) {
        let users = &mut *self.0.lock().unwrap();
        match users.keys.get_mut(&key) {
            Some(slot) => {
                users.queue.reset(&slot.0, delay);
                slot.1 = value;
            }
            None => {
                let queued = users.queue.insert(key, delay);
                users.keys.insert(key, (queued, value));
            }
        }
    }
    fn reset(&self, key: u64, delay: Duration) {
        let users = &mut *self.0.lock().unwrap();
        if let Some(slot) = users.keys.get(&key) {
            users.queue.reset(&slot.0, delay);
        }
    }
    fn remove(&self, key: u64) {
        let users = &mut *self.0.lock().unwrap();
        if let Some(slot) = users.keys.remove(&key) {
            users.queue.remove(&slot.0);
        }
    }
}

/// `ops` operations on `map` from `threads` threads, each on its own keys;
/// the process's CPU time they took.
fn run<M: Keyed>(map: &M, runtime: &Handle, threads: u64, ops: u64, seed: &mut u64) -> Duration {
    let work = |thread: u64, seed: u64| {
        // In the runtime, as a task would be: tokio-util's queue needs it.
        let _runtime = runtime.enter();
        let mut rng = fastrand::Rng::with_seed(seed);
        for _ in 0..ops / threads {
            let key = thread * KEYS + rng.u64(0..KEYS);
            let delay = Duration::from_millis(rng.u64(100..=1_000));
            match rng.u8(0..10) {
                0..=4 => map.insert(key, key, delay),
                5..=7 => map.reset(key, delay),
                _ => map.remove(key),
            }
        }
    };
    *seed += 1;
    let before = proc::process_cpu();
    if threads == 1 {
        work(0, *seed);
    } else {
        std::thread::scope(|s| {
            for thread in 0..threads {
                let seed = *seed * 8 + thread;
                s.spawn(move || work(thread, seed));
            }
        });
    }
    Duration::from_secs_f64(proc::process_cpu() - before)
}

fn delay_map(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let timer = HashedWheelTimer::new();
    for threads in [1, 2] {
        let mut group = c.benchmark_group(format!(
            "keyed deadlines, CPU per operation, {threads} thread(s)"
        ));
        group.throughput(Throughput::Elements(1));

        let map: DelayMap<u64, u64> = timer.delay_map();
        let mut expired = map.clone();
        let drain = runtime.spawn(async move { while expired.next().await.is_some() {} });
        let mut seed = 0;
        group.bench_function("hashed-wheel-timer DelayMap", |b| {
            b.iter_custom(|ops| run(&map, runtime.handle(), threads, ops, &mut seed))
        });
        map.close();
        map.clear();
        drop(drain);

        let users = TokioUtil(Arc::default());
        let shared = users.0.clone();
        let drain = runtime.spawn(async move {
            loop {
                let expired = std::future::poll_fn(|cx| {
                    let users = &mut *shared.lock().unwrap();
                    users.queue.poll_expired(cx).map(|e| {
                        if let Some(e) = &e {
                            users.keys.remove(e.get_ref());
                        }
                        e.is_some()
                    })
                })
                .await;
                if !expired {
                    // Empty: tokio-util ends the stream until an insert.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        });
        group.bench_function("tokio-util DelayQueue + HashMap (Mutex)", |b| {
            b.iter_custom(|ops| run(&users, runtime.handle(), threads, ops, &mut seed))
        });
        drain.abort();
        group.finish();
    }
}

criterion_group!(benches, delay_map);
criterion_main!(benches);
