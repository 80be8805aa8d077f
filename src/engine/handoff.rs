//! Where the engine hands a fired callback when the timer has an executor:
//! a shared function that takes a job. The public face builds it from the
//! user's `Executor`.

use std::fmt;
use std::sync::Arc;

/// A fired callback, ready to run.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// Hands jobs to the timer's executor. Shared, cloneable and printable.
#[derive(Clone)]
pub(crate) struct Handoff(Arc<dyn Fn(Job) + Send + Sync>);

impl Handoff {
    pub(crate) fn new(execute: impl Fn(Job) + Send + Sync + 'static) -> Handoff {
        Handoff(Arc::new(execute))
    }

    pub(crate) fn execute(&self, job: Job) {
        (self.0)(job)
    }
}

impl fmt::Debug for Handoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Executor")
    }
}
