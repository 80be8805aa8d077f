//! Who may still name an entry: its `refs` count (see `slots.rs` and the
//! ground rules in `mod.rs`). The holder of the last reference vacates the
//! slot; a cancel that withdrew the entry from its lane may leave the
//! queue's reference counted instead of releasing it.

use super::{Entry, CANCELLED, PENDING, RESET, WITHDRAWN};
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

    /// True if two parties name the entry: its only holder and its queue,
    /// with no reset's `moved` reference out (see `Shared::cancel_sole`).
    #[inline(always)]
    pub(crate) fn has_two_references(&self) -> bool {
        self.refs.load(Ordering::Acquire) == 2
    }

    /// Empties an entry that its only holder withdrew from its lane
    /// (see `Shared::cancel_sole`), and returns its task. Nobody else can
    /// name it: no handle, and neither the driver nor `stop()` took it from
    /// the lane. So plain stores do, where a cancel and a release would each
    /// swap.
    #[inline(always)]
    pub(crate) fn vacate_withdrawn(&self) -> Option<Task> {
        debug_assert_eq!(self.state.load(Ordering::Relaxed) & !RESET, PENDING);
        debug_assert_eq!(self.refs.load(Ordering::Relaxed), 2);
        self.state.store(CANCELLED, Ordering::Relaxed);
        self.refs.store(0, Ordering::Relaxed);
        self.with_task_alone(Option::take)
    }

    pub(crate) fn retain(&self) {
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops one reference; true for the last one. With `WITHDRAWN` set,
    /// the last but one: the one left is the queue's, which nobody holds.
    #[inline(always)]
    pub(crate) fn release(&self) -> bool {
        match self.refs.fetch_sub(1, Ordering::AcqRel) {
            1 => true,
            2 => self.state.load(Ordering::Relaxed) & WITHDRAWN != 0,
            _ => false,
        }
    }

    /// The cancel that won the entry withdrew it from its lane, taking over
    /// the queue's reference: instead of releasing it, which is an atomic
    /// read-modify-write, it leaves it counted and says so, and `release`
    /// frees the slot one reference early.
    ///
    /// A plain store will do: the entry is `CANCELLED`, which no transition
    /// leaves, and a withdrawn entry never ran, so nothing sets
    /// `PANICKED`. Whoever releases the next-to-last reference acquired
    /// this store through the chain of `release`s after it.
    #[inline(always)]
    pub(crate) fn keep_withdrawn_reference(&self) {
        let state = self.state.load(Ordering::Relaxed);
        debug_assert_eq!(state & !RESET, CANCELLED);
        self.state.store(state | WITHDRAWN, Ordering::Relaxed);
    }
}
