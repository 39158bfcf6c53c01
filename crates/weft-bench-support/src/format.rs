//! Numbers as a reader takes them in.

/// `1234567` → `1,234,567`.
///
/// # Examples
///
/// ```
/// assert_eq!(weft_bench_support::format::thousands(1_234_567), "1,234,567");
/// assert_eq!(weft_bench_support::format::thousands(999), "999");
/// ```
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// KiB → `87.9 MiB`, `172 MiB`, `1.21 GiB`.
///
/// # Examples
///
/// ```
/// use weft_bench_support::format::kib;
///
/// assert_eq!(kib(2 * 1024 * 1024), "2.00 GiB");
/// assert_eq!(kib(172 * 1024), "172 MiB");
/// assert_eq!(kib(90_000), "87.9 MiB");
/// ```
pub fn kib(kib: u64) -> String {
    let mib = kib as f64 / 1024.0;
    if mib >= 1024.0 {
        format!("{:.2} GiB", mib / 1024.0)
    } else if mib >= 100.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
}

/// Three significant-ish digits: `1234` → `1234`, `12.34` → `12.3`,
/// `1.234` → `1.23`.
///
/// # Examples
///
/// ```
/// use weft_bench_support::format::sig3;
///
/// assert_eq!(sig3(1234.4), "1234");
/// assert_eq!(sig3(12.34), "12.3");
/// assert_eq!(sig3(1.234), "1.23");
/// ```
pub fn sig3(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A rate in compact form: `1.23M`, `45.6k`, `789`.
///
/// # Examples
///
/// ```
/// use weft_bench_support::format::rate;
///
/// assert_eq!(rate(1_234_000.0), "1.23M");
/// assert_eq!(rate(45_600.0), "45.6k");
/// assert_eq!(rate(789.2), "789");
/// ```
pub fn rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// A ratio: `13` from 10 up, `0.85` below.
///
/// # Examples
///
/// ```
/// assert_eq!(weft_bench_support::format::ratio(12.6), "13");
/// assert_eq!(weft_bench_support::format::ratio(0.854), "0.85");
/// ```
pub fn ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.2}")
    }
}
