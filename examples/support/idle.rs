//! The idle-connection pattern, for `compare`: two threads each serve
//! 10,000 connections, and 125,000 messages a second arrive on them at
//! random. Each message resets its connection's idle timeout to 200 ms
//! from now; a connection silent for 200 ms times out, and its next
//! message opens it again with a new timeout. (About 8 % of the gaps
//! between two messages on one connection exceed 200 ms, so timeouts do
//! fire, and old deadlines do come round.) Reported as whole-process CPU
//! (user + system) per message, less the same harness resetting nothing.
//!
//! A future is reset and then polled once, as a connection task's
//! `select!` does when a message wakes it.

use futures::FutureExt;
use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio_util::time::{delay_queue, DelayQueue};

use crate::proc::process_cpu;

/// Messages per second on each of the two threads.
const RATE: u64 = 125_000;
const SPAN: Duration = Duration::from_secs(2);
const THREADS: usize = 2;
const CONNECTIONS: usize = 10_000;
const IDLE: Duration = Duration::from_millis(200);

/// The peers, by the name `compare` prints.
pub const PEERS: [&str; 5] = [
    "tokio::time",
    "hashed-wheel-timer",
    "hashed-wheel-timer cancel + new_timeout",
    "hashed-wheel-timer Sleep",
    "tokio-util DelayQueue",
];

/// One thread's connections, as a peer keeps their idle timeouts.
enum Idle {
    Nothing,
    Callbacks(Vec<Option<Timeout>>),
    Sleeps(Vec<hashed_wheel_timer::Sleep>),
    TokioSleeps(Vec<Pin<Box<tokio::time::Sleep>>>),
    Queue(DelayQueue<usize>, Vec<Option<delay_queue::Key>>),
}

impl Idle {
    fn new(peer: &str, timer: &HashedWheelTimer) -> Idle {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        match peer {
            "harness" => Idle::Nothing,
            "hashed-wheel-timer" | "hashed-wheel-timer cancel + new_timeout" => {
                Idle::Callbacks((0..CONNECTIONS).map(|_| Some(callback(timer))).collect())
            }
            "hashed-wheel-timer Sleep" => Idle::Sleeps(
                (0..CONNECTIONS)
                    .map(|_| {
                        let mut sleep = timer.sleep(IDLE);
                        assert!(sleep.poll_unpin(&mut cx).is_pending());
                        sleep
                    })
                    .collect(),
            ),
            "tokio::time" => Idle::TokioSleeps(
                (0..CONNECTIONS)
                    .map(|_| {
                        let mut sleep = Box::pin(tokio::time::sleep(IDLE));
                        assert!(sleep.as_mut().poll(&mut cx).is_pending());
                        sleep
                    })
                    .collect(),
            ),
            "tokio-util DelayQueue" => {
                let mut queue = DelayQueue::with_capacity(CONNECTIONS);
                let keys = (0..CONNECTIONS)
                    .map(|i| Some(queue.insert(i, IDLE)))
                    .collect();
                Idle::Queue(queue, keys)
            }
            _ => unreachable!("{peer}"),
        }
    }

    /// A message on connection `i`.
    fn message(&mut self, peer: &str, timer: &HashedWheelTimer, i: usize) {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        match self {
            Idle::Nothing => {}
            Idle::Callbacks(timeouts) => {
                let slot = &mut timeouts[i];
                let t = slot.as_ref().expect("every connection has a timeout");
                let moved = match peer {
                    "hashed-wheel-timer" => t.reset(IDLE),
                    _ => {
                        t.cancel();
                        false
                    }
                };
                if !moved {
                    // Timed out (or cancelled): a new timeout.
                    *slot = Some(callback(timer));
                }
            }
            Idle::Sleeps(sleeps) => {
                let sleep = &mut sleeps[i];
                sleep.reset(timer.now() + IDLE);
                let _ = sleep.poll_unpin(&mut cx);
            }
            Idle::TokioSleeps(sleeps) => {
                let sleep = sleeps[i].as_mut();
                let to = tokio::time::Instant::now() + IDLE;
                let mut sleep = sleep;
                sleep.as_mut().reset(to);
                let _ = sleep.poll(&mut cx);
            }
            Idle::Queue(queue, keys) => match keys[i] {
                Some(key) => queue.reset(&key, IDLE),
                None => keys[i] = Some(queue.insert(i, IDLE)),
            },
        }
    }

    /// Once a millisecond: a `DelayQueue`'s owner takes what expired.
    fn tick(&mut self) {
        if let Idle::Queue(queue, keys) = self {
            let mut cx = Context::from_waker(futures::task::noop_waker_ref());
            while let Poll::Ready(Some(expired)) = queue.poll_expired(&mut cx) {
                keys[expired.into_inner()] = None;
            }
        }
    }
}

fn callback(timer: &HashedWheelTimer) -> Timeout {
    timer.new_timeout(|_: &Timeout| {}, IDLE).unwrap()
}

/// One thread: messages at `RATE` for `SPAN`, in batches a millisecond
/// apart (a spinning harness would burn more CPU than every timer here).
fn serve(peer: &str, timer: &HashedWheelTimer, seed: u64) -> Idle {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut idle = Idle::new(peer, timer);
    let total = RATE * SPAN.as_millis() as u64 / 1000;
    let start = Instant::now();
    let mut sent = 0;
    while sent < total {
        let target = (RATE * start.elapsed().as_micros() as u64 / 1_000_000).min(total);
        while sent < target {
            idle.message(peer, timer, rng.usize(0..CONNECTIONS));
            sent += 1;
        }
        idle.tick();
        std::thread::sleep(Duration::from_millis(1));
    }
    idle
}

/// CPU seconds the whole run of `peer` took, until the last idle
/// deadline passed.
fn run_cpu(peer: &str) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let timer = HashedWheelTimer::new();
    let before = process_cpu();
    let left: Vec<Idle> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS as u64)
            .map(|seed| {
                let (rt, timer) = (&rt, &timer);
                s.spawn(move || {
                    let _rt = rt.enter();
                    serve(peer, timer, seed)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    std::thread::sleep(IDLE + Duration::from_millis(100));
    let cpu = process_cpu() - before;
    drop(left);
    drop(rt);
    cpu
}

fn messages_per_run() -> u64 {
    THREADS as u64 * RATE * SPAN.as_millis() as u64 / 1000
}

/// Nanoseconds of whole-process CPU per message for `peer`, less the
/// harness's, given the harness's CPU seconds for the same run.
pub fn cpu_ns_per_message(peer: &str, harness_cpu: f64) -> f64 {
    (run_cpu(peer) - harness_cpu).max(0.0) * 1e9 / messages_per_run() as f64
}

/// The harness alone: the same pacing and bookkeeping, no timers.
pub fn harness_cpu() -> f64 {
    run_cpu("harness")
}
