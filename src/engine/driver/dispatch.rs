//! Running a fired task here or on the [`Executor`](crate::Executor) (the face's `Handoff`,
//! `entry/task.rs`), and ending a periodic run (`rearm`). A task runs marked as its timer's
//! (`stop()` in it is an error, not a deadlock); a panic is caught (its payload's drop too: a
//! `UserBox`), logged and recorded on the entry. Wakers and notices run where they fired, even with
//! an executor: cheap, and in firing order. With an executor, each fire is a boxed job, in the table
//! of jobs until it starts.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::{any::Any, sync::Arc};

use crate::engine::driver::{counts::Ended, Shared};
use crate::engine::entry::task::{panic_message, Handoff, JobState, Jobs, Periodic, Task, UserBox};
use crate::engine::entry::{handle::Timeout, key::Key, Entry};
use crate::engine::sync::{lock, MutexGuard};

/// A fired task handed to the executor. The task waits in its entry until the
/// job starts, so `stop()` can take it back; a job dropped unrun ends stopped.
struct Dispatch {
    timeout: Timeout,
    started: bool,
}

impl Shared {
    /// Runs a fired `task` here or on the executor, taking the timer's reference.
    #[inline]
    pub(crate) fn dispatch(self: &Arc<Self>, key: Key, task: Task) {
        let timeout = Timeout::from_parts(key, self);
        match &self.config.executor {
            Some(executor) if !matches!(task, Task::Wake(_) | Task::Notice(_)) => {
                timeout.entry().put_task(task);
                lock(&self.jobs).insert(key, JobState::Queued);
                hand_off(executor, timeout);
            }
            _ => run(&timeout, task),
        }
    }

    /// Takes `key`'s task to run, marking its job `Running` in the same step.
    /// `None` if `stop()` took the job back, or a cancel took a periodic task.
    fn start_job(&self, key: Key) -> Option<Task> {
        let mut jobs = lock(&self.jobs);
        let state = jobs.get_mut(&key).filter(|s| **s == JobState::Queued)?;
        *state = JobState::Running;
        self.entry(key).take_task()
    }

    #[inline]
    pub(crate) fn end_job(&self, key: Key) {
        drop(self.job_done(key));
    }

    /// `end_job`, the table kept locked while the caller re-arms: a `stop()`
    /// finds it `Running` or back in the intake; a new job waits to enter.
    fn job_done(&self, key: Key) -> Option<MutexGuard<'_, Jobs>> {
        self.config.executor.as_ref()?;
        let mut jobs = lock(&self.jobs);
        jobs.remove(&key);
        Some(jobs)
    }

    /// On shutdown, under the core lock: takes back into `taken_back` each job not
    /// started (stopped, task in place, a new reference), and stops each periodic run
    /// in progress (it finishes, not re-armed). Returns how many were still pending.
    pub(crate) fn reclaim_jobs(&self, taken_back: &mut Vec<Key>) -> usize {
        let mut uncounted = 0;
        for (key, state) in lock(&self.jobs).drain() {
            let entry = self.entry(key);
            if state == JobState::Running {
                // A one-shot that runs has fired; a periodic one that runs was pending until now.
                uncounted += usize::from(entry.try_stop_running());
            } else if let Some(counted) = entry.try_stop_fired() {
                // (`None`: a periodic job cancelled meanwhile.)
                uncounted += usize::from(counted);
                entry.retain();
                taken_back.push(key);
            }
        }
        uncounted
    }

    pub(crate) fn catch_task(&self, f: impl FnOnce()) -> Result<(), UserBox<dyn Any + Send>> {
        self.mark(|| catch_unwind(AssertUnwindSafe(f)).map_err(UserBox::new))
    }

    /// A fired task that will not run, or a periodic one not re-armed: ends stopped (if `stop()`
    /// has not), the task kept for `Timeout::take_task`; if cancelled, returns it, to drop unlocked.
    pub(crate) fn end_unrun(&self, entry: &Entry) -> Option<Task> {
        if let Some(counted) = entry.try_stop_fired() {
            self.counts.uncount(usize::from(counted), Ended::Stopped);
        }
        entry.is_cancelled().then(|| entry.take_task()).flatten()
    }

    /// Re-arms a periodic entry whose run returned, unless cancelled or stopped meanwhile, its job
    /// ended and the table locked throughout (`job_done`). No user code: returns any task left, to
    /// drop outside locks.
    fn rearm(&self, key: Key, task: UserBox<Periodic>) -> Option<Task> {
        let _jobs = self.job_done(key);
        let entry = self.entry(key);
        let next = task.every.next_due(entry.deadline(), self.clock.now());
        entry.put_task(Task::Periodic(task));
        if self.is_shutdown() || !entry.try_rearm(next) {
            // Running at `stop()` (it ends stopped, not in the list returned; on an executor
            // `stop()` may have ended it), or cancelled during the run (the canceller counted it).
            return self.end_unrun(entry);
        }
        entry.retain(); // the queue's reference
        if !self.enqueue(key) && entry.try_stop() {
            self.counts.uncount(1, Ended::Stopped);
            // Stopped by the shutdown. Taken out: the queue's reference may
            // be the last, released under the core lock.
            return entry.take_task();
        }
        None
    }
}

