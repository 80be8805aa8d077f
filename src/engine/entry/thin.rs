//! `ThinCallback`: a callback behind one pointer, so that an entry's task slot is 8 bytes. Its box
//! starts with the one function that runs, cancels or drops it, then holds the callback; a
//! `Box<dyn Callback>` is a pointer and a vtable's, 16 bytes. A zero-sized callback (a closure that
//! captures nothing) allocates nothing: it points at a static copy of the function.

use std::any::Any;
use std::marker::PhantomData;
use std::mem::{size_of, ManuallyDrop};
use std::ptr::NonNull;

use crate::engine::entry::task::{drop_caught, Callback};

/// What `Call` does with the callback, which it takes out of its box (freed first) by value.
enum What<'a> {
    Run(&'a dyn Any),
    Cancelled(&'a dyn Any),
    Drop,
}

/// Takes the box, which starts with it.
type Call = unsafe fn(NonNull<()>, What<'_>);

/// The box: `call` first, so a pointer to the box is one to it (`repr(C)`).
#[repr(C)]
struct Boxed<C> {
    call: Call,
    callback: C,
}

/// The `call` of a zero-sized `C`, in a static of its own.
struct Unboxed<C>(PhantomData<C>);

impl<C: Callback> Unboxed<C> {
    const CALL: Call = call::<C>;
}

/// `Call` for a `Boxed<C>`, or `Unboxed<C>::CALL`.
///
/// # Safety
///
/// `boxed` came from `ThinCallback::new::<C>`, and is called once.
unsafe fn call<C: Callback>(boxed: NonNull<()>, what: What<'_>) {
    let callback = if size_of::<C>() == 0 {
        // SAFETY: `new` forgot a `C`, zero-sized: any aligned pointer reads one, once (the
        // caller's promise).
        unsafe { NonNull::<C>::dangling().as_ptr().read() }
    } else {
        // SAFETY: the caller's promise: the `Box<Boxed<C>>` that `new` leaked, taken back once.
        let boxed = unsafe { Box::from_raw(boxed.cast::<Boxed<C>>().as_ptr()) };
        boxed.callback
    };
    match what {
        What::Run(timeout) => callback.run(timeout),
        What::Cancelled(timeout) => callback.cancelled(timeout),
        What::Drop => drop(callback),
    }
}

/// A one-shot callback in one pointer. Dropped unrun, its drop's panic is caught and logged, as a
/// `UserBox`'s is.
pub(crate) struct ThinCallback(NonNull<()>);

// SAFETY: it owns a `Callback`, which is `Send`.
unsafe impl Send for ThinCallback {}

impl ThinCallback {
    pub(crate) fn new<C: Callback>(callback: C) -> ThinCallback {
        if size_of::<C>() == 0 {
            std::mem::forget(callback); // `call` reads it back
            let call: &'static Call = &Unboxed::<C>::CALL;
            return ThinCallback(NonNull::from(call).cast());
        }
        let boxed = Box::new(Boxed {
            call: call::<C>,
            callback,
        });
        ThinCallback(NonNull::from(Box::leak(boxed)).cast())
    }

    pub(crate) fn run(self, timeout: &dyn Any) {
        self.consume(What::Run(timeout));
    }

    /// Tells the callback its cancel won.
    pub(crate) fn cancelled(self, timeout: &dyn Any) {
        self.consume(What::Cancelled(timeout));
    }

    fn consume(self, what: What<'_>) {
        // SAFETY: consumed once (`self`), and not dropped: `call` frees the box.
        unsafe { ManuallyDrop::new(self).call(what) }
    }

    /// # Safety
    ///
    /// Called once: the box is freed.
    unsafe fn call(&self, what: What<'_>) {
        // SAFETY: `new` pointed at a static `call`, or at the box it made, which starts with its
        // `call` (`repr(C)`) and lives until called; the caller's promise is `call`'s.
        unsafe { (*self.0.cast::<Call>().as_ptr())(self.0, what) }
    }
}

impl Drop for ThinCallback {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and nothing consumed `self` before (`consume` forgets it).
        drop_caught(|| unsafe { self.call(What::Drop) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    /// Adds what it was given to `seen` when run, 100 when cancelled, 1,000 when dropped (and then
    /// panics if `panics`).
    struct Probe(Arc<AtomicUsize>, bool);

    impl Callback for Probe {
        fn run(self, given: &dyn Any) {
            self.0
                .fetch_add(*given.downcast_ref::<usize>().unwrap(), SeqCst);
        }

        fn cancelled(self, _: &dyn Any) {
            self.0.fetch_add(100, SeqCst);
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.fetch_add(1_000, SeqCst);
            assert!(!self.1, "a callback's drop panics");
        }
    }

    #[test]
    fn it_runs_cancels_or_drops_its_callback_once_and_catches_a_drops_panic() {
        let seen = Arc::new(AtomicUsize::new(0));
        let probe = |panics| ThinCallback::new(Probe(seen.clone(), panics));
        probe(false).run(&7_usize);
        assert_eq!(seen.swap(0, SeqCst), 1_007, "run, then dropped");
        probe(false).cancelled(&7_usize);
        assert_eq!(seen.swap(0, SeqCst), 1_100, "told, then dropped");
        drop(probe(true));
        assert_eq!(
            seen.swap(0, SeqCst),
            1_000,
            "dropped once, its panic caught"
        );
        assert_eq!(Arc::strong_count(&seen), 1, "nothing leaked");
        ThinCallback::new(Unit).run(&7_usize);
        drop(ThinCallback::new(Unit));
        assert_eq!(UNIT.load(SeqCst), 12, "zero-sized: one run, two drops");
    }

    static UNIT: AtomicUsize = AtomicUsize::new(0);

    /// Zero-sized: adds 10 to `UNIT` when run, 1 when dropped.
    struct Unit;

    impl Callback for Unit {
        fn run(self, _: &dyn Any) {
            UNIT.fetch_add(10, SeqCst);
        }

        fn cancelled(self, _: &dyn Any) {}
    }

    impl Drop for Unit {
        fn drop(&mut self) {
            UNIT.fetch_add(1, SeqCst);
        }
    }
}
