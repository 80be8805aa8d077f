//! Helpers shared by the integration tests.
#![allow(dead_code)]

use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub fn manual(tick: Duration) -> HashedWheelTimer {
    HashedWheelTimer::builder()
        .manual_clock()
        .tick_duration(tick)
        .build()
        .expect("valid settings")
}

/// Records, for each labelled timeout, the timer time at which it fired.
#[derive(Clone, Default)]
pub struct Fired(Arc<Mutex<Vec<(usize, Instant)>>>);

impl Fired {
    pub fn schedule(&self, timer: &HashedWheelTimer, label: usize, delay: Duration) -> Timeout {
        let fired = self.clone();
        timer
            .new_timeout(
                move |t: &Timeout| {
                    fired
                        .0
                        .lock()
                        .unwrap()
                        .push((label, t.timer().unwrap().now()))
                },
                delay,
            )
            .expect("scheduled")
    }

    pub fn labels(&self) -> Vec<usize> {
        self.0.lock().unwrap().iter().map(|f| f.0).collect()
    }

    pub fn times(&self) -> Vec<(usize, Instant)> {
        self.0.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}
