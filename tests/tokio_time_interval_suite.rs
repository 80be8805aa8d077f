//! tokio's own time tests, `tokio/tests/time_interval.rs` and `tokio/tests/time_pause.rs`, ported
//! to a `tokio_clock()` timer on a paused runtime: the timer's `interval`, `interval_at` and
//! `sleep` (or the free functions under `set_default`) stand in for `tokio::time`'s, and
//! `tokio::time::advance` and auto-advance move the timer as they move tokio's timers.
//!
//! Skipped, because they test tokio's clock itself, with nothing of this crate in them:
//! - `pause_time_in_main`, `pause_time_in_task`, `pause_time_in_main_threads`,
//!   `pause_time_in_spawn_threads`: where `tokio::time::pause()` may be called, and that it panics
//!   on a multi-thread runtime.
//!
//! Adapted, where the crate differs from tokio on purpose (its docs say so):
//! - `interval_zero_duration`: tokio panics on a zero period; `interval_at` here raises it to one
//!   tick of the timer and logs a warning, and `try_interval_at` returns `TimerError::ZeroPeriod`.
//!
//! `test_time_advance_sub_ms`, `test_time_advance_3ms_and_change` and `exact_1ms_advance` check,
//! beside tokio's clock, that the timer's clock (`timer.now()`) moves by exactly as much.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use hashed_wheel_timer::TimerError::ZeroPeriod;
use hashed_wheel_timer::{set_default, HashedWheelTimer, Interval, MissedTickBehavior, Sleep};
use tokio::time::{self, Duration, Instant};
use tokio_test::{assert_elapsed, assert_pending, assert_ready, assert_ready_eq, task};

/// A timer on the runtime's clock; built inside the runtime.
fn tokio_clock() -> HashedWheelTimer {
    HashedWheelTimer::builder().tokio_clock().build().unwrap()
}

/// For each delta, polls the interval and asserts it is ready with `start` + that delta; then that
/// it is pending.
macro_rules! check_interval_poll {
    ($i:ident, $start:ident, $($delta:expr),*$(,)?) => {
        $(
            assert_ready_eq!(poll_next(&mut $i), ($start + ms($delta)).into_std());
        )*
        assert_pending!(poll_next(&mut $i));
    };
    ($i:ident, $start:ident) => {
        check_interval_poll!($i, $start,);
    };
}

