//! The per-call cost of a timeout layer, for `compare`: this crate's
//! `TimeoutLayer` against tower's own, around a service that answers at
//! once and one that answers after a yield to the runtime (so the
//! deadline is scheduled, then cancelled). Whole-process CPU per call on a
//! current-thread runtime, less the same service with no layer.

use std::hint::black_box;
use std::time::Duration;

use hashed_wheel_timer::HashedWheelTimer;
use tower::{service_fn, Layer, Service, ServiceExt};

use crate::proc::process_cpu;

pub const PEERS: [&str; 2] = ["tower TimeoutLayer", "hashed-wheel-timer TimeoutLayer"];

const CALLS: u64 = 500_000;
const DEADLINE: Duration = Duration::from_secs(1);

/// Whole-process CPU nanoseconds per call through `peer` ("bare" for none),
/// with a service that yields once before answering if `yields`.
pub fn cpu_ns_per_call(peer: &str, yields: bool) -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let timer = HashedWheelTimer::new();
    let inner = service_fn(move |i: u64| async move {
        if yields {
            tokio::task::yield_now().await;
        }
        Ok::<u64, tower::BoxError>(i)
    });
    let before = process_cpu();
    rt.block_on(async {
        match peer {
            "bare" => drive(inner).await,
            "tower TimeoutLayer" => {
                drive(tower::timeout::TimeoutLayer::new(DEADLINE).layer(inner)).await
            }
            _ => {
                drive(hashed_wheel_timer::TimeoutLayer::new(timer.clone(), DEADLINE).layer(inner))
                    .await
            }
        }
    });
    // Let this crate's worker see the last cancels.
    std::thread::sleep(Duration::from_millis(20));
    let cpu = process_cpu() - before;
    drop((timer, rt));
    cpu * 1e9 / CALLS as f64
}

async fn drive<S>(mut svc: S)
where
    S: Service<u64, Response = u64>,
    S::Error: std::fmt::Debug,
{
    for i in 0..CALLS {
        let response = svc.ready().await.unwrap().call(i).await.unwrap();
        black_box(response);
    }
}
