//! Differential test: the crate's `DelayQueue` on a `tokio_clock()` timer against tokio-util's
//! `DelayQueue`, both on one paused tokio clock, driven by the same random operations: insert and
//! `insert_at` (delays of 0 to 300 ms, whole milliseconds, sub-millisecond ones and deadlines
//! already past), remove, `try_remove` and reset (earlier, later, into the past) of live items,
//! `advance` by nothing, by less than a millisecond, by one and by tens of milliseconds, draining
//! what is ready through one of two consumer handles, `len`, `peek`, `deadline`, `compact`, and, at
//! the end, `close` and a full drain. The queues start on or off tokio's millisecond grid, and the
//! timer's wheel has the default shape or ticks of a quarter, one or ten milliseconds on a small
//! wheel (so that deadlines wait rounds).
//!
//! Checked: every item comes out of each queue once, or is removed (the same item from both);
//! never before its deadline; what is due by now is out of ours after a drain (on a paused clock,
//! what is due is ready at that instant); ours no later than tokio-util's, and tokio-util's at
//! most a millisecond later (two off the grid); `Expired::deadline` (of the stream and of
//! `try_remove`) and `deadline` are the deadline the item was given (tokio-util's are rounded to
//! its millisecond); `len` agrees with the model; `peek` names the item that comes out next; once
//! closed and drained, the stream ends; each item's timeout ended once.
//!
//! Differences by design (README, "Porting"), not asserted:
//! - `reset` of an item whose deadline fired but that is not yet yielded returns false and changes
//!   nothing here; tokio-util moves it. The test then leaves tokio-util's alone too, so that both
//!   yield it at its old deadline.
//! - tokio-util's stream ends whenever its queue is empty; this one once closed and empty.
//! - Among items due at one instant the two orders differ (tokio-util's is a stack per slot), so
//!   each drain is compared as a set; `peek` is checked against what comes out next of ours.
//!
//! Below it: the defects it found, each as a test of its own (`peek` against a fired item, a reset
//! into the past within its tick), and a consumer's panicking waker that must not lose an item.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures::task::noop_waker_ref;
use hashed_wheel_timer::{DelayKey, DelayQueue, HashedWheelTimer};
use proptest::prelude::*;
use tokio::time::Instant;
use tokio_util::time::delay_queue::Key as TheirKey;
use tokio_util::time::DelayQueue as TheirQueue;

mod common;
use common::paused::paused_runtime;

const TICK: Duration = Duration::from_millis(1);

#[derive(Debug, Clone, Copy)]
enum Op {
    /// `insert(delay)`, or `insert_at(now + delay)`.
    Insert(Duration, bool),
    /// `insert_at(now - back)`: a deadline already past (not before the queues were made).
    InsertPast(Duration),
    /// The live item at this index (modulo their number).
    Remove(usize),
    Reset(usize, Duration),
    ResetPast(usize, Duration),
    Advance(Duration),
    /// Drain, ours through the queue or (true) through a clone of it, another consumer.
    Drain(bool),
    Peek,
    /// `try_remove` of the live item at this index, and `deadline` of another.
    TryRemove(usize),
    Deadline(usize),
    Compact,
}

fn delay() -> impl Strategy<Value = Duration> {
    prop_oneof![
        2 => Just(Duration::ZERO),
        3 => (0..300u64).prop_map(Duration::from_millis),
        2 => (0..300_000u64).prop_map(Duration::from_micros),
        1 => prop_oneof![Just(1u64), Just(999), Just(1_000), Just(1_001), Just(999_999)]
            .prop_map(Duration::from_nanos),
    ]
}

fn advance() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (1..1_000u64).prop_map(Duration::from_micros),
        Just(TICK),
        (1..60u64).prop_map(Duration::from_millis),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (delay(), any::<bool>()).prop_map(|(d, at)| Op::Insert(d, at)),
        1 => (0..5_000u64).prop_map(|us| Op::InsertPast(Duration::from_micros(us))),
        2 => any::<usize>().prop_map(Op::Remove),
        3 => (any::<usize>(), delay()).prop_map(|(i, d)| Op::Reset(i, d)),
        1 => (any::<usize>(), (0..5_000u64)).prop_map(|(i, us)| Op::ResetPast(i, Duration::from_micros(us))),
        5 => advance().prop_map(Op::Advance),
        3 => any::<bool>().prop_map(Op::Drain),
        1 => Just(Op::Peek),
        1 => any::<usize>().prop_map(Op::TryRemove),
        1 => any::<usize>().prop_map(Op::Deadline),
        1 => Just(Op::Compact),
    ];
    prop::collection::vec(op, 1..60)
}

