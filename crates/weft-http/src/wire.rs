//! Wire-level pieces shared by the server and the client: the input
//! buffer, body framing (Content-Length, chunked, close-delimited), the
//! chunked encoder, and small formatting helpers.

use std::io::{self, Read, Write};

use crate::tls::Stream;

/// A growable input buffer: bytes `start..end` of `buf` are unread.
pub(crate) struct InBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// Error kind used when the buffer is full and may not grow further.
pub(crate) fn buffer_full() -> io::Error {
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        "weft-http: input buffer limit reached",
    )
}

impl InBuf {
    pub(crate) fn with_capacity(n: usize) -> InBuf {
        InBuf {
            buf: vec![0; n.max(64)],
            start: 0,
            end: 0,
        }
    }

    /// The unread bytes.
    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Marks `n` unread bytes as read.
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len());
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Reads more bytes from `stream` (one `read` call, under the stream's
    /// current read timeout). Grows the buffer up to `limit` bytes of
    /// unread data; past that fails with [`buffer_full`]. `Ok(0)` is EOF.
    pub(crate) fn fill(&mut self, stream: &Stream, limit: usize) -> io::Result<usize> {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < limit {
                let new = (self.buf.len() * 2).min(limit).max(self.buf.len() + 1);
                self.buf.resize(new, 0);
            } else {
                return Err(buffer_full());
            }
        }
        let n = (&*stream).read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// `fill` for a poll: `read` gets the free tail of the buffer (an
    /// empty buffer has room) and says how many bytes it put there.
    pub(crate) fn poll_fill(
        &mut self,
        read: impl FnOnce(&mut [u8]) -> std::task::Poll<io::Result<usize>>,
    ) -> std::task::Poll<io::Result<usize>> {
        let r = read(&mut self.buf[self.end..]);
        if let std::task::Poll::Ready(Ok(n)) = r {
            self.end += n;
        }
        r
    }

    /// Copies unread bytes into `out`, returning how many.
    #[inline]
    pub(crate) fn copy_to(&mut self, out: &mut [u8]) -> usize {
        let n = self.len().min(out.len());
        out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
        self.consume(n);
        n
    }

    /// Index of the end of an HTTP head (just past the blank line) in the
    /// unread data, scanning from `from` (an offset into the unread data).
    pub(crate) fn find_head_end(&self, from: usize) -> Option<usize> {
        find_head_end(self.data(), from)
    }

    /// Shrinks an oversized buffer back to `cap` when it is empty (after a
    /// large head or body, so idle connections stay small).
    pub(crate) fn shrink_if_idle(&mut self, cap: usize) {
        if self.is_empty() && self.buf.len() > cap * 4 {
            self.buf = vec![0; cap];
        }
    }
}

/// Finds the end of an HTTP head (`\r\n\r\n`, or a bare `\n\n` that
/// httparse also accepts) in `data`, starting near `from`.
pub(crate) fn find_head_end(data: &[u8], from: usize) -> Option<usize> {
    let start = from.saturating_sub(3);
    let mut i = start;
    while i < data.len() {
        // Jump to the next '\n'.
        match data[i..].iter().position(|&b| b == b'\n') {
            None => return None,
            Some(p) => i += p,
        }
        // data[i] == '\n': a blank line follows if the next byte is '\n'
        // or the next two are "\r\n".
        match data.get(i + 1) {
            Some(b'\n') => return Some(i + 2),
            Some(b'\r') if data.get(i + 2) == Some(&b'\n') => return Some(i + 3),
            _ => {}
        }
        i += 1;
    }
    None
}

/// How a message body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body, or the body has been read completely.
    Done,
    /// `n` more bytes of a `Content-Length` body.
    Length(u64),
    /// A chunked body, in the given decoder state.
    Chunked(Chunk),
    /// Until the peer closes (responses only).
    Eof,
}

