//! Time as the engine keeps it: `u64` nanoseconds, saturating at
//! `u64::MAX` (about 584 years), which means never.

use std::time::Duration;

/// Nanoseconds: since the timer's start (see `clock.rs`), or since the
/// process's first timer (see `tsc.rs`).
pub(crate) type Nanos = u64;

/// `d` in nanoseconds, saturated.
pub(crate) fn saturating_nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
