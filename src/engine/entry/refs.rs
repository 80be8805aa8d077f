//! Who may still name an entry: its `refs` count (see `slots.rs` and the
//! ground rules in `mod.rs`). The holder of the last reference vacates the
//! slot, and the count alone says who that is.

use super::Entry;
use crate::engine::packed_task::Kind;
use crate::engine::sync::Ordering;
use crate::engine::task::Task;

impl Entry {
    /// Empties a slot whose last reference is gone; returns any task left.
    #[inline(always)]
    pub(crate) fn vacate(&self) -> Option<Task> {
        if Kind::from_bits(self.task_word.load(Ordering::Relaxed)) == Kind::Empty {
            return None; // the common case: fired or cancelled, task taken
        }
        self.with_task_alone(Option::take)
    }

    pub(crate) fn retain(&self) {
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops one reference; true for the last one.
    ///
    /// The count alone decides: once this returns, the caller names the
    /// entry no more, and another holder may free the slot and the next
    /// schedule fill it. So nothing is read from the entry after the
    /// decrement. (A flag read after it, for a withdrawn entry, once let a
    /// release that was not the last free the reused slot a second time.)
    #[inline(always)]
    pub(crate) fn release(&self) -> bool {
        self.refs.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// The cancel that won the entry withdrew it from its lane, taking over
    /// the queue's reference: it gives that reference up. Never the last:
    /// the caller holds one too.
    #[inline(always)]
    pub(crate) fn release_withdrawn_reference(&self) {
        let last = self.release();
        debug_assert!(!last, "a cancel's caller holds a reference too");
    }
}

/// A loom model of a release against the slot's reuse, through the public
/// handle:
///
///     RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
///         cargo test --release --lib --target-dir target/loom -- loom_models
#[cfg(all(test, loom))]
mod loom_models {
    use crate::engine::sync::{AtomicUsize, Ordering};
    use crate::{HashedWheelTimer, Timeout};
    use loom::thread;
    use std::sync::Arc;
    use std::time::Duration;

    const TICK: Duration = Duration::from_millis(1);

    /// The driving thread drops the handle it ran a fired task with while
    /// the user drops theirs, and the user's thread, whose drop freed the
    /// slot, reuses it at once for a timeout it cancels before the driver
    /// drains it. The driver's release, which was not the last, must not
    /// free the reused slot: its reference is gone, and so is its say about
    /// the slot. Freed twice, the slot would be handed to two timeouts.
    #[test]
    fn loom_models_a_release_that_was_not_the_last_never_frees_the_slot_reused_after_it() {
        // An advance that fires, two schedules, a cancel, and five
        // schedules after: more than loom's default 1,000 branches.
        let mut model = loom::model::Builder::new();
        model.max_branches = 4_000;
        model.check(|| {
            let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
            let runs = Arc::new(AtomicUsize::new(0));
            let counter = runs.clone();
            let first = timer
                .new_timeout(
                    move |_: &Timeout| {
                        counter.fetch_add(1, Ordering::SeqCst);
                    },
                    TICK,
                )
                .unwrap();
            timer.advance(Duration::ZERO); // filed into its bucket
            let worker = timer.clone();
            let driver = thread::spawn(move || worker.advance(TICK));
            drop(first); // the last reference, if the driver dropped its own
            let second = timer.new_timeout(|_| {}, TICK * 10).unwrap();
            assert!(second.cancel(), "nothing else could win it");
            drop(second);
            driver.join().unwrap();
            assert_eq!(runs.load(Ordering::SeqCst), 1);
            // This thread keeps a line's spare slots (4 under loom): a
            // fifth schedule refills from the shared list, where a slot
            // freed twice would be again.
            let later: Vec<Timeout> = (0..5)
                .map(|_| timer.new_timeout(|_| {}, TICK).unwrap())
                .collect();
            for (i, a) in later.iter().enumerate() {
                for b in &later[i + 1..] {
                    assert!(a != b, "two pending timeouts share one slot");
                }
            }
        });
    }
}
