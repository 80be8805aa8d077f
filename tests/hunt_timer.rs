//! Defects found by the review of the timer's public faces, one test each.

mod common;

use common::manual;
use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// What a `stop()` returned.
type Stopped = Arc<Mutex<Option<Result<Vec<Timeout>, TimerError>>>>;

/// Calls `stop()` on its timer when dropped, and keeps what it returned.
struct StopOnDrop(HashedWheelTimer, Stopped);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        *self.1.lock().unwrap() = Some(self.0.stop());
    }
}

/// A periodic task that cancels itself is dropped by the driver after its run. A `stop()` in its
/// `Drop` ran in the middle of `advance`'s turn, without waiting for it: it returned nothing,
/// and the timeout due in the same tick was then set aside, stopped but returned by no `stop()`
/// (invariant 3). From the driver it is refused, as from the worker thread.
#[test]
fn stop_from_a_tasks_drop_on_the_driver_is_refused_and_loses_nothing() {
    let timer = manual(MS);
    let stopped = Arc::new(Mutex::new(None));
    let guard = StopOnDrop(timer.clone(), stopped.clone());
    let task = move |t: &Timeout| {
        let _keep = &guard;
        t.cancel();
    };
    timer
        .schedule_at_fixed_rate(task, MS * 5, MS * 100)
        .unwrap();
    let same_tick = timer.new_timeout(|_| {}, MS * 5).unwrap();
    timer.advance(MS * 20);
    let stopped = stopped.lock().unwrap().take();
    assert_eq!(stopped, Some(Err(TimerError::StopFromTimerTask)));
    assert!(same_tick.is_expired(), "{same_tick:?}");
    assert_eq!(timer.stop().unwrap(), vec![]);
}