fn poll_next(interval: &mut task::Spawn<Interval>) -> Poll<std::time::Instant> {
    interval.enter(|cx, mut interval| interval.poll_tick(cx))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

async fn advance(n: u64) {
    time::advance(ms(n)).await;
}

/// The common start of the interval tests: an interval of 300 ms from `start`, 1 ms ago, polled
/// to its second tick at 300 ms.
async fn to_second_tick(
    timer: &HashedWheelTimer,
    b: MissedTickBehavior,
) -> (Instant, task::Spawn<Interval>) {
    let start = Instant::now();
    advance(1).await;
    let mut i = task::spawn(timer.interval_at(start, ms(300)));
    i.set_missed_tick_behavior(b);
    check_interval_poll!(i, start, 0);
    advance(100).await;
    check_interval_poll!(i, start);
    advance(200).await;
    check_interval_poll!(i, start, 300);
    (start, i)
}

// ---- time_interval.rs ----

/// A zero period: tokio panics; here `try_interval_at` errs and `interval_at` ticks every tick.
#[tokio::test(start_paused = true)]
async fn interval_zero_duration() {
    let timer = tokio_clock();
    let err = timer.try_interval_at(Instant::now(), ms(0)).unwrap_err();
    assert!(matches!(err, ZeroPeriod { .. }), "{err:?}");
    let mut i = timer.interval_at(Instant::now(), ms(0));
    assert_eq!(i.period(), timer.tick_duration());
    let first = i.tick().await;
    assert_eq!(i.tick().await - first, timer.tick_duration());
}

/// `Burst`: missed ticks all come at once, then the schedule goes on as it was.
#[tokio::test(start_paused = true)]
async fn burst() {
    let timer = tokio_clock();
    let (start, mut i) = to_second_tick(&timer, MissedTickBehavior::Burst).await;
    advance(650).await;
    check_interval_poll!(i, start, 600, 900);
    advance(200).await;
    check_interval_poll!(i, start);
    advance(100).await;
    check_interval_poll!(i, start, 1200);
    advance(250).await;
    check_interval_poll!(i, start, 1500);
    advance(300).await;
    check_interval_poll!(i, start, 1800);
}

/// `Delay`: after a missed tick, the next is one period after the late tick was polled.
#[tokio::test(start_paused = true)]
async fn delay() {
    let timer = tokio_clock();
    let (start, mut i) = to_second_tick(&timer, MissedTickBehavior::Delay).await;
    advance(650).await;
    check_interval_poll!(i, start, 600);
    advance(100).await;
    check_interval_poll!(i, start);
    // The late tick was polled at 951 ms, so the next is due at 1251 ms.
    advance(201).await;
    check_interval_poll!(i, start, 1251);
    advance(300).await;
    check_interval_poll!(i, start, 1551);
    advance(300).await;
    check_interval_poll!(i, start, 1851);
}

/// `Skip`: missed ticks are skipped, and the next is on the original schedule.
#[tokio::test(start_paused = true)]
async fn skip() {
    let timer = tokio_clock();
    let (start, mut i) = to_second_tick(&timer, MissedTickBehavior::Skip).await;
    advance(650).await;
    check_interval_poll!(i, start, 600);
    advance(250).await;
    check_interval_poll!(i, start, 1200);
    advance(300).await;
    check_interval_poll!(i, start, 1500);
    advance(300).await;
    check_interval_poll!(i, start, 1800);
}

/// `reset` moves the next tick to one period from now.
#[tokio::test(start_paused = true)]
async fn reset() {
    let timer = tokio_clock();
    let (start, mut i) = to_second_tick(&timer, MissedTickBehavior::Burst).await;
    advance(100).await;
    check_interval_poll!(i, start);
    i.reset();
    advance(250).await;
    check_interval_poll!(i, start);
    advance(50).await;
    check_interval_poll!(i, start, 701);
    advance(300).await;
    check_interval_poll!(i, start, 1001);
}

/// `reset_immediately` makes the next tick now, and the schedule follows from it.
#[tokio::test(start_paused = true)]
async fn reset_immediately() {
    let timer = tokio_clock();
    let (start, mut i) = to_second_tick(&timer, MissedTickBehavior::Burst).await;
    advance(100).await;
    check_interval_poll!(i, start);
    i.reset_immediately();
    check_interval_poll!(i, start, 401);
    advance(100).await;
    check_interval_poll!(i, start);
    advance(200).await;
    check_interval_poll!(i, start, 701);
}

/// `reset_after` makes the next tick the given time from now.
#[tokio::test(start_paused = true)]
async fn reset_after() {
    let timer = tokio_clock();
    let (start, mut i) = to_second_tick(&timer, MissedTickBehavior::Burst).await;
    advance(100).await;
    check_interval_poll!(i, start);
    i.reset_after(ms(20));
    advance(20).await;
    check_interval_poll!(i, start, 421);
    advance(100).await;
    check_interval_poll!(i, start);
    advance(200).await;
    check_interval_poll!(i, start, 721);
}

/// `reset_at` makes the next tick the given instant.
#[tokio::test(start_paused = true)]
async fn reset_at() {
    let timer = tokio_clock();
    let (start, mut i) = to_second_tick(&timer, MissedTickBehavior::Burst).await;
    advance(100).await;
    check_interval_poll!(i, start);
    i.reset_at(Instant::now() + ms(40));
    advance(40).await;
    check_interval_poll!(i, start, 441);
    advance(100).await;
    check_interval_poll!(i, start);
    advance(200).await;
    check_interval_poll!(i, start, 741);
}

/// `reset_at` further than a period away: no tick until that instant.
#[tokio::test(start_paused = true)]
async fn reset_at_bigger_than_interval() {
    let timer = tokio_clock();
    let (start, mut i) = to_second_tick(&timer, MissedTickBehavior::Burst).await;
    advance(100).await;
    check_interval_poll!(i, start);
    i.reset_at(Instant::now() + ms(1000));
    for _ in 0..3 {
        advance(300).await;
        check_interval_poll!(i, start);
    }
    advance(100).await;
    check_interval_poll!(i, start, 1401);
    advance(300).await;
    check_interval_poll!(i, start, 1701);
}

/// Counts ticks as a stream, yielding every fourth; rewakes itself on a swallowed tick only if
/// `wake_on_pending`.
struct IntervalStreamer {
    counter: u32,
    timer: Interval,
    wake_on_pending: bool,
}

impl Stream for IntervalStreamer {
    type Item = u32;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = Pin::into_inner(self);
        if this.counter > 12 {
            return Poll::Ready(None);
        }
        match this.timer.poll_tick(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => {
                this.counter += 1;
                if this.counter % 4 == 0 {
                    Poll::Ready(Some(this.counter))
                } else {
                    if this.wake_on_pending {
                        cx.waker().wake_by_ref();
                    }
                    Poll::Pending
                }
            }
        }
    }
}

