//! One direction of a simulated connection ([`Pipe`]): the segments one
//! end sent, each with the virtual instant it arrives at the other end.
//!
//! Nothing is "delivered" by anyone: a segment is readable once the
//! virtual clock has reached its arrival instant, and a reader with
//! nothing readable waits until the first arrival (a Weft timer), so the
//! simulated carrier's idle jump of the clock is what delivers it.
//! Arrival instants never decrease along a pipe (TCP delivers in order);
//! a segment held by a partition has none, and neither has any segment
//! behind it, until the partition is repaired.

use std::collections::VecDeque;
use std::time::Instant;

/// What a segment carries.
enum Kind {
    Data(Vec<u8>),
    /// The sender shut its writing down, or closed: end of file.
    Fin,
    /// The connection was reset.
    Rst,
}

struct Segment {
    /// When it arrives (`None`: held by a partition).
    at: Option<Instant>,
    kind: Kind,
}

/// What a read finds.
pub(super) enum Read {
    /// This many bytes were copied.
    Data(usize),
    /// End of file.
    Eof,
    /// The connection was reset.
    Reset,
    /// Nothing has arrived yet; the next segment arrives at the instant
    /// (`None`: nothing is in flight, or it is held).
    Wait(Option<Instant>),
}

/// One direction of a connection.
#[derive(Default)]
pub(super) struct Pipe {
    segments: VecDeque<Segment>,
    /// Bytes of the first segment already read.
    offset: usize,
    /// Data bytes sent and not yet read (what the window counts).
    queued: usize,
    /// The latest arrival instant given out.
    last: Option<Instant>,
    /// Segments held by a partition (always the last ones).
    held: usize,
    /// A RST is queued: nothing more is sent.
    reset: bool,
}

