//! `DelayQueue` back to back, for `compare`: insert + remove, and insert +
//! reset (to a later deadline) + remove, of items due far away, on one
//! thread (each queue with one owner) and on two threads sharing one queue
//! (tokio-util's behind a `Mutex`, as sharing it requires). Whole-process
//! CPU per item, so this crate's worker thread counts.

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hashed_wheel_timer::HashedWheelTimer;

use crate::proc::process_cpu;

pub const PEERS: [&str; 2] = ["hashed-wheel-timer DelayQueue", "tokio-util DelayQueue"];

const ITEMS: usize = 1_000_000;
const FAR: Duration = Duration::from_secs(60);

/// Whole-process CPU nanoseconds per item for `peer`, `threads` threads
/// sharing one queue, each item inserted, reset if `reset`, and removed.
pub fn cpu_ns_per_item(peer: &str, threads: usize, reset: bool) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_time()
        .build()
        .unwrap();
    let timer = HashedWheelTimer::new();
    let ours = timer.delay_queue::<u64>();
    let theirs = Arc::new(Mutex::new(tokio_util::time::DelayQueue::<u64>::new()));
    let per_thread = ITEMS / threads;
    let before = process_cpu();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (rt, ours, theirs) = (&rt, &ours, &theirs);
            s.spawn(move || {
                let _rt = rt.enter();
                match peer {
                    "hashed-wheel-timer DelayQueue" => {
                        for i in 0..per_thread as u64 {
                            let key = ours.insert(i, FAR).unwrap();
                            if reset {
                                black_box(ours.reset(&key, FAR * 2));
                            }
                            black_box(ours.remove(&key));
                        }
                    }
                    _ if threads == 1 => {
                        let mut queue = theirs.lock().unwrap();
                        for i in 0..per_thread as u64 {
                            let key = queue.insert(i, FAR);
                            if reset {
                                queue.reset(&key, FAR * 2);
                            }
                            black_box(queue.remove(&key));
                        }
                    }
                    _ => {
                        for i in 0..per_thread as u64 {
                            let key = theirs.lock().unwrap().insert(i, FAR);
                            if reset {
                                theirs.lock().unwrap().reset(&key, FAR * 2);
                            }
                            black_box(theirs.lock().unwrap().remove(&key));
                        }
                    }
                }
            });
        }
    });
    // Let this crate's worker see the last cancels, as a longer run would.
    std::thread::sleep(Duration::from_millis(20));
    let cpu = process_cpu() - before;
    drop((ours, timer, rt));
    cpu * 1e9 / (per_thread * threads) as f64
}