/// Runs the streamer in a task under a 150 ms timeout and collects what it yields.
async fn run_streamer(wake_on_pending: bool) -> Vec<u32> {
    let _default = set_default(tokio_clock());
    let stream = IntervalStreamer {
        counter: 0,
        timer: hashed_wheel_timer::interval(ms(10)),
        wake_on_pending,
    };
    let (res_tx, mut res_rx) = tokio::sync::mpsc::channel(12);
    tokio::spawn(hashed_wheel_timer::timeout(ms(150), async move {
        tokio::pin!(stream);
        while let Some(item) = stream.next().await {
            res_tx.send(item).await.ok();
        }
    }));
    let mut items = Vec::new();
    while let Some(result) = res_rx.recv().await {
        items.push(result);
    }
    items
}

/// A task that rewakes itself after a `Ready` tick it swallowed gets every tick.
#[tokio::test(start_paused = true)]
async fn stream_with_interval_poll_tick_self_waking() {
    assert_eq!(run_streamer(true).await, vec![4, 8, 12]);
}

/// `poll_tick` registers the waker only when it returns `Pending`: a task that swallows a
/// `Ready` tick without rewaking itself stalls.
#[tokio::test(start_paused = true)]
async fn stream_with_interval_poll_tick_no_waking() {
    assert_eq!(run_streamer(false).await, Vec::<u32>::new());
}

/// A period of `Duration::MAX` neither panics nor overflows: the first tick is ready at once.
#[tokio::test(start_paused = true)]
async fn interval_doesnt_panic_max_duration_when_polling() {
    let timer = tokio_clock();
    let mut i = task::spawn(timer.interval(Duration::MAX));
    assert_ready!(i.enter(|cx, mut i| i.poll_tick(cx)));
}

// ---- time_pause.rs ----

/// Two runs of 10,000 random sleeps on a paused clock wake at the same times.
#[test]
fn paused_time_is_deterministic() {
    let run_1 = paused_time_stress_run();
    let run_2 = paused_time_stress_run();
    assert_eq!(run_1, run_2);
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn paused_time_stress_run() -> Vec<Duration> {
    let timer = tokio_clock();
    let mut rng = fastrand::Rng::with_seed(1);
    let mut times = vec![];
    let start = Instant::now();
    for _ in 0..10_000 {
        let sleep = Duration::from_nanos(rng.u64(0..1_000_000_000));
        timer.sleep(sleep).await;
        times.push(start.elapsed());
    }
    times
}

/// A sleep polled, then `advance` short of its deadline: the clock moves that much, the sleep
/// stays pending.
#[tokio::test(start_paused = true)]
async fn advance_after_poll() {
    let timer = tokio_clock();
    timer.sleep(ms(1)).await;
    let start = Instant::now();
    let mut sleep = task::spawn(timer.sleep_until(start + ms(300)));
    assert_pending!(sleep.poll());
    let before = Instant::now();
    advance(100).await;
    assert_elapsed!(before, ms(100));
    assert_pending!(sleep.poll());
}

/// A sleep never polled before an `advance` short of its deadline stays pending.
#[tokio::test(start_paused = true)]
async fn sleep_no_poll() {
    let timer = tokio_clock();
    let start = Instant::now();
    advance(1).await;
    let mut sleep = task::spawn(timer.sleep_until(start + ms(300)));
    let before = Instant::now();
    advance(100).await;
    assert_elapsed!(before, ms(100));
    assert_pending!(sleep.poll());
}

enum State {
    Begin,
    AwaitingAdvance(Pin<Box<dyn Future<Output = ()>>>),
    AfterAdvance,
}

/// Polls a sleep (or not), then awaits an `advance` of 100 ms in the same task, then polls it.
struct Tester {
    sleep: Pin<Box<Sleep>>,
    state: State,
    before: Option<Instant>,
    poll: bool,
}

impl Future for Tester {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.state {
            State::Begin => {
                if self.poll {
                    assert_pending!(self.sleep.as_mut().poll(cx));
                }
                self.before = Some(Instant::now());
                let advance_fut = Box::pin(time::advance(ms(100)));
                self.state = State::AwaitingAdvance(advance_fut);
                self.poll(cx)
            }
            State::AwaitingAdvance(ref mut advance_fut) => match advance_fut.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(()) => {
                    self.state = State::AfterAdvance;
                    self.poll(cx)
                }
            },
            State::AfterAdvance => {
                assert_elapsed!(self.before.unwrap(), ms(100));
                assert_pending!(self.sleep.as_mut().poll(cx));
                Poll::Ready(())
            }
        }
    }
}

