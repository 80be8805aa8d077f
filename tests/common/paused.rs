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

/// Lets the driver task and the woken tasks run.
pub async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// Runs `f` on a thread of its own; `None` if it has not returned within `secs` seconds of real
/// time (a hang), so a test fails instead of hanging.
pub fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).ok()
}
