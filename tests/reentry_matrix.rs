//! Re-entrancy matrix: from each place the crate runs user code (a context), each public operation
//! on the same timer and on another one. A cell passes if no panic escapes the operation or the
//! crate, nothing hangs (each cell runs on a thread of its own, bounded), and afterwards every
//! timeout accepted has fired, been cancelled or been stopped, and `stats()` adds up.

mod common;

use common::{assert_stats_add_up, QueueExecutor};
use hashed_wheel_timer::{
    DelayMap, DelayQueue, HashedWheelTimer, Job, Timeout, TimerError, TimerTask,
};
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const HANG: Duration = Duration::from_secs(20);
const FAR: Duration = Duration::from_secs(3600);

/// What a cell's operations act on: two timers (0: the one running the user code, 1: another),
/// a far timeout on each, a delay queue on each, and the timeouts the cell made.
struct Env {
    timers: [Mutex<Option<HashedWheelTimer>>; 2],
    victims: [Timeout; 2],
    queues: [Mutex<Option<DelayQueue<u32>>>; 2],
    me: Mutex<Option<Timeout>>,
    made: Mutex<Vec<Timeout>>,
    failures: Mutex<Vec<String>>,
}

impl Env {
    fn new(same: HashedWheelTimer, other: HashedWheelTimer) -> Arc<Env> {
        let far = |t: &HashedWheelTimer| t.new_timeout(|_| {}, FAR).unwrap();
        Arc::new(Env {
            victims: [far(&same), far(&other)],
            queues: [
                Mutex::new(Some(same.delay_queue())),
                Mutex::new(Some(other.delay_queue())),
            ],
            timers: [Mutex::new(Some(same)), Mutex::new(Some(other))],
            me: Mutex::new(None),
            made: Mutex::new(Vec::new()),
            failures: Mutex::new(Vec::new()),
        })
    }

    /// Timer `i`: the env's handle, or else one got back through its far timeout.
    fn timer(&self, i: usize) -> Option<HashedWheelTimer> {
        let held = self.timers[i].lock().unwrap().clone();
        held.or_else(|| self.victims[i].timer())
    }

    fn keep(&self, t: Result<Timeout, TimerError>) {
        if let Ok(t) = t {
            self.made.lock().unwrap().push(t);
        }
    }

    fn me(&self) -> Option<Timeout> {
        self.me.lock().unwrap().clone()
    }
}

type OpFn = fn(&Env, usize);

fn noop_waker() -> Waker {
    futures::task::noop_waker()
}

/// The operations, each on timer `i` of the env.
const OPS: &[(&str, OpFn)] = &[
    ("new_timeout", |e, i| {
        if let Some(t) = e.timer(i) {
            e.keep(t.new_timeout(|_| {}, MS));
        }
    }),
    ("cancel_victim", |e, i| {
        e.victims[i].cancel();
    }),
    ("cancel_self", |e, _| {
        e.me().map(|t| t.cancel());
    }),
    ("reset_victim", |e, i| {
        e.victims[i].reset(2 * MS);
    }),
    ("reset_self", |e, _| {
        e.me().map(|t| t.reset(MS));
    }),
    ("stop", |e, i| match e.timer(i).map(|t| t.stop()) {
        Some(Ok(v)) => e.made.lock().unwrap().extend(v),
        Some(Err(TimerError::StopFromTimerTask)) | None => {}
        Some(Err(err)) => e.failures.lock().unwrap().push(format!("stop: {err}")),
    }),
    ("advance", |e, i| {
        if let Some(t) = e.timer(i) {
            t.advance(MS)
        }
    }),
    ("advance_to_next", |e, i| {
        e.timer(i).map(|t| t.advance_to_next());
    }),
    ("pending_and_stats", |e, i| {
        if let Some(t) = e.timer(i) {
            let (p, s) = (t.pending_timeouts(), t.stats());
            let _ = (p, s.pending, t.is_shutdown());
        }
    }),
    ("drop_handle", |e, i| {
        let t = e.timers[i].lock().unwrap().take();
        drop(t);
    }),
    ("sleep_poll_drop", |e, i| {
        if let Some(t) = e.timer(i) {
            let mut s = t.sleep(MS);
            let _ = common::poll_with(&mut s, &noop_waker());
            drop(s);
            let mut s = t.sleep(Duration::ZERO);
            let _ = common::poll_with(&mut s, &noop_waker());
        }
    }),
    ("queue_ops", |e, i| {
        let Some(q) = e.queues[i].lock().unwrap().clone() else {
            return;
        };
        if let Ok(k) = q.insert(1, MS) {
            q.remove(&k);
        }
        let _ = q.insert(2, MS);
        let _ = q.poll_expired(&mut Context::from_waker(&noop_waker()));
        q.clear();
        q.close();
    }),
    ("set_default", |e, i| {
        if let Some(t) = e.timer(i) {
            let guard = hashed_wheel_timer::set_default(t);
            e.keep(hashed_wheel_timer::new_timeout(|_| {}, MS));
            let mut s = hashed_wheel_timer::sleep(MS);
            let _ = common::poll_with(&mut s, &noop_waker());
            drop(guard);
        }
    }),
];

