//! What hears of a timer's shutdown besides its own entries: a delay
//! queue whose consumer waits on an empty queue has no entry to be woken
//! through, so it registers a hook (`Shared::on_shutdown`), which `stop()`
//! calls once it is done.

use std::sync::{Arc, Mutex, Weak};

/// Told once, after `stop()` has stopped every entry.
pub(crate) trait ShutdownHook: Send + Sync {
    fn shut_down(&self);
}

/// The hooks of one timer, held weakly: a hook's owner may go first.
#[derive(Default)]
pub(crate) struct ShutdownHooks(Mutex<Vec<Weak<dyn ShutdownHook>>>);

impl ShutdownHooks {
    /// Adds `hook`. Hooks whose owners have gone are dropped here, so the
    /// list stays as long as the live hooks.
    pub(crate) fn add(&self, hook: &Arc<dyn ShutdownHook>) {
        let mut hooks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        hooks.retain(|h| h.strong_count() > 0);
        hooks.push(Arc::downgrade(hook));
    }

    /// Calls every live hook, outside the lock.
    pub(crate) fn run(&self) {
        let hooks: Vec<_> = {
            let hooks = self.0.lock().unwrap_or_else(|p| p.into_inner());
            hooks.iter().filter_map(Weak::upgrade).collect()
        };
        hooks.iter().for_each(|h| h.shut_down());
    }
}
