//! Re-entrancy matrix: from each place the crate runs user code (a context), each public operation
//! on the same timer and on another one. A cell passes if no panic escapes the operation or the
//! crate, nothing hangs (each cell runs on a thread of its own, bounded), and afterwards every
//! timeout accepted has fired, been cancelled or been stopped, and `stats()` adds up.

mod common;

use common::{assert_stats_add_up, poll_with, QueueExecutor};
use futures::task::noop_waker_ref as noop;
use hashed_wheel_timer::{DelayMap, DelayQueue, HashedWheelTimer, Job, Timeout, TimerTask};
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
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
            queues: [same.delay_queue(), other.delay_queue()].map(|q| Mutex::new(Some(q))),
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

    fn keep(&self, t: Result<Timeout, hashed_wheel_timer::TimerError>) {
        self.made.lock().unwrap().extend(t.ok());
    }

    fn me(&self) -> Option<Timeout> {
        self.me.lock().unwrap().clone()
    }
}

type OpFn = fn(&Env, usize);

/// Drops its argument, which may be `Copy` or hold references.
fn ignore<T>(_: T) {}

/// Runs `f` on timer `i` of the env, if it is still there.
fn on(e: &Env, i: usize, f: impl FnOnce(HashedWheelTimer)) {
    e.timer(i).map(f).unwrap_or_default()
}

/// The operations, each on timer `i` of the env.
const OPS: &[(&str, OpFn)] = &[
    ("new_timeout", |e, i| {
        on(e, i, |t| e.keep(t.new_timeout(|_| {}, MS)))
    }),
    ("new_timeout_now", |e, i| {
        on(e, i, |t| e.keep(t.new_timeout(|_| {}, Duration::ZERO)))
    }),
    ("cancel_victim", |e, i| {
        assert!(e.victims[i].cancel() || !e.victims[i].is_pending())
    }),
    ("cancel_self", |e, _| {
        assert!(!e.me().is_some_and(|t| t.cancel() && t.is_pending()))
    }),
    ("reset_victim", |e, i| ignore(e.victims[i].reset(2 * MS))),
    ("reset_victim_now", |e, i| {
        ignore(e.victims[i].reset(Duration::ZERO))
    }),
    ("reset_self", |e, _| ignore(e.me().map(|t| t.reset(MS)))),
    ("take_task_self", |e, _| {
        drop(e.me().and_then(|t| t.take_task()))
    }),
    ("stop", |e, i| match e.timer(i).map(|t| t.stop()) {
        Some(Ok(v)) => e.made.lock().unwrap().extend(v),
        Some(Err(hashed_wheel_timer::TimerError::StopFromTimerTask)) | None => {}
        Some(Err(err)) => e.failures.lock().unwrap().push(format!("stop: {err}")),
    }),
    ("advance", |e, i| on(e, i, |t| t.advance(MS))),
    ("advance_to_next", |e, i| {
        on(e, i, |t| ignore(t.advance_to_next()))
    }),
    ("pending_and_stats", |e, i| {
        on(e, i, |t| ignore((t.pending_timeouts(), t.stats())))
    }),
    ("drop_handle", |e, i| {
        let t = e.timers[i].lock().unwrap().take();
        let q = e.queues[i].lock().unwrap().take(); // a queue holds a handle
        drop((t, q));
    }),
    ("sleep_poll_drop", |e, i| {
        on(e, i, |t| {
            let (mut s, mut now) = (t.sleep(MS), t.sleep(Duration::ZERO));
            let _ = (poll_with(&mut s, noop()), poll_with(&mut now, noop()));
        })
    }),
    ("queue_ops", |e, i| {
        let Some(q) = e.queues[i].lock().unwrap().clone() else {
            return;
        };
        let _ = q.insert(1, MS).map(|k| q.remove(&k));
        let _ = (
            q.insert(2, MS),
            q.poll_expired(&mut Context::from_waker(noop())),
        );
        q.clear();
        q.close();
    }),
    ("periodic", |e, i| {
        on(e, i, |t| {
            e.keep(t.schedule_with_fixed_delay(|_| {}, MS, MS));
            let c = t.schedule_at_fixed_rate(|_| {}, Duration::ZERO, MS);
            assert!(
                c.map_or(true, |c| c.cancel()),
                "a periodic task not yet run cancels"
            );
        })
    }),
    ("interval_poll_drop", |e, i| {
        on(e, i, |t| {
            let (mut iv, cx) = (t.interval(MS), &mut Context::from_waker(noop()));
            let _ = (iv.poll_tick(cx), iv.poll_tick(cx));
        })
    }),
    ("timeout_future", |e, i| {
        on(e, i, |t| {
            let mut f = Box::pin(t.timeout(MS, std::future::pending::<()>()));
            let _ = f.as_mut().poll(&mut Context::from_waker(noop()));
        })
    }),
    ("map_ops", |e, i| {
        on(e, i, |t| {
            let m = t.delay_map::<u32, u32>();
            let _ = (m.insert(1, 1, MS), m.remove(&1), m.insert(2, 2, MS));
            m.clear();
        })
    }),
    ("set_default", |e, i| {
        on(e, i, |t| {
            let guard = hashed_wheel_timer::set_default(t);
            e.keep(hashed_wheel_timer::new_timeout(|_| {}, MS));
            let _ = poll_with(&mut hashed_wheel_timer::sleep(MS), noop());
            drop(guard);
        })
    }),
];

