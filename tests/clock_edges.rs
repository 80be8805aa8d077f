//! Time and instants at their edges, on each clock: absolute deadlines before the timer's start
//! or far ahead, round trips through `deadline()`, the manual clock moved by nanoseconds or
//! nothing, a paused tokio clock moved by huge amounts. Never early, at most a tick late.

mod common;

use common::manual;
use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_test::{assert_pending, assert_ready, task};

const MS: Duration = Duration::from_millis(1);
const NS: Duration = Duration::from_nanos(1);

fn recorder() -> (
    Arc<Mutex<Vec<Instant>>>,
    impl Fn(&Timeout) + Send + Sync + 'static,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    (seen, move |t: &Timeout| {
        s.lock().unwrap().push(t.timer().unwrap().now())
    })
}

#[test]
fn one_nanosecond_steps_across_a_tick_fire_exactly_at_its_end() {
    let timer = manual(MS);
    let start = timer.now();
    let (seen, task) = recorder();
    let t = timer.new_timeout_at(task, start + MS + NS).unwrap();
    timer.advance(2 * MS - 3 * NS);
    for _ in 0..2 {
        timer.advance(NS);
        assert!(!t.is_expired(), "early at {:?}", timer.now() - start);
    }
    timer.advance(Duration::ZERO);
    assert!(!t.is_expired());
    timer.advance(NS);
    assert!(t.is_expired(), "not at the tick's end");
    assert_eq!(seen.lock().unwrap()[0] - start, 2 * MS);
}

#[test]
fn advance_zero_fires_what_is_due_now() {
    let timer = manual(MS);
    let t = timer.new_timeout(|_| {}, Duration::ZERO).unwrap();
    timer.advance(Duration::ZERO);
    assert!(t.is_expired());
}

#[test]
fn advance_to_next_with_nothing_that_can_fire_is_none_and_moves_nothing() {
    let timer = manual(MS);
    let start = timer.now();
    assert_eq!(timer.advance_to_next(), None);
    let t = timer.new_timeout(|_| {}, 5 * MS).unwrap();
    assert!(t.cancel());
    assert_eq!(timer.advance_to_next(), None, "only a cancelled one");
    let _far = timer.new_timeout(|_| {}, Duration::MAX).unwrap();
    let _far2 = timer
        .new_timeout_at(|_| {}, start + Duration::from_secs(86_400 * 365 * 200))
        .unwrap();
    assert_eq!(timer.advance_to_next(), None, "only saturated ones");
    assert_eq!(timer.now(), start);
}

#[test]
fn a_deadline_before_the_timers_start_fires_on_the_next_tick() {
    let before = Instant::now();
    std::thread::sleep(MS);
    let timer = manual(MS);
    let (seen, task) = recorder();
    let t = timer.new_timeout_at(task, before).unwrap();
    assert_eq!(t.remaining(), Duration::ZERO);
    timer.advance(Duration::ZERO);
    timer.advance(MS);
    assert!(t.is_expired());
    assert!(seen.lock().unwrap()[0] <= timer.now());
}

#[test]
fn round_trips_through_deadline_are_exact() {
    let timer = manual(MS);
    let start = timer.now();
    for d in [NS, MS + NS, Duration::from_secs(3), Duration::MAX] {
        let t = timer.new_timeout(|_| {}, d).unwrap();
        let dl = t.deadline();
        assert!(t.reset_at(dl));
        assert_eq!(t.deadline(), dl, "{d:?}");
        let s = timer.sleep(d);
        let s2 = timer.sleep_until(s.deadline());
        assert_eq!(s2.deadline(), s.deadline(), "{d:?}");
        let q = timer.delay_queue();
        let k = q.insert_at((), dl).unwrap();
        assert_eq!(q.deadline(&k), Some(dl), "{d:?}");
        assert!(q.reset_at(&k, q.deadline(&k).unwrap()));
        assert_eq!(q.deadline(&k), Some(dl), "{d:?}");
        let m = timer.delay_map();
        m.insert_at(1u8, (), dl).unwrap();
        assert_eq!(m.get_deadline(&1u8), Some(dl), "{d:?}");
        assert!(t.cancel());
    }
    assert_eq!(timer.now(), start);
}

#[test]
fn now_in_a_callback_is_its_ticks_time() {
    let timer = manual(MS);
    let start = timer.now();
    let (seen, task) = recorder();
    let _a = timer.new_timeout(task, MS * 3 / 2).unwrap();
    timer.advance(10 * MS);
    assert_eq!(seen.lock().unwrap()[0] - start, 2 * MS);
}