impl Pipe {
    /// Data bytes sent and not yet read.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    fn push(&mut self, at: Option<Instant>, kind: Kind) {
        let at = match at {
            Some(t) if self.held == 0 => {
                let t = self.last.map_or(t, |l| l.max(t));
                self.last = Some(t);
                Some(t)
            }
            _ => {
                self.held += 1;
                None
            }
        };
        self.segments.push_back(Segment { at, kind });
    }

    /// Sends `data`, arriving at `at`.
    pub(super) fn push_data(&mut self, data: &[u8], at: Option<Instant>) {
        if self.reset {
            return;
        }
        self.queued += data.len();
        self.push(at, Kind::Data(data.to_vec()));
    }

    /// Sends end of file.
    pub(super) fn push_fin(&mut self, at: Option<Instant>) {
        if !self.reset {
            self.push(at, Kind::Fin);
        }
    }

    /// Sends a reset (once).
    pub(super) fn push_rst(&mut self, at: Option<Instant>) {
        if !self.reset {
            self.reset = true;
            self.push(at, Kind::Rst);
        }
    }

    /// Whether a reset has arrived by `now`.
    pub(super) fn reset_arrived(&self, now: Instant) -> bool {
        self.reset
            && self
                .segments
                .back()
                .is_some_and(|s| matches!(s.kind, Kind::Rst) && s.at.is_some_and(|t| t <= now))
    }

    /// Whether data is left unread (arrived or not).
    pub(super) fn has_data(&self) -> bool {
        self.queued > 0
    }

    /// Reads what has arrived by `now` into `buf`; with `consume` false,
    /// leaves it there (a peek).
    pub(super) fn read(&mut self, buf: &mut [u8], now: Instant, consume: bool) -> Read {
        let mut n = 0;
        let mut offset = self.offset;
        let mut i = 0;
        while let Some(s) = self.segments.get(i) {
            match s.at {
                Some(t) if t <= now => {}
                at => {
                    if n > 0 {
                        break;
                    }
                    return Read::Wait(at);
                }
            }
            match &s.kind {
                Kind::Data(d) => {
                    if n == buf.len() {
                        break;
                    }
                    let k = (d.len() - offset).min(buf.len() - n);
                    buf[n..n + k].copy_from_slice(&d[offset..offset + k]);
                    n += k;
                    offset += k;
                    if offset == d.len() {
                        offset = 0;
                        i += 1;
                    } else {
                        break;
                    }
                }
                Kind::Fin if n == 0 => return Read::Eof,
                Kind::Rst if n == 0 => return Read::Reset,
                Kind::Fin | Kind::Rst => break,
            }
        }
        if n == 0 {
            // Nothing in flight (an empty `buf` reads nothing either).
            return if buf.is_empty() {
                Read::Data(0)
            } else {
                Read::Wait(None)
            };
        }
        if consume {
            self.segments.drain(..i);
            self.offset = offset;
            self.queued -= n;
        }
        Read::Data(n)
    }

    /// The receiver went away: drop what it will never read.
    pub(super) fn clear(&mut self) {
        self.segments.clear();
        self.offset = 0;
        self.queued = 0;
        self.held = 0;
    }

    /// A partition began at `now`: what has not arrived is held.
    pub(super) fn hold_after(&mut self, now: Instant) {
        for s in self.segments.iter_mut().rev() {
            match s.at {
                Some(t) if t <= now => break,
                Some(_) => {
                    s.at = None;
                    self.held += 1;
                }
                None => {}
            }
        }
        self.last = self
            .segments
            .iter()
            .rev()
            .find_map(|s| s.at)
            .or(self.last.filter(|&l| l <= now));
    }

    /// Segments held by a partition.
    pub(super) fn held(&self) -> usize {
        self.held
    }

    /// The partition was repaired: the held segments arrive at `times`
    /// (one per held segment, kept in order).
    pub(super) fn release(&mut self, times: impl Iterator<Item = Instant>) {
        let first = self.segments.len() - self.held;
        let mut last = self.last;
        for (s, t) in self.segments.iter_mut().skip(first).zip(times) {
            let t = last.map_or(t, |l| l.max(t));
            s.at = Some(t);
            last = Some(t);
        }
        self.last = last;
        self.held = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn arrivals_are_in_order_and_reads_see_only_what_arrived() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut p = Pipe::default();
        p.push_data(b"ab", Some(ms(10)));
        p.push_data(b"cd", Some(ms(5))); // jitter: waits for "ab"
        p.push_fin(Some(ms(12)));
        let mut buf = [0u8; 8];
        assert!(matches!(p.read(&mut buf, ms(9), true), Read::Wait(Some(t)) if t == ms(10)));
        assert!(matches!(p.read(&mut buf[..3], ms(10), true), Read::Data(3)));
        assert_eq!(&buf[..3], b"abc");
        assert_eq!(p.queued(), 1);
        assert!(matches!(p.read(&mut buf, ms(11), false), Read::Data(1)));
        assert!(matches!(p.read(&mut buf, ms(11), true), Read::Data(1)));
        assert_eq!(buf[0], b'd');
        assert!(matches!(p.read(&mut buf, ms(11), true), Read::Wait(Some(t)) if t == ms(12)));
        assert!(matches!(p.read(&mut buf, ms(12), true), Read::Eof));
        assert!(matches!(p.read(&mut buf, ms(13), true), Read::Eof));
    }

    #[test]
    fn a_partition_holds_what_is_in_flight_until_repair() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut p = Pipe::default();
        p.push_data(b"a", Some(ms(1)));
        p.push_data(b"b", Some(ms(10)));
        p.hold_after(ms(5));
        p.push_data(b"c", Some(ms(6)));
        assert_eq!(p.held(), 2);
        let mut buf = [0u8; 4];
        assert!(matches!(p.read(&mut buf, ms(50), true), Read::Data(1)));
        assert!(matches!(p.read(&mut buf, ms(50), true), Read::Wait(None)));
        p.release([ms(60), ms(55)].into_iter());
        assert!(matches!(p.read(&mut buf, ms(59), true), Read::Wait(Some(t)) if t == ms(60)));
        assert!(matches!(p.read(&mut buf, ms(60), true), Read::Data(2)));
        assert_eq!(&buf[..2], b"bc");
    }

    #[test]
    fn a_reset_ends_the_pipe() {
        let t0 = Instant::now();
        let mut p = Pipe::default();
        p.push_data(b"x", Some(t0));
        p.push_rst(Some(t0));
        p.push_data(b"y", Some(t0));
        assert!(p.reset_arrived(t0));
        let mut buf = [0u8; 4];
        assert!(matches!(p.read(&mut buf, t0, true), Read::Data(1)));
        assert!(matches!(p.read(&mut buf, t0, true), Read::Reset));
    }
}