fn message(p: Box<dyn std::any::Any + Send>) -> String {
    let s = p.downcast_ref::<&str>().map(|s| s.to_string());
    s.unwrap_or_else(|| p.downcast_ref::<String>().cloned().unwrap_or_default())
}

/// Runs operation `op` on timer `i` of `env`; a panic out of it is a failure.
fn run_op(env: &Env, op: OpFn, i: usize) {
    let r = catch_unwind(AssertUnwindSafe(|| op(env, i))).map_err(message);
    let mut failures = env.failures.lock().unwrap();
    failures.extend(r.err().map(|p| format!("op panicked: {p}")));
}

type Hook = Arc<dyn Fn() + Send + Sync>;

/// Calls the hook when dropped.
struct OnDrop(Hook);
impl Drop for OnDrop {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// A waker that calls the hook when woken; one that calls it when dropped.
struct HookWaker(Hook);
impl Wake for HookWaker {
    fn wake(self: Arc<Self>) {
        (self.0)()
    }
}
struct DropWaker(#[allow(dead_code)] OnDrop);
impl Wake for DropWaker {
    fn wake(self: Arc<Self>) {}
}

/// A `TimerTask` whose `cancelled` hook calls the hook.
struct CancelHook(Hook);
impl TimerTask for CancelHook {
    fn run(self: Box<Self>, _: &Timeout) {}
    fn cancelled(self: Box<Self>, _: &Timeout) {
        (self.0)()
    }
}

/// A map key whose `Hash` (mode 0), `Eq` (1) or `Drop` (2) calls the hook; mode 3 never does.
#[derive(Clone)]
struct HookKey(u32, Hook, u8);
impl HookKey {
    fn call(&self, mode: u8) {
        ignore((self.2 == mode).then(|| (self.1)()))
    }
}
impl Hash for HookKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.call(0);
        self.0.hash(h)
    }
}
impl PartialEq for HookKey {
    fn eq(&self, o: &HookKey) -> bool {
        ignore((self.call(1), o.call(1)));
        self.0 == o.0
    }
}
impl Drop for HookKey {
    fn drop(&mut self) {
        self.call(2)
    }
}
impl Eq for HookKey {}

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

/// A context: builds the env (the timer under test first) with `mk`, arranges for the hook to
/// run in its place, and makes it run.
type CtxFn = fn(Hook, &dyn Fn(HashedWheelTimer) -> Arc<Env>);

/// Drives a manual timer's due work from the test thread.
fn drive(e: &Env) {
    on(e, 0, |t| t.advance(5 * MS))
}

/// Schedules `task` on the timer under test, as the env's own timeout.
fn sched(e: &Env, task: impl FnOnce(&Timeout) + Send + 'static, delay: Duration) -> Timeout {
    let t = e.timer(0).unwrap().new_timeout(task, delay).unwrap();
    *e.me.lock().unwrap() = Some(t.clone());
    t
}

/// A task that calls the hook, and a receiver told when it has.
fn signalling(h: Hook) -> (impl FnOnce(&Timeout) + Send + 'static, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let task = move |_: &Timeout| ignore((h(), tx.lock().unwrap().send(())));
    (task, rx)
}

fn woken(h: Hook) -> Waker {
    Waker::from(Arc::new(HookWaker(h)))
}

