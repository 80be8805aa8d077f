//! The `TimerTask` trait: `run` on expiry, the `cancelled` hook on cancel,
//! and closures as tasks.

mod common;

use common::manual;
use hashed_wheel_timer::{Timeout, TimerTask};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// Records what the timer called, and on which thread.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<(&'static str, ThreadId)>>>);

struct Task(Calls);

impl TimerTask for Task {
    fn run(self: Box<Self>, _: &Timeout) {
        self.0.record("run");
    }
    fn cancelled(self: Box<Self>, _: &Timeout) {
        self.0.record("cancelled");
    }
}

impl Calls {
    fn record(&self, call: &'static str) {
        let thread = std::thread::current().id();
        self.0.lock().unwrap().push((call, thread));
    }

    fn names(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().iter().map(|c| c.0).collect()
    }
}

#[test]
fn the_cancelled_hook_runs_once_on_the_cancelling_thread_and_run_never() {
    let timer = manual(MS);
    let calls = Calls::default();
    let t = timer.new_timeout_task(Task(calls.clone()), MS * 5).unwrap();
    let canceller = std::thread::spawn({
        let t = t.clone();
        move || (t.cancel(), std::thread::current().id())
    });
    let (won, thread) = canceller.join().unwrap();
    assert!(won);
    assert!(!t.cancel());
    timer.advance(MS * 10);
    assert_eq!(*calls.0.lock().unwrap(), vec![("cancelled", thread)]);
}

#[test]
fn a_task_that_fires_hears_run_and_never_cancelled() {
    let timer = manual(MS);
    let calls = Calls::default();
    let t = timer.new_timeout_task(Task(calls.clone()), MS).unwrap();
    timer.advance(MS);
    assert!(!t.cancel(), "too late");
    assert_eq!(calls.names(), vec!["run"]);
}

#[test]
fn cancelling_a_stopped_timeout_calls_the_hook() {
    let timer = manual(MS);
    let calls = Calls::default();
    let t = timer.new_timeout_task(Task(calls.clone()), MS).unwrap();
    assert_eq!(timer.stop().unwrap(), vec![t.clone()]);
    assert!(t.cancel());
    assert_eq!(calls.names(), vec!["cancelled"]);
    assert!(t.take_task().is_none(), "the hook consumed it");
}

#[test]
fn closures_are_timer_tasks() {
    fn boxed<T: TimerTask>(task: T) -> Box<dyn TimerTask> {
        Box::new(task)
    }
    let timer = manual(MS);
    let hit = Arc::new(Mutex::new(0));
    let h = hit.clone();
    let t = timer
        .new_timeout_task(move |_: &Timeout| *h.lock().unwrap() += 1, MS)
        .unwrap();
    timer.advance(MS);
    assert!(t.is_expired());
    let h = hit.clone();
    boxed(move |_: &Timeout| *h.lock().unwrap() += 10).run(&t);
    assert_eq!(*hit.lock().unwrap(), 11);
}
