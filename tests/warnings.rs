//! The warnings users must see reach standard error when no `tracing`
//! subscriber takes them. The test runs itself as a child process, with no
//! subscriber, and reads the child's standard error.

use hashed_wheel_timer::HashedWheelTimer;
use std::process::Command;
use std::time::Duration;

const CHILD: &str = "HASHED_WHEEL_TIMER_WARNINGS_CHILD";

#[test]
fn warnings_reach_stderr_without_a_subscriber() {
    if std::env::var_os(CHILD).is_some() {
        let manual = HashedWheelTimer::builder().manual_clock().build().unwrap();
        drop(manual.interval(Duration::ZERO));
        HashedWheelTimer::new().advance(Duration::from_millis(1));
        return;
    }
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "warnings_reach_stderr_without_a_subscriber",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(child.status.success());
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(
        stderr.contains("hashed_wheel_timer: warning: interval:"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hashed_wheel_timer: warning: advance() does nothing"),
        "{stderr}"
    );
}