fn dropped(h: Hook) -> Waker {
    Waker::from(Arc::new(DropWaker(OnDrop(h))))
}

fn on_executor(exec: impl hashed_wheel_timer::Executor) -> HashedWheelTimer {
    let b = HashedWheelTimer::builder().manual_clock();
    b.executor(exec).build().unwrap()
}

const CONTEXTS: &[(&str, CtxFn)] = &[
    ("a: callback in advance", |h, mk| {
        let e = mk(manual());
        sched(&e, move |_| h(), MS);
        drive(&e);
    }),
    ("a2: callback in advance_to_next", |h, mk| {
        let e = mk(manual());
        sched(&e, move |_| h(), MS);
        let _ = e.timer(0).map(|t| t.advance_to_next());
    }),
    ("b: callback on the worker", |h, mk| {
        let e = mk(HashedWheelTimer::builder().build().unwrap());
        let (task, rx) = signalling(h);
        sched(&e, task, MS);
        rx.recv_timeout(Duration::from_secs(10)).expect("ran");
    }),
    ("c1: job on an inline executor", |h, mk| {
        let e = mk(on_executor(|job: Job| job()));
        sched(&e, move |_| h(), MS);
        drive(&e);
    }),
    ("c2: job on a queued executor", |h, mk| {
        let exec = QueueExecutor::default();
        let e = mk(exec.timer(MS));
        sched(&e, move |_| h(), MS);
        drive(&e);
        exec.run_all();
    }),
    ("c3: job on a thread of its own", |h, mk| {
        let e = mk(on_executor(|job: Job| drop(std::thread::spawn(job))));
        let (task, rx) = signalling(h);
        sched(&e, task, MS);
        drive(&e);
        rx.recv_timeout(Duration::from_secs(10)).expect("ran");
    }),
    ("c4: inside Executor::execute", |h, mk| {
        let e = mk(on_executor(move |job: Job| {
            h();
            job()
        }));
        sched(&e, |_| {}, MS);
        drive(&e);
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
        let me = e.timer(0).unwrap().new_timeout_task(CancelHook(h), FAR);
        *e.me.lock().unwrap() = me.ok();
        e.me().map(|t| t.cancel());
    }),
    ("f1: task dropped when cancelled", |h, mk| {
        let e = mk(manual());
        let d = OnDrop(h);
        sched(&e, move |_| drop(d), FAR).cancel();
    }),
    ("f2: task dropped when fired", |h, mk| {
        let e = mk(manual());
        let d = OnDrop(h);
        let _d = sched(&e, move |t| ignore((t, &d)), MS); // `d` drops after the run
        drive(&e);
    }),
    ("f3: task dropped by stop", |h, mk| {
        let e = mk(manual());
        let (d, t) = (OnDrop(h), e.timer(0).unwrap());
        t.new_timeout(move |_| drop(d), FAR).unwrap(); // the handles returned hold the task
        let v = t.stop().unwrap();
        assert!(v.len() == 2 && v.iter().all(Timeout::is_stopped));
    }),
    ("f4: task dropped with the last handle", |h, mk| {
        let e = mk(manual());
        let (d, t) = (OnDrop(h), e.timers[0].lock().unwrap().take().unwrap());
        drop(e.queues[0].lock().unwrap().take()); // a queue holds a handle
        t.new_timeout(move |_| drop(d), FAR).unwrap();
        drop(t);
    }),
    ("f5: a queued job's task dropped after stop", |h, mk| {
        let exec = QueueExecutor::default();
        let (e, d) = (mk(exec.timer(MS)), OnDrop(h));
        let _ = e.timer(0).map(|t| t.new_timeout(move |_| drop(d), MS));
        drive(&e);
        let v = e.timer(0).unwrap().stop().unwrap();
        exec.run_all();
        assert!(v.len() == 2 && v.iter().all(Timeout::is_stopped), "{v:?}");
    }),
    ("g3: queue consumer woken", |h, mk| {
        consumer(&mk(manual()), woken(h))
    }),
    ("g4: interval waker woken", |h, mk| {
        interval(&mk(manual()), woken(h))
    }),
    ("g5: consumer's waker dropped", |h, mk| {
        consumer(&mk(manual()), dropped(h))
    }),
    ("g6: interval waker dropped", |h, mk| {
        interval(&mk(manual()), dropped(h))
    }),
    ("g1: sleep waker woken", |h, mk| {
        let e = mk(manual());
        let mut s = e.timer(0).unwrap().sleep(MS);
        let _ = poll_with(&mut s, &woken(h));
        drive(&e);
    }),
    ("g2: sleep waker dropped", |h, mk| {
        let e = mk(manual());
        let mut s = e.timer(0).unwrap().sleep(MS);
        let _ = poll_with(&mut s, &dropped(h));
        drop(s);
        drive(&e);
    }),
    ("g7: sleep and consumer woken by stop", |h, mk| {
        let e = mk(manual());
        let t = e.timer(0).unwrap();
        let (mut s, q, w) = (t.sleep(FAR), t.delay_queue::<u32>(), woken(h));
        let _ = poll_with(&mut s, &w);
        let _ = q.poll_expired(&mut Context::from_waker(&w));
        drop(w);
        let v = t.stop().unwrap_or_default(); // wakes the hook: no lock held here
        e.made.lock().unwrap().extend(v);
    }),
    ("g8: waker dropped with the last handle", |h, mk| {
        let e = mk(manual());
        let t = e.timers[0].lock().unwrap().take().unwrap();
        drop(e.queues[0].lock().unwrap().take());
        let mut s = t.sleep(FAR);
        let _ = poll_with(&mut s, &dropped(h));
        drop((s, t));
    }),
    ("h1: queue item dropped by clear", |h, mk| {
        queue_item(h, mk, true)
    }),
    ("h2: map key's hash", |h, mk| map_key(h, mk, 0)),
    ("h3: map key's eq", |h, mk| map_key(h, mk, 1)),
    ("h4: map key's drop", |h, mk| map_key(h, mk, 2)),
    ("h5: item dropped with its queue", |h, mk| {
        queue_item(h, mk, false)
    }),
    ("i: callback in a tokio driver task", |h, mk| {
        on_tokio(mk, move |e| ignore(sched(e, move |_| h(), MS)))
    }),
    ("i2: sleep woken by a tokio driver task", |h, mk| {
        on_tokio(mk, |e| {
            let mut s = Box::pin(e.timer(0).unwrap().sleep(MS));
            let _ = s.as_mut().poll(&mut Context::from_waker(&woken(h)));
            s
        })
    }),
];