/// Chunked-decoder state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside chunk data: this many bytes left.
    Data(u64),
    /// Expecting the CRLF after chunk data.
    DataEnd,
    /// Reading trailer lines after the last chunk: this many bytes of
    /// them so far (bounded by [`MAX_TRAILERS`]).
    Trailers(usize),
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Longest chunk-size line or trailer line accepted.
const MAX_LINE: usize = 8 * 1024;

/// Largest trailer section accepted (all its lines together): without a
/// bound, a client could send trailer lines for ever.
const MAX_TRAILERS: usize = 16 * 1024;

/// Reads body bytes into `out` according to `framing` (updated), from the
/// buffered bytes of `input` and then from `stream`. `Ok(0)` means the body
/// is complete (or `out` is empty). A malformed chunked body fails with
/// `InvalidData`; a connection closed early with `UnexpectedEof`.
pub(crate) fn read_body(
    framing: &mut Framing,
    input: &mut InBuf,
    stream: &Stream,
    out: &mut [u8],
) -> io::Result<usize> {
    if out.is_empty() {
        return Ok(0);
    }
    loop {
        match *framing {
            Framing::Done => return Ok(0),
            Framing::Length(0) => {
                *framing = Framing::Done;
                return Ok(0);
            }
            Framing::Length(rem) => {
                let want = clamp(rem, out.len());
                let n = if !input.is_empty() {
                    input.copy_to(&mut out[..want])
                } else if want >= 4096 {
                    // Large reads go straight to the caller's buffer.
                    (&*stream).read(&mut out[..want])?
                } else {
                    if input.fill(stream, usize::MAX)? == 0 {
                        0
                    } else {
                        input.copy_to(&mut out[..want])
                    }
                };
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed before the end of the body",
                    ));
                }
                let rem = rem - n as u64;
                *framing = if rem == 0 {
                    Framing::Done
                } else {
                    Framing::Length(rem)
                };
                return Ok(n);
            }
            Framing::Eof => {
                if !input.is_empty() {
                    return Ok(input.copy_to(out));
                }
                let n = (&*stream).read(out)?;
                if n == 0 {
                    *framing = Framing::Done;
                }
                return Ok(n);
            }
            Framing::Chunked(Chunk::Data(rem)) => {
                let want = clamp(rem, out.len());
                if input.is_empty() && input.fill(stream, MAX_LINE)? == 0 {
                    return Err(eof_in_chunk());
                }
                let n = input.copy_to(&mut out[..want]);
                let rem = rem - n as u64;
                *framing = Framing::Chunked(if rem == 0 {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(rem)
                });
                return Ok(n);
            }
            Framing::Chunked(Chunk::Size) => {
                let line_end = line(input, stream)?;
                match httparse::parse_chunk_size(&input.data()[..line_end]) {
                    Ok(httparse::Status::Complete((used, size))) if used == line_end => {
                        input.consume(used);
                        *framing = Framing::Chunked(if size == 0 {
                            Chunk::Trailers(0)
                        } else {
                            Chunk::Data(size)
                        });
                    }
                    _ => return Err(invalid("invalid chunk size line")),
                }
            }
            Framing::Chunked(Chunk::DataEnd) => {
                while input.len() < 2 {
                    if input.fill(stream, MAX_LINE)? == 0 {
                        return Err(eof_in_chunk());
                    }
                }
                if &input.data()[..2] == b"\r\n" {
                    input.consume(2);
                } else if input.data()[0] == b'\n' {
                    input.consume(1);
                } else {
                    return Err(invalid("chunk data not followed by CRLF"));
                }
                *framing = Framing::Chunked(Chunk::Size);
            }
            Framing::Chunked(Chunk::Trailers(seen)) => {
                let line_end = line(input, stream)?;
                let blank = matches!(&input.data()[..line_end], b"\r\n" | b"\n");
                input.consume(line_end);
                if blank {
                    *framing = Framing::Done;
                    return Ok(0);
                }
                let seen = seen + line_end;
                if seen > MAX_TRAILERS {
                    return Err(invalid("trailer section too long"));
                }
                *framing = Framing::Chunked(Chunk::Trailers(seen));
            }
        }
    }
}