#[test]
fn a_sleep_until_far_ahead_is_pending_and_keeps_its_instant() {
    let timer = manual(MS);
    let far = timer.now() + Duration::from_secs(86_400 * 365 * 500);
    let mut s = task::spawn(timer.sleep_until(far));
    assert_pending!(s.poll());
    assert_eq!(s.deadline(), far);
    timer.advance(Duration::from_secs(86_400 * 365 * 80));
    assert_pending!(s.poll());
    assert!(!s.is_elapsed());
}

#[test]
fn interval_at_a_past_start_ticks_at_its_start_first() {
    let timer = manual(MS);
    let start = timer.now();
    let mut iv = timer.interval_at(start, 10 * MS);
    let mut tick = task::spawn(async move {
        let a = iv.tick().await;
        let b = iv.tick().await;
        (a, b)
    });
    assert_pending!(tick.poll());
    timer.advance(10 * MS);
    let (a, b) = assert_ready!(tick.poll());
    assert_eq!((a - start, b - start), (Duration::ZERO, 10 * MS));
}

#[tokio::test(start_paused = true)]
async fn tokio_instants_on_a_paused_clock_are_the_timers_time() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    tokio::time::advance(Duration::from_secs(10)).await;
    let at = tokio::time::Instant::now() + 5 * MS;
    assert_eq!(timer.now(), tokio::time::Instant::now().into_std());
    let (seen, task) = recorder();
    let t = timer.new_timeout_at(task, at).unwrap();
    assert_eq!(t.deadline(), at.into_std());
    assert_eq!(t.remaining(), 5 * MS);
    let s = timer.sleep_until(at);
    assert_eq!(s.deadline(), at.into_std());
    completes_with_tokios_sleep_until(s, at, true).await;
    tokio::task::yield_now().await;
    assert!(t.is_expired());
    assert!(seen.lock().unwrap()[0] >= at.into_std());
}

#[tokio::test(start_paused = true)]
async fn a_huge_advance_of_the_paused_clock_fires_what_is_due_and_the_timer_goes_on() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let (seen, task) = recorder();
    let t = timer.new_timeout(task, Duration::from_secs(1)).unwrap();
    let far = timer.sleep(Duration::from_secs(86_400 * 365 * 50));
    tokio::time::advance(Duration::from_secs(86_400 * 365 * 40)).await;
    tokio::task::yield_now().await;
    assert!(t.is_expired());
    assert_eq!(seen.lock().unwrap().len(), 1);
    let mut far = task::spawn(far);
    assert_pending!(far.poll());
    let t2 = timer.new_timeout(|_| {}, MS).unwrap();
    tokio::time::sleep(2 * MS).await;
    assert!(t2.is_expired());
}

#[tokio::test(start_paused = true)]
async fn sub_millisecond_advances_fire_a_sub_millisecond_tick_never_early() {
    let timer = HashedWheelTimer::builder()
        .tokio_clock()
        .tick_duration(Duration::from_micros(100))
        .build()
        .unwrap();
    let start = tokio::time::Instant::now();
    let t = timer
        .new_timeout(|_| {}, Duration::from_micros(250))
        .unwrap();
    for _ in 0..2 {
        tokio::time::advance(Duration::from_micros(100)).await;
        tokio::task::yield_now().await;
        assert!(!t.is_expired(), "early at {:?}", start.elapsed());
    }
    let s = timer.sleep(Duration::from_micros(250));
    tokio::time::timeout(Duration::from_secs(1), s)
        .await
        .unwrap();
    assert!(start.elapsed() >= Duration::from_micros(450));
}

#[test]
fn a_paused_timer_used_from_spawn_blocking_reads_the_paused_clock() {
    let rt = common::paused::paused_runtime();
    rt.block_on(async {
        let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
        tokio::time::advance(Duration::from_secs(3600)).await;
        let t2 = timer.clone();
        let (now, dl) = tokio::task::spawn_blocking(move || {
            let t = t2.new_timeout(|_| {}, 5 * MS).unwrap();
            (t2.now(), t.deadline())
        })
        .await
        .unwrap();
        assert_eq!(now, tokio::time::Instant::now().into_std());
        assert_eq!(dl - now, 5 * MS);
    });
}

const YEAR: Duration = Duration::from_secs(86_400 * 365);