/// Runs operation `op` on timer `i` of `env`; a panic out of it is a failure.
fn run_op(env: &Env, op: OpFn, i: usize) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| op(env, i))) {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        env.failures
            .lock()
            .unwrap()
            .push(format!("op panicked: {msg}"));
    }
}

type Hook = Arc<dyn Fn() + Send + Sync>;

/// Calls the hook when dropped.
struct OnDrop(Hook);
impl Drop for OnDrop {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// A waker that calls the hook when woken, and again when its last reference drops.
struct HookWaker(Hook, AtomicBool);
impl Wake for HookWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if !self.1.swap(true, Ordering::SeqCst) {
            (self.0)()
        }
    }
}
struct DropWaker(Hook);
impl Wake for DropWaker {
    fn wake(self: Arc<Self>) {}
}
impl Drop for DropWaker {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// A `TimerTask` whose `cancelled` hook calls the hook.
struct CancelHook(Hook);
impl TimerTask for CancelHook {
    fn run(self: Box<Self>, _: &Timeout) {}
    fn cancelled(self: Box<Self>, _: &Timeout) {
        (self.0)()
    }
}

/// A map key whose `Hash` and `Eq` call the hook (once each per key, to bound the work).
#[derive(Clone)]
struct HookKey(u32, Hook, Arc<AtomicBool>);
impl Hash for HookKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        if !self.2.swap(true, Ordering::SeqCst) {
            (self.1)()
        }
        self.0.hash(h)
    }
}
impl PartialEq for HookKey {
    fn eq(&self, o: &HookKey) -> bool {
        self.0 == o.0
    }
}
impl Eq for HookKey {}

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

fn inline_executor() -> HashedWheelTimer {
    let exec = |job: Job| job();
    let b = HashedWheelTimer::builder().manual_clock();
    b.executor(exec).build().unwrap()
}

/// A context: builds the env (the timer under test first), arranges for the hook to run in its
/// place, and makes it run. `i` picks a queued executor where one is needed.
type CtxFn = fn(Hook, &dyn Fn(HashedWheelTimer) -> Arc<Env>);

/// Drives a manual timer's due work from the test thread.
fn drive(e: &Env) {
    if let Some(t) = e.timer(0) {
        t.advance(5 * MS);
    }
}