fn eof_in_chunk() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "connection closed inside a chunked body",
    )
}

/// Ensures a whole line is buffered; returns its length including `\n`.
fn line(input: &mut InBuf, stream: &Stream) -> io::Result<usize> {
    let mut scanned = 0;
    loop {
        if let Some(p) = input.data()[scanned..].iter().position(|&b| b == b'\n') {
            return Ok(scanned + p + 1);
        }
        scanned = input.len();
        if scanned >= MAX_LINE {
            return Err(invalid("chunk line too long"));
        }
        match input.fill(stream, MAX_LINE * 2) {
            Ok(0) => return Err(eof_in_chunk()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::OutOfMemory => {
                return Err(invalid("chunk line too long"));
            }
            Err(e) => return Err(e),
        }
    }
}

#[inline]
fn clamp(rem: u64, len: usize) -> usize {
    usize::try_from(rem).map_or(len, |r| r.min(len))
}

/// Writes all of `bufs` to `w`, handling short writes.
pub(crate) fn write_all_vectored(mut w: impl Write, a: &[u8], b: &[u8]) -> io::Result<()> {
    let (mut a, mut b) = (a, b);
    while !a.is_empty() || !b.is_empty() {
        let n = if a.is_empty() {
            w.write(b)?
        } else {
            w.write_vectored(&[io::IoSlice::new(a), io::IoSlice::new(b)])?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        if n >= a.len() {
            b = &b[n - a.len()..];
            a = &[];
        } else {
            a = &a[n..];
        }
    }
    Ok(())
}

/// A [`Write`] that frames what it is given as HTTP chunks, buffering up
/// to `limit` bytes per chunk. [`ChunkedWriter::finish`] writes the last
/// chunk.
pub(crate) struct ChunkedWriter<'a, W: Write> {
    inner: W,
    buf: &'a mut Vec<u8>,
    limit: usize,
    /// Bytes of payload passed through (not counting framing).
    pub(crate) written: u64,
}

/// Room reserved in front of a chunk for its size line.
const CHUNK_HEAD: usize = 18;

impl<'a, W: Write> ChunkedWriter<'a, W> {
    pub(crate) fn new(inner: W, buf: &'a mut Vec<u8>, limit: usize) -> Self {
        buf.clear();
        buf.resize(CHUNK_HEAD, 0);
        ChunkedWriter {
            inner,
            buf,
            limit: limit.max(64),
            written: 0,
        }
    }

    /// Writes the buffered bytes as one chunk (nothing if empty).
    fn flush_chunk(&mut self, last: bool) -> io::Result<()> {
        let payload = self.buf.len() - CHUNK_HEAD;
        let mut start = CHUNK_HEAD;
        if payload > 0 {
            let mut head = [0u8; CHUNK_HEAD];
            let h = format_chunk_head(payload, &mut head);
            start = CHUNK_HEAD - h.len();
            let hl = h.len();
            self.buf[start..CHUNK_HEAD].copy_from_slice(&head[..hl]);
            self.buf.extend_from_slice(b"\r\n");
        }
        if last {
            self.buf.extend_from_slice(b"0\r\n\r\n");
        }
        if self.buf.len() > start {
            self.inner.write_all(&self.buf[start..])?;
        }
        self.buf.clear();
        self.buf.resize(CHUNK_HEAD, 0);
        Ok(())
    }

    /// Writes any buffered data and the terminating zero-size chunk, and
    /// hands back the inner writer.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.flush_chunk(true)?;
        Ok(self.inner)
    }
}

