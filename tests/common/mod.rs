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

/// A waker that counts its wake-ups, to tell which task a future woke.
#[derive(Default)]
pub struct CountingWaker(std::sync::atomic::AtomicUsize);

impl CountingWaker {
    pub fn new() -> (Arc<CountingWaker>, std::task::Waker) {
        let counter = Arc::new(CountingWaker::default());
        let waker = futures::task::waker(counter.clone());
        (counter, waker)
    }

    pub fn wakes(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl futures::task::ArcWake for CountingWaker {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Polls `future` once with `waker`.
pub fn poll_with<F: std::future::Future + Unpin>(
    future: &mut F,
    waker: &std::task::Waker,
) -> std::task::Poll<F::Output> {
    let mut cx = std::task::Context::from_waker(waker);
    std::pin::Pin::new(future).poll(&mut cx)
}
