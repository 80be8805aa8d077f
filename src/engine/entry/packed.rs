//! An `Option<Task>` in 16 bytes, not an enum's 24 (its tag would need a
//! word): the tag is a [`Kind`] the entry keeps in a byte beside its other
//! flags, bringing an entry from 56 bytes to 48 (see `entry/`).

use std::mem::ManuallyDrop;
use std::task::Waker;

use crate::engine::entry::task::{Callback, Notice, Periodic, Task, UserBox};

/// Which field of a [`PackedTask`] holds a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Empty = 0,
    Callback = 1,
    Periodic = 2,
    Wake = 3,
    Notice = 4,
}

impl Kind {
    /// Bits of a byte that a `Kind` uses; the rest are free for flags.
    pub(crate) const MASK: u8 = 0b111;

    /// The kind in the low bits of `byte`.
    #[inline(always)]
    pub(crate) fn from_bits(byte: u8) -> Kind {
        match byte & Kind::MASK {
            0 => Kind::Empty,
            1 => Kind::Callback,
            2 => Kind::Periodic,
            3 => Kind::Wake,
            _ => Kind::Notice,
        }
    }
}

/// A task whose tag is kept elsewhere: the [`Kind`] returned by the last
/// [`put`](PackedTask::put) says which field is live. Dropping it drops
/// nothing, so whoever owns it takes the task out first.
pub(crate) union PackedTask {
    empty: (),
    callback: ManuallyDrop<UserBox<dyn Callback>>,
    periodic: ManuallyDrop<UserBox<Periodic>>,
    wake: ManuallyDrop<Option<Waker>>,
    notice: ManuallyDrop<Notice>,
}

const _: () = assert!(std::mem::size_of::<PackedTask>() == 16);
const _: () = assert!(std::mem::size_of::<Notice>() == 16);

impl PackedTask {
    pub(crate) const EMPTY: PackedTask = PackedTask { empty: () };

    /// Stores `task`, overwriting without dropping, and returns its kind.
    /// The payload must be empty: never put, or taken since.
    #[inline(always)]
    pub(crate) fn put(&mut self, task: Option<Task>) -> Kind {
        let (packed, kind) = match task {
            None => (PackedTask::EMPTY, Kind::Empty),
            Some(Task::Callback(task)) => (
                PackedTask {
                    callback: ManuallyDrop::new(task),
                },
                Kind::Callback,
            ),
            Some(Task::Periodic(task)) => (
                PackedTask {
                    periodic: ManuallyDrop::new(task),
                },
                Kind::Periodic,
            ),
            Some(Task::Wake(waker)) => (
                PackedTask {
                    wake: ManuallyDrop::new(waker),
                },
                Kind::Wake,
            ),
            Some(Task::Notice(notice)) => (
                PackedTask {
                    notice: ManuallyDrop::new(notice),
                },
                Kind::Notice,
            ),
        };
        *self = packed;
        kind
    }

    /// Moves the task out. Afterwards the payload counts as empty.
    ///
    /// # Safety
    ///
    /// `kind` is what the last `put` on this payload returned, and nothing
    /// has been taken since (or `kind` is `Empty`).
    #[inline(always)]
    pub(crate) unsafe fn take(&mut self, kind: Kind) -> Option<Task> {
        // SAFETY: by the contract, `kind` names the field the last `put`
        // wrote, not moved out since: initialised, and ours to move.
        unsafe {
            match kind {
                Kind::Empty => None,
                Kind::Callback => Some(Task::Callback(ManuallyDrop::take(&mut self.callback))),
                Kind::Periodic => Some(Task::Periodic(ManuallyDrop::take(&mut self.periodic))),
                Kind::Wake => Some(Task::Wake(ManuallyDrop::take(&mut self.wake))),
                Kind::Notice => Some(Task::Notice(ManuallyDrop::take(&mut self.notice))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::entry::task::Every;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn every_kind_of_task_comes_back_out_as_it_went_in() {
        let ran = Arc::new(AtomicUsize::new(0));
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let ran_by_callback = ran.clone();
        let heard = Arc::new(AtomicUsize::new(0));
        let heard_by = {
            let heard = heard.clone();
            crate::engine::entry::task::Listener::new(move |token| {
                heard.fetch_add(token as usize, Ordering::SeqCst);
            })
        };
        let tasks = [
            None,
            Some(Task::callback(Box::new(move |_: &crate::Timeout| {
                ran_by_callback.fetch_add(1, Ordering::SeqCst);
            }))),
            Some(Task::periodic(Periodic::new(
                |_: &dyn std::any::Any| {},
                Every::Rate(10),
            ))),
            Some(Task::Wake(None)),
            Some(Task::Wake(Some(Waker::from(counter.clone())))),
            Some(Task::Notice(Notice {
                to: heard_by.clone(),
                token: 42,
            })),
        ];
        let expected = [
            Kind::Empty,
            Kind::Callback,
            Kind::Periodic,
            Kind::Wake,
            Kind::Wake,
            Kind::Notice,
        ];
        let mut packed = PackedTask::EMPTY;
        for (task, expected) in tasks.into_iter().zip(expected) {
            let kind = packed.put(task);
            assert_eq!(kind, expected);
            assert_eq!(Kind::from_bits(kind as u8 | !Kind::MASK), kind);
            // SAFETY: `kind` is what `put` just returned.
            match unsafe { packed.take(kind) } {
                None => assert_eq!(kind, Kind::Empty),
                Some(Task::Callback(task)) => {
                    let timer = crate::HashedWheelTimer::builder()
                        .manual_clock()
                        .build()
                        .unwrap();
                    let t = timer
                        .new_timeout(|_| {}, std::time::Duration::ZERO)
                        .unwrap();
                    task.into_inner().run(&t);
                }
                Some(Task::Periodic(_)) => assert_eq!(kind, Kind::Periodic),
                Some(Task::Wake(waker)) => waker.into_iter().for_each(Waker::wake),
                Some(Task::Notice(notice)) => notice.deliver(),
            }
        }
        assert_eq!(
            ran.load(Ordering::SeqCst),
            1,
            "the callback came back whole"
        );
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "so did the waker");
        assert_eq!(Arc::strong_count(&counter), 1, "and it was dropped once");
        assert_eq!(
            heard.load(Ordering::SeqCst),
            42,
            "the notice came back whole"
        );
        assert_eq!(Arc::strong_count(&heard_by), 1, "and was dropped once");
    }
}