fn format_chunk_head(n: usize, out: &mut [u8; CHUNK_HEAD]) -> &[u8] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut tmp = [0u8; 16];
    let mut i = tmp.len();
    let mut v = n;
    loop {
        i -= 1;
        tmp[i] = HEX[v & 15];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    let digits = &tmp[i..];
    out[..digits.len()].copy_from_slice(digits);
    out[digits.len()..digits.len() + 2].copy_from_slice(b"\r\n");
    &out[..digits.len() + 2]
}

impl<W: Write> Write for ChunkedWriter<'_, W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        if self.buf.len() - CHUNK_HEAD + data.len() > self.limit {
            self.flush_chunk(false)?;
            if data.len() >= self.limit {
                // Big writes become one chunk each, without copying.
                let mut head = [0u8; CHUNK_HEAD];
                let h = format_chunk_head(data.len(), &mut head);
                self.inner.write_all(h)?;
                self.inner.write_all(data)?;
                self.inner.write_all(b"\r\n")?;
                self.written += data.len() as u64;
                return Ok(data.len());
            }
        }
        self.buf.extend_from_slice(data);
        self.written += data.len() as u64;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_chunk(false)?;
        self.inner.flush()
    }
}

/// A [`Write`] that passes at most `limit` bytes through, failing beyond.
pub(crate) struct LimitedWriter<W: Write> {
    pub(crate) inner: W,
    pub(crate) remaining: u64,
}

impl<W: Write> Write for LimitedWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.len() as u64 > self.remaining {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "streamed body is longer than its declared length",
            ));
        }
        let n = self.inner.write(data)?;
        self.remaining -= n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A [`Write`] over `inner` that buffers small writes in `buf`, writing
/// out when it exceeds `limit` (and on flush).
pub(crate) struct BufferedStream<'a, W: Write> {
    pub(crate) inner: W,
    pub(crate) buf: &'a mut Vec<u8>,
    pub(crate) limit: usize,
}

impl<W: Write> Write for BufferedStream<'_, W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > self.limit {
            self.flush()?;
            if data.len() >= self.limit {
                return self.inner.write(data);
            }
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.inner.write_all(self.buf)?;
            self.buf.clear();
        }
        self.inner.flush()
    }
}

/// Appends the decimal form of `v`.
#[inline]
pub(crate) fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

/// Whether a header value lists `token` (comma-separated, case-insensitive),
/// as in `Connection: keep-alive, Upgrade`.
pub(crate) fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Parses a Content-Length value (digits only; RFC 9110 §8.6). Leading
/// zeros are allowed; a value too large for a `u64` is `u64::MAX` (a valid
/// length no body limit admits), not an error.
pub(crate) fn parse_content_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits = &v[v.iter().position(|&b| b != b'0').unwrap_or(v.len())..];
    if digits.len() > 19 {
        return Some(u64::MAX);
    }
    Some(
        digits
            .iter()
            .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')),
    )
}

/// Whether `v` is a valid `Host` field value (RFC 9112 §3.2: `uri-host
/// [ ":" port ]`, RFC 3986's `host` and `port`). Empty is valid: a client
/// sends it when the target has no authority.
pub(crate) fn valid_host(v: &[u8]) -> bool {
    let v = v.trim_ascii();
    let (host, port) = match v.first() {
        Some(b'[') => match v.iter().position(|&b| b == b']') {
            Some(close) => {
                if !valid_ip_literal(&v[1..close]) {
                    return false;
                }
                (&v[..0], &v[close + 1..])
            }
            None => return false,
        },
        _ => match v.iter().position(|&b| b == b':') {
            Some(i) => (&v[..i], &v[i..]),
            None => (v, &v[v.len()..]),
        },
    };
    let port_ok = match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    };
    port_ok && valid_reg_name(host)
}

/// RFC 3986 `reg-name` (which includes `IPv4address`): unreserved,
/// sub-delims and percent-encoded octets.
fn valid_reg_name(h: &[u8]) -> bool {
    let mut i = 0;
    while i < h.len() {
        match h[i] {
            b'%' => {
                if !(h.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                    && h.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
                {
                    return false;
                }
                i += 3;
                continue;
            }
            b if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b) => {}
            _ => return false,
        }
        i += 1;
    }
    true
}

