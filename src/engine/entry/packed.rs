//! `Packed`: an entry's `Option<Task>` in 16 bytes. Its variant lives apart, in spare bits of
//! the entry's `word`, so an entry is 40 bytes; an `Option<Task>` (three variants of 16 bytes,
//! and a tag) made it 48.

use std::mem::ManuallyDrop;
use std::task::Waker;

use crate::engine::entry::task::{Callback, Notice, Periodic, Task, UserBox};

/// Which `Option<Task>` a `Packed` holds: `NONE`, no task.
pub(crate) const NONE: u8 = 0;
const CALLBACK: u8 = 1;
const PERIODIC: u8 = 2;
const NO_WAKER: u8 = 3;
const WAKER: u8 = 4;
const NOTICE: u8 = 5;

/// A task's payload without its variant. Dropping it drops nothing: `unpack` moves the task out.
pub(crate) union Packed {
    empty: (),
    callback: ManuallyDrop<UserBox<dyn Callback>>,
    periodic: ManuallyDrop<UserBox<Periodic>>,
    waker: ManuallyDrop<Waker>,
    notice: ManuallyDrop<Notice>,
}

impl Packed {
    pub(crate) const EMPTY: Packed = Packed { empty: () };

    /// `task`'s kind, and its payload.
    #[inline(always)]
    #[rustfmt::skip] // one arm a line, as `unpack` has
    pub(crate) fn pack(task: Option<Task>) -> (u8, Packed) {
        match task {
            None => (NONE, Packed::EMPTY),
            Some(Task::Callback(task)) => (CALLBACK, Packed { callback: ManuallyDrop::new(task) }),
            Some(Task::Periodic(task)) => (PERIODIC, Packed { periodic: ManuallyDrop::new(task) }),
            Some(Task::Wake(None)) => (NO_WAKER, Packed::EMPTY),
            Some(Task::Wake(Some(waker))) => (WAKER, Packed { waker: ManuallyDrop::new(waker) }),
            Some(Task::Notice(notice)) => (NOTICE, Packed { notice: ManuallyDrop::new(notice) }),
        }
    }

    /// The task `pack` made these bytes from.
    ///
    /// # Safety
    ///
    /// `kind` is the kind `pack` returned with these bytes, and they are unpacked once.
    #[inline(always)]
    pub(crate) unsafe fn unpack(self, kind: u8) -> Option<Task> {
        // SAFETY: by the caller's promise, each arm reads the field `pack` wrote for `kind`.
        unsafe {
            match kind {
                CALLBACK => Some(Task::Callback(ManuallyDrop::into_inner(self.callback))),
                PERIODIC => Some(Task::Periodic(ManuallyDrop::into_inner(self.periodic))),
                NO_WAKER => Some(Task::Wake(None)),
                WAKER => Some(Task::Wake(Some(ManuallyDrop::into_inner(self.waker)))),
                NOTICE => Some(Task::Notice(ManuallyDrop::into_inner(self.notice))),
                _ => None,
            }
        }
    }
}