/// One item as both queues hold it.
struct Item {
    ours: DelayKey,
    theirs: TheirKey,
    deadline: Instant,
    /// When each queue yielded it.
    ours_out: Option<Instant>,
    theirs_out: Option<Instant>,
    removed: bool,
}

struct Run {
    start: Instant,
    ours: DelayQueue<u32>,
    /// Another handle to ours: a second consumer.
    clone: DelayQueue<u32>,
    theirs: TheirQueue<u32>,
    items: BTreeMap<u32, Item>,
    next: u32,
    /// How much later than ours tokio-util's may come out: a tick, or two off tokio's millisecond
    /// grid (it rounds a deadline up to its own millisecond, then tokio's driver to the runtime's).
    theirs_late: Duration,
}

fn noop_cx() -> Context<'static> {
    Context::from_waker(noop_waker_ref())
}

impl Run {
    fn live(&self) -> Vec<u32> {
        let live = self.items.iter().filter(|(_, i)| !i.removed);
        live.filter(|(_, i)| i.ours_out.is_none() || i.theirs_out.is_none())
            .map(|(&id, _)| id)
            .collect()
    }

    /// Live in both queues: neither yielded it.
    fn live_in_both(&self) -> Vec<u32> {
        let live = self.items.iter().filter(|(_, i)| !i.removed);
        live.filter(|(_, i)| i.ours_out.is_none() && i.theirs_out.is_none())
            .map(|(&id, _)| id)
            .collect()
    }

    fn insert(&mut self, deadline: Instant, at: Option<Duration>) {
        let id = self.next;
        self.next += 1;
        let (ours, theirs) = match at {
            Some(delay) => (
                self.ours.insert(id, delay).unwrap(),
                self.theirs.insert(id, delay),
            ),
            None => (
                self.ours.insert_at(id, deadline).unwrap(),
                self.theirs.insert_at(id, deadline),
            ),
        };
        let item = Item {
            ours,
            theirs,
            deadline,
            ours_out: None,
            theirs_out: None,
            removed: false,
        };
        self.items.insert(id, item);
    }

    fn remove(&mut self, index: usize) {
        let live = self.live_in_both();
        let Some(&id) = live.get(index % live.len().max(1)) else {
            return;
        };
        let item = self.items.get_mut(&id).unwrap();
        let ours = self.ours.remove(&item.ours);
        let theirs = self.theirs.remove(&item.theirs).into_inner();
        assert_eq!(ours, Some(id), "ours removed another item, or none");
        assert_eq!(theirs, id);
        item.removed = true;
    }

    fn try_remove(&mut self, index: usize) {
        let live = self.live_in_both();
        let Some(&id) = live.get(index % live.len().max(1)) else {
            return;
        };
        let item = self.items.get_mut(&id).unwrap();
        let ours = self
            .ours
            .try_remove(&item.ours)
            .expect("try_remove found nothing");
        let theirs = self
            .theirs
            .try_remove(&item.theirs)
            .expect("tokio-util's found nothing");
        assert_eq!((*ours.get_ref(), ours.key()), (id, item.ours));
        assert_eq!(
            ours.deadline(),
            item.deadline.into_std(),
            "try_remove's deadline"
        );
        assert_eq!(theirs.into_inner(), id);
        item.removed = true;
    }

