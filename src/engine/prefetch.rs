//! A hint to the CPU to start loading a cache line: for the cancel paths,
//! which read two or three lines that a timeout's producer wrote
//! milliseconds earlier and that have most often left every cache since.
//! Each read depends on the one before (a handle names its entry, the
//! entry its lane cell); a handle that keeps where its cell is can have
//! both on their way at once.

/// Starts loading the line holding `value`. Does nothing where the
/// instruction is not used (other targets, Miri, loom).
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
    // SAFETY: `_mm_prefetch` only hints the cache: it reads no value, and
    // never faults, whatever the address; `value` is a live reference
    // anyway. It is `unsafe` only for its `sse` target feature, which
    // every x86_64 CPU has.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>());
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri), not(loom))))]
    let _ = value;
}
