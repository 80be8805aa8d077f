//! A client sends requests to an in-process server, some of which are slow,
//! with a timeout per request, and counts what succeeded and what timed out.
//!
//! `cargo run --release --example rpc_timeout`

use hashed_wheel_timer::HashedWheelTimer;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, Semaphore};

const REQUESTS: u64 = 10_000;
const IN_FLIGHT: usize = 1_000;
const TIMEOUT: Duration = Duration::from_millis(100);

struct Request {
    id: u64,
    reply: oneshot::Sender<u64>,
}

/// Answers each request after a made-up service time: most in 1..20 ms,
/// one in ten in 150..300 ms (a slow disk, a lock, a GC pause).
async fn server(timer: HashedWheelTimer, mut requests: mpsc::Receiver<Request>) {
    while let Some(Request { id, mut reply }) = requests.recv().await {
        let mut rng = fastrand::Rng::with_seed(id);
        let service = if rng.u8(0..10) == 0 {
            Duration::from_millis(rng.u64(150..300))
        } else {
            Duration::from_millis(rng.u64(1..20))
        };
        let timer = timer.clone();
        tokio::spawn(async move {
            let done = tokio::select! {
                () = timer.sleep(service) => true,
                // The client gave up: stop working. Dropping the Sleep
                // cancels its entry in the wheel.
                () = reply.closed() => false,
            };
            if done {
                let _ = reply.send(id * 2);
            }
        });
    }
}

#[tokio::main]
async fn main() {
    let timer = HashedWheelTimer::builder()
        .thread_name("rpc-timer")
        .build()
        .expect("valid settings");
    let (tx, rx) = mpsc::channel(IN_FLIGHT);
    tokio::spawn(server(timer.clone(), rx));

    let ok = Arc::new(AtomicUsize::new(0));
    let timed_out = Arc::new(AtomicUsize::new(0));
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let start = Instant::now();
    let mut calls = Vec::new();
    for id in 0..REQUESTS {
        let permit = slots.clone().acquire_owned().await.expect("open");
        let (tx, timer, ok, timed_out) = (tx.clone(), timer.clone(), ok.clone(), timed_out.clone());
        calls.push(tokio::spawn(async move {
            let call = async {
                let (reply, answer) = oneshot::channel();
                tx.send(Request { id, reply }).await.expect("server up");
                answer.await.expect("server answers")
            };
            match timer.timeout(TIMEOUT, call).await {
                Ok(answer) => {
                    assert_eq!(answer, id * 2);
                    ok.fetch_add(1, Ordering::Relaxed);
                }
                Err(_elapsed) => {
                    timed_out.fetch_add(1, Ordering::Relaxed);
                }
            }
            drop(permit);
        }));
    }
    for call in calls {
        call.await.expect("call");
    }
    let (ok, timed_out) = (
        ok.load(Ordering::Relaxed),
        timed_out.load(Ordering::Relaxed),
    );
    println!(
        "{REQUESTS} requests, {IN_FLIGHT} in flight, timeout {TIMEOUT:?}: \
         {ok} succeeded, {timed_out} timed out ({:.1} %), in {:?}",
        timed_out as f64 * 100.0 / REQUESTS as f64,
        start.elapsed()
    );
    // Every answered call cancelled its deadline, and the server dropped
    // the work of every call that timed out: nothing is left in the wheel
    // once the server has seen the last of them.
    timer.sleep(Duration::from_millis(10)).await;
    println!(
        "timeouts still pending in the wheel: {}",
        timer.pending_timeouts()
    );
}