    fn reset(&mut self, index: usize, to: Instant, delay: Option<Duration>) {
        let now = Instant::now();
        let live = self.live_in_both();
        let Some(&id) = live.get(index % live.len().max(1)) else {
            return;
        };
        let item = self.items.get_mut(&id).unwrap();
        let moved = match delay {
            Some(delay) => self.ours.reset(&item.ours, delay),
            None => self.ours.reset_at(&item.ours, to),
        };
        if !moved {
            // By design: its deadline fired; it is on its way out, at the old deadline.
            assert!(item.deadline <= now, "reset refused before the deadline");
            return;
        }
        match delay {
            Some(delay) => self.theirs.reset(&item.theirs, delay),
            None => self.theirs.reset_at(&item.theirs, to),
        }
        item.deadline = to;
    }

    /// Lets the runtime's other tasks (the timer's driver) run.
    async fn settle() {
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    }

    /// Takes what is ready from both, then checks both.
    async fn drain(&mut self, other: bool) {
        Run::settle().await;
        let now = Instant::now();
        let mut cx = noop_cx();
        let consumer = if other { &self.clone } else { &self.ours };
        loop {
            let peeked = self.ours.peek();
            let Poll::Ready(Some(expired)) = consumer.poll_expired(&mut cx) else {
                break;
            };
            let id = *expired.get_ref();
            let item = self.items.get_mut(&id).expect("an item never inserted");
            assert!(!item.removed, "ours yielded removed item {id}");
            assert!(item.ours_out.is_none(), "ours yielded item {id} twice");
            assert_eq!(
                expired.key(),
                item.ours,
                "item {id} yielded with another key"
            );
            assert!(item.deadline <= now, "item {id} yielded early");
            assert_eq!(
                expired.deadline(),
                item.deadline.into_std(),
                "item {id}: Expired::deadline is not the deadline it was given"
            );
            item.ours_out = Some(now);
            let (key, deadline) = (item.ours, item.deadline);
            let peeked = peeked.expect("peek named nothing, and an item came out");
            let named = self.items.values().find(|i| i.ours == peeked).unwrap();
            assert!(
                peeked == key || named.deadline == deadline,
                "peek named the item due at {:?}, and out came item {id}, due at {:?}",
                named.deadline - self.start,
                deadline - self.start,
            );
        }
        while let Poll::Ready(Some(expired)) = self.theirs.poll_expired(&mut cx) {
            let id = *expired.get_ref();
            let item = self.items.get_mut(&id).expect("an item never inserted");
            assert!(!item.removed && item.theirs_out.is_none());
            assert!(item.deadline <= now, "tokio-util yielded item {id} early");
            item.theirs_out = Some(now);
        }
        self.check(now);
    }

    /// Both queues hold what the model says; nothing due a tick ago is left in ours.
    fn check(&mut self, now: Instant) {
        let in_ours = self.items.values();
        let in_ours = in_ours.filter(|i| !i.removed && i.ours_out.is_none());
        assert_eq!(self.ours.len(), in_ours.clone().count(), "ours' len");
        let in_theirs = self.items.values();
        let in_theirs = in_theirs.filter(|i| !i.removed && i.theirs_out.is_none());
        assert_eq!(self.theirs.len(), in_theirs.count(), "tokio-util's len");
        for (id, item) in &self.items {
            if item.removed {
                continue;
            }
            if item.ours_out.is_none() {
                assert!(
                    item.deadline > now,
                    "item {id} due at {:?} is not out of ours at {:?}",
                    item.deadline - self.start,
                    now - self.start
                );
            }
            // Ours is never later than tokio-util's, and tokio-util's at most a tick later.
            if item.theirs_out.is_some() {
                assert!(
                    item.ours_out.is_some(),
                    "item {id} due at {:?} came out of tokio-util's, not ours, by {:?}",
                    item.deadline - self.start,
                    now - self.start
                );
            }
            if let (Some(ours), None) = (item.ours_out, item.theirs_out) {
                assert!(
                    ours + self.theirs_late > now,
                    "item {id} due at {:?}: out of ours at {:?}, not of tokio-util's by {:?}",
                    item.deadline - self.start,
                    ours - self.start,
                    now - self.start
                );
            }
        }
        let earliest = in_ours.map(|i| i.deadline).min();
        let peeked = self.ours.peek();
        let named = peeked.map(|k| self.items.values().find(|i| i.ours == k).unwrap());
        assert_eq!(named.map(|i| i.deadline), earliest, "peek");
    }
}

