//! `TimeoutFuture`: a future raced against a `Sleep`.

use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use std::{future::Future, future::IntoFuture, pin::Pin};

use pin_project_lite::pin_project;

use crate::{Elapsed, HashedWheelTimer, Sleep};

pin_project! {
    /// A future with a deadline, made by [`HashedWheelTimer::timeout`] and
    /// [`timeout_at`](HashedWheelTimer::timeout_at): tokio's `time::Timeout`, named apart from this
    /// crate's [`Timeout`](crate::Timeout) handle.
    ///
    /// It resolves to `Ok` with the inner future's output if that finishes first, or to
    /// `Err(`[`Elapsed`]`)` once the deadline passes. The inner future is polled first on every
    /// poll, so one ready at the deadline still wins, and one ready at once never touches the
    /// wheel.
    ///
    /// # Cancellation
    ///
    /// Dropping it drops the inner future and cancels the deadline, whose entry leaves the wheel
    /// within a tick.
    ///
    /// # When the timer stops
    ///
    /// It neither hangs nor ends early: the inner future keeps its time, waited out elsewhere (see
    /// [`Sleep`]), and if it is not ready by then the call ends with an `Elapsed` whose
    /// [`is_shutdown`](Elapsed::is_shutdown) is true. So a retry loop around it does not spin,
    /// unless its timer was a `tokio_clock()` one whose current-thread runtime is gone: then it
    /// ends at once, as its [`Sleep`] does, and such a loop checks `is_shutdown`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hashed_wheel_timer::HashedWheelTimer;
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = HashedWheelTimer::new();
    /// let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    /// // Nobody answers: the call times out.
    /// let reply = timer.timeout(Duration::from_millis(10), rx).await;
    /// assert!(reply.is_err());
    /// drop(tx);
    ///
    /// let quick = timer.timeout(Duration::from_secs(1), async { 42 }).await;
    /// assert_eq!(quick, Ok(42));
    /// # }
    /// ```
    #[must_use = "futures do nothing unless you .await or poll them"]
    #[derive(Debug)]
    pub struct TimeoutFuture<F> {
        #[pin]
        future: F,
        sleep: Sleep,
    }
}

impl HashedWheelTimer {
    /// Runs `future` with a deadline `duration` from now: `Err(Elapsed)` if it has not finished by
    /// then. See [`TimeoutFuture`].
    pub fn timeout<F: IntoFuture>(
        &self,
        duration: Duration,
        future: F,
    ) -> TimeoutFuture<F::IntoFuture> {
        TimeoutFuture::new(future.into_future(), self.sleep(duration))
    }

    /// Runs `future` with a deadline at `deadline`, on this timer's clock ([which
    /// `Instant`](crate#deadlines)). See [`TimeoutFuture`].
    pub fn timeout_at<F: IntoFuture>(
        &self,
        deadline: impl Into<Instant>,
        future: F,
    ) -> TimeoutFuture<F::IntoFuture> {
        TimeoutFuture::new(future.into_future(), self.sleep_until(deadline))
    }
}

impl<F> TimeoutFuture<F> {
    fn new(future: F, sleep: Sleep) -> TimeoutFuture<F> {
        TimeoutFuture { future, sleep }
    }

    /// The inner future.
    pub fn get_ref(&self) -> &F {
        &self.future
    }

    /// The inner future, mutably.
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.future
    }

    /// Gives the inner future back, dropping (and so cancelling) the deadline.
    pub fn into_inner(self) -> F {
        self.future
    }

    /// The deadline.
    pub fn deadline(&self) -> Instant {
        self.sleep.deadline()
    }
}

impl<F: Future> Future for TimeoutFuture<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        this.sleep
            .poll_elapsed(cx)
            .map(|result| Err(Elapsed::new(result.is_err())))
    }
}
