//! The lane's unit tests: withdraw, reclaim, a full ring, order, holding.

use super::*;
use crate::engine::entry::task::Task;

const R: u32 = RING as u32;

fn key(n: u32) -> Key {
    Key::unpack(n + 1).unwrap()
}

/// A lane, and one entry that takes every key's queue mark.
struct Fixture {
    lane: Lane,
    slots: Slots,
    marked: Key,
    scanned: std::sync::Mutex<u64>,
}

impl Fixture {
    fn new() -> Fixture {
        let slots = Slots::new();
        let marked = slots.insert(0, Task::Wake(None), 1).unwrap();
        Fixture {
            lane: Lane::new(0),
            slots,
            marked,
            scanned: std::sync::Mutex::new(0),
        }
    }

    fn push_at(&self, n: u32, at: Nanos) {
        assert!(self.try_push_at(n, at), "the ring is full");
    }

    fn try_push_at(&self, n: u32, at: Nanos) -> bool {
        let entry = self.slots.get(self.marked);
        self.lane.try_push(key(n), entry, 0, at)
    }

    /// Takes the keys of the oldest `cells` (`None`: all).
    fn drain(&self, cells: Option<u64>) -> Vec<u32> {
        let mut out = Vec::new();
        self.lane
            .drain(cells, &mut |k: Key| out.push(k.index() as u32));
        out
    }

    /// What a scan passes: (cell, key number, take time); and whether it saw an empty cell.
    fn scan(&self) -> (Vec<(u32, u32, Nanos)>, bool) {
        let mut out = Vec::new();
        let number = |key| Key::unpack(key).unwrap().index() as u32;
        let mut scanned = self.scanned.lock().unwrap();
        let skipped = self.lane.scan(&mut scanned, &mut |cell, key, at| {
            out.push((cell, number(key), at))
        });
        (out, skipped)
    }

    /// Moves the head on past what was scanned and taken; how many cells are left.
    fn advance_head(&self) -> usize {
        let mut scanned = self.scanned.lock().unwrap();
        *scanned = self.lane.advance_head(*scanned).max(*scanned);
        self.lane.len()
    }
}

#[test]
fn a_full_ring_refuses_keys_and_a_drain_takes_the_oldest_in_order() {
    let f = Fixture::new();
    (0..R).for_each(|n| f.push_at(n, 0));
    assert!(!f.try_push_at(R, 0), "the ring holds {R}");
    // A withdrawn cell at the head is reclaimed by the owner.
    assert!(f.lane.withdraw(0, key(0)));
    f.push_at(R, 0);
    assert!(!f.try_push_at(R + 1, 0));
    assert!(f.drain(None).into_iter().eq(1..R + 1), "in push order");
    assert_eq!(f.lane.len(), 0);
    f.push_at(R + 1, 0);
    assert_eq!(f.drain(None), vec![R + 1]);

    let f = Fixture::new();
    (0..10).for_each(|n| f.push_at(n, 0));
    assert!(
        f.drain(Some(7)).into_iter().eq(0..7),
        "the oldest half of a full ring"
    );
    assert_eq!(f.lane.len(), 3);
    assert_eq!(f.drain(None), (7..10).collect::<Vec<_>>());
}

/// A scan passes each new key once, with its take time; a take claims a key once, and not a
/// withdrawn one; the head moves past the cells taken or withdrawn, up to the first still held.
#[test]
fn a_scan_passes_each_key_once_and_a_take_claims_it_once() {
    let f = Fixture::new();
    f.push_at(0, 30);
    f.push_at(1, 10);
    f.push_at(2, 20);
    assert!(f.lane.withdraw(1, key(1)));
    let (seen, skipped) = f.scan();
    assert_eq!(seen, vec![(0, 0, 30), (2, 2, 20)]);
    assert!(skipped, "a withdrawn cell");
    assert_eq!(f.scan(), (vec![], false), "read once");
    let packed = |n| key(n).pack();
    assert_eq!(f.lane.take(2, packed(2)), Some(key(2)));
    assert_eq!(f.lane.take(2, packed(2)), None, "taken once");
    assert!(
        !f.lane.holds(1, packed(1)) && f.lane.take(1, packed(1)).is_none(),
        "withdrawn"
    );
    assert_eq!(f.advance_head(), 3, "the oldest still held");
    assert!(f.lane.holds(0, packed(0)));
    assert_eq!(f.lane.take(0, packed(0)), Some(key(0)));
    assert!(
        !f.lane.withdraw(0, key(0)),
        "taken: a cancel leaves it to the driver"
    );
    assert_eq!(f.advance_head(), 0);
    f.push_at(3, 40);
    assert_eq!(f.scan().0, vec![(3, 3, 40)], "only the new key");
}

/// A near deadline is taken when due; a far key once it is `HOLD` old, on a `BATCH` boundary, a
/// tick or more before it is due, whatever the tick.
#[test]
fn a_far_key_is_taken_once_a_hold_old_and_a_tick_before_its_deadline() {
    let (ms, top) = (1_000_000, u64::MAX);
    let hold = HOLD.as_nanos() as Nanos;
    assert_eq!(take_time(top - 5, top, urgent_nanos(ms)), top, "saturates");
    for tick in [ms / 10, ms, 10 * ms, 100 * ms] {
        let urgent = urgent_nanos(tick);
        for now in [0, 1, 7 * ms + 3, 1 << 40] {
            assert_eq!(take_time(now, now + urgent - 1, urgent), now + urgent - 1);
            assert_eq!(take_time(now, now, urgent), now, "due now");
            for deadline in [now + urgent, now + urgent + 1, u64::MAX] {
                let at = take_time(now, deadline, urgent);
                assert!(at >= now + hold && at <= now + hold + BATCH_NANOS, "{at}");
                assert_eq!(at % BATCH_NANOS, 0);
                assert!(at + 2 * tick <= deadline, "taken a tick or more before due");
            }
        }
    }
}

/// The owner withdraws a key while the driver scans, then wraps the ring (4 cells under loom),
/// writing another key in the same cell: each key is taken once, by a take or the last drain,
/// or withdrawn, and none is lost.
#[cfg(loom)]
#[test]
fn loom_models_a_scan_and_take_against_its_owner_withdrawing_and_wrapping_round() {
    loom::model(|| {
        let f = std::sync::Arc::new(Fixture::new());
        (0..2).for_each(|n| f.push_at(n, 0));
        let owner = {
            let f = f.clone();
            loom::thread::spawn(move || {
                let withdrew = f.lane.withdraw(0, key(0));
                if withdrew {
                    (2..5).for_each(|n| assert!(f.try_push_at(n, 0), "room for {n}"));
                }
                withdrew
            })
        };
        let (seen, _) = f.scan();
        let mut taken: Vec<u32> = seen
            .iter()
            .filter_map(|&(cell, n, _)| f.lane.take(cell, key(n).pack()))
            .map(|k| k.index() as u32)
            .collect();
        f.advance_head();
        let withdrew = owner.join().unwrap();
        taken.extend(f.drain(None));
        taken.sort();
        let want: Vec<u32> = if withdrew {
            (1..5).collect()
        } else {
            vec![0, 1]
        };
        assert_eq!(taken, want, "each once, none lost");
    });
}