#[tokio::test(start_paused = true)]
async fn saturated_deadlines_fire_once_the_paused_clock_is_moved_past_the_end() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let (seen, task) = recorder();
    let t = timer.new_timeout(task, Duration::MAX).unwrap();
    let s = timer.sleep(Duration::MAX);
    tokio::time::advance(80 * YEAR).await;
    common::paused::settle().await;
    assert!(t.is_expired(), "{t:?}");
    assert_eq!(seen.lock().unwrap().len(), 1);
    tokio::time::timeout(Duration::from_secs(1), s)
        .await
        .expect("completes");
}

#[tokio::test(start_paused = true)]
async fn auto_advance_completes_a_saturated_sleep() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    timer.sleep(Duration::MAX).await;
}

#[test]
fn advance_to_next_past_only_cancelled_waits_moves_no_time() {
    let timer = manual(MS);
    let start = timer.now();
    let mut s = task::spawn(timer.sleep(5 * MS));
    assert_pending!(s.poll());
    drop(s);
    assert_eq!(timer.advance_to_next(), None, "a dropped sleep");
    assert_eq!(timer.now() - start, Duration::ZERO);
    let q = timer.delay_queue();
    let k = q.insert((), 7 * MS).unwrap();
    q.remove(&k).unwrap();
    assert_eq!(timer.advance_to_next(), None, "a removed item");
    assert_eq!(timer.now() - start, Duration::ZERO);
    let t = timer.new_timeout(|_| {}, 9 * MS).unwrap();
    timer.advance(Duration::ZERO);
    assert!(t.cancel());
    assert_eq!(timer.advance_to_next(), None, "a filed, cancelled timeout");
    assert_eq!(timer.now() - start, Duration::ZERO);
}

#[test]
fn advance_to_next_follows_a_reset() {
    let timer = manual(MS);
    let t = timer.new_timeout(|_| {}, 5 * MS).unwrap();
    timer.advance(Duration::ZERO);
    assert!(t.reset(20 * MS));
    assert_eq!(timer.advance_to_next(), Some(20 * MS));
    assert!(t.is_expired());
    let t = timer.new_timeout(|_| {}, Duration::ZERO).unwrap();
    assert_eq!(timer.advance_to_next(), Some(Duration::ZERO));
    assert!(t.is_expired());
    let q = timer.delay_queue();
    let k = q.insert((), 5 * MS).unwrap();
    timer.advance(Duration::ZERO);
    assert!(q.reset(&k, 20 * MS));
    assert_eq!(timer.advance_to_next(), Some(20 * MS));
    assert_eq!(q.peek(), Some(k));
}

/// Small steps, every face: each fires at the end of its deadline's tick, exactly.
#[test]
fn small_steps_fire_every_face_at_its_ticks_end() {
    for (tick, deadline, step) in [
        (MS, MS * 3 / 2, Duration::from_micros(1)),
        (MS, 150 * MS + NS, Duration::from_micros(100)),
        (3 * MS, 100 * MS, Duration::from_micros(7)),
        (
            Duration::from_micros(100),
            99 * MS + NS,
            Duration::from_micros(3),
        ),
    ] {
        let timer = manual(tick);
        let start = timer.now();
        let (seen, task) = recorder();
        let _t = timer.new_timeout(task, deadline).unwrap();
        let mut s = task::spawn(timer.sleep(deadline));
        assert_pending!(s.poll());
        let q = timer.delay_queue();
        q.insert_at((), start + deadline).unwrap();
        let mut qr = &q;
        let mut next = task::spawn(futures::StreamExt::next(&mut qr));
        assert_pending!(next.poll());
        let due = start + tick * (deadline.as_nanos() as u32).div_ceil(tick.as_nanos() as u32);
        while timer.now() < due {
            let ready = !seen.lock().unwrap().is_empty();
            assert!(!ready, "early: {tick:?} {deadline:?}");
            assert_eq!(s.is_elapsed(), timer.now() >= start + deadline);
            assert_pending!(next.poll(), "early: {tick:?} {deadline:?}");
            timer.advance(step.min(due - timer.now()));
        }
        assert_eq!(
            seen.lock().unwrap().as_slice(),
            &[due],
            "{tick:?} {deadline:?}"
        );
        assert!(s.is_woken() && next.is_woken());
        assert_ready!(s.poll());
        let e = assert_ready!(next.poll()).unwrap();
        assert_eq!(e.deadline(), start + deadline);
    }
}

