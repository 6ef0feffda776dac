//! The accept loop and what bounds each connection (issue 13: idle, slow-header and
//! non-reading clients knocked the agent over without a token).
//!
//! - At most [`Limits::max_connections`] connections are open. At the cap, a new connection
//!   closes the one idle longest, so a scraper always gets in (issue 31: with the cap of idle
//!   connections open, a restarted Prometheus was refused). Connections that have sent no
//!   request, idle since they opened, go before those waiting between requests: a scraper's
//!   keep-alive connection outlasts a flood of connections that send nothing (issue 13).
//!   Only when every connection is in the middle of a request is the new one refused.
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
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Largest read or write buffer of one connection, in bytes. Request heads are small and
/// bodies at most [`crate::http::BODY_LIMIT`]; hyper's 400 KB default would let 512
/// connections pin 200 MB.
pub const MAX_BUF: usize = 64 * 1024;

/// Pause after an accept error other than a refused connection, such as running out of file
/// descriptors: retrying at once would spin on the same error.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Longest a new connection waits at the cap for the idle one it closed to give back its
/// slot; the closed one's task frees it at its next poll, well within this.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

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
    let open = Arc::new(Open::default());
    let mut at_cap = AtCap::default();
    let mut next_id: u64 = 0;
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
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                at_cap.left();
                slot
            }
            Err(_) => {
                let room = make_room(&open, &slots).await;
                at_cap.reached(limits.max_connections, room.is_some());
                // Dropping the stream closes it: with no room, the newest is refused.
                let Some(slot) = room else { continue };
                slot
            }
        };
        // A response larger than one write leaves its last short segment behind Nagle's
        // algorithm until the scraper's delayed ACK (40 ms on Linux): 140 KB /metrics bodies
        // measured 17 ms at p90 and 37 ms at p99 in one run of three at 200 requests/s.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY: {e}");
        }
        let head_received = Arc::new(AtomicBool::new(false));
        let activity = Arc::new(Activity::new());
        let (id, close) = (next_id, open.insert(next_id, activity.clone()));
        next_id += 1;
        let deadlines = Deadlines::new(stream, limits, head_received.clone(), activity);
        let io = TokioIo::new(deadlines);
        let app = TowerToHyperService::new(app.clone());
        let service = hyper::service::service_fn(move |request| {
            head_received.store(true, Ordering::Release);
            app.call(request)
        });
        let connection = builder.serve_connection(io, service);
        let mut stop = stop.clone();
        let open = open.clone();
        tokio::spawn(async move {
            tokio::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                // Idle longest at the cap: dropped, which closes it.
                Ok(()) = close => Ok(()),
                () = stopped(&mut stop) => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            // The client's doing (a timeout, a reset, a bad request): not the agent's error.
            if let Err(e) = result {
                tracing::debug!("connection closed: {e}");
            }
            open.remove(id);
            drop(slot);
        });
    }
    drop(listener);
    // Every connection holds a slot until it closes: all slots back means all closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
}

/// At the cap: closes the connection idle longest and takes its slot once given back. `None`
/// when every connection is in the middle of a request.
async fn make_room(open: &Open, slots: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
    if !open.close_most_idle() {
        return None;
    }
    let slot = tokio::time::timeout(CLOSE_WAIT, slots.clone().acquire_owned()).await;
    slot.ok()?.ok()
}

/// Logs the cap once when reached and once when left, with what happened meanwhile.
#[derive(Debug, Default)]
struct AtCap {
    /// Idle connections closed for new ones.
    closed: u64,
    /// New connections refused, every open one being in the middle of a request.
    refused: u64,
}

impl AtCap {
    /// A new connection met the cap; `made_room` when an idle one was closed for it.
    fn reached(&mut self, max_connections: usize, made_room: bool) {
        if self.closed + self.refused == 0 {
            tracing::warn!(
                "{max_connections} connections open, the max_connections limit: closing the \
                 one idle longest for each new one"
            );
        }
        if made_room {
            self.closed += 1;
        } else {
            self.refused += 1;
        }
    }

    /// A new connection found a free slot.
    fn left(&mut self) {
        if self.closed + self.refused > 0 {
            tracing::info!(
                "below max_connections again; closed {} idle connections for new ones, refused \
                 {} while every connection was busy",
                self.closed,
                self.refused
            );
            *self = AtCap::default();
        }
    }
}

