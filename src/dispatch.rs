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
use crate::executor::SharedExecutor;
use crate::periodic::Periodic;
use crate::shared::Shared;
use crate::slots::Key;
use crate::task::{panic_message, Task, UserBox};
use crate::Timeout;

/// A fired task handed to the executor. If the executor drops it unrun
/// (say, its runtime shut down), its timeout ends stopped, uncounted once,
/// and its task can still be taken from the handle.
struct Dispatch {
    timeout: Timeout,
    task: Option<Task>,
}

impl Shared {
    /// Runs `task`, which `key` just fired, here or on the executor. Takes
    /// over the timer's reference.
    #[inline]
    pub(crate) fn dispatch(self: &Arc<Self>, key: Key, task: Task) {
        let timeout = Timeout::from_parts(key, self);
        if let Some(executor) = &self.config.executor {
            if !matches!(task, Task::Wake(_)) {
                let job = Dispatch {
                    timeout,
                    task: Some(task),
                };
                self.hand_off(executor, job);
                return;
            }
        }
        run(&timeout, task);
    }

    fn hand_off(&self, executor: &SharedExecutor, mut job: Dispatch) {
        let handed_off = catch_unwind(AssertUnwindSafe(|| {
            executor.execute(Box::new(move || {
                if let Some(task) = job.task.take() {
                    run(&job.timeout, task);
                }
            }));
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

/// Runs a fired task on this thread.
#[inline(always)]
fn run(timeout: &Timeout, task: Task) {
    let (entry, shared) = (timeout.entry(), timeout.shared());
    let result = match task {
        Task::Wake(wakers) => shared.catch_task(|| wakers.into_iter().for_each(|w| w.wake())),
        Task::Callback(task) => shared.catch_task(|| task.into_inner().run(timeout)),
        Task::Periodic(task) => return run_periodic(timeout, task),
    };
    if let Err(panic) = result {
        entry.mark_panicked();
        report_panic(timeout, &*panic);
    }
}

/// Runs one run of a periodic task, then re-arms it or, if it panicked,
/// ends it.
fn run_periodic(timeout: &Timeout, mut task: UserBox<Periodic>) {
    let (entry, shared) = (timeout.entry(), timeout.shared());
    if !entry.is_running() {
        return; // cancelled before this run began
    }
    match shared.catch_task(|| task.run_once(timeout)) {
        Ok(()) => shared.rearm(timeout.key(), task),
        Err(panic) => {
            shared.end_panicked(entry);
            report_panic(timeout, &*panic);
        }
    }
}

#[cold]
#[inline(never)]
fn report_panic(timeout: &Timeout, panic: &(dyn Any + Send)) {
    tracing::warn!(
        target: "hashed_wheel_timer",
        deadline = ?timeout.deadline(),
        periodic = timeout.is_periodic(),
        panic = panic_message(panic),
        "a timer task panicked; the timer keeps running"
    );
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
