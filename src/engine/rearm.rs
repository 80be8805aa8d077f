//! How a periodic run ends: re-armed for its next run, as a new timeout is
//! scheduled, or ended by a cancel, a stop or a panic. The runner (the
//! worker, an `advance`, or an executor job; see `dispatch.rs`) calls it
//! once the run's code returned.

use crate::engine::counts::Ended;
use crate::engine::entry::Entry;
use crate::engine::key::Key;
use crate::engine::shared::Shared;
use crate::engine::task::{Periodic, Task, UserBox};

impl Shared {
    /// Ends a run that returned: re-arms the entry for its next run, unless
    /// it was cancelled during the run or the timer was stopped. Runs no
    /// user code: a task left over is returned, for the caller to drop
    /// outside any lock.
    pub(crate) fn rearm(&self, key: Key, task: UserBox<Periodic>) -> Option<Task> {
        let entry = self.entry(key);
        let next = task.next_due(entry.deadline(), self.clock.now());
        entry.set_deadline(next);
        entry.put_task(Task::Periodic(task));
        if self.is_shutdown() {
            // Running when `stop()` was called: it ends stopped, and is not
            // in the list `stop()` returned.
            return self.end_unrun(entry);
        }
        if !entry.try_rearm() {
            // Cancelled during the run (the canceller counted it), or ended
            // stopped by `stop()` on an executor.
            return entry.take_task();
        }
        self.slots.retain(key); // the queue's reference
        if !self.enqueue(key) && self.take_back(key) {
            self.uncount(1, Ended::Stopped);
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
            self.uncount(1, Ended::Fired);
        }
    }
}