/// The open connections by id, for closing one at the cap.
#[derive(Default)]
struct Open(Mutex<HashMap<u64, Tracked>>);

/// One open connection, as [`Open`] knows it.
struct Tracked {
    activity: Arc<Activity>,
    /// Closes the connection.
    close: oneshot::Sender<()>,
}

impl Open {
    /// Adds connection `id`; the receiver completes when it is to close.
    fn insert(&self, id: u64, activity: Arc<Activity>) -> oneshot::Receiver<()> {
        let (close, closed) = oneshot::channel();
        self.lock().insert(id, Tracked { activity, close });
        closed
    }

    /// Forgets connection `id`, closed.
    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Asks the connection idle longest to close; false when none is idle.
    fn close_most_idle(&self) -> bool {
        let mut open = self.lock();
        let most_idle = open
            .iter()
            .filter_map(|(id, tracked)| Some((tracked.activity.idle_rank()?, *id)))
            .min();
        let Some((_, id)) = most_idle else {
            return false;
        };
        open.remove(&id)
            .is_some_and(|tracked| tracked.close.send(()).is_ok())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Tracked>> {
        // A panic elsewhere leaves whole entries behind: keep serving.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A connection's [`Phase`] and when it began, shared by its stream and the accept loop.
struct Activity(Mutex<(Phase, Instant)>);

impl Activity {
    fn new() -> Activity {
        Activity(Mutex::new((Phase::Opened, Instant::now())))
    }

    fn set(&self, phase: Phase) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = (phase, Instant::now());
    }

    /// How soon the connection is closed for a new one, the least first: one that has sent
    /// nothing since it opened, then one between requests, each the longest idle first;
    /// `None` while a request is under way.
    fn idle_rank(&self) -> Option<(u8, Instant)> {
        let (phase, since) = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match phase {
            Phase::Opened => Some((0, since)),
            Phase::Idle => Some((1, since)),
            Phase::Head | Phase::Request => None,
        }
    }
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
    /// Just opened, nothing read yet: the first head must be complete by the head deadline,
    /// counted from the opening.
    Opened,
    /// Waiting for the first byte of a request head: hyper's idle timeout applies.
    Idle,
    /// A head has begun: it must be complete by the head deadline.
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
    /// The phase again, for the accept loop to tell idle connections.
    activity: Arc<Activity>,
    head_received: Arc<AtomicBool>,
    head_deadline: Pin<Box<Sleep>>,
    /// Armed while a write is pending.
    write_deadline: Option<Pin<Box<Sleep>>>,
}

impl Deadlines {
    fn new(
        stream: TcpStream,
        limits: Limits,
        head_received: Arc<AtomicBool>,
        activity: Arc<Activity>,
    ) -> Deadlines {
        Deadlines {
            stream,
            limits,
            phase: Phase::Opened,
            activity,
            head_received,
            head_deadline: Box::pin(tokio::time::sleep(limits.header_read_timeout)),
            write_deadline: None,
        }
    }

    /// Moves to [`Phase::Request`] when the service has been handed a request since the
    /// last poll.
    fn note_head_received(&mut self) {
        if self.head_received.swap(false, Ordering::AcqRel) {
            self.enter(Phase::Request);
        }
    }

    /// Moves to `phase`, from now.
    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.activity.set(phase);
    }

    /// `Ready(Err)` when a head is in progress and its deadline has passed; else `Pending`,
    /// with the deadline's waker registered.
    fn poll_head_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let in_head = matches!(self.phase, Phase::Opened | Phase::Head);
        if in_head && self.head_deadline.as_mut().poll(cx).is_ready() {
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
    /// [`Phase::Idle`], idle from then: the response is under way, so bytes read from now on
    /// begin the next request.
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
                    self.enter(Phase::Idle);
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
                let began = buf.filled().len() > before;
                match this.phase {
                    Phase::Idle if began => {
                        this.enter(Phase::Head);
                        let deadline = Instant::now() + this.limits.header_read_timeout;
                        this.head_deadline.as_mut().reset(deadline);
                    }
                    // The first head's deadline runs from the opening.
                    Phase::Opened if began => this.enter(Phase::Head),
                    _ => {}
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