/// `offset`: how far off tokio's millisecond grid both queues start.
async fn differential(offset: Duration, wheel: (Duration, usize), ops: Vec<Op>) {
    tokio::time::advance(offset).await;
    let timer = HashedWheelTimer::builder().tokio_clock();
    let timer = timer.tick_duration(wheel.0).ticks_per_wheel(wheel.1);
    let timer = timer.build().unwrap();
    let queue = timer.delay_queue();
    let mut run = Run {
        start: Instant::now(),
        ours: queue.clone(),
        clone: queue,
        theirs: TheirQueue::new(),
        items: BTreeMap::new(),
        next: 0,
        theirs_late: if offset.is_zero() { TICK } else { 2 * TICK },
    };
    for op in ops {
        let now = Instant::now();
        match op {
            Op::Insert(delay, at) => run.insert(now + delay, (!at).then_some(delay)),
            Op::InsertPast(back) => {
                let at = (now - back).max(run.start);
                run.insert(at, None)
            }
            Op::Remove(index) => run.remove(index),
            Op::Reset(index, delay) => run.reset(index, now + delay, Some(delay)),
            Op::ResetPast(index, back) => {
                let at = (now - back).max(run.start);
                run.reset(index, at, None)
            }
            Op::Advance(by) => tokio::time::advance(by).await,
            Op::Drain(other) => run.drain(other).await,
            Op::TryRemove(index) => run.try_remove(index),
            Op::Deadline(index) => {
                for id in run.live_in_both().into_iter().skip(index % 8).take(1) {
                    let item = &run.items[&id];
                    let deadline = run.ours.deadline(&item.ours);
                    assert_eq!(
                        deadline,
                        Some(item.deadline.into_std()),
                        "item {id}'s deadline"
                    );
                }
            }
            Op::Compact => {
                run.ours.compact();
                run.theirs.compact();
                assert_eq!(run.ours.capacity(), run.ours.len(), "compact");
            }
            Op::Peek => {
                let in_ours = run
                    .items
                    .values()
                    .any(|i| !i.removed && i.ours_out.is_none());
                let in_theirs = run
                    .items
                    .values()
                    .any(|i| !i.removed && i.theirs_out.is_none());
                assert_eq!(run.ours.peek().is_some(), in_ours, "ours' peek");
                assert_eq!(run.theirs.peek().is_some(), in_theirs, "tokio-util's peek");
            }
        }
    }
    // The end: close ours, advance past every deadline, drain both to the end.
    run.ours.close();
    tokio::time::advance(Duration::from_millis(310)).await;
    run.drain(false).await;
    assert!(run.live().is_empty(), "left in one queue only");
    let mut cx = noop_cx();
    assert!(matches!(run.ours.poll_expired(&mut cx), Poll::Ready(None)));
    assert!(matches!(
        run.theirs.poll_expired(&mut cx),
        Poll::Ready(None)
    ));
    // Each item's timeout ended once: fired (yielded) or cancelled (removed; a removal after the
    // fire counts as fired).
    Run::settle().await;
    let stats = timer.stats();
    let removed = run.items.values().filter(|i| i.removed).count() as u64;
    assert_eq!(stats.pending, 0, "{stats:?}");
    assert_eq!(stats.scheduled, run.items.len() as u64);
    assert_eq!(stats.fired + stats.cancelled, stats.scheduled, "{stats:?}");
    assert!(stats.cancelled <= removed, "{stats:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(std::env::var("CASES").map_or(256, |c| c.parse().unwrap())))]

    #[test]
    fn delay_queue_against_tokio_util(
        offset in prop_oneof![Just(0u64), 0..1_000_000u64],
        wheel in prop_oneof![
            3 => Just((TICK, 512)),
            1 => (prop_oneof![Just(TICK), Just(TICK / 4), Just(TICK * 10)], prop_oneof![Just(4usize), Just(16)]),
        ],
        ops in ops(),
    ) {
        let offset = Duration::from_nanos(offset);
        paused_runtime().block_on(differential(offset, wheel, ops));
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Polls once with a waker that does nothing.
fn poll_once<T>(queue: &DelayQueue<T>) -> Poll<Option<hashed_wheel_timer::Expired<T>>> {
    queue.poll_expired(&mut noop_cx())
}

/// On a paused tokio clock what is due at an instant is ready at that instant (ARCHITECTURE.md's
/// invariants), a reset earlier within its tick, to a deadline already past, included.
#[tokio::test(start_paused = true)]
async fn an_item_reset_earlier_within_its_tick_into_the_past_is_ready_at_once() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let queue = timer.delay_queue();
    let start = Instant::now();
    tokio::time::advance(ms(1)).await;
    let key = queue
        .insert("moved", Duration::from_nanos(999_999))
        .unwrap();
    tokio::time::advance(Duration::from_micros(171)).await;
    Run::settle().await;
    assert!(queue.reset_at(&key, start + Duration::from_micros(1_170)));
    Run::settle().await;
    let Poll::Ready(Some(out)) = poll_once(&queue) else {
        panic!("an item due 1 µs ago is not ready");
    };
    assert_eq!(out.key(), key);
}

/// A waker that panics when woken: another consumer's, a bug in the user's code.
struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("a consumer's waker panicked");
    }
}

