//! `DelayQueue` shared between threads and tasks: producers on many
//! threads and several consumers see each item exactly once; and the
//! queue on tokio's paused clock.

mod common;

use common::manual;
use futures::StreamExt;
use hashed_wheel_timer::{DelayKey, DelayQueue, HashedWheelTimer};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

#[test]
fn handles_are_shareable_and_keys_are_plain_values() {
    fn assert_shareable<Q: Clone + Send + Sync + 'static>() {}
    assert_shareable::<DelayQueue<String>>();
    fn plain<K: Copy + Eq + std::hash::Hash + Send + Sync + 'static>() {}
    plain::<DelayKey>();
}

#[test]
fn producers_on_many_threads_and_several_consumers_see_each_item_exactly_once() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<(usize, usize)>();
    const THREADS: usize = 4;
    const EACH: usize = 5_000;
    let producers: Vec<_> = (0..THREADS)
        .map(|p| {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let mut removed = Vec::new();
                for i in 0..EACH {
                    let delay = Duration::from_millis((i % 50) as u64);
                    let key = queue.insert((p, i), delay).unwrap();
                    if i % 4 == 0 {
                        match queue.remove(&key) {
                            Some(item) => removed.push(item),
                            // Due at once: a consumer may have had it.
                            None => assert!(delay.is_zero(), "{i} was not yet due"),
                        }
                    }
                }
                removed
            })
        })
        .collect();
    let (done, finished) = std::sync::mpsc::channel();
    for _ in 0..3 {
        let (mut queue, done) = (queue.clone(), done.clone());
        std::thread::spawn(move || {
            let mut got = Vec::new();
            while let Some(e) = futures::executor::block_on(queue.next()) {
                got.push(e.into_inner());
            }
            let _ = done.send(got);
        });
    }
    let mut removed: Vec<(usize, usize)> = producers
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    let guard = std::time::Instant::now();
    while !queue.is_empty() {
        // A hang guard, not a timing assertion.
        let left = queue.len();
        assert!(
            guard.elapsed() < Duration::from_secs(60),
            "the consumers stopped draining: {left} left"
        );
        timer.advance(MS);
        std::thread::yield_now();
    }
    timer.stop().unwrap();
    // A hang guard, not a timing assertion: the streams end at once.
    let mut all: Vec<(usize, usize)> = (0..3)
        .flat_map(|_| {
            finished
                .recv_timeout(Duration::from_secs(60))
                .expect("every consumer's stream ends after stop")
        })
        .collect();
    all.append(&mut removed);
    all.sort_unstable();
    let want: Vec<(usize, usize)> = (0..THREADS)
        .flat_map(|p| (0..EACH).map(move |i| (p, i)))
        .collect();
    assert_eq!(all, want, "every item removed or yielded, exactly once");
}

#[tokio::test(start_paused = true)]
async fn on_a_paused_tokio_clock_items_come_out_as_time_is_advanced() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let mut queue = timer.delay_queue();
    let start = timer.now();
    let producer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            for i in 0..5u64 {
                queue.insert(i, Duration::from_secs(10 - i)).unwrap();
            }
        })
    };
    producer.await.unwrap();
    let mut out = Vec::new();
    while out.len() < 5 {
        // An hour of the paused clock, which auto-advances: a lost wake-up
        // fails here rather than hangs.
        let next = tokio::time::timeout(Duration::from_secs(3600), queue.next());
        let e = next.await.expect("woken when the item fired").unwrap();
        assert!(timer.now() >= e.deadline(), "early");
        assert_eq!(e.deadline(), start + Duration::from_secs(10 - e.get_ref()));
        out.push(e.into_inner());
    }
    assert_eq!(out, vec![4, 3, 2, 1, 0]);
}

/// Three consumers drain the queue while a thread peeks in a loop (`peek` holds the first fired
/// key for the stream) and a producer inserts and resets items into the past: each item comes out
/// once, none is lost in `peek`'s hands, and every stream ends after `close`.
#[test]
fn consumers_against_a_thread_peeking_see_each_item_once_and_end_after_close() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<usize>();
    const ITEMS: usize = 4_000;
    let stop_peeking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let peeker = {
        let (queue, stop) = (queue.clone(), stop_peeking.clone());
        std::thread::spawn(move || {
            let mut named = 0usize;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                named += usize::from(queue.peek().is_some());
            }
            named
        })
    };
    let (done, finished) = std::sync::mpsc::channel();
    for _ in 0..3 {
        let (mut queue, done) = (queue.clone(), done.clone());
        std::thread::spawn(move || {
            let mut got = Vec::new();
            while let Some(e) = futures::executor::block_on(queue.next()) {
                got.push(e.into_inner());
            }
            let _ = done.send(got);
        });
    }
    let start = timer.now();
    for i in 0..ITEMS {
        let key = queue.insert(i, MS * (i % 7) as u32).unwrap();
        if i % 3 == 0 {
            queue.reset_at(&key, start); // into the past: due, behind what fired
        }
        if i % 50 == 0 {
            timer.advance(MS);
        }
    }
    queue.close();
    let guard = std::time::Instant::now();
    while !queue.is_empty() {
        // A hang guard, not a timing assertion.
        assert!(
            guard.elapsed() < Duration::from_secs(60),
            "{} left",
            queue.len()
        );
        timer.advance(MS);
        std::thread::yield_now();
    }
    stop_peeking.store(true, std::sync::atomic::Ordering::SeqCst);
    peeker.join().unwrap();
    let mut all: Vec<usize> = (0..3)
        .flat_map(|_| {
            finished
                .recv_timeout(Duration::from_secs(60))
                .expect("every consumer's stream ends after close")
        })
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..ITEMS).collect::<Vec<_>>(), "each item once");
    assert_eq!(timer.pending_timeouts(), 0);
}
