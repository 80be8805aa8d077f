//! `DelayQueue` and `DelayMap` against the driving thread.

use super::*;

/// A delay queue's consumer turning the wheel at its poll (a manual or
/// tokio clock's, so that what is due comes out at that poll) against a
/// producer inserting an item already due and an `advance`: the item comes
/// out exactly once, at that poll or the next.
#[test]
fn a_consumer_turning_at_its_poll_against_a_producer_and_advance() {
    model_long(|| {
        let timer = manual();
        // The arena's first chunk made here, before the race.
        assert!(timer.new_timeout(|_| {}, TICK).unwrap().cancel());
        let queue = timer.delay_queue::<u8>();
        let poll_once = |queue: &hashed_wheel_timer::DelayQueue<u8>| {
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            match queue.poll_expired(&mut cx) {
                std::task::Poll::Ready(Some(e)) => Some(e.into_inner()),
                _ => None,
            }
        };
        let producer = {
            let queue = queue.clone();
            thread::spawn(move || queue.insert(7, Duration::ZERO).unwrap())
        };
        let consumer = {
            let queue = queue.clone();
            thread::spawn(move || poll_once(&queue))
        };
        timer.advance(Duration::ZERO);
        producer.join().unwrap();
        let first = consumer.join().unwrap();
        let second = poll_once(&queue);
        let out: Vec<u8> = first.into_iter().chain(second).collect();
        assert_eq!(out, [7], "exactly once, by the poll after the insert");
        assert!(queue.is_empty());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A delay queue's removals wait in their thread's batch (two cells under
/// loom), the second filling it and cancelling both, while the driving
/// thread's turn takes the batches before it fires. Each item comes back
/// from its `remove` and never out of the stream; each timeout ends once,
/// its reference handed from the removed slot to the batch, freed once.
#[test]
fn delay_queue_removals_batched_against_a_turn() {
    model_long(|| {
        let timer = manual();
        let queue = timer.delay_queue::<u8>();
        let keys = [
            queue.insert(1, TICK).unwrap(),
            queue.insert(2, TICK).unwrap(),
        ];
        let driver = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(TICK))
        };
        let removed: Vec<_> = keys.iter().map(|key| queue.remove(key)).collect();
        driver.join().unwrap();
        assert_eq!(removed, [Some(1), Some(2)]);
        let waker = futures::task::noop_waker();
        let polled = queue.poll_expired(&mut std::task::Context::from_waker(&waker));
        assert!(polled.is_pending(), "a removed item came out");
        let stats = timer.stats();
        assert_eq!((stats.fired + stats.cancelled, stats.pending), (2, 0));
    });
}

/// A `DelayMap`'s one key, due now, against a replacing `insert` on one
/// thread and a consumer's poll on another while this thread turns the
/// wheel. The map's shard lock decides: the old value comes back to the
/// inserter or out of the stream, never both, and the new value comes
/// out once, after its own deadline, never lost.
#[test]
fn a_delay_map_insert_replacing_a_key_against_its_expiry() {
    model_long(|| {
        let timer = manual();
        let map = timer.delay_map::<u8, u8>();
        map.insert(0, 1, TICK).unwrap();
        timer.advance(Duration::ZERO); // filed into its bucket
        let inserter = {
            let map = map.clone();
            thread::spawn(move || map.insert(0, 2, TICK * 3).unwrap())
        };
        let consumer = {
            let map = map.clone();
            thread::spawn(move || poll_map(&map))
        };
        timer.advance(TICK);
        let replaced = inserter.join().unwrap();
        let mut out: Vec<u8> = consumer.join().unwrap().into_iter().collect();
        out.extend(poll_map(&map));
        assert_eq!(replaced.is_some(), !out.contains(&1), "1 comes back once");
        assert!(!out.contains(&2), "2 is not due");
        timer.advance(TICK * 3);
        out.extend(poll_map(&map));
        out.extend(replaced);
        out.sort_unstable();
        assert_eq!(out, [1, 2], "each value once");
        assert!(map.is_empty());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A `DelayMap`'s key, due now, removed on one thread while a consumer
/// polls on another and this thread turns the wheel: exactly one of them
/// gets the value.
#[test]
fn a_delay_map_remove_against_expiry() {
    model_long(|| {
        let timer = manual();
        let map = timer.delay_map::<u8, u8>();
        map.insert(0, 1, TICK).unwrap();
        timer.advance(Duration::ZERO);
        let remover = {
            let map = map.clone();
            thread::spawn(move || map.remove(&0))
        };
        let consumer = {
            let map = map.clone();
            thread::spawn(move || poll_map(&map))
        };
        timer.advance(TICK);
        let removed = remover.join().unwrap();
        let yielded = consumer.join().unwrap().or_else(|| poll_map(&map));
        assert_eq!(
            removed.is_some() as u8 + yielded.is_some() as u8,
            1,
            "exactly one gets it"
        );
        assert!(map.is_empty());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// One poll of a `DelayMap`'s stream: the value it yields, if any.
fn poll_map(map: &hashed_wheel_timer::DelayMap<u8, u8>) -> Option<u8> {
    let mut cx = std::task::Context::from_waker(futures::task::noop_waker_ref());
    match map.poll_expired(&mut cx) {
        std::task::Poll::Ready(Some((_, value))) => Some(value),
        _ => None,
    }
}

/// A closed queue's last item, fired, comes out to one consumer while
/// another polls: the other gets the item, or the end, or is woken to look
/// again; it is never left waiting on a queue that has ended.
#[test]
fn a_closed_queues_last_item_taken_against_another_consumers_poll() {
    use std::sync::atomic::AtomicBool;
    struct Flag(AtomicBool);
    impl futures::task::ArcWake for Flag {
        fn wake_by_ref(flag: &Arc<Flag>) {
            flag.0.store(true, SeqCst);
        }
    }
    model_long(|| {
        let timer = manual();
        let queue = timer.delay_queue::<u8>();
        queue.insert(1, Duration::ZERO).unwrap();
        timer.advance(Duration::ZERO); // fired: its key waits for a consumer
        queue.close();
        let other = {
            let queue = queue.clone();
            thread::spawn(move || {
                let woken = Arc::new(Flag(AtomicBool::new(false)));
                let waker = futures::task::waker(woken.clone());
                let polled = queue.poll_expired(&mut std::task::Context::from_waker(&waker));
                (polled.map(|e| e.map(|e| e.into_inner())), woken, queue) // a consumer waits
            })
        };
        let waker = futures::task::noop_waker();
        let mine = queue.poll_expired(&mut std::task::Context::from_waker(&waker));
        let mine = mine.map(|e| e.map(|e| e.into_inner()));
        let (theirs, woken, _waiting) = other.join().unwrap();
        let items = [mine, theirs]
            .iter()
            .filter(|p| matches!(p, std::task::Poll::Ready(Some(_))))
            .count();
        assert_eq!(items, 1, "the item comes out once");
        assert!(
            theirs.is_ready() || woken.0.load(SeqCst),
            "the other consumer waits on an ended queue, unwoken"
        );
    });
}

/// An insert racing `close()` against a consumer's poll: the insert is
/// refused, or its item comes out before the stream's end, never after it.
#[test]
fn an_insert_racing_close_is_refused_or_comes_out_before_the_end() {
    model_long(|| {
        let timer = manual();
        let queue = timer.delay_queue::<u8>();
        let producer = {
            let queue = queue.clone();
            thread::spawn(move || queue.insert(1, Duration::ZERO).is_ok())
        };
        thread::yield_now(); // `closed` is std's atomic: a point where loom may switch
        queue.close();
        let waker = futures::task::noop_waker();
        let polled = queue.poll_expired(&mut std::task::Context::from_waker(&waker));
        let polled = polled.map(|p| p.map(|e| e.into_inner()));
        let inserted = producer.join().unwrap();
        if matches!(polled, std::task::Poll::Ready(None)) {
            assert!(!inserted, "an item got in after the stream had ended");
        }
    });
}

/// `peek` names a fired key while a consumer polls on another thread: the item comes out once, and
/// a consumer that found nothing (were `peek` to take the key off the list) is woken to look again.
#[test]
fn a_peek_holding_a_fired_key_against_a_consumers_poll() {
    use std::sync::atomic::AtomicBool;
    struct Flag(AtomicBool);
    impl futures::task::ArcWake for Flag {
        fn wake_by_ref(flag: &Arc<Flag>) {
            flag.0.store(true, SeqCst);
        }
    }
    model_long(|| {
        let timer = manual();
        let queue = timer.delay_queue::<u8>();
        let key = queue.insert(1, Duration::ZERO).unwrap();
        timer.advance(Duration::ZERO); // fired: its key waits for a consumer
        let consumer = {
            let queue = queue.clone();
            thread::spawn(move || {
                let woken = Arc::new(Flag(AtomicBool::new(false)));
                let waker = futures::task::waker(woken.clone());
                let polled = queue.poll_expired(&mut std::task::Context::from_waker(&waker));
                (polled.map(|e| e.map(|e| e.into_inner())), woken, queue) // a consumer waits
            })
        };
        let peeked = queue.peek();
        let (theirs, woken, _waiting) = consumer.join().unwrap();
        match theirs {
            std::task::Poll::Ready(Some(1)) => assert!(peeked.is_none() || peeked == Some(key)),
            std::task::Poll::Pending => {
                assert_eq!(peeked, Some(key));
                assert!(
                    woken.0.load(SeqCst),
                    "the consumer missed the item, unwoken"
                );
                let waker = futures::task::noop_waker();
                let mine = queue.poll_expired(&mut std::task::Context::from_waker(&waker));
                assert!(matches!(mine, std::task::Poll::Ready(Some(e)) if *e.get_ref() == 1));
            }
            other => panic!("{other:?}"),
        }
        assert!(queue.is_empty() && queue.peek().is_none());
    });
}

/// An `advance` from a job on an executor thread, with no `advance` running, against a delay
/// queue consumer's brief turn at its poll: the job's `advance` waits for that turn, then fires
/// what falls due on its way (it used to take the held lock for a running `advance`'s, and only
/// moved the clock).
#[test]
fn an_advance_from_a_job_against_a_consumers_turn_fires_what_falls_due() {
    loom::model(|| {
        let jobs = Arc::new(std::sync::Mutex::new(Vec::<hashed_wheel_timer::Job>::new()));
        let queued = jobs.clone();
        let timer = HashedWheelTimer::builder()
            .manual_clock()
            .executor(move |job: hashed_wheel_timer::Job| queued.lock().unwrap().push(job))
            .build()
            .unwrap();
        let due = timer.new_timeout(|_| {}, TICK * 2).unwrap();
        let advances = |t: &Timeout| t.timer().unwrap().advance(TICK * 2);
        timer.new_timeout(advances, TICK).unwrap();
        timer.advance(TICK); // its job waits in `jobs`
        let job = jobs.lock().unwrap().pop().unwrap();
        let queue = timer.delay_queue::<u8>();
        let consumer = thread::spawn(move || {
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            assert!(queue.poll_expired(&mut cx).is_pending());
        });
        let runner = thread::spawn(job);
        consumer.join().unwrap();
        runner.join().unwrap();
        assert!(
            due.is_expired(),
            "the job's advance moved the clock past it unfired"
        );
    });
}