async fn sleep_same_task_with(poll: bool) {
    let timer = tokio_clock();
    let start = Instant::now();
    advance(1).await;
    let sleep = Box::pin(timer.sleep_until(start + ms(300)));
    let before = None;
    let state = State::Begin;
    Tester {
        sleep,
        state,
        before,
        poll,
    }
    .await;
}

/// A sleep polled by the task that then awaits `advance` does not hold the clock back.
#[tokio::test(start_paused = true)]
async fn sleep_same_task() {
    sleep_same_task_with(true).await;
}

/// The same, with the sleep never polled before the advance.
#[tokio::test(start_paused = true)]
async fn sleep_same_task_no_poll() {
    sleep_same_task_with(false).await;
}

/// An interval across `advance`s: each moves the clock exactly, and the due ticks come.
#[tokio::test(start_paused = true)]
async fn interval() {
    let timer = tokio_clock();
    let start = Instant::now();
    advance(1).await;
    let mut i = task::spawn(timer.interval_at(start, ms(300)));
    check_interval_poll!(i, start, 0);
    for (step, ticks) in [
        (100, &[][..]),
        (200, &[300]),
        (400, &[600]),
        (500, &[900, 1200]),
    ] {
        let before = Instant::now();
        advance(step).await;
        assert_elapsed!(before, ms(step));
        for &t in ticks {
            assert_ready_eq!(poll_next(&mut i), (start + ms(t)).into_std());
        }
        assert_pending!(poll_next(&mut i));
    }
}

/// Advances `dur` and asserts that tokio's clock and the timer's moved by exactly `dur`.
async fn advance_exactly(timer: &HashedWheelTimer, dur: Duration) {
    let (now, timer_now) = (Instant::now(), timer.now());
    time::advance(dur).await;
    assert_eq!(now.elapsed(), dur);
    assert_eq!(timer.now() - timer_now, dur);
}

/// Advances of fractions of a millisecond move both clocks exactly.
#[tokio::test(start_paused = true)]
async fn test_time_advance_sub_ms() {
    let timer = tokio_clock();
    advance_exactly(&timer, Duration::from_micros(51_592)).await;
    advance_exactly(&timer, Duration::from_micros(1)).await;
}

/// Advances of seconds and a fraction move both clocks exactly.
#[tokio::test(start_paused = true)]
async fn test_time_advance_3ms_and_change() {
    let timer = tokio_clock();
    advance_exactly(&timer, Duration::from_micros(3_141_592)).await;
    advance_exactly(&timer, Duration::from_micros(3_123_456)).await;
}

/// A sub-millisecond advance with a long sleep pending moves the clock exactly; the sleep waits.
#[tokio::test(start_paused = true)]
async fn regression_3710_with_submillis_advance() {
    let timer = tokio_clock();
    let start = Instant::now();
    advance(1).await;
    let mut sleep = task::spawn(timer.sleep_until(start + Duration::from_secs(60)));
    assert_pending!(sleep.poll());
    let before = Instant::now();
    let dur = Duration::from_micros(51_592);
    time::advance(dur).await;
    assert_eq!(before.elapsed(), dur);
    assert_pending!(sleep.poll());
}

/// Advances of exactly 1 ms move both clocks exactly.
#[tokio::test(start_paused = true)]
async fn exact_1ms_advance() {
    let timer = tokio_clock();
    advance_exactly(&timer, ms(1)).await;
    advance_exactly(&timer, ms(1)).await;
}

