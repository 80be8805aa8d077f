//! Messages a user must see: through `tracing` (target
//! `hashed_wheel_timer`) where a subscriber takes them, else on standard
//! error, so that a program without a subscriber is told too.

use std::fmt;

/// Warns of `what` (see the module docs).
#[cold]
pub(crate) fn warn(what: fmt::Arguments<'_>) {
    if tracing::enabled!(target: "hashed_wheel_timer", tracing::Level::WARN) {
        tracing::warn!(target: "hashed_wheel_timer", "{what}");
    } else {
        eprintln!("hashed_wheel_timer: warning: {what}");
    }
}

/// `warn`, as an error.
#[cold]
pub(crate) fn error(what: fmt::Arguments<'_>) {
    if tracing::enabled!(target: "hashed_wheel_timer", tracing::Level::ERROR) {
        tracing::error!(target: "hashed_wheel_timer", "{what}");
    } else {
        eprintln!("hashed_wheel_timer: error: {what}");
    }
}
