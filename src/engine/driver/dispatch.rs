//! Running a fired task: on the thread that fired it, or on the timer's
//! [`Executor`](crate::Executor) (the face builds a `Handoff` from it:
//! see `task.rs`), and
//! ending a periodic run (`rearm`).
//!
//! A task runs marked as its timer's (so `stop()` inside it is an error,
//! not a deadlock), and a panic is caught, logged and recorded on the
//! entry. Wakers and notices are woken where they fired, even with an
//! executor: that is cheap, and in firing order. With an executor, a fire
//! costs a boxed job and a short lock on the table of jobs, so that
//! `stop()` can take back the jobs not started; without one, nothing.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::engine::driver::counts::Ended;
use crate::engine::driver::Shared;
use crate::engine::entry::handle::Timeout;
use crate::engine::entry::key::Key;
use crate::engine::entry::task::{panic_message, Handoff, JobState, Jobs, Periodic, Task, UserBox};
use crate::engine::entry::Entry;

/// A fired task handed to the executor. The task itself waits in its
/// entry until the job starts, so that `stop()` can take it back with
/// the task in place for `Timeout::take_task`. If the executor drops the
/// job unrun (say, its runtime shut down), its timeout ends stopped,
/// uncounted once, and its task can still be taken from the handle.
struct Dispatch {
    timeout: Timeout,
    started: bool,
}

impl Shared {
    /// Runs `task`, which `key` just fired, here or on the executor. Takes
    /// over the timer's reference.
    #[inline]
    pub(crate) fn dispatch(self: &Arc<Self>, key: Key, task: Task) {
        let timeout = Timeout::from_parts(key, self);
        if let Some(executor) = &self.config.executor {
            if !matches!(task, Task::Wake(_) | Task::Notice(_)) {
                timeout.entry().put_task(task);
                self.lock_jobs().insert(key, JobState::Queued);
                self.hand_off(
                    executor,
                    Dispatch {
                        timeout,
                        started: false,
                    },
                );
                return;
            }
        }
        run(&timeout, task);
    }