/// A map on the timer under test whose key calls the hook in `mode` (see `HookKey`).
fn map_key(h: Hook, mk: &dyn Fn(HashedWheelTimer) -> Arc<Env>, mode: u8) {
    let e = mk(manual());
    let m: DelayMap<HookKey, u32> = e.timer(0).unwrap().delay_map();
    let _ = m.insert(HookKey(1, h.clone(), mode), 1, MS);
    let _ = m.insert(HookKey(2, h.clone(), mode), 2, MS);
    m.remove(&HookKey(1, h, 3));
    drive(&e);
    drop(m);
}

/// An item that calls the hook when dropped, in a queue on the timer under test, cleared or not.
fn queue_item(h: Hook, mk: &dyn Fn(HashedWheelTimer) -> Arc<Env>, clear: bool) {
    let e = mk(manual());
    let q = e.timer(0).unwrap().delay_queue::<OnDrop>();
    let _ = q.insert(OnDrop(h), MS);
    if clear {
        q.clear();
    }
    drop(q);
    drive(&e);
}

/// On a paused runtime, a tokio-clock timer under test, set up by `f`, 5 ms of virtual time on.
fn on_tokio<R>(mk: &dyn Fn(HashedWheelTimer) -> Arc<Env>, f: impl FnOnce(&Env) -> R) {
    common::paused::paused_runtime().block_on(async {
        let kept = f(&mk(common::paused::tokio_clock()));
        tokio::time::sleep(5 * MS).await;
        common::paused::settle().await;
        drop(kept);
    });
}

/// A delay queue's consumer polled with `w`, woken by an item, and dropped.
fn consumer(e: &Env, w: Waker) {
    let q = e.timer(0).unwrap().delay_queue::<u32>();
    let _ = q.poll_expired(&mut Context::from_waker(&w));
    let _ = (q.insert(7, MS), drop(w), drive(e));
    drop(q);
    drive(e);
}

/// An interval polled with `w` until pending, ticking, then dropped.
fn interval(e: &Env, w: Waker) {
    let mut iv = e.timer(0).unwrap().interval(MS);
    let _ = (0..2)
        .map(|_| iv.poll_tick(&mut Context::from_waker(&w)))
        .count();
    let _ = (drop(w), drive(e));
    drop(iv);
    drive(e);
}

