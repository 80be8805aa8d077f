//! Messages a user must see: through `tracing` (target `hashed_wheel_timer`)
//! where a subscriber takes them, else on standard error.

use std::fmt;

#[cold]
pub(crate) fn warn(what: fmt::Arguments<'_>) {
    if tracing::enabled!(target: "hashed_wheel_timer", tracing::Level::WARN) {
        tracing::warn!(target: "hashed_wheel_timer", "{what}");
    } else {
        eprintln!("hashed_wheel_timer: warning: {what}");
    }
}

#[cold]
pub(crate) fn error(what: fmt::Arguments<'_>) {
    if tracing::enabled!(target: "hashed_wheel_timer", tracing::Level::ERROR) {
        tracing::error!(target: "hashed_wheel_timer", "{what}");
    } else {
        eprintln!("hashed_wheel_timer: error: {what}");
    }
}
