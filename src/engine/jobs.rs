//! The table of a timer's jobs in its executor's hands (see
//! `dispatch.rs`), kept in `Shared`.

use std::collections::HashMap;

use crate::engine::key::Key;

/// Where a job handed to the executor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobState {
    /// In the executor's hands, not started: `stop()` may take it back.
    Queued,
    /// Running its task's code.
    Running,
}

/// The timer's jobs in the executor's hands, by key: how `stop()` finds
/// the fired tasks that have not started, and the periodic runs in
/// progress. A job is `Queued` until it starts, `Running` until its
/// task's code returns, and then leaves.
pub(crate) type Jobs = HashMap<Key, JobState>;
