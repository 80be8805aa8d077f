//! A `DelayMap` key whose `Hash` and `Eq` panic only when the stream looks it up, its deadline
//! come: the panic reaches no consumer, and the stream goes on with the other keys.

mod common;

use common::{assert_stats_add_up, manual};
use hashed_wheel_timer::DelayMap;
use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const EQ_ONLY: u32 = 1000;

/// A key whose `Hash` and `Eq` panic while its shared cell names it, only its `Eq` while the cell
/// holds its number plus `EQ_ONLY` (0: never). Lookups by `u32` (`Borrow`) run none of its code.
struct Key(u32, Arc<AtomicU32>);

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        assert_ne!(self.1.load(SeqCst), self.0, "Hash of key {}", self.0);
        self.0.hash(state);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        let panics = self.1.load(SeqCst) % EQ_ONLY;
        assert!(
            panics != self.0 && panics != other.0,
            "Eq of key {}",
            self.0
        );
        self.0 == other.0
    }
}

impl Eq for Key {}

impl Clone for Key {
    fn clone(&self) -> Key {
        Key(self.0, self.1.clone())
    }
}

impl Borrow<u32> for Key {
    fn borrow(&self) -> &u32 {
        &self.0
    }
}

/// Every pair the stream gives now, as `(key, value)`, or `Err` if a poll panicked.
fn drain(map: &DelayMap<Key, u32>) -> std::thread::Result<Vec<(u32, u32)>> {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    catch_unwind(AssertUnwindSafe(|| {
        let mut out = Vec::new();
        while let Poll::Ready(Some((key, value))) = map.poll_expired(&mut cx) {
            out.push((key.0, value));
        }
        out.sort_unstable();
        out
    }))
}

/// The key stays in the map, unyielded, for `remove` and `clear` (`DelayMap`'s docs, "Keys").
#[test]
fn a_key_whose_hash_panics_in_the_streams_lookup_stalls_no_other_key() {
    let timer = manual(MS);
    let map: DelayMap<Key, u32> = timer.delay_map();
    let panics = Arc::new(AtomicU32::new(0));
    for k in 1..=4 {
        map.insert(Key(k, panics.clone()), k * 10, 5 * MS).unwrap();
    }
    map.insert(Key(5, panics.clone()), 50, 8 * MS).unwrap();
    timer.advance(5 * MS);
    panics.store(2, SeqCst);
    let Ok(first) = drain(&map) else {
        panic!("the stream panicked into its consumer");
    };
    assert_eq!(first, [(1, 10), (3, 30), (4, 40)]);
    timer.advance(5 * MS);
    assert_eq!(
        drain(&map).unwrap(),
        [(5, 50)],
        "a later key still comes out"
    );
    assert!(map.contains_key(&2) && map.len() == 1, "left in the map");
    panics.store(0, SeqCst);
    assert_eq!(map.remove(&2), Some(20));
    map.insert(Key(6, panics.clone()), 60, MS).unwrap();
    panics.store(6 + EQ_ONLY, SeqCst);
    timer.advance(MS);
    assert_eq!(drain(&map).unwrap(), [], "its Eq panicked");
    assert_eq!(map.len(), 1);
    map.clear();
    assert!(map.is_empty());
    assert_eq!(timer.pending_timeouts(), 0);
    assert_stats_add_up(&timer);
}
