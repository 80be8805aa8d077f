//! Why the engine refused a new timeout, in its own words; the public
//! face turns it into a `TimerError`.

/// Why a timeout could not be scheduled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The timer has been stopped.
    Shutdown,
    /// The timer holds as many pending timeouts as it may.
    AtCapacity { pending: usize, max: usize },
    /// The worker thread could not be started.
    WorkerSpawn(String),
}
