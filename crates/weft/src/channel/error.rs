//! The errors of the channel's sends and receives (std's shapes, plus
//! interruption).

#[cfg(doc)]
use super::{Receiver, Sender};
use std::error::Error;
use std::fmt;
use std::io;

/// Error of [`Sender::send`]; gives the message back.
///
/// Unlike std's `SendError(T)` this is an enum, because a parked send can
/// also end by interruption.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendError<T> {
    /// Every receiver is gone.
    Disconnected(T),
    /// The thread was interrupted while parked (flag cleared).
    Interrupted(T),
}

/// Error of [`Sender::try_send`] (as in std).
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The buffer is full (rendezvous: no receiver is waiting).
    Full(T),
    /// Every receiver is gone.
    Disconnected(T),
}

/// Error of [`Sender::send_timeout`] and [`Sender::send_deadline`].
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// Still full when the time ran out.
    Timeout(T),
    /// Every receiver is gone.
    Disconnected(T),
    /// The thread was interrupted while parked (flag cleared).
    Interrupted(T),
}

/// Error of [`Receiver::recv`].
///
/// Unlike std's unit struct `RecvError`, this is an enum, because a parked
/// receive can also end by interruption.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum RecvError {
    /// The channel is empty and every sender is gone.
    Disconnected,
    /// The thread was interrupted while parked (flag cleared).
    Interrupted,
}

/// Error of [`Receiver::try_recv`] (as in std).
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum TryRecvError {
    /// No message right now.
    Empty,
    /// The channel is empty and every sender is gone.
    Disconnected,
}

/// Error of [`Receiver::recv_timeout`] and [`Receiver::recv_deadline`].
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum RecvTimeoutError {
    /// No message arrived in time.
    Timeout,
    /// The channel is empty and every sender is gone.
    Disconnected,
    /// The thread was interrupted while parked (flag cleared).
    Interrupted,
}

impl<T> SendError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            SendError::Disconnected(v) | SendError::Interrupted(v) => v,
        }
    }

    /// `true` for [`SendError::Disconnected`].
    pub fn is_disconnected(&self) -> bool {
        matches!(self, SendError::Disconnected(_))
    }

    /// `true` for [`SendError::Interrupted`].
    pub fn is_interrupted(&self) -> bool {
        matches!(self, SendError::Interrupted(_))
    }
}

impl<T> TrySendError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => v,
        }
    }

    /// `true` for [`TrySendError::Full`].
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }

    /// `true` for [`TrySendError::Disconnected`].
    pub fn is_disconnected(&self) -> bool {
        matches!(self, TrySendError::Disconnected(_))
    }
}

impl<T> SendTimeoutError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            SendTimeoutError::Timeout(v)
            | SendTimeoutError::Disconnected(v)
            | SendTimeoutError::Interrupted(v) => v,
        }
    }

    /// `true` for [`SendTimeoutError::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, SendTimeoutError::Timeout(_))
    }

    /// `true` for [`SendTimeoutError::Disconnected`].
    pub fn is_disconnected(&self) -> bool {
        matches!(self, SendTimeoutError::Disconnected(_))
    }

    /// `true` for [`SendTimeoutError::Interrupted`].
    pub fn is_interrupted(&self) -> bool {
        matches!(self, SendTimeoutError::Interrupted(_))
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Disconnected(_) => f.write_str("Disconnected(..)"),
            SendError::Interrupted(_) => f.write_str("Interrupted(..)"),
        }
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Disconnected(_) => f.write_str("sending on a disconnected channel"),
            SendError::Interrupted(_) => f.write_str("interrupted while sending on a channel"),
        }
    }
}

impl<T> Error for SendError<T> {}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Disconnected(_) => f.write_str("sending on a disconnected channel"),
        }
    }
}

impl<T> Error for TrySendError<T> {}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("Timeout(..)"),
            SendTimeoutError::Disconnected(_) => f.write_str("Disconnected(..)"),
            SendTimeoutError::Interrupted(_) => f.write_str("Interrupted(..)"),
        }
    }
}

impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("timed out waiting on send operation"),
            SendTimeoutError::Disconnected(_) => f.write_str("sending on a disconnected channel"),
            SendTimeoutError::Interrupted(_) => {
                f.write_str("interrupted while sending on a channel")
            }
        }
    }
}

impl<T> Error for SendTimeoutError<T> {}

impl<T> From<SendError<T>> for SendTimeoutError<T> {
    fn from(e: SendError<T>) -> Self {
        match e {
            SendError::Disconnected(v) => SendTimeoutError::Disconnected(v),
            SendError::Interrupted(v) => SendTimeoutError::Interrupted(v),
        }
    }
}

impl<T> From<SendError<T>> for io::Error {
    fn from(e: SendError<T>) -> io::Error {
        match e {
            SendError::Disconnected(_) => {
                io::Error::new(io::ErrorKind::BrokenPipe, "channel disconnected")
            }
            SendError::Interrupted(_) => crate::sync::interrupted_error(),
        }
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Disconnected => {
                f.write_str("receiving on an empty and disconnected channel")
            }
            RecvError::Interrupted => f.write_str("interrupted while receiving on a channel"),
        }
    }
}

impl Error for RecvError {}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => {
                f.write_str("receiving on an empty and disconnected channel")
            }
        }
    }
}

impl Error for TryRecvError {}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out waiting on receive operation"),
            RecvTimeoutError::Disconnected => {
                f.write_str("channel is empty and sending half is closed")
            }
            RecvTimeoutError::Interrupted => {
                f.write_str("interrupted while receiving on a channel")
            }
        }
    }
}

impl Error for RecvTimeoutError {}

impl From<RecvError> for RecvTimeoutError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Disconnected => RecvTimeoutError::Disconnected,
            RecvError::Interrupted => RecvTimeoutError::Interrupted,
        }
    }
}

impl From<RecvError> for io::Error {
    fn from(e: RecvError) -> io::Error {
        match e {
            RecvError::Disconnected => {
                io::Error::new(io::ErrorKind::BrokenPipe, "channel disconnected")
            }
            RecvError::Interrupted => crate::sync::interrupted_error(),
        }
    }
}

impl From<RecvTimeoutError> for io::Error {
    fn from(e: RecvTimeoutError) -> io::Error {
        match e {
            RecvTimeoutError::Timeout => {
                io::Error::new(io::ErrorKind::TimedOut, "channel receive timed out")
            }
            RecvTimeoutError::Disconnected => {
                io::Error::new(io::ErrorKind::BrokenPipe, "channel disconnected")
            }
            RecvTimeoutError::Interrupted => crate::sync::interrupted_error(),
        }
    }
}
