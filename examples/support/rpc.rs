//! The RPC pattern, for `compare`: two threads each make 125,000 timeouts a
//! second, 200-1000 ms away; 99 % are cancelled 1-60 ms after they were
//! made (the response came), 1 % are left to fire. Reported as
//! whole-process CPU (user + system) per timeout, less the same harness
//! making no timeouts, after every deadline has passed.

use futures::FutureExt;
use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::time::DelayQueue;

use crate::proc::process_cpu;

/// Timeouts made per second by each of the two threads.
const RATE: u64 = 125_000;
/// How long each thread makes them.
const SPAN: Duration = Duration::from_secs(2);
/// Threads making timeouts.
const THREADS: usize = 2;
/// Buckets of pending cancels, one per millisecond; more than the 60 ms
/// a response may take.
const BUCKETS: usize = 64;

/// One timeout in flight, as each peer holds it.
enum Held {
    Callback(Timeout),
    Future(Pin<Box<dyn Future<Output = ()> + Send>>),
    Queued(tokio_util::time::delay_queue::Key),
    Owned(tokio_util::time::delay_queue::Key),
    Keyed(hashed_wheel_timer::DelayKey),
    Nothing,
}

/// This crate's `DelayQueue` peer.
pub const QUEUE: &str = "hashed-wheel-timer DelayQueue";
/// tokio-util's `DelayQueue`, one per producer thread, which polls it.
pub const OWNED: &str = "tokio-util DelayQueue (one per thread)";
/// tokio-util's `DelayQueue` shared by the producers behind a `Mutex`.
pub const SHARED: &str = "tokio-util DelayQueue (Mutex)";

/// tokio-util's `DelayQueue` takes `&mut self`: code that shares one
/// between threads puts it behind a lock, and a task takes what expires.
type SharedQueue = Arc<Mutex<DelayQueue<()>>>;

/// What the peers share in one run.
struct Peers<'a> {
    timer: &'a HashedWheelTimer,
    queue: &'a SharedQueue,
    ours: &'a hashed_wheel_timer::DelayQueue<()>,
}

/// Makes one timeout `delay` away, as `peer` would, registered as its
/// future would be by a first poll.
fn make(peer: &str, peers: &Peers, owned: &mut DelayQueue<()>, delay: Duration) -> Held {
    let timer = peers.timer;
    let future: Pin<Box<dyn Future<Output = ()> + Send>> = match peer {
        "harness" => return Held::Nothing,
        "hashed-wheel-timer" => {
            return Held::Callback(timer.new_timeout(|_: &Timeout| {}, delay).unwrap())
        }
        SHARED => return Held::Queued(peers.queue.lock().unwrap().insert((), delay)),
        OWNED => return Held::Owned(owned.insert((), delay)),
        QUEUE => return Held::Keyed(peers.ours.insert((), delay).unwrap()),
        "hashed-wheel-timer Sleep" => Box::pin(timer.sleep(delay)),
        "tokio::time" => Box::pin(tokio::time::sleep(delay)),
        "futures-timer" => Box::pin(futures_timer::Delay::new(delay)),
        "async-io Timer" => Box::pin(async_io::Timer::after(delay).map(drop)),
        _ => unreachable!("{peer}"),
    };
    let mut future = future;
    assert!((&mut future).now_or_never().is_none(), "pending");
    Held::Future(future)
}

/// The response came: cancel the timeout (a future is dropped).
fn answer(held: Held, peers: &Peers, owned: &mut DelayQueue<()>) {
    match held {
        Held::Callback(t) => drop(t.cancel()),
        Held::Future(future) => drop(future),
        Held::Queued(key) => drop(peers.queue.lock().unwrap().try_remove(&key)),
        Held::Owned(key) => drop(owned.try_remove(&key)),
        Held::Keyed(key) => drop(peers.ours.remove(&key)),
        Held::Nothing => {}
    }
}

/// The owner of a per-thread tokio-util `DelayQueue` takes what expired.
fn poll_owned(owned: &mut DelayQueue<()>) {
    let mut cx = std::task::Context::from_waker(futures::task::noop_waker_ref());
    while let std::task::Poll::Ready(Some(_)) = owned.poll_expired(&mut cx) {}
}

