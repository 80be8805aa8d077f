//! A producer's lane: withdrawals, reclaims and a full ring against the driver's drain.

use super::*;

/// A cancel withdraws a timeout from its lane while the driving thread
/// drains that lane: exactly one of them takes the key, so the slot is
/// freed once. A second free would hand the slot to the next timeout while
/// the old handle still names it.
#[test]
fn withdraw_against_drain_frees_the_slot_once() {
    loom::model(|| {
        let timer = manual();
        let (t, runs) = counted(&timer, TICK);
        let handle = t.clone();
        let canceller = thread::spawn(move || handle.cancel());
        timer.advance(Duration::ZERO); // drains the lane, racing the withdrawal
        assert!(canceller.join().unwrap(), "nothing else could win yet");
        timer.advance(TICK); // frees it, if the drain took it first
        let (new, new_runs) = counted(&timer, TICK);
        timer.advance(TICK * 2);
        assert_eq!(new_runs.load(SeqCst), 1);
        assert!(new.is_expired());
        assert!(
            t.is_cancelled() && !t.is_expired(),
            "the old handle's entry"
        );
        assert_eq!(runs.load(SeqCst), 0);
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A lane's owner, making room in its ring, moves the ring's head past the
/// cells it finds empty while the worker drains the same ring. Every key
/// still queued is filed exactly once, the withdrawn one never, and the
/// ring keeps working after it wraps round.
#[test]
fn reclaim_against_drain_files_every_key_once() {
    loom::model(|| {
        let timer = manual();
        let (a, a_runs) = counted(&timer, TICK);
        assert!(a.cancel(), "withdrawn: its cell is empty");
        let worker = timer.clone();
        let drainer = thread::spawn(move || worker.advance(Duration::ZERO));
        // Half the ring: the owner reclaims the withdrawn cell.
        let (b, b_runs) = counted(&timer, TICK);
        let (c, c_runs) = counted(&timer, TICK);
        drainer.join().unwrap();
        let wrapped: Vec<_> = (0..3).map(|_| counted(&timer, TICK)).collect();
        timer.advance(TICK * 2);
        assert_eq!(a_runs.load(SeqCst), 0);
        for (t, runs) in [(b, b_runs), (c, c_runs)].into_iter().chain(wrapped) {
            assert_eq!(runs.load(SeqCst), 1);
            assert!(t.is_expired());
        }
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A producer fills its ring (4 cells under loom), so files its own lane
/// under the driver's lock, frees a cell with a cancel and schedules once
/// more, while the driving thread drains the lane: equal deadlines still
/// fire in submission order, and none is lost.
#[test]
fn a_full_ring_keeps_submission_order_against_drain() {
    // Seven timeouts and their fires take more than loom's default 1,000
    // branches on one path (each fire also counts and notes its lateness).
    model_long(|| {
        let timer = manual();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let producer = {
            let (timer, order) = (timer.clone(), order.clone());
            thread::spawn(move || {
                let schedule = |n: usize| {
                    let order = order.clone();
                    let record = move |_: &Timeout| order.lock().unwrap().push(n);
                    timer.new_timeout(record, TICK).unwrap()
                };
                let first = schedule(0);
                (1..6).for_each(|n| drop(schedule(n)));
                assert!(first.cancel(), "not yet due");
                schedule(6)
            })
        };
        timer.advance(Duration::ZERO); // drains, racing the producer
        let last = producer.join().unwrap();
        timer.advance(TICK);
        assert!(last.is_expired());
        assert_eq!(*order.lock().unwrap(), (1..7).collect::<Vec<_>>());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}