const CONTEXTS: &[(&str, CtxFn)] = &[
    ("a: callback in advance", |h, mk| {
        let e = mk(manual());
        *e.me.lock().unwrap() = e
            .timer(0)
            .and_then(|t| t.new_timeout(move |_| h(), MS).ok());
        drive(&e);
    }),
    ("b: callback on the worker", |h, mk| {
        let e = mk(HashedWheelTimer::builder().build().unwrap());
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let task = move |_: &Timeout| {
            h();
            let _ = tx.lock().unwrap().send(());
        };
        *e.me.lock().unwrap() = e.timer(0).and_then(|t| t.new_timeout(task, MS).ok());
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the callback ran");
    }),
    ("c1: job on an inline executor", |h, mk| {
        let e = mk(inline_executor());
        *e.me.lock().unwrap() = e
            .timer(0)
            .and_then(|t| t.new_timeout(move |_| h(), MS).ok());
        drive(&e);
    }),
    ("c2: job on a queued executor", |h, mk| {
        let exec = QueueExecutor::default();
        let e = mk(exec.timer(MS));
        *e.me.lock().unwrap() = e
            .timer(0)
            .and_then(|t| t.new_timeout(move |_| h(), MS).ok());
        drive(&e);
        exec.run_all();
    }),
    ("d: periodic run", |h, mk| {
        let e = mk(manual());
        let t = e.timer(0).unwrap();
        *e.me.lock().unwrap() = t.schedule_at_fixed_rate(move |_| h(), MS, MS).ok();
        drop(t);
        drive(&e);
    }),
    ("e: cancelled hook", |h, mk| {
        let e = mk(manual());
        let me = e
            .timer(0)
            .unwrap()
            .new_timeout_task(CancelHook(h), FAR)
            .unwrap();
        *e.me.lock().unwrap() = Some(me.clone());
        me.cancel();
    }),
    ("f1: task dropped when cancelled", |h, mk| {
        let e = mk(manual());
        let d = OnDrop(h);
        let me = e
            .timer(0)
            .unwrap()
            .new_timeout(move |_| drop(d), FAR)
            .unwrap();
        *e.me.lock().unwrap() = Some(me.clone());
        me.cancel();
    }),
    ("f2: task dropped when fired", |h, mk| {
        let e = mk(manual());
        let d = OnDrop(h);
        let f = move |_: &Timeout| {
            let _keep = &d;
        };
        *e.me.lock().unwrap() = e.timer(0).and_then(|t| t.new_timeout(f, MS).ok());
        drive(&e);
    }),
    ("f3: task dropped by stop", |h, mk| {
        let e = mk(manual());
        let d = OnDrop(h);
        let t = e.timer(0).unwrap();
        t.new_timeout(move |_| drop(d), FAR).unwrap(); // the handles returned hold the task
        let v = t.stop().unwrap();
        assert!(v.len() == 2 && v.iter().all(Timeout::is_stopped));
    }),
    ("f4: task dropped with the last handle", |h, mk| {
        let e = mk(manual());
        let d = OnDrop(h);
        let t = e.timers[0].lock().unwrap().take().unwrap();
        drop(e.queues[0].lock().unwrap().take()); // a queue holds a handle
        t.new_timeout(move |_| drop(d), FAR).unwrap();
        drop(t);
    }),
    ("g1: sleep waker woken", |h, mk| {
        let e = mk(manual());
        let mut s = e.timer(0).unwrap().sleep(MS);
        let w = Waker::from(Arc::new(HookWaker(h, AtomicBool::new(false))));
        let _ = common::poll_with(&mut s, &w);
        drop(w);
        drive(&e);
    }),
    ("g2: sleep waker dropped", |h, mk| {
        let e = mk(manual());
        let mut s = e.timer(0).unwrap().sleep(MS);
        let _ = common::poll_with(&mut s, &Waker::from(Arc::new(DropWaker(h))));
        drop(s);
        drive(&e);
    }),
    ("g3: queue consumer woken", |h, mk| {
        let e = mk(manual());
        let q = e.timer(0).unwrap().delay_queue::<u32>();
        let w = Waker::from(Arc::new(HookWaker(h, AtomicBool::new(false))));
        let _ = q.poll_expired(&mut Context::from_waker(&w));
        drop(w);
        let _ = q.insert(7, MS);
        drive(&e);
    }),
    ("g4: interval waker woken", |h, mk| {
        let e = mk(manual());
        let mut iv = e.timer(0).unwrap().interval(MS);
        let w = Waker::from(Arc::new(HookWaker(h, AtomicBool::new(false))));
        for _ in 0..2 {
            let _ = iv.poll_tick(&mut Context::from_waker(&w));
        }
        drop(w);
        drive(&e);
    }),
    ("h1: queue item dropped by clear", |h, mk| {
        let e = mk(manual());
        let q = e.timer(0).unwrap().delay_queue::<OnDrop>();
        let _ = q.insert(OnDrop(h), MS);
        q.clear();
        drive(&e);
    }),
    ("h2: map key's hash", |h, mk| {
        let e = mk(manual());
        let m: DelayMap<HookKey, u32> = e.timer(0).unwrap().delay_map();
        let k = HookKey(1, h, Arc::new(AtomicBool::new(false)));
        let _ = m.insert(k.clone(), 1, MS);
        m.remove(&k);
        drive(&e);
    }),
    ("i: callback in a tokio driver task", |h, mk| {
        let rt = common::paused::paused_runtime();
        rt.block_on(async {
            let e = mk(common::paused::tokio_clock());
            *e.me.lock().unwrap() = e
                .timer(0)
                .and_then(|t| t.new_timeout(move |_| h(), MS).ok());
            tokio::time::sleep(5 * MS).await;
            common::paused::settle().await;
        });
    }),
];

