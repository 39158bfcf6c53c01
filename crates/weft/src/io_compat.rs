//! Async I/O traits for weft's streams, driven by weft's poller.
//!
//! With the cargo feature `futures-io`, [`TcpStream`] and [`UnixStream`]
//! (and their `&` references) implement `futures_io::AsyncRead` and
//! `futures_io::AsyncWrite`; with `tokio`, they implement
//! `tokio::io::AsyncRead` and `tokio::io::AsyncWrite`.
//!
//! No Tokio reactor or other event loop is involved: a pending read or
//! write registers the task's waker with weft's poller, which wakes it when
//! the socket becomes ready. So these streams work under any executor —
//! [`crate::block_on`] inside a virtual thread (the future parks the
//! virtual thread, not the carrier), `futures::executor::block_on`, or a
//! Tokio runtime — and an async-only library can be given a weft socket.
//!
//! ```ignore
//! // features = ["tokio"]
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! let mut s = weft::net::TcpStream::connect(addr)?;
//! weft::block_on(async {
//!     s.write_all(b"ping").await?;
//!     let mut buf = [0u8; 4];
//!     s.read_exact(&mut buf).await
//! })?;
//! ```
//!
//! Read and write timeouts (`set_read_timeout`, …) apply to the blocking
//! calls only; use the executor's timers for async deadlines. Closing
//! (`poll_close` / `poll_shutdown`) shuts the write half down, like
//! `shutdown(Shutdown::Write)`.

use std::io::{self, IoSlice, Read, Write};
use std::net::Shutdown;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::net::{TcpStream, UnixStream};

macro_rules! async_impls {
    ($($t:ty),*) => {$(
        #[cfg(feature = "futures-io")]
        impl futures_io::AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut [u8],
            ) -> Poll<io::Result<usize>> {
                self.io().poll_read(cx, |mut s| s.read(buf))
            }

            fn poll_read_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &mut [io::IoSliceMut<'_>],
            ) -> Poll<io::Result<usize>> {
                self.io().poll_read(cx, |mut s| s.read_vectored(bufs))
            }
        }

        #[cfg(feature = "futures-io")]
        impl futures_io::AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.io().poll_write(cx, |mut s| s.write(buf))
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                self.io().poll_write(cx, |mut s| s.write_vectored(bufs))
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(self.shutdown(Shutdown::Write))
            }
        }

        #[cfg(feature = "tokio")]
        impl tokio::io::AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                let dst = buf.initialize_unfilled();
                match self.io().poll_read(cx, |mut s| s.read(dst)) {
                    Poll::Ready(Ok(n)) => {
                        buf.advance(n);
                        Poll::Ready(Ok(()))
                    }
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            }
        }

        #[cfg(feature = "tokio")]
        impl tokio::io::AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.io().poll_write(cx, |mut s| s.write(buf))
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                self.io().poll_write(cx, |mut s| s.write_vectored(bufs))
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(self.shutdown(Shutdown::Write))
            }
        }
    )*};
}

async_impls!(TcpStream, &TcpStream, UnixStream, &UnixStream);
