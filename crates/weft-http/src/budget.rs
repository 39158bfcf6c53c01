//! Time budgets per request: how long a client may keep the server waiting
//! while it sends a request body, or while it takes in an answer — in all,
//! not per call.
//!
//! A timeout per call lets a client that moves one byte just before each
//! timeout hold a connection for ever. A [`Budget`] counts the time spent
//! *blocked* in the client's calls of one request (so a handler that
//! computes between two reads, or a stream that writes now and then, is not
//! charged for its own time) against an allowance that grows with the
//! bytes moved: `base + bytes / rate`. A client that keeps up the minimum
//! rate may move a large body as slowly as that; one that trickles runs out
//! after about `base` of waiting. This is Kestrel's minimum data rate with
//! a grace period (`MinRequestBodyDataRate`), measured on waiting time.

use std::io::{self, Write};
use std::time::Duration;

use crate::tls::Stream;

/// The waiting time one request's reads (or writes) may still cost.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// Allowed regardless of size.
    base: Duration,
    /// Bytes per second that earn a second more (0: none).
    rate: u64,
    /// Time spent blocked so far.
    spent: Duration,
    /// Bytes moved so far.
    bytes: u64,
}

impl Budget {
    pub(crate) fn new(base: Duration, rate: u64) -> Budget {
        Budget {
            base,
            rate,
            spent: Duration::ZERO,
            bytes: 0,
        }
    }

    /// What is left of the allowance (zero: spent).
    pub(crate) fn remaining(&self) -> Duration {
        let earned = if self.rate == 0 {
            Duration::ZERO
        } else {
            let nanos = u128::from(self.bytes) * 1_000_000_000 / u128::from(self.rate);
            Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
        };
        self.base.saturating_add(earned).saturating_sub(self.spent)
    }

    /// Runs one call that may block: `arm` sets the socket's timeout to
    /// what is left, `op` makes the call and says how many bytes it moved.
    /// A spent budget fails with `TimedOut` without calling.
    pub(crate) fn run<T>(
        &mut self,
        arm: impl FnOnce(Duration),
        op: impl FnOnce() -> io::Result<(T, usize)>,
    ) -> io::Result<T> {
        let left = self.remaining();
        if left.is_zero() {
            return Err(spent());
        }
        arm(left);
        let t0 = weft::clock::now();
        let r = op();
        self.spent += weft::clock::now().saturating_duration_since(t0);
        let (t, n) = r?;
        self.bytes = self.bytes.saturating_add(n as u64);
        Ok(t)
    }
}

/// The error of a spent budget.
pub(crate) fn spent() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "weft-http: the client kept this request waiting longer than its time budget",
    )
}

/// A response's writer: the connection's stream under the response's
/// write budget.
pub(crate) struct Timed<'a> {
    pub(crate) stream: &'a Stream,
    pub(crate) budget: Budget,
}

impl Write for Timed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let s = self.stream;
        self.budget.run(
            |d| {
                let _ = s.set_write_timeout(Some(d));
            },
            || (&*s).write(buf).map(|n| (n, n)),
        )
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let s = self.stream;
        self.budget.run(
            |d| {
                let _ = s.set_write_timeout(Some(d));
            },
            || (&*s).write_vectored(bufs).map(|n| (n, n)),
        )
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self.stream).flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowance_grows_with_bytes_and_shrinks_with_waiting() {
        let mut b = Budget::new(Duration::from_secs(2), 1000);
        assert_eq!(b.remaining(), Duration::from_secs(2));
        b.spent = Duration::from_secs(1);
        b.bytes = 500;
        assert_eq!(b.remaining(), Duration::from_millis(1500));
        b.spent = Duration::from_secs(5);
        assert_eq!(b.remaining(), Duration::ZERO);
        let r: io::Result<()> = b.run(|_| panic!("armed"), || panic!("called"));
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
        let no_rate = Budget {
            bytes: u64::MAX,
            ..Budget::new(Duration::from_secs(1), 0)
        };
        assert_eq!(no_rate.remaining(), Duration::from_secs(1));
        let huge = Budget {
            bytes: u64::MAX,
            ..Budget::new(Duration::from_secs(1), 1)
        };
        assert!(huge.remaining() > Duration::from_secs(1 << 30));
    }
}
