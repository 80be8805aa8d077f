//! Stopping: each entry that never ran is stopped and returned once, whoever
//! stops (`stop()`, the last handle's drop, a tokio driver task dropped with
//! its runtime); futures are woken instead. Listeners (`Shared::listen`)
//! are told last, for a delay queue's consumer waiting with no entry in the wheel.

use std::task::Waker;

use crate::engine::driver::{counts::Ended, dispatch::each_then_first_panic, Shared};
use crate::engine::entry::{key::Key, task::Task};
use crate::engine::sync::{fence, lock, Ordering};

impl Shared {
    /// Due entries that will not fire after all: stopped, into `Core::unfired`.
    #[cold]
    pub(crate) fn set_aside(&self, keys: impl Iterator<Item = Key>) {
        // The lock ends with this statement: a release may run user code.
        let released = self.stop_each(keys, &mut self.lock_core().unfired);
        released.into_iter().for_each(|key| self.slots.release(key));
    }

    /// Under the core lock: stops each of `keys` into `stopped`, uncounted, and
    /// returns those cancelled meanwhile, to release after the lock.
    fn stop_each(&self, keys: impl IntoIterator<Item = Key>, stopped: &mut Vec<Key>) -> Vec<Key> {
        let (won, cancelled): (Vec<Key>, Vec<Key>) = keys
            .into_iter()
            .partition(|&key| self.entry(key).try_stop());
        self.counts.uncount(won.len(), Ended::Stopped);
        stopped.extend(won);
        cancelled
    }

    /// `shut_down` with nobody left to ask for what never ran: its tasks are
    /// dropped now, even if a `Timeout` handle outlives the timer.
    pub(crate) fn shut_down_dropping(&self, wait: bool) {
        self.tasks_dropped.store(true, Ordering::SeqCst); // before the hooks run
        for key in self.shut_down(wait) {
            drop(self.entry(key).take_task());
            self.slots.release(key);
        }
    }

    /// Stops the timer; returns every entry that never ran, stopped, each with a reference. `wait`:
    /// first waits until no thread drives, so nothing fires after. States and counts change under
    /// the core lock, so a second call finds them done; wakers and releases (user code) after.
    pub(crate) fn shut_down(&self, wait: bool) -> Vec<Key> {
        self.shutdown.store(true, Ordering::SeqCst);
        self.unpark_worker();
        if wait {
            // Until the worker exits (a second caller waits too: the first holds `worker` until it
            // joined) and no other driver turns (never called from a driver: see `in_own_task`).
            if let Some(handle) = lock(&self.worker).take() {
                // The worker may not have published its `Thread` when
                // `shut_down` tried to unpark it: unpark it here too.
                handle.thread().unpark();
                let _ = handle.join();
            }
            drop(lock(&self.driver));
        }
        self.cancel_batched(); // dropped `Sleep`s, removed items: cancelled, not stopped
        fence(Ordering::SeqCst);
        let mut all = Vec::new();
        let mut core = self.lock_core();
        // Jobs first: a periodic run that ends on an executor from now
        // on sees the shutdown, and one that ended is in the intake.
        let uncounted = self.reclaim_jobs(&mut all);
        let mut drained = Vec::new();
        core.wheel.drain_all(&self.slots, &mut drained);
        drained.append(&mut core.ready);
        core.held.iter_mut().for_each(|bucket| bucket.clear());
        self.intake.drain(usize::MAX, true, |key| drained.push(key));
        while let Some(key) = self.mailbox.pop() {
            self.release_locked(key);
        }
        let released = self.stop_each(drained, &mut all);
        all.append(&mut core.unfired);
        self.counts.uncount(uncounted, Ended::Stopped);
        drop(core);
        wait.then(|| self.counts.end()); // else a turn under way may hold keys: still pending
        released.into_iter().for_each(|key| self.slots.release(key));
        #[cfg(feature = "metrics")]
        self.config.publish.turned(self, self.clock.now(), None);
        all.retain(|&key| !self.wake_if_future(key));
        all.sort_by_key(|&key| self.entry(key).deadline());
        // Every listener, told outside the lock (it ends with this statement).
        let listeners: Vec<_> = lock(&self.listeners)
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        let _ = self.catch_task(|| each_then_first_panic(&listeners, |l| l.shut_down())); // may panic
        all
    }

    /// Wakes a stopped future's entry, to be polled and end, and releases it; true if it was one.
    fn wake_if_future(&self, key: Key) -> bool {
        let future = |task: &mut Task| matches!(task, Task::Wake(_));
        let taken = self.entry(key).with_task(|slot| slot.take_if(future));
        let Some(Task::Wake(waker)) = taken else {
            return false;
        };
        let _ = self.catch_task(|| waker.into_iter().for_each(Waker::wake)); // may panic
        self.slots.release(key);
        true
    }
}
