//! Running a fired task: on the thread that fired it, or on the timer's
//! [`Executor`](crate::Executor).
//!
//! Wherever it runs, a task runs marked as a task of its timer (so `stop()`
//! from inside it is an error, not a deadlock), and a panic is caught,
//! logged and recorded on the entry. A periodic run then ends in
//! `periodic.rs`: re-armed, or finished by its panic.
//!
//! A waker is always woken where it fired: waking is cheap, and the woken
//! future runs on its own runtime anyway.
//!
//! With an executor, firing costs one allocation (the boxed job) and no
//! lock; without one, nothing is allocated.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::entry::Entry;
use crate::shared::Shared;
use crate::task::Task;
use crate::Timeout;

/// A fired task on its way to run. If it is dropped unrun (an executor
/// that shut down drops its jobs), its timeout ends stopped, uncounted once,
/// and its task can still be taken from the handle.
struct Dispatch {
    timeout: Timeout,
    task: Option<Task>,
}

impl Shared {
    /// Runs `task`, which `entry` just fired, here or on the executor.
    pub(crate) fn dispatch(self: &Arc<Self>, entry: Arc<Entry>, task: Task) {
        let executor = match (&self.config.executor, &task) {
            (Some(executor), Task::Callback(_) | Task::Periodic(_)) => Some(executor),
            _ => None,
        };
        let job = Dispatch {
            timeout: Timeout::from_parts(entry, self.clone()),
            task: Some(task),
        };
        let Some(executor) = executor else {
            job.run();
            return;
        };
        let handed_off = catch_unwind(AssertUnwindSafe(|| {
            executor.execute(Box::new(move || job.run()));
        }));
        if let Err(panic) = handed_off {
            // The job was dropped while unwinding, which ended its timeout.
            tracing::error!(
                target: "hashed_wheel_timer",
                panic = panic_message(&*panic),
                "the timer's executor panicked in execute(); the timer keeps running"
            );
        }
    }

    /// Runs `f` as a task of this timer, catching a panic.
    fn catch_task(&self, f: impl FnOnce()) -> Result<(), Box<dyn Any + Send>> {
        self.as_own_task(|| catch_unwind(AssertUnwindSafe(f)))
    }

    /// A fired job that will not run: its timeout ends stopped, keeping its
    /// task for `Timeout::take_task`, unless it was cancelled meanwhile.
    pub(crate) fn end_stopped(&self, entry: &Entry, task: Task) {
        entry.put_task(task);
        match entry.try_stop_fired() {
            Some(true) => self.uncount(1),
            Some(false) => {}
            None => drop(entry.take_task()),
        }
    }
}

impl Dispatch {
    fn run(mut self) {
        let Some(task) = self.task.take() else {
            return;
        };
        let timeout = &self.timeout;
        let (entry, shared) = (timeout.entry(), timeout.shared());
        let result = match task {
            Task::Wake(wakers) => shared.catch_task(|| wakers.into_iter().for_each(|w| w.wake())),
            Task::Callback(task) => shared.catch_task(|| task.run(timeout)),
            Task::Periodic(mut task) => {
                if !entry.is_running() {
                    return; // cancelled before this run began
                }
                match shared.catch_task(|| task.run_once(timeout)) {
                    Ok(()) => {
                        shared.rearm(entry, task);
                        return;
                    }
                    Err(panic) => {
                        shared.end_panicked(entry);
                        Err(panic)
                    }
                }
            }
        };
        if let Err(panic) = result {
            entry.mark_panicked();
            tracing::warn!(
                target: "hashed_wheel_timer",
                deadline = ?timeout.deadline(),
                periodic = entry.is_periodic(),
                panic = panic_message(&*panic),
                "a timer task panicked; the timer keeps running"
            );
        }
    }
}

impl Drop for Dispatch {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else {
            return;
        };
        tracing::warn!(
            target: "hashed_wheel_timer",
            deadline = ?self.timeout.deadline(),
            "the executor dropped a timer task without running it; its timeout is now stopped"
        );
        self.timeout
            .shared()
            .end_stopped(self.timeout.entry(), task);
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "<non-string panic payload>"
    }
}