#[tokio::test]
async fn a_runtime_paused_after_the_timer_was_built_moves_it_by_advance() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let (seen, task) = recorder();
    let t0 = timer.new_timeout(|_| {}, MS).unwrap();
    tokio::time::sleep(20 * MS).await; // real time: 20 ticks of margin
    assert!(t0.is_expired());
    tokio::time::pause();
    let at = tokio::time::Instant::now() + Duration::from_secs(3600);
    let t = timer.new_timeout_at(task, at).unwrap();
    let s = timer.sleep_until(at);
    assert_eq!(t.remaining(), Duration::from_secs(3600));
    tokio::time::advance(Duration::from_secs(3599)).await;
    common::paused::settle().await;
    assert!(!t.is_expired());
    assert_eq!(t.remaining(), Duration::from_secs(1));
    // Paused after a real-time start, tokio's own timer runs on a millisecond grid of that start,
    // which `at` may fall inside: its sleep may end up to a millisecond after ours.
    completes_with_tokios_sleep_until(s, at, false).await;
    common::paused::settle().await;
    assert!(t.is_expired());
    assert!(seen.lock().unwrap()[0] >= at.into_std());
    tokio::time::resume();
    let s = std::time::Instant::now();
    timer.sleep(10 * MS).await;
    assert!(s.elapsed() >= 10 * MS);
}

/// On a tokio clock running in real time, a timeout fires at tokio's first millisecond after its
/// deadline, where tokio fires its own, whatever the wheel's tick: with 1 s ticks, a 10 ms sleep
/// and a 30 ms callback in the tick under way end long before it does (they once waited for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_time_tokio_clock_fires_at_tokios_millisecond_not_at_the_ticks_end() {
    let tick = Duration::from_secs(1);
    let timer = HashedWheelTimer::builder()
        .tokio_clock()
        .tick_duration(tick)
        .build()
        .unwrap();
    let start = Instant::now();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let t = timer
        .new_timeout(|_| tx.send(Instant::now()).unwrap(), 30 * MS)
        .unwrap();
    timer.sleep(10 * MS).await;
    let slept = start.elapsed();
    let fired = rx.await.unwrap() - start;
    assert!(
        slept >= 10 * MS && slept < tick / 2,
        "{slept:?}: never early, and 50x margin"
    );
    assert!(fired >= 30 * MS && fired < tick / 2, "{fired:?}");
    assert!(t.is_expired());
}

/// `DelayQueue::insert`: "A zero delay is due at once: it wakes the consumers, and on a manual or
/// tokio clock comes out at their next poll" — also in the middle of a tick.
#[test]
fn a_zero_delay_item_comes_out_at_the_next_poll_mid_tick_on_the_manual_clock() {
    let timer = manual(MS);
    timer.advance(MS / 2);
    let q = timer.delay_queue();
    let k = q.insert("zero", Duration::ZERO).unwrap();
    let mut qr = &q;
    let mut next = task::spawn(futures::StreamExt::next(&mut qr));
    let e = assert_ready!(next.poll()).expect("an item");
    assert_eq!(e.key(), k);
    drop(next);
    let k = q.insert_at("now", timer.now()).unwrap();
    let mut next = task::spawn(futures::StreamExt::next(&mut qr));
    assert_eq!(assert_ready!(next.poll()).expect("an item").key(), k);
    drop(next);
    let map = timer.delay_map();
    map.insert_at(7u8, "past", timer.now() - MS / 4).unwrap();
    let mut mr = &map;
    let mut next = task::spawn(futures::StreamExt::next(&mut mr));
    assert_eq!(assert_ready!(next.poll()), Some((7, "past")));
}

#[tokio::test(start_paused = true)]
async fn a_zero_delay_item_comes_out_at_the_next_poll_mid_tick_on_a_paused_clock() {
    use futures::FutureExt;
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    tokio::time::advance(Duration::from_micros(500)).await;
    let q = timer.delay_queue();
    let k = q.insert("zero", Duration::ZERO).unwrap();
    let mut qr = &q;
    let e = futures::StreamExt::next(&mut qr).now_or_never();
    assert_eq!(e.flatten().expect("an item").key(), k);
}

