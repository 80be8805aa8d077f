//! A paused tokio runtime and a timer on its clock, for tests that run this crate beside tokio.

use hashed_wheel_timer::HashedWheelTimer;
use std::time::Duration;

/// A virtual hour: a side that has not finished by then hangs.
pub const GUARD: Duration = Duration::from_secs(3600);

/// A current-thread runtime whose clock starts paused, as `#[tokio::test(start_paused = true)]`.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

/// A timer on the current runtime's clock.
pub fn tokio_clock() -> HashedWheelTimer {
    HashedWheelTimer::builder().tokio_clock().build().unwrap()
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
