//! Defects found in `DelayQueue`, `DelayMap` and the tower layer, each
//! guarded by a test that failed before its fix.

use hashed_wheel_timer::{DelayMap, HashedWheelTimer, TimerError};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Runs `f` on a thread of its own: true if it returned within 10 s (a
/// deadlock fails the test instead of hanging it).
fn finishes(f: impl FnOnce() + Send + 'static) -> bool {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    finished.recv_timeout(Duration::from_secs(10)).is_ok()
}

/// A value whose `Drop` looks its own key up in the map it was offered to.
struct LooksUp(Arc<OnceLock<DelayMap<u32, LooksUp>>>);

impl Drop for LooksUp {
    fn drop(&mut self) {
        if let Some(map) = self.0.get() {
            let _ = map.contains_key(&1);
        }
    }
}

/// A refused insert drops the offered value where `V`'s code may use the
/// map (the docs: "`V`'s code never does" run under a shard's lock).
#[test]
fn a_refused_insert_drops_the_value_outside_the_maps_lock() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let map: DelayMap<u32, LooksUp> = timer.delay_map();
    let cell = Arc::new(OnceLock::new());
    let _ = cell.set(map.clone());
    timer.stop().unwrap();
    let finished = finishes(move || {
        let refused = map.insert(1, LooksUp(cell.clone()), Duration::from_secs(1));
        assert!(matches!(refused, Err(TimerError::Shutdown)));
    });
    assert!(finished, "the value's Drop deadlocked on the map's lock");
}
