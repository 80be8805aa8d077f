//! The engine: how the timer works, in the five parts a timeout passes through, `clock`, `entry`,
//! `intake`, `wheel` and `driver` (each module's docs say what it owns; ARCHITECTURE.md maps them).
//! Nothing here imports the public face (`src/*.rs` beside this folder): the engine speaks in its
//! own types (`Refusal`, `Handoff`, `Config`, `Task`, `Publish`), which the face converts.

pub(crate) mod clock;
pub(crate) mod driver;
pub(crate) mod entry;
pub(crate) mod intake;
pub(crate) mod notice;
pub(crate) mod sync;
pub(crate) mod wheel;