    fn hand_off(&self, executor: &Handoff, job: Dispatch) {
        let handed_off = catch_unwind(AssertUnwindSafe(|| {
            executor.execute(Box::new(move || job.start()));
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

    pub(crate) fn lock_jobs(&self) -> crate::engine::sync::MutexGuard<'_, Jobs> {
        // No user code runs under this lock; recover rather than propagate.
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A job starts: takes `key`'s task out to run it, in the same step as
    /// it marks the job `Running`. `None` if `stop()` took the job back
    /// first, or (periodic) it was cancelled and its task taken.
    fn start_job(&self, key: Key) -> Option<Task> {
        let mut jobs = self.lock_jobs();
        let state = jobs.get_mut(&key).filter(|s| **s == JobState::Queued)?;
        *state = JobState::Running;
        self.entry(key).take_task()
    }

    /// The code of a job's task returned.
    #[inline]
    pub(crate) fn end_job(&self, key: Key) {
        drop(self.job_done(key));
    }

    /// `end_job`, keeping the table locked: a periodic task re-armed
    /// meanwhile is either still `Running` for a `stop()` to end, or back
    /// in the intake before that `stop()` drains it. (Re-arming may also
    /// hand the key to a new job, which waits for the lock to enter it.)
    fn job_done(&self, key: Key) -> Option<crate::engine::sync::MutexGuard<'_, Jobs>> {
        self.config.executor.as_ref()?;
        let mut jobs = self.lock_jobs();
        jobs.remove(&key);
        Some(jobs)
    }

    /// On shutdown, with the core lock held: takes back every job not yet
    /// started (each ends stopped and is returned, with its task in place;
    /// it gains a reference for that), and ends each periodic run in
    /// progress stopped (it finishes, and is not re-armed). Returns the
    /// jobs taken back and how many of them, or of the runs, were still
    /// counted as pending.
    pub(crate) fn reclaim_jobs(&self, taken_back: &mut Vec<Key>) -> usize {
        let mut uncounted = 0;
        for (key, state) in self.lock_jobs().drain() {
            let entry = self.entry(key);
            match state {
                JobState::Queued => {
                    // `None`: a periodic job cancelled meanwhile.
                    if let Some(counted) = entry.try_stop_fired() {
                        uncounted += usize::from(counted);
                        self.slots.retain(key);
                        taken_back.push(key);
                    }
                }
                JobState::Running => {
                    // A one-shot that runs has fired; a periodic one that
                    // runs is still pending until now.
                    uncounted += usize::from(entry.try_stop_running());
                }
            }
        }
        uncounted
    }

    /// Runs `f` as a task of this timer, catching a panic.
    fn catch_task(&self, f: impl FnOnce()) -> Result<(), Box<dyn Any + Send>> {
        self.as_own_task(|| catch_unwind(AssertUnwindSafe(f)))
    }

    /// A fired task that will not run, or a periodic one that will not be
    /// re-armed: its timeout ends stopped, keeping its task for
    /// `Timeout::take_task`. If it was cancelled meanwhile, returns the
    /// task left in the slot, for the caller to drop outside any lock.
    pub(crate) fn end_unrun(&self, entry: &Entry) -> Option<Task> {
        match entry.try_stop_fired() {
            Some(true) => self.counts.uncount(1, Ended::Stopped),
            Some(false) => {}
            None => return entry.take_task(),
        }
        None
    }

    /// Ends a run that returned: re-arms the entry for its next run, unless
    /// it was cancelled during the run or the timer was stopped. Runs no
    /// user code: a task left over is returned, for the caller to drop
    /// outside any lock.
    pub(crate) fn rearm(&self, key: Key, task: UserBox<Periodic>) -> Option<Task> {
        let entry = self.entry(key);
        let next = task.next_due(entry.deadline(), self.clock.now());
        entry.put_task(Task::Periodic(task));
        if self.is_shutdown() {
            // Running when `stop()` was called: it ends stopped, and is not
            // in the list `stop()` returned.
            return self.end_unrun(entry);
        }
        if !entry.try_rearm(next) {
            // Cancelled during the run (the canceller counted it), or ended
            // stopped by `stop()` on an executor.
            return entry.take_task();
        }
        self.slots.retain(key); // the queue's reference
        if !self.enqueue(key) && self.try_stop(key) {
            self.counts.uncount(1, Ended::Stopped);
            // Ended stopped by the shutdown. Not left in the slot: the
            // queue's reference may be the last, released by the driver
            // under the core lock.
            return entry.take_task();
        }
        None
    }

    /// Ends a run that panicked: no later run starts.
    pub(crate) fn end_panicked(&self, entry: &Entry) {
        if entry.try_end_panicked() {
            self.counts.uncount(1, Ended::Fired);
        }
    }
}

impl Dispatch {
    /// The job's body, on an executor thread.
    fn start(mut self) {
        self.started = true; // whatever comes next, the executor ran it
        let (key, shared) = (self.timeout.key(), self.timeout.shared());
        match shared.start_job(key) {
            Some(task) => run(&self.timeout, task),
            None => shared.end_job(key), // taken back by `stop()`, or cancelled
        }
    }
}

/// Runs a fired task on this thread.
#[inline(always)]
fn run(timeout: &Timeout, task: Task) {
    let (entry, shared) = (timeout.entry(), timeout.shared());
    let result = match task {
        Task::Wake(wakers) => shared.catch_task(|| wakers.into_iter().for_each(|w| w.wake())),
        Task::Notice(notice) => shared.catch_task(|| notice.deliver()),
        Task::Callback(task) => {
            let result = shared.catch_task(|| task.into_inner().run(timeout));
            shared.end_job(timeout.key());
            result
        }
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
    if entry.is_cancelled() {
        // Cancelled before this run began. (Stopped is no reason to skip
        // it: `stop()` found the run begun, on an executor, and let it be.)
        shared.end_job(timeout.key());
        return;
    }
    let result = shared.catch_task(|| task.run_once(timeout));
    match result {
        Ok(()) => {
            let leftover = {
                let _jobs = shared.job_done(timeout.key());
                shared.rearm(timeout.key(), task)
            };
            drop(leftover); // may run user code: after the lock
        }
        Err(panic) => {
            shared.end_job(timeout.key());
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
        let (key, shared) = (self.timeout.key(), self.timeout.shared());
        if self.started || shared.lock_jobs().remove(&key).is_none() {
            return; // it started, or `stop()` took it back
        }
        tracing::warn!(
            target: "hashed_wheel_timer",
            deadline = ?self.timeout.deadline(),
            "the executor dropped a timer task without running it; its timeout is now stopped"
        );
        drop(shared.end_unrun(self.timeout.entry()));
    }
}
