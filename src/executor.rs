//! Where callbacks run: on the worker thread (the default), or handed to an
//! [`Executor`], Netty's `taskExecutor`.

use tokio::runtime::Handle;

/// A callback of the timer, ready to run: what an [`Executor`] is given (see there for what it
/// guarantees).
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// Runs the timer's callbacks somewhere other than its worker thread, set with
/// [`Builder::executor`](crate::Builder::executor).
///
/// What a job guarantees wherever it runs:
/// - A panicking task is caught by the job and logged with `tracing` (the executor never sees
///   it); its [`Timeout`](crate::Timeout) reports [`is_panicked`](crate::Timeout::is_panicked).
/// - Runs of one periodic task never overlap, even on many threads.
/// - [`stop`](crate::HashedWheelTimer::stop) called from inside a job returns
///   [`TimerError::StopFromTimerTask`](crate::TimerError::StopFromTimerTask), as on the worker.
/// - A job the executor drops without running (its runtime shut down, say) ends its timeout
///   [stopped](crate::Timeout::is_stopped), counted once; [`take_task`](crate::Timeout::take_task)
///   hands the task back.
/// - A job not started when the timer is [stopped](crate::HashedWheelTimer::stop) (or its last
///   handle dropped) never runs its task: `stop` returned its timeout, task in place.
///
/// Every `Fn(Job) + Send + Sync` closure is an executor; [`TokioExecutor`] runs jobs on a tokio
/// runtime. `execute` is called on the worker thread, so it should hand the job off and return (one
/// that runs jobs inline works, but gives back the stalls an executor is for); a panic in `execute`
/// is caught and logged.
///
/// # Examples
///
/// A thread per job (a real program would use a pool):
///
/// ```
/// use hashed_wheel_timer::{Executor, HashedWheelTimer, Job};
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// struct ThreadPerJob;
///
/// impl Executor for ThreadPerJob {
///     fn execute(&self, job: Job) {
///         std::thread::spawn(job);
///     }
/// }
///
/// let timer = HashedWheelTimer::builder().executor(ThreadPerJob).build()?;
/// let (tx, rx) = mpsc::channel();
/// timer.new_timeout(
///     move |_| {
///         std::thread::sleep(Duration::from_millis(50)); // slow, but not on the worker
///         tx.send(std::thread::current().name().map(str::to_owned)).unwrap();
///     },
///     Duration::from_millis(1),
/// )?;
/// assert_eq!(rx.recv().unwrap(), None, "ran on an unnamed job thread, not the worker");
/// # Ok::<(), hashed_wheel_timer::TimerError>(())
/// ```
pub trait Executor: Send + Sync + 'static {
    /// Runs `job`, preferably on another thread, preferably soon.
    fn execute(&self, job: Job);
}

impl<F> Executor for F
where
    F: Fn(Job) + Send + Sync + 'static,
{
    fn execute(&self, job: Job) {
        self(job)
    }
}

/// Runs the timer's callbacks on a tokio runtime, through [`Handle::spawn`] or
/// [`Handle::spawn_blocking`].
#[derive(Debug, Clone)]
pub struct TokioExecutor {
    handle: Handle,
    blocking: bool,
}

impl TokioExecutor {
    /// Runs each callback as a tokio task, with [`Handle::spawn`]. For short callbacks, that should
    /// not cost a blocking-pool thread: one that blocks stalls a runtime worker thread.
    pub fn spawn(handle: Handle) -> TokioExecutor {
        TokioExecutor {
            handle,
            blocking: false,
        }
    }

    /// Runs each callback on tokio's blocking pool, with [`Handle::spawn_blocking`]. For callbacks
    /// that block or take long, the usual reason to want an executor.
    pub fn spawn_blocking(handle: Handle) -> TokioExecutor {
        TokioExecutor {
            handle,
            blocking: true,
        }
    }
}

impl Executor for TokioExecutor {
    fn execute(&self, job: Job) {
        // The JoinHandles are not needed: a job reports its own outcome.
        if self.blocking {
            drop(self.handle.spawn_blocking(job));
        } else {
            drop(self.handle.spawn(async move { job() }));
        }
    }
}
