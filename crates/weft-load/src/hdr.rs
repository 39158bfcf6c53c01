//! The latency histograms and their text form in a JSON report:
//! HdrHistogram's V2 encoding, deflate-compressed, in base64 — the form
//! HdrHistogram's own libraries (Java, Go, C, Rust) write with
//! `encodeIntoCompressedByteBuffer` and into their interval logs, so a
//! report's histogram can be read by their tools too.

use std::io::{Cursor, Read};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

/// Largest latency a histogram holds, microseconds (one hour); longer
/// values are recorded as one hour.
pub(crate) const HIGHEST_US: u64 = 3_600_000_000;

/// Significant digits of a histogram: a value is recorded within 0.1 %.
pub(crate) const SIGNIFICANT_DIGITS: u8 = 3;

/// Default for the largest decompressed histogram a report may carry
/// (`--max-histogram-bytes`): a weft-load histogram is at most ~400 KB
/// uncompressed, so 16 MiB leaves room while refusing a corrupt header
/// that claims gigabytes.
pub const DEFAULT_MAX_HISTOGRAM_BYTES: usize = 16 << 20;

const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// Cookie, payload length, normalizing offset, significant digits, lowest,
/// highest, integer-to-double ratio.
const V2_HEADER_LEN: usize = 40;

/// A histogram of microseconds, 1 µs .. 1 hour, 3 significant digits.
pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_US, SIGNIFICANT_DIGITS).expect("valid histogram bounds")
}

/// The histogram as base64 of its V2 deflate encoding.
pub(crate) fn encode(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    // Serializing into a Vec fails only for a histogram whose encoding
    // would not fit a u32 length: not one with weft-load's bounds.
    match V2DeflateSerializer::new().serialize(h, &mut bytes) {
        Ok(_) => STANDARD.encode(bytes),
        Err(e) => unreachable!("encoding a histogram: {e:?}"),
    }
}

/// Decodes what [`encode`] wrote, refusing (instead of allocating for) a
/// histogram that decompresses to more than `max_bytes`, and checking the
/// encoded counts before HdrHistogram's deserializer reads them (it
/// assumes a well-formed payload).
pub(crate) fn decode(text: &str, max_bytes: usize) -> Result<Histogram<u64>, String> {
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    if bytes.len() < 8 || u32_at(&bytes, 0) != V2_COMPRESSED_COOKIE {
        return Err("not an HdrHistogram V2 compressed histogram (wrong cookie)".into());
    }
    let limit = max_bytes.saturating_add(V2_HEADER_LEN);
    let mut inner = Vec::new();
    flate2::read::ZlibDecoder::new(&bytes[8..])
        .take((limit as u64).saturating_add(1))
        .read_to_end(&mut inner)
        .map_err(|e| format!("corrupt histogram: {e}"))?;
    if inner.len() > limit {
        return Err(format!(
            "histogram decompresses to more than {max_bytes} bytes (--max-histogram-bytes)"
        ));
    }
    let payload = check_header(&inner)?;
    check_counts(payload)?;
    Deserializer::new()
        .deserialize(&mut Cursor::new(&inner))
        .map_err(|e| format!("corrupt histogram: {e}"))
}

/// Checks the uncompressed V2 header; returns the payload (the counts).
fn check_header(inner: &[u8]) -> Result<&[u8], String> {
    let Some(header) = inner.get(..V2_HEADER_LEN) else {
        return Err("corrupt histogram: truncated header".into());
    };
    if u32_at(header, 0) != V2_COOKIE {
        return Err("corrupt histogram: wrong inner cookie".into());
    }
    let len = u32_at(header, 4) as usize;
    let Some(payload) = inner.get(V2_HEADER_LEN..V2_HEADER_LEN.saturating_add(len)) else {
        return Err(format!(
            "corrupt histogram: payload of {len} bytes announced, {} present",
            inner.len() - V2_HEADER_LEN
        ));
    };
    let digits = u32_at(header, 12);
    let lowest = u64_at(header, 16);
    let highest = u64_at(header, 24);
    if digits > 5 || lowest == 0 || highest < lowest.saturating_mul(2) {
        return Err(format!(
            "corrupt histogram: invalid bounds (lowest {lowest}, highest {highest}, {digits} significant digits)"
        ));
    }
    Ok(payload)
}

/// Walks the payload's zig-zag LEB128 numbers (a count, or minus a run of
/// zero counts) and refuses the one value the deserializer cannot negate.
fn check_counts(payload: &[u8]) -> Result<(), String> {
    let mut i = 0;
    while i < payload.len() {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let Some(&b) = payload.get(i) else {
                return Err("corrupt histogram: truncated count".into());
            };
            i += 1;
            if shift == 56 {
                // The ninth byte carries 8 bits.
                v |= u64::from(b) << 56;
                break;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let n = ((v >> 1) as i64) ^ -((v & 1) as i64);
        if n == i64::MIN {
            return Err("corrupt histogram: invalid count".into());
        }
    }
    Ok(())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_be_bytes)
        .unwrap_or(0)
}

/// Records `us` microseconds, clamped to the histogram's range.
pub(crate) fn record(h: &mut Histogram<u64>, us: u64) {
    let _ = h.record(us.clamp(1, HIGHEST_US));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_exact() {
        let mut h = new_histogram();
        for v in [1, 7, 999, 1000, 1001, 123_456, 3_000_000, HIGHEST_US] {
            h.record_n(v, v % 7 + 1).unwrap();
        }
        let back = decode(&encode(&h), DEFAULT_MAX_HISTOGRAM_BYTES).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.len(), h.len());
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(back.value_at_quantile(q), h.value_at_quantile(q));
        }
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_panic() {
        let mut h = new_histogram();
        for v in 1..2000u64 {
            h.record(v * 37).unwrap();
        }
        let text = encode(&h);
        let bytes = STANDARD.decode(&text).unwrap();
        // Every byte flipped, every length cut: Ok or Err, never a panic.
        for i in 0..bytes.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= mask;
                let _ = decode(&STANDARD.encode(&b), DEFAULT_MAX_HISTOGRAM_BYTES);
            }
            assert!(decode(&STANDARD.encode(&bytes[..i]), DEFAULT_MAX_HISTOGRAM_BYTES).is_err());
        }
        assert!(
            decode("not base64!", 1 << 20)
                .unwrap_err()
                .contains("base64")
        );
        assert!(decode("", 1 << 20).is_err());
        // More than the limit is refused before anything is allocated
        // for it.
        let err = decode(&text, 16).unwrap_err();
        assert!(err.contains("--max-histogram-bytes"), "{err}");
        // The count the deserializer would overflow negating.
        let mut payload = vec![0xffu8; 9];
        payload.insert(0, 2);
        assert!(
            check_counts(&payload)
                .unwrap_err()
                .contains("invalid count")
        );
    }
}