/// One producer thread: makes timeouts at `RATE` for `SPAN`, cancels each
/// answered one when its response is due. Returns those left to fire.
fn produce(peer: &str, peers: &Peers, seed: u64) -> Vec<Held> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut owned = DelayQueue::new();
    let mut due: Vec<Vec<Held>> = (0..BUCKETS).map(|_| Vec::new()).collect();
    let mut unanswered = Vec::new();
    let start = Instant::now();
    let mut made = 0u64;
    let mut ms_done = 0u64;
    let total = RATE * SPAN.as_millis() as u64 / 1000;
    while made < total || ms_done <= SPAN.as_millis() as u64 + BUCKETS as u64 {
        let ms = start.elapsed().as_millis() as u64;
        // Cancel what was answered by now, a millisecond at a time.
        while ms_done < ms {
            ms_done += 1;
            for held in due[ms_done as usize % BUCKETS].drain(..) {
                answer(held, peers, &mut owned);
            }
        }
        if peer == OWNED {
            poll_owned(&mut owned);
        }
        let target = (RATE * start.elapsed().as_micros() as u64 / 1_000_000).min(total);
        while made < target {
            let delay = Duration::from_millis(rng.u64(200..=1000));
            let held = make(peer, peers, &mut owned, delay);
            if rng.u8(0..100) == 0 {
                unanswered.push(held);
            } else {
                let at = ms + rng.u64(1..=60);
                due[at as usize % BUCKETS].push(held);
            }
            made += 1;
        }
        // Batches a millisecond apart: a spinning harness would burn more
        // CPU than every timer here, and drown what is measured.
        std::thread::sleep(Duration::from_millis(1));
    }
    // The owner keeps taking what expires, as the other peers' drivers do.
    while peer == OWNED && !owned.is_empty() {
        poll_owned(&mut owned);
        std::thread::sleep(Duration::from_millis(1));
    }
    unanswered
}

/// The task that takes expired items from a shared `DelayQueue`. An empty
/// queue ends its stream until the next insert, so the task then waits a
/// millisecond before it looks again.
async fn take_expired(queue: SharedQueue) {
    loop {
        let expired = std::future::poll_fn(|cx| queue.lock().unwrap().poll_expired(cx)).await;
        if expired.is_none() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// CPU seconds the whole run of `peer` took, every deadline passed.
fn run_cpu(peer: &str) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let timer = HashedWheelTimer::new();
    let queue = SharedQueue::default();
    let before = process_cpu();
    let ours = timer.delay_queue::<()>();
    let expiring =
        match peer {
            SHARED => Some(rt.spawn(take_expired(queue.clone()))),
            QUEUE => {
                let mut ours = ours.clone();
                Some(rt.spawn(async move {
                    while futures::StreamExt::next(&mut ours).await.is_some() {}
                }))
            }
            _ => None,
        };
    let peers = Peers {
        timer: &timer,
        queue: &queue,
        ours: &ours,
    };
    let left: Vec<Vec<Held>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS as u64)
            .map(|seed| {
                let (rt, peers) = (&rt, &peers);
                s.spawn(move || {
                    let _rt = rt.enter();
                    produce(peer, peers, seed)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Let the 1 % fire: the latest deadline is 1 s after the last one made.
    std::thread::sleep(Duration::from_millis(1_100));
    let cpu = process_cpu() - before;
    expiring.into_iter().for_each(|task| task.abort());
    drop(left);
    drop(rt);
    cpu
}

/// Timeouts one run makes.
pub fn timeouts_per_run() -> u64 {
    THREADS as u64 * RATE * SPAN.as_millis() as u64 / 1000
}

/// Nanoseconds of whole-process CPU per timeout for `peer`, less the
/// harness's, given the harness's CPU seconds for the same run.
pub fn cpu_ns_per_timeout(peer: &str, harness_cpu: f64) -> f64 {
    (run_cpu(peer) - harness_cpu).max(0.0) * 1e9 / timeouts_per_run() as f64
}

/// The harness alone: the same pacing and bookkeeping, no timeouts.
pub fn harness_cpu() -> f64 {
    run_cpu("harness")
}
