//! What hears of a timer's shutdown besides its own entries: a delay
//! queue whose consumer waits on an empty queue has no entry to be woken
//! through, so it registers a hook, which `stop()` calls once it is done.

use std::sync::{Arc, Weak};

use crate::engine::shared::Shared;

/// Told once, after `stop()` has stopped every entry.
pub(crate) trait ShutdownHook: Send + Sync {
    fn shut_down(&self);
}

/// The hooks of one timer, held weakly: a hook's owner may go first.
#[derive(Default)]
pub(crate) struct ShutdownHooks(std::sync::Mutex<Vec<Weak<dyn ShutdownHook>>>);

impl Shared {
    /// Calls `hook` when the timer shuts down, or now if it has. Hooks
    /// whose owners have gone are dropped here, so the list stays as long
    /// as the live hooks.
    pub(crate) fn on_shutdown(&self, hook: &Arc<dyn ShutdownHook>) {
        {
            let mut hooks = self
                .shutdown_hooks
                .0
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            hooks.retain(|h| h.strong_count() > 0);
            hooks.push(Arc::downgrade(hook));
        }
        if self.is_shutdown() {
            hook.shut_down();
        }
    }

    /// Calls every live hook; after `stop()` has done its work.
    pub(crate) fn run_shutdown_hooks(&self) {
        let hooks: Vec<_> = {
            let hooks = self
                .shutdown_hooks
                .0
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            hooks.iter().filter_map(Weak::upgrade).collect()
        };
        hooks.iter().for_each(|h| h.shut_down());
    }
}
