//! `TimeoutLayer`: per-request deadlines on the wheel for any
//! `tower::Service`, in the shape of tower's own `TimeoutLayer`. Behind the
//! cargo feature `tower`. [`timeout`] mirrors `tower::timeout` name for
//! name, so that a port changes one `use` line.

use std::task::{ready, Context, Poll};
use std::time::Duration;
use std::{fmt, future::Future, pin::Pin};

use pin_project_lite::pin_project;
use tower::timeout::error::Elapsed;
use tower::{Layer, Service};

use crate::{HashedWheelTimer, TimeoutFuture};

/// The error type of a [`TimeoutService`], as `tower::BoxError`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Applies a deadline to every request of the service it wraps, on this crate's wheel: tower's
/// [`TimeoutLayer`](https://docs.rs/tower/latest/tower/timeout/struct.TimeoutLayer.html) with a
/// [`HashedWheelTimer`] in place of `tokio::time`.
///
/// A call that outlasts the deadline fails with a [`BoxError`] holding tower's [`Elapsed`] (on a
/// stopped timer, as [`TimeoutFuture`] ends); the inner service's own errors pass through (boxed),
/// and readiness is the inner service's. A response ready when first polled never touches the wheel.
///
/// # Examples
///
/// ```
/// use hashed_wheel_timer::{HashedWheelTimer, TimeoutLayer};
/// use std::time::Duration;
/// use tower::timeout::error::Elapsed;
/// use tower::{service_fn, Service, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let timer = HashedWheelTimer::builder().tokio_clock().build()?;
/// let mut svc = ServiceBuilder::new()
///     .layer(TimeoutLayer::new(timer, Duration::from_millis(100)))
///     .service(service_fn(|secs: u64| async move {
///         tokio::time::sleep(Duration::from_secs(secs)).await;
///         Ok::<_, std::convert::Infallible>("done")
///     }));
///
/// assert_eq!(svc.ready().await?.call(0).await?, "done");
/// let err = svc.ready().await?.call(1).await.unwrap_err();
/// assert!(err.is::<Elapsed>());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct TimeoutLayer {
    timer: HashedWheelTimer,
    timeout: Duration,
}

impl TimeoutLayer {
    /// A layer that gives each request `timeout` on `timer`.
    pub fn new(timer: HashedWheelTimer, timeout: Duration) -> TimeoutLayer {
        TimeoutLayer { timer, timeout }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = TimeoutService<S>;

    fn layer(&self, inner: S) -> TimeoutService<S> {
        TimeoutService::new(inner, self.timer.clone(), self.timeout)
    }
}

/// A service whose requests each have a deadline: what [`TimeoutLayer`] makes, tower's
/// `timeout::Timeout` with an explicit timer (named apart from this crate's
/// [`Timeout`](crate::Timeout) handle; [`timeout::Timeout`] takes tower's arguments).
#[derive(Clone)]
pub struct TimeoutService<S> {
    inner: S,
    timer: HashedWheelTimer,
    timeout: Duration,
}

impl<S> TimeoutService<S> {
    /// Wraps `inner`, giving each request `timeout` on `timer`.
    pub fn new(inner: S, timer: HashedWheelTimer, timeout: Duration) -> TimeoutService<S> {
        TimeoutService {
            inner,
            timer,
            timeout,
        }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, by value.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug> fmt::Debug for TimeoutService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimeoutService")
            .field("inner", &self.inner)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<S, Request> Service<Request> for TimeoutService<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> ResponseFuture<S::Future> {
        ResponseFuture {
            inner: self.timer.timeout(self.timeout, self.inner.call(request)),
        }
    }
}

pin_project! {
    /// The response of a [`TimeoutService`]: the inner service's, or tower's [`Elapsed`] error at
    /// the deadline.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: TimeoutFuture<F>,
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, BoxError>> {
        let response = ready!(self.project().inner.poll(cx)).map_err(|_| Elapsed::new())?;
        Poll::Ready(response.map_err(Into::into))
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

pub mod timeout;