/// Hands `timeout`'s job to the executor; a panic in `execute` is caught.
fn hand_off(executor: &Handoff, timeout: Timeout) {
    let job = Dispatch {
        timeout,
        started: false,
    };
    let handed_off = catch_unwind(AssertUnwindSafe(|| {
        executor.execute(Box::new(move || job.start()));
    }));
    if let Err(panic) = handed_off.map_err(UserBox::new) {
        // The job was dropped while unwinding, which ended its timeout.
        tracing::error!(
            target: "hashed_wheel_timer",
            panic = panic_message(&*panic),
            "the timer's executor panicked in execute(); the timer keeps running"
        );
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

#[inline(always)]
fn run(timeout: &Timeout, task: Task) {
    let (entry, shared) = (timeout.entry(), timeout.shared());
    let result = match task {
        Task::Wake(wakers) => shared.catch_task(|| wakers.into_iter().for_each(|w| w.wake())),
        Task::Notice(notice) => shared.catch_task(|| shared.deliver(notice)),
        Task::Callback(task) => {
            let result = shared.catch_task(|| task.run(timeout));
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

/// One run of a periodic task, then `rearm`, or its end if it panicked.
fn run_periodic(timeout: &Timeout, mut task: UserBox<Periodic>) {
    let (entry, shared) = (timeout.entry(), timeout.shared());
    if entry.is_cancelled() {
        // Cancelled before the run. Stopped is no reason to skip it: `stop()`
        // found the run begun, on an executor, and let it be.
        shared.end_job(timeout.key());
        return;
    }
    match shared.catch_task(|| (task.run)(timeout)) {
        Ok(()) => drop(shared.rearm(timeout.key(), task)), // may run user code: after the lock
        Err(panic) => {
            shared.end_job(timeout.key());
            if entry.try_end_panicked() {
                shared.counts.uncount(1, Ended::Fired);
            }
            report_panic(timeout, &*panic);
        }
    }
}

#[cold]
#[inline(never)]
fn report_panic(timeout: &Timeout, panic: &(dyn Any + Send)) {
    let (entry, shared) = (timeout.entry(), timeout.shared());
    tracing::warn!(
        target: "hashed_wheel_timer",
        deadline = ?shared.clock.to_instant(entry.deadline()),
        periodic = entry.is_periodic(),
        panic = panic_message(panic),
        "a timer task panicked; the timer keeps running"
    );
}

impl Drop for Dispatch {
    fn drop(&mut self) {
        let (key, shared) = (self.timeout.key(), self.timeout.shared());
        let entry = self.timeout.entry();
        if self.started || lock(&shared.jobs).remove(&key).is_none() || entry.is_cancelled() {
            return; // it started, `stop()` took it back, or a cancel won: nothing is lost
        }
        tracing::warn!(
            target: "hashed_wheel_timer",
            deadline = ?shared.clock.to_instant(entry.deadline()),
            "the executor dropped a timer task without running it; its timeout is now stopped"
        );
        drop(shared.end_unrun(entry));
    }
}

/// Runs `f` on every item, even after one panics (a second panic while the first unwinds would
/// abort the process); then the first panic goes on.
pub(crate) fn each_then_first_panic<T>(items: impl IntoIterator<Item = T>, f: impl Fn(T)) {
    let run = |item| catch_unwind(AssertUnwindSafe(|| f(item)));
    let first = items.into_iter().map(run).fold(Ok(()), Result::and);
    first.unwrap_or_else(|panic| resume_unwind(panic));
}