/// A 1 ms sleep is pending after 250 us and woken and ready after 1.75 ms.
#[tokio::test(start_paused = true)]
async fn advance_once_with_timer() {
    let timer = tokio_clock();
    let mut sleep = task::spawn(timer.sleep(ms(1)));
    assert_pending!(sleep.poll());
    time::advance(Duration::from_micros(250)).await;
    assert_pending!(sleep.poll());
    time::advance(Duration::from_micros(1500)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

/// A 1 ms sleep is pending through three advances of 250 us, and woken and ready after a fourth.
#[tokio::test(start_paused = true)]
async fn advance_multi_with_timer() {
    let timer = tokio_clock();
    let mut sleep = task::spawn(timer.sleep(ms(1)));
    assert_pending!(sleep.poll());
    for _ in 0..3 {
        time::advance(Duration::from_micros(250)).await;
        assert_pending!(sleep.poll());
    }
    time::advance(Duration::from_micros(250)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

// ---- Beyond tokio's files ----
//
// Found by running the tests above beside `tokio::time`'s own `Sleep` and `Interval` on one
// paused runtime, with random advances and resets: where tokio completes a sleep, this timer must
// too.

/// A sleep due one tick before the tick the driver waits for (a pending sleep's) completes at its
/// own deadline, as tokio's does, not a tick late with the other.
#[tokio::test(start_paused = true)]
async fn sleep_due_a_tick_before_the_drivers_wake_up() {
    let timer = tokio_clock();
    let start = Instant::now();
    let mut later = task::spawn(timer.sleep_until(start + ms(200)));
    assert_pending!(later.poll());
    advance(150).await;
    let mut sleep = task::spawn(timer.sleep_until(start + ms(199)));
    assert_pending!(sleep.poll());
    advance(49).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    assert_pending!(later.poll());
    // Awaited, with auto-advance.
    advance(1).await;
    let mut later = task::spawn(timer.sleep(ms(200)));
    assert_pending!(later.poll());
    advance(150).await;
    let before = Instant::now();
    timer.sleep(ms(49)).await;
    assert_eq!(before.elapsed(), ms(49));
}

/// A timer built off tokio's millisecond grid (after a sub-millisecond advance, as tokio's tests
/// make): a sleep due within the wheel tick under way, before tokio's next millisecond, completes
/// at that millisecond, as tokio's own does, not at the millisecond after the tick's end.
#[tokio::test(start_paused = true)]
async fn sleep_due_in_the_tick_under_way_off_the_millisecond_grid() {
    let us = Duration::from_micros;
    let start = Instant::now();
    time::advance(us(600)).await;
    let timer = tokio_clock(); // its ticks end at 0.6 ms, 1.6 ms, ...
    time::advance(us(9_200)).await; // 9.8 ms: in the tick (9.6 ms, 10.6 ms]
    let mut ours = task::spawn(timer.sleep_until(start + us(9_900)));
    let mut tokios = task::spawn(time::sleep_until(start + us(9_900)));
    assert_pending!(ours.poll());
    assert_pending!(tokios.poll());
    tokio::task::yield_now().await; // the driver plans its wake-up inside the tick
    time::advance(us(200)).await;
    assert!(tokios.is_woken());
    assert!(ours.is_woken());
    assert_ready!(ours.poll());
}

/// The same at the first tick of a wheel round (512 ticks), whose keys wait apart from the
/// buckets: a sleep due there before tokio's millisecond completes at that millisecond.
#[tokio::test(start_paused = true)]
async fn sleep_due_in_a_rounds_first_tick_off_the_millisecond_grid() {
    let us = Duration::from_micros;
    let start = Instant::now();
    time::advance(us(600)).await;
    let timer = tokio_clock(); // its second round's first tick is (511.6 ms, 512.6 ms]
    let mut ours = task::spawn(timer.sleep_until(start + us(511_900)));
    let mut tokios = task::spawn(time::sleep_until(start + us(511_900)));
    assert_pending!(ours.poll());
    assert_pending!(tokios.poll());
    time::advance(us(511_400)).await; // 512 ms
    assert!(tokios.is_woken());
    assert!(ours.is_woken());
    assert_ready!(ours.poll());
}