/// RFC 3986 `IP-literal` between the brackets: an IPv6 address or
/// `IPvFuture` (`v` 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )).
fn valid_ip_literal(l: &[u8]) -> bool {
    if let Some(rest) = l.strip_prefix(b"v").or_else(|| l.strip_prefix(b"V")) {
        let Some(dot) = rest.iter().position(|&b| b == b'.') else {
            return false;
        };
        let (ver, tail) = (&rest[..dot], &rest[dot + 1..]);
        return !ver.is_empty()
            && ver.iter().all(u8::is_ascii_hexdigit)
            && !tail.is_empty()
            && tail
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:".contains(&b));
    }
    std::str::from_utf8(l)
        .ok()
        .and_then(|s| s.parse::<std::net::Ipv6Addr>().ok())
        .is_some()
}

/// Whether `name` is a valid header field name (an RFC 9110 token).
pub(crate) fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether `value` is a valid header field value (no CR, LF or NUL).
pub(crate) fn valid_header_value(value: &[u8]) -> bool {
    !value.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_end() {
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n\r\n", 0), Some(18));
        assert_eq!(
            find_head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nxx", 0),
            Some(24)
        );
        assert_eq!(find_head_end(b"GET / HTTP/1.1\n\n", 0), Some(16));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\nA: b\r\n", 0), None);
        assert_eq!(
            find_head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\n", 22),
            Some(24)
        );
    }

    #[test]
    fn chunk_head_format() {
        let mut b = [0u8; CHUNK_HEAD];
        assert_eq!(format_chunk_head(255, &mut b), b"ff\r\n");
        assert_eq!(format_chunk_head(1, &mut b), b"1\r\n");
        assert_eq!(format_chunk_head(4096, &mut b), b"1000\r\n");
    }

    #[test]
    fn chunked_writer_frames() {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        let mut w = ChunkedWriter::new(&mut out, &mut scratch, 64);
        w.write_all(b"hello").unwrap();
        w.write_all(b" world").unwrap();
        w.flush().unwrap();
        w.write_all(&[b'x'; 70]).unwrap();
        w.write_all(b"end").unwrap();
        w.finish().unwrap();
        let want = format!(
            "b\r\nhello world\r\n46\r\n{}\r\n3\r\nend\r\n0\r\n\r\n",
            "x".repeat(70)
        );
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn host_values() {
        for ok in [
            &b""[..],
            b"example.com",
            b"example.com:8080",
            b"127.0.0.1:80",
            b"[::1]:80",
            b"[::1]",
            b"[v1.fe]",
            b"h:",
            b"a%20b",
        ] {
            assert!(valid_host(ok), "{:?}", String::from_utf8_lossy(ok));
        }
        for bad in [
            &b"a b"[..],
            b"h:80:80",
            b"h:x",
            b"[::1",
            b"[zz]",
            b"a/b",
            b"a@b",
            b"%zz",
            b"[::1]x",
        ] {
            assert!(!valid_host(bad), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn tokens_and_lengths() {
        assert!(has_token(b"keep-alive, Upgrade", "upgrade"));
        assert!(!has_token(b"keep-alive", "close"));
        assert_eq!(parse_content_length(b" 42 "), Some(42));
        assert_eq!(parse_content_length(b"+42"), None);
        assert_eq!(parse_content_length(b""), None);
        assert_eq!(parse_content_length(b"42, 42"), None);
        assert_eq!(parse_content_length(b"000000000000000000000042"), Some(42));
        assert_eq!(
            parse_content_length(b"99999999999999999999"),
            Some(u64::MAX)
        );
        let mut v = Vec::new();
        push_u64(&mut v, 1234567890);
        assert_eq!(v, b"1234567890");
    }
}
