//! The accept loop and what bounds each connection (issue 13: idle, slow-header and
//! non-reading clients knocked the agent over without a token).
//!
//! - At most [`Limits::max_connections`] connections are open. Past that, the newest is
//!   accepted and closed at once: connections already open, such as a scraper's keep-alive
//!   one, keep answering, and the listen backlog does not fill up.
//! - A request head must be complete within [`Limits::header_read_timeout`] of its first
//!   byte (of the connection opening, for the first request): a slow-header client holds a
//!   slot for seconds, not for ever.
//! - Between requests a keep-alive connection waits up to [`Limits::idle_timeout`] for the
//!   next request head, longer than a scrape interval, so Prometheus keeps its connection.
//! - A write that makes no progress for [`Limits::write_timeout`] fails and closes the
//!   connection: a client that asks and never reads does not hold its response for ever.
//! - Each connection buffers at most [`MAX_BUF`] bytes of its own; large bodies are shared
//!   `Bytes` queued by reference (vectored writes), never copied per client.
//!
//! Shutdown stops accepting, lets each connection finish the request it is serving, and
//! returns when every connection is closed.

use crate::config::HttpLimits;
use axum::Router;
use hyper::server::conn::http1;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::{Instant, Sleep};

/// Largest read or write buffer of one connection, in bytes. Request heads are small and
/// bodies at most [`crate::http::BODY_LIMIT`]; hyper's 400 KB default would let 512
/// connections pin 200 MB.
pub const MAX_BUF: usize = 64 * 1024;

/// Pause after an accept error other than a refused connection, such as running out of file
/// descriptors: retrying at once would spin on the same error.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// What bounds the server's connections; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Longest a request head may take from its first byte.
    pub header_read_timeout: Duration,
    /// Longest a keep-alive connection waits for its next request.
    pub idle_timeout: Duration,
    /// Longest a write may make no progress.
    pub write_timeout: Duration,
}

impl From<&HttpLimits> for Limits {
    fn from(http: &HttpLimits) -> Limits {
        Limits {
            max_connections: http.max_connections as usize,
            header_read_timeout: http.header_read_timeout.0,
            idle_timeout: http.idle_timeout.0,
            write_timeout: http.write_timeout.0,
        }
    }
}