#[test]
fn advance_to_next_with_periodic_runs_and_saturated_periods() {
    let timer = manual(MS);
    let start = timer.now();
    let (seen, task) = recorder();
    let p = timer
        .schedule_at_fixed_rate(move |t: &Timeout| task(t), 3 * MS, Duration::MAX)
        .unwrap();
    assert_eq!(timer.advance_to_next(), Some(3 * MS));
    assert_eq!(seen.lock().unwrap().as_slice(), &[start + 3 * MS]);
    assert!(p.is_pending());
    assert_eq!(timer.advance_to_next(), None, "its next run never comes");
    assert_eq!(timer.now() - start, 3 * MS);
    let t = timer.new_timeout(|_| {}, 50 * MS).unwrap();
    assert!(t.reset(2 * MS), "earlier, still in its lane");
    assert_eq!(timer.advance_to_next(), Some(2 * MS));
    assert!(t.is_expired());
}

#[test]
fn an_item_reset_to_a_past_deadline_comes_out_at_the_next_poll_mid_tick() {
    let timer = manual(MS);
    timer.advance(MS / 2);
    let q = timer.delay_queue();
    let k = q.insert("later", 5 * MS).unwrap();
    let mut qr = &q;
    let mut next = task::spawn(futures::StreamExt::next(&mut qr));
    assert_pending!(next.poll());
    assert!(q.reset_at(&k, timer.now()));
    assert!(next.is_woken());
    assert_eq!(assert_ready!(next.poll()).expect("an item").key(), k);
    let map = timer.delay_map();
    map.insert(1u8, "later", 5 * MS).unwrap();
    let mut mr = &map;
    let mut next = task::spawn(futures::StreamExt::next(&mut mr));
    assert_pending!(next.poll());
    assert!(map.reset_at(&1u8, timer.now() - MS / 4));
    assert!(next.is_woken());
    assert_eq!(assert_ready!(next.poll()), Some((1, "later")));
}

#[test]
fn at_the_manual_clocks_end_an_item_inserted_never_comes_out() {
    let timer = manual(MS);
    timer.advance(Duration::MAX);
    let q = timer.delay_queue();
    q.insert("never", Duration::from_secs(1)).unwrap();
    timer.advance(Duration::from_secs(1));
    let mut qr = &q;
    let mut next = task::spawn(futures::StreamExt::next(&mut qr));
    assert_pending!(next.poll());
    assert_eq!(q.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn periodic_runs_on_a_paused_clock_are_never_early_and_at_most_a_tick_late() {
    for (tick, step) in [
        (MS, MS),
        (Duration::from_micros(250), Duration::from_micros(100)),
    ] {
        let timer = HashedWheelTimer::builder()
            .tokio_clock()
            .tick_duration(tick)
            .build()
            .unwrap();
        let runs = Arc::new(Mutex::new(Vec::new()));
        let r = runs.clone();
        let _p = timer
            .schedule_at_fixed_rate(
                move |t: &Timeout| {
                    let now = tokio::time::Instant::now().into_std();
                    r.lock().unwrap().push((now, t.scheduled_execution_time()));
                },
                3 * MS,
                10 * MS,
            )
            .unwrap();
        let start = timer.now();
        for _ in 0..(100 * MS).as_micros() / step.as_micros() {
            tokio::time::advance(step).await;
            tokio::task::yield_now().await;
        }
        common::paused::settle().await;
        let runs = runs.lock().unwrap();
        assert!(runs.len() >= 9, "{tick:?}: {}", runs.len());
        for (i, (now, due)) in runs.iter().enumerate() {
            assert_eq!(*due - start, 3 * MS + 10 * MS * i as u32, "{tick:?}");
            assert!(now >= due, "{tick:?}: early");
            assert!(
                *now - *due <= MS.max(tick),
                "{tick:?}: {:?} late",
                *now - *due
            );
        }
    }
}

/// Awaits `ours`, due at `at`, beside tokio's own `sleep_until(at)`: ours completes never before
/// `at` and within a tick of it, at the same paused instant as tokio's (`exact`), or no later.
async fn completes_with_tokios_sleep_until(
    ours: hashed_wheel_timer::Sleep,
    at: tokio::time::Instant,
    exact: bool,
) {
    let theirs = tokio::spawn(async move {
        tokio::time::sleep_until(at).await;
        tokio::time::Instant::now()
    });
    ours.await;
    let now = tokio::time::Instant::now();
    assert!(now >= at && now - at <= MS, "{:?}", now - at);
    let theirs = theirs.await.unwrap();
    if exact {
        assert_eq!(now, theirs, "as tokio's own sleep_until");
    } else {
        assert!(
            now <= theirs,
            "{:?} after tokio's own sleep_until",
            now - theirs
        );
    }
}