/// Registers a consumer (a clone of `queue`, returned) whose waker panics.
fn consumer_with_panicking_waker<T>(queue: &DelayQueue<T>) -> DelayQueue<T> {
    let other = queue.clone();
    let waker = Waker::from(Arc::new(PanickingWaker));
    assert!(other
        .poll_expired(&mut Context::from_waker(&waker))
        .is_pending());
    other
}

/// On a closed queue, a removal (or the consumer that takes an item) wakes the other consumers,
/// to see whether the stream ends. Another consumer's waker that panics then must not cost the
/// item: it is returned, or stays in the queue, never dropped on the way (nothing lost). (The
/// stream's path, `next_fired`, wakes the same way; a consumer can hold a waker there only by
/// racing the fire's wake-up on another thread, so no test here reaches it.)
#[test]
fn a_panicking_waker_of_another_consumer_does_not_lose_the_item_removed() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let queue = timer.delay_queue::<&str>();
    let key = queue.insert("only", ms(100)).unwrap();
    queue.close();
    let _other = consumer_with_panicking_waker(&queue);
    let removed = catch_unwind(AssertUnwindSafe(|| queue.remove(&key)));
    let left = queue.len();
    assert!(
        matches!(removed, Ok(Some("only"))) || left == 1,
        "the item was neither returned ({:?}) nor kept (len {left})",
        removed.is_ok()
    );
}

/// As above, for `DelayMap::remove` of a key of a closed map.
#[test]
fn a_panicking_waker_of_another_consumer_does_not_lose_a_delay_map_value() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let map = timer.delay_map::<u32, &str>();
    map.insert(1, "only", ms(100)).unwrap();
    map.close();
    let other = map.clone();
    let waker = Waker::from(Arc::new(PanickingWaker));
    assert!(other
        .poll_expired(&mut Context::from_waker(&waker))
        .is_pending());
    let removed = catch_unwind(AssertUnwindSafe(|| map.remove(&1)));
    let left = map.len();
    assert!(
        matches!(removed, Ok(Some("only"))) || left == 1,
        "the value was neither returned ({:?}) nor kept (len {left})",
        removed.is_ok()
    );
}

/// As above, for the value a `DelayMap::insert` replaces with a deadline already due, which wakes
/// the consumers: the old value is returned, not dropped on the way.
#[test]
fn a_panicking_waker_of_another_consumer_does_not_lose_a_replaced_delay_map_value() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let map = timer.delay_map::<u32, &str>();
    map.insert(1, "old", ms(100)).unwrap();
    let other = map.clone();
    let waker = Waker::from(Arc::new(PanickingWaker));
    assert!(other
        .poll_expired(&mut Context::from_waker(&waker))
        .is_pending());
    let replaced = catch_unwind(AssertUnwindSafe(|| map.insert(1, "new", Duration::ZERO)));
    assert!(
        matches!(replaced, Ok(Ok(Some("old")))),
        "the old value was not returned (insert panicked: {})",
        replaced.is_err()
    );
    assert_eq!(map.get(&1), Some("new"));
}
