//! The engine: how the timer works. The entry arena and its state machine,
//! the intake (lanes and the shared queue), the wheel, the clocks, the
//! drivers (worker thread and manual `advance`) and dispatch of fired tasks.
//!
//! Nothing here imports the public face (`src/*.rs` beside this folder):
//! the face uses the engine, never the other way round. The engine speaks
//! in its own types (`Refusal`, `Handoff`, `Config`, `Task`), and the face
//! converts at the boundary. See ARCHITECTURE.md for the map.

pub(crate) mod clock;
pub(crate) mod counts;
pub(crate) mod dispatch;
pub(crate) mod driver;
pub(crate) mod entry;
pub(crate) mod handle;
pub(crate) mod intake;
pub(crate) mod key;
pub(crate) mod lane;
#[cfg(all(test, loom))]
mod loom_models;
pub(crate) mod manual;
pub(crate) mod notice;
pub(crate) mod packed_task;
pub(crate) mod refusal;
pub(crate) mod reset;
pub(crate) mod shared;
pub(crate) mod shutdown_hooks;
pub(crate) mod slots;
pub(crate) mod sync;
pub(crate) mod task;
pub(crate) mod wheel;
pub(crate) mod worker;
