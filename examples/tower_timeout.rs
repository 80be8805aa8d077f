//! Per-request deadlines for a tower service, on the wheel: the one-line
//! swap from tower's own `TimeoutLayer`.
//!
//!     cargo run --release --example tower_timeout --features tower
//!
//! A service answers most requests within a few milliseconds and stalls on
//! every tenth; a 50 ms deadline turns the stalls into `Elapsed` errors,
//! and the service's own errors pass through as they were.

use hashed_wheel_timer::{HashedWheelTimer, TimeoutLayer};
use std::time::Duration;
use tower::timeout::error::Elapsed;
use tower::{service_fn, BoxError, Service, ServiceBuilder, ServiceExt};

#[derive(Debug)]
struct NotFound(u64);

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no record {}", self.0)
    }
}

impl std::error::Error for NotFound {}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let timer = HashedWheelTimer::new();
    let mut svc = ServiceBuilder::new()
        // Was: .layer(tower::timeout::TimeoutLayer::new(Duration::from_millis(50)))
        .layer(TimeoutLayer::new(timer.clone(), Duration::from_millis(50)))
        .service(service_fn(|id: u64| async move {
            let work = if id % 10 == 0 { 500 } else { id % 5 };
            tokio::time::sleep(Duration::from_millis(work)).await;
            if id % 7 == 0 {
                return Err(NotFound(id));
            }
            Ok(format!("record {id}"))
        }));

    let (mut ok, mut timed_out, mut failed) = (0, 0, 0);
    for id in 1..=40 {
        match svc.ready().await?.call(id).await {
            Ok(_) => ok += 1,
            Err(e) if e.is::<Elapsed>() => timed_out += 1,
            Err(e) if e.is::<NotFound>() => failed += 1,
            Err(e) => return Err(e),
        }
    }
    println!("{ok} answered, {timed_out} timed out after 50 ms, {failed} failed on their own");
    let stats = timer.stats();
    println!(
        "timer: {} deadlines scheduled, {} fired, {} cancelled",
        stats.scheduled, stats.fired, stats.cancelled
    );
    Ok(())
}
