//! `Packed`: an entry's `Option<Task>` in 8 bytes. Its variant lives apart, in spare bits of the
//! entry's `word`, so an entry is 32 bytes; an `Option<Task>` (variants of 16 bytes, and a tag)
//! made it 48.
//!
//! A waker is packed as its data pointer, its vtable named by the kind: its place in `VTABLES`, a
//! process-wide table of the first vtables seen. A program has few (tokio's tasks share one, as do
//! `Arc<impl Wake>` wakers of one type); a waker of any other is boxed.

use std::mem::ManuallyDrop;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering::AcqRel, Ordering::Acquire};
use std::task::{RawWakerVTable, Waker};

use crate::engine::entry::task::{Notice, Periodic, Task, UserBox};
use crate::engine::entry::thin::ThinCallback;

/// Which `Option<Task>` a `Packed` holds (4 bits): `NONE`, no task.
pub(crate) const NONE: u8 = 0;
const CALLBACK: u8 = 1;
const PERIODIC: u8 = 2;
const NO_WAKER: u8 = 3;
const NOTICE: u8 = 4;
const BOXED_WAKER: u8 = 5;
/// From here up: a waker whose vtable is `VTABLES[kind - WAKER]`.
const WAKER: u8 = 6;

/// Each place is written once, from null to a vtable it then keeps (a std static: loom's atomics
/// cannot be statics; the places' claims are tested by threads, under Miri and ThreadSanitizer).
static VTABLES: [AtomicPtr<RawWakerVTable>; (16 - WAKER) as usize] =
    [const { AtomicPtr::new(null_mut()) }; (16 - WAKER) as usize];

/// `vtable`'s place in `VTABLES`, claiming a free one if it has none; `None` if all are taken.
#[inline(always)]
fn place_of(vtable: &'static RawWakerVTable) -> Option<u8> {
    let wanted = (vtable as *const RawWakerVTable).cast_mut();
    (0..VTABLES.len()).find_map(|place| {
        let mut seen = VTABLES[place].load(Acquire);
        if seen.is_null() {
            let claim = VTABLES[place].compare_exchange(seen, wanted, AcqRel, Acquire);
            seen = claim.map_or_else(|theirs| theirs, |_| wanted);
        }
        (seen == wanted).then_some(place as u8)
    })
}

/// A task's payload without its variant. Dropping it drops nothing: `unpack` moves the task out.
pub(crate) union Packed {
    empty: (),
    callback: ManuallyDrop<ThinCallback>,
    periodic: ManuallyDrop<UserBox<Periodic>>,
    /// The data of a waker whose vtable the kind names.
    waker: *const (),
    boxed_waker: ManuallyDrop<Box<Waker>>,
    notice: ManuallyDrop<Notice>,
}

// SAFETY: it holds a `Task`'s parts, and `Task` is `Send`: the data pointer is a `Waker`'s, which is.
unsafe impl Send for Packed {}

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
            Some(Task::Wake(Some(waker))) => match place_of(waker.vtable()) {
                Some(place) => (WAKER + place, Packed { waker: ManuallyDrop::new(waker).data() }),
                None => (BOXED_WAKER, Packed { boxed_waker: ManuallyDrop::new(Box::new(waker)) }),
            },
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
        // SAFETY: by the caller's promise, each arm reads the field `pack` wrote for `kind`; a
        // waker's data and vtable (its place holds it for good) are those of the one it forgot.
        unsafe {
            match kind {
                CALLBACK => Some(Task::Callback(ManuallyDrop::into_inner(self.callback))),
                PERIODIC => Some(Task::Periodic(ManuallyDrop::into_inner(self.periodic))),
                NO_WAKER => Some(Task::Wake(None)),
                NOTICE => Some(Task::Notice(ManuallyDrop::into_inner(self.notice))),
                BOXED_WAKER => Some(Task::Wake(Some(*ManuallyDrop::into_inner(
                    self.boxed_waker,
                )))),
                NONE => None,
                _ => {
                    let vtable = VTABLES[usize::from(kind - WAKER)].load(Acquire);
                    Some(Task::Wake(Some(Waker::new(self.waker, &*vtable))))
                }
            }
        }
    }
}
