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
        let clock = timer.clone();
        timer
            .new_timeout(
                move |_: &Timeout| fired.0.lock().unwrap().push((label, clock.now())),
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

/// An executor that only queues jobs: the test decides when, and in which
/// order, each one runs, as if on threads of its own.
#[derive(Clone, Default)]
pub struct QueueExecutor(Arc<Mutex<std::collections::VecDeque<hashed_wheel_timer::Job>>>);

impl hashed_wheel_timer::Executor for QueueExecutor {
    fn execute(&self, job: hashed_wheel_timer::Job) {
        self.0.lock().unwrap().push_back(job);
    }
}

impl QueueExecutor {
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Takes the oldest job without running it.
    pub fn take(&self) -> Option<hashed_wheel_timer::Job> {
        self.0.lock().unwrap().pop_front()
    }

    /// Runs every queued job, oldest first, including jobs queued meanwhile.
    /// Returns how many ran.
    pub fn run_all(&self) -> usize {
        let mut ran = 0;
        while let Some(job) = self.take() {
            job();
            ran += 1;
        }
        ran
    }

    /// A manual-clock timer (tick `tick`) that hands its callbacks here.
    pub fn timer(&self, tick: Duration) -> HashedWheelTimer {
        HashedWheelTimer::builder()
            .manual_clock()
            .tick_duration(tick)
            .executor(self.clone())
            .build()
            .expect("valid settings")
    }
}