/// One cell, on a thread of its own: its failures, or "hang".
fn cell(ctx: CtxFn, op: OpFn, i: usize) -> Vec<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let env: Arc<Mutex<Option<Arc<Env>>>> = Arc::default();
        let slot = env.clone();
        let mk = move |same: HashedWheelTimer| {
            let e = Env::new(same, manual());
            *slot.lock().unwrap() = Some(e.clone());
            e
        };
        let (weak, once) = (env.clone(), Arc::new(AtomicBool::new(false)));
        let ran = once.clone();
        // Once per cell: a periodic task advancing its timer on every run never ends (as documented).
        let hook: Hook = Arc::new(move || {
            let e = weak
                .lock()
                .unwrap()
                .clone()
                .filter(|_| !once.swap(true, Ordering::SeqCst));
            if let Some(e) = e {
                run_op(&e, op, i);
            }
        });
        let escaped = catch_unwind(AssertUnwindSafe(|| ctx(hook, &mk))).is_err();
        let e = env.lock().unwrap().take().unwrap();
        let mut out = std::mem::take(&mut *e.failures.lock().unwrap());
        if escaped {
            out.push("a panic escaped the crate".into());
        }
        if !ran.load(Ordering::SeqCst) {
            out.push("the user code never ran".into());
        }
        out.extend(account(&e));
        let _ = tx.send(out);
    });
    rx.recv_timeout(HANG)
        .unwrap_or_else(|_| vec!["hang: the cell did not finish".into()])
}

/// Nothing lost: each live timer is stopped, adds up, and every timeout accepted has ended.
fn account(e: &Env) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..2 {
        let Some(t) = e.timer(i) else { continue };
        match t.stop() {
            Ok(v) => e.made.lock().unwrap().extend(v),
            Err(err) => out.push(format!("stop afterwards: {err}")),
        }
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| assert_stats_add_up(&t))) {
            out.push(format!("stats: {:?}", p.downcast_ref::<String>()));
        }
        if t.pending_timeouts() != 0 {
            out.push(format!(
                "timer {i}: {} pending after stop",
                t.pending_timeouts()
            ));
        }
    }
    let mut all: Vec<Timeout> = e.victims.to_vec();
    all.extend(e.me());
    all.extend(e.made.lock().unwrap().iter().cloned());
    for t in all {
        if !(t.is_expired() || t.is_cancelled() || t.is_stopped()) {
            out.push(format!("lost: {t:?}"));
        }
    }
    out
}

/// Runs `f` on a thread of its own, failing with "hang: `what`" if it takes `HANG`.
fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(HANG)
        .unwrap_or_else(|_| panic!("hang: {what}"))
}

#[test]
fn advance_to_next_from_a_task_of_the_same_timers_advance_returns() {
    let moved = within("advance_to_next in a task of advance", || {
        let timer = manual();
        let far = timer.new_timeout(|_| {}, Duration::from_secs(10)).unwrap();
        let (tx, rx) = mpsc::channel();
        let t = timer.clone();
        let me = timer.new_timeout(move |_| tx.send(t.advance_to_next()).unwrap(), MS);
        timer.advance(MS);
        assert!(
            me.unwrap().is_expired() && far.is_expired(),
            "the outer advance went on"
        );
        assert_stats_add_up(&timer);
        rx.recv().unwrap()
    });
    assert_eq!(
        moved,
        Some(Duration::from_secs(10) - MS),
        "it stands for a task that long"
    );
}

#[test]
fn every_context_times_every_operation_on_the_same_and_another_timer() {
    let mut failures = Vec::new();
    let mut cells = 0;
    for (ctx_name, ctx) in CONTEXTS {
        for (op_name, op) in OPS {
            for (i, which) in ["same", "other"].iter().enumerate() {
                cells += 1;
                for f in cell(*ctx, *op, i) {
                    failures.push(format!("{ctx_name} / {op_name} on {which}: {f}"));
                }
            }
        }
    }
    assert_eq!(cells, CONTEXTS.len() * OPS.len() * 2);
    assert!(
        failures.is_empty(),
        "{} of {cells} cells failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
