//! The engine: how the timer works, in the five parts a timeout passes through: the `clock`, the
//! `entry` (its state machine, its task, the arena that holds it), the `intake` (how a new, reset
//! or cancelled entry reaches the driver), the `wheel`, and the `driver` (one routine, `turn`, run
//! by the worker thread, a tokio task or a manual `advance`, and the dispatch of what fires).
//! Nothing here imports the public face (`src/*.rs` beside this folder): the engine speaks in its
//! own types (`Refusal`, `Handoff`, `Config`, `Task`, `Publish`), and the face converts at the
//! boundary. See ARCHITECTURE.md for the map.

pub(crate) mod clock;
pub(crate) mod driver;
pub(crate) mod entry;
pub(crate) mod intake;
pub(crate) mod notice;
pub(crate) mod sync;
pub(crate) mod wheel;
