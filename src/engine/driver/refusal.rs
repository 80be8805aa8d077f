//! Why the engine refused a new timeout; the face makes it a `TimerError`.

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The timer has been stopped.
    Shutdown,
    /// The timer holds as many pending timeouts as it may.
    AtCapacity { pending: usize, max: usize },
    /// The worker thread could not be started.
    WorkerSpawn(String),
}