/// One cell, on a thread of its own: its failures, or "hang".
fn cell(ctx: CtxFn, ops: Vec<OpFn>, i: usize) -> Vec<String> {
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
            let e = weak.lock().unwrap().clone();
            let e = e.filter(|_| !once.swap(true, Ordering::SeqCst));
            let run = |e: &Arc<Env>| ops.iter().for_each(|op| run_op(e, *op, i));
            e.iter().for_each(run);
        });
        let escaped = catch_unwind(AssertUnwindSafe(|| ctx(hook, &mk))).is_err();
        let e = env.lock().unwrap().take().unwrap();
        let mut out = std::mem::take(&mut *e.failures.lock().unwrap());
        out.extend(escaped.then(|| "a panic escaped the crate".into()));
        let never = !ran.load(Ordering::SeqCst);
        out.extend(never.then(|| "the user code never ran".into()));
        out.extend(account(&e));
        let _ = tx.send(out);
    });
    let hang = || vec!["hang: the cell did not finish".into()];
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| hang())
}

/// Nothing lost: each live timer adds up, is stopped, adds up; every timeout accepted has ended.
fn account(e: &Env) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..2 {
        let Some(t) = e.timer(i) else { continue };
        let adds_up = |out: &mut Vec<String>, when: &str| {
            let r = catch_unwind(AssertUnwindSafe(|| assert_stats_add_up(&t)));
            let r = r.map_err(message).err();
            out.extend(r.map(|p| format!("stats {when} stop: {p}")));
        };
        if t.is_manual_clock() {
            adds_up(&mut out, "before"); // a live worker fires between the counts' reads
        }
        match t.stop() {
            Ok(v) => e.made.lock().unwrap().extend(v),
            Err(err) => out.push(format!("stop afterwards: {err}")),
        }
        adds_up(&mut out, "after");
        if t.pending_timeouts() != 0 {
            out.push(format!("{} pending after stop", t.pending_timeouts()));
        }
    }
    let mut all: Vec<Timeout> = e.victims.to_vec();
    all.extend(e.me());
    all.extend(e.made.lock().unwrap().clone());
    all.retain(|t| !(t.is_expired() || t.is_cancelled() || t.is_stopped()));
    out.extend(all.iter().map(|t| format!("lost: {t:?}")));
    out
}

#[test]
fn advance_to_next_from_a_task_of_the_same_timers_advance_returns() {
    let ten = Duration::from_secs(10);
    let moved = common::paused::within(20, move || {
        let timer = manual();
        let far = timer.new_timeout(|_| {}, ten).unwrap();
        let (tx, rx) = mpsc::channel();
        let t = timer.clone();
        let me = timer.new_timeout(move |_| tx.send(t.advance_to_next()).unwrap(), MS);
        timer.advance(MS);
        let went_on = me.unwrap().is_expired() && far.is_expired();
        assert!(went_on, "the outer advance went on");
        assert_stats_add_up(&timer);
        rx.recv().unwrap()
    });
    let moved = moved.expect("hang: advance_to_next in a task of advance");
    assert_eq!(moved, Some(ten - MS), "it stands for a task that long");
}

/// Every context with every sequence of `arity` operations, on the same timer and on another.
fn matrix(arity: u32) {
    let (mut failures, mut cells) = (Vec::new(), 0);
    for (ctx_name, ctx) in CONTEXTS {
        for n in 0..OPS.len().pow(arity) {
            let pick = |k| OPS[n / OPS.len().pow(k) % OPS.len()];
            let seq: Vec<_> = (0..arity).map(pick).collect();
            let names: Vec<_> = seq.iter().map(|op| op.0).collect();
            for (i, which) in ["same", "other"].iter().enumerate() {
                cells += 1;
                for f in cell(*ctx, seq.iter().map(|op| op.1).collect(), i) {
                    failures.push(format!("{ctx_name} / {names:?} on {which}: {f}"));
                }
            }
        }
    }
    let n = failures.len();
    failures.truncate(60);
    let list = failures.join("\n");
    assert!(n == 0, "{n} of {cells} cells failed:\n{list}");
}

#[test]
fn every_context_times_every_operation_on_the_same_and_another_timer() {
    matrix(1)
}

#[test]
fn every_context_times_every_pair_of_operations() {
    matrix(2)
}