/// Serves `app` on `listener` within `limits` until `stop` turns true (or its sender is
/// gone), then waits for open connections to close. It does not fail: accept errors are
/// logged and retried, connection errors belong to that connection.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // hyper starts this timer when it waits for a request head, idle time included; the
        // stricter bound from the head's first byte is `Deadlines`' own.
        .header_read_timeout(limits.idle_timeout)
        .max_buf_size(MAX_BUF)
        // Vectored writes queue a shared body by reference; flattening would copy it into
        // each connection's buffer.
        .writev(true);
    let mut refused: u64 = 0;
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Dropping the stream closes it: the newest connection is the one refused.
            if refused == 0 {
                tracing::warn!(
                    "{} connections open, the max_connections limit: refusing new ones",
                    limits.max_connections
                );
            }
            refused += 1;
            continue;
        };
        if refused > 0 {
            tracing::info!("below max_connections again; refused {refused} connections");
            refused = 0;
        }
        // A response larger than one write leaves its last short segment behind Nagle's
        // algorithm until the scraper's delayed ACK (40 ms on Linux): 140 KB /metrics bodies
        // measured 17 ms at p90 and 37 ms at p99 in one run of three at 200 requests/s.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY: {e}");
        }
        let head_received = Arc::new(AtomicBool::new(false));
        let io = TokioIo::new(Deadlines::new(stream, limits, head_received.clone()));
        let app = TowerToHyperService::new(app.clone());
        let service = hyper::service::service_fn(move |request| {
            head_received.store(true, Ordering::Release);
            app.call(request)
        });
        let connection = builder.serve_connection(io, service);
        let mut stop = stop.clone();
        tokio::spawn(async move {
            tokio::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                () = stopped(&mut stop) => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            // The client's doing (a timeout, a reset, a bad request): not the agent's error.
            if let Err(e) = result {
                tracing::debug!("connection closed: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    // Every connection holds a slot until it closes: all slots back means all closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
}

/// Completes once `stop` is true, or its sender is gone (the agent is ending all the same).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Logs an accept error; pauses when it is not about one refused connection.
async fn accept_failed(e: &io::Error) {
    match e.kind() {
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset => {
            tracing::debug!("accept: {e}");
        }
        _ => {
            tracing::warn!("accept: {e}; retrying in {ACCEPT_RETRY:?}");
            tokio::time::sleep(ACCEPT_RETRY).await;
        }
    }
}

/// Where a connection stands, as far as its deadlines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the first byte of a request head: hyper's idle timeout applies.
    Idle,
    /// A head has begun (or the connection has just opened): it must be complete by the
    /// head deadline.
    Head,
    /// The head is complete: bytes read now are its body, until the response is written.
    Request,
}

/// A TCP stream whose request heads and writes have deadlines. A missed deadline is an
/// `io::ErrorKind::TimedOut` error, which makes hyper close the connection.
///
/// The service sets `head_received` when hyper hands it a request: only hyper's parser knows
/// where a head ends.
struct Deadlines {
    stream: TcpStream,
    limits: Limits,
    phase: Phase,
    head_received: Arc<AtomicBool>,
    head_deadline: Pin<Box<Sleep>>,
    /// Armed while a write is pending.
    write_deadline: Option<Pin<Box<Sleep>>>,
}

impl Deadlines {
    fn new(stream: TcpStream, limits: Limits, head_received: Arc<AtomicBool>) -> Deadlines {
        Deadlines {
            stream,
            limits,
            phase: Phase::Head,
            head_received,
            head_deadline: Box::pin(tokio::time::sleep(limits.header_read_timeout)),
            write_deadline: None,
        }
    }

    /// Moves to [`Phase::Request`] when the service has been handed a request since the
    /// last poll.
    fn note_head_received(&mut self) {
        if self.head_received.swap(false, Ordering::AcqRel) {
            self.phase = Phase::Request;
        }
    }

    /// `Ready(Err)` when a head is in progress and its deadline has passed; else `Pending`,
    /// with the deadline's waker registered.
    fn poll_head_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.phase == Phase::Head && self.head_deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "request head not complete within header_read_timeout {:?}",
                    self.limits.header_read_timeout
                ),
            )));
        }
        Poll::Pending
    }

    /// Passes a write's result through, arming the write deadline while it is pending and
    /// failing it once the deadline passes. Progress moves the connection to
    /// [`Phase::Idle`]: the response is under way, so bytes read from now on begin the next
    /// request.
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match result {
            Poll::Pending => {
                let limit = self.limits.write_timeout;
                let deadline = self
                    .write_deadline
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                if deadline.as_mut().poll(cx).is_ready() {
                    self.write_deadline = None;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the client read nothing for write_timeout {limit:?}"),
                    )));
                }
                Poll::Pending
            }
            ready => {
                self.write_deadline = None;
                if matches!(ready, Poll::Ready(Ok(n)) if n > 0) {
                    self.phase = Phase::Idle;
                }
                ready
            }
        }
    }
}

impl AsyncRead for Deadlines {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.note_head_received();
        // Checked before reading too: a client that always has one more byte ready would
        // otherwise never let the read come back pending.
        if let Poll::Ready(Err(e)) = this.poll_head_deadline(cx) {
            return Poll::Ready(Err(e));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if this.phase == Phase::Idle && buf.filled().len() > before {
                    this.phase = Phase::Head;
                    let deadline = Instant::now() + this.limits.header_read_timeout;
                    this.head_deadline.as_mut().reset(deadline);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.poll_head_deadline(cx) {
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                _ => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Deadlines {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.note_head_received();
        let result = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.after_write(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.note_head_received();
        let result = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.after_write(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
