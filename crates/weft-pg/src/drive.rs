//! Running tokio-postgres futures from blocking code on weft.
//!
//! A `tokio_postgres::Connection` is the half that does the socket I/O; a
//! `Client` call only queues a request for it and waits for the answer.
//! Instead of a second virtual thread per connection that drives the
//! `Connection` (two extra thread hand-offs per query), the thread that
//! makes a call polls both the call's future and the connection, each with
//! its own waker that unparks it (see the crate docs, "Driver", for the
//! measurement). Between polls the virtual thread parks: the socket's
//! readiness comes from weft's poller, so the carrier is never blocked.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Why [`run`] gave up before the future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The deadline passed.
    TimedOut,
    /// The thread was interrupted (flag cleared).
    Interrupted,
}

/// What the wakers of one [`run`] share: the thread to unpark, and whether
/// it is (about to be) parked.
struct Sleeper {
    thread: weft::Thread,
    sleeping: AtomicBool,
}

/// A waker that records *which* future it belongs to (the call or the
/// connection), so that the loop polls only what was woken, and that
/// unparks the thread only if it sleeps.
///
/// Polling the connection when it was not woken costs a `read` that fails
/// with `EAGAIN` and a waker registration; a self-wake while running would
/// leave a stale park permit and cost a spurious loop. Both showed up as
/// client CPU per query in the `driver/*` bench rows.
struct FlagWaker {
    sleeper: Arc<Sleeper>,
    woken: AtomicBool,
}

impl Wake for FlagWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        // Pairs with the store/load of `sleeping` in `run`: either we see
        // it sleeping and unpark, or it sees `woken` before parking.
        if self.sleeper.sleeping.load(Ordering::SeqCst) {
            self.sleeper.thread.unpark();
        }
    }
}

/// Polls `fut` to completion on the calling thread, polling `side` (the
/// connection) as well, each only when its waker fired, and parking while
/// neither has anything to do.
///
/// `interruptible`: an interrupt ends the wait with [`Stop::Interrupted`]
/// and clears the flag. Otherwise an interrupt is held back and the flag
/// restored at the end (like `weft::block_on`). A result that is ready
/// wins over an interrupt that arrives at the same time.
pub(crate) fn run<F: Future>(
    mut fut: Pin<&mut F>,
    side: &mut dyn FnMut(&mut Context<'_>),
    deadline: Option<Instant>,
    interruptible: bool,
) -> Result<F::Output, Stop> {
    let me = weft::current();
    let sleeper = Arc::new(Sleeper {
        thread: me.clone(),
        sleeping: AtomicBool::new(false),
    });
    let fut_w = Arc::new(FlagWaker {
        sleeper: Arc::clone(&sleeper),
        woken: AtomicBool::new(true),
    });
    let side_w = Arc::new(FlagWaker {
        sleeper: Arc::clone(&sleeper),
        woken: AtomicBool::new(true),
    });
    let fut_waker = Waker::from(Arc::clone(&fut_w));
    let side_waker = Waker::from(Arc::clone(&side_w));
    let mut fut_cx = Context::from_waker(&fut_waker);
    let mut side_cx = Context::from_waker(&side_waker);
    let woken = || fut_w.woken.load(Ordering::SeqCst) || side_w.woken.load(Ordering::SeqCst);
    let mut held_interrupt = false;
    let out = loop {
        if fut_w.woken.swap(false, Ordering::SeqCst)
            && let Poll::Ready(v) = fut.as_mut().poll(&mut fut_cx)
        {
            break Ok(v);
        }
        // Polled after the call: a request it just queued goes out now.
        if side_w.woken.swap(false, Ordering::SeqCst) {
            side(&mut side_cx);
        }
        if woken() {
            continue;
        }
        if me.is_interrupted() {
            // Clear it either way: a set flag would make `park` return at
            // once, and the loop would spin.
            weft::interrupted();
            if interruptible {
                break Err(Stop::Interrupted);
            }
            held_interrupt = true;
        }
        let now = deadline.map(|_| Instant::now());
        if let (Some(d), Some(now)) = (deadline, now)
            && now >= d
        {
            break Err(Stop::TimedOut);
        }
        sleeper.sleeping.store(true, Ordering::SeqCst);
        if !woken() {
            match (deadline, now) {
                (Some(d), Some(now)) => weft::park_timeout(d - now),
                _ => weft::park(),
            }
        }
        sleeper.sleeping.store(false, Ordering::SeqCst);
    };
    if held_interrupt {
        me.interrupt();
    }
    out
}

/// A socket to the server: TCP or Unix-domain, both weft sockets whose
/// `tokio::io` traits are driven by weft's poller.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(weft::net::TcpStream),
    Unix(weft::net::UnixStream),
}

impl Stream {
    /// A second handle to the same socket (a duplicated descriptor).
    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    /// Reads and discards until the peer closes the connection: end of
    /// file, or a reset (a peer that closes with our bytes unread, e.g. a
    /// TLS `close_notify`, resets the connection). Other errors are
    /// returned.
    pub(crate) fn until_closed(&mut self) -> impl Future<Output = io::Result<()>> + '_ {
        std::future::poll_fn(move |cx| {
            let mut buf = [0u8; 256];
            loop {
                let mut rb = ReadBuf::new(&mut buf);
                match Pin::new(&mut *self).poll_read(cx, &mut rb) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(())) if rb.filled().is_empty() => return Poll::Ready(Ok(())),
                    Poll::Ready(Ok(())) => {}
                    Poll::Ready(Err(e))
                        if matches!(
                            e.kind(),
                            io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                        ) =>
                    {
                        return Poll::Ready(Ok(()));
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                }
            }
        })
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
