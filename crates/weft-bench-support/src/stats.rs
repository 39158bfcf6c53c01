//! Medians of repeated runs.
//!
//! A harness runs each configuration several times in one process run and
//! reports the median with min..max beside it: on a shared machine the
//! median is steadier than the mean, and min..max shows the noise.

/// The median of the finite values of `v` (the mean of the two middle ones
/// for an even count); `None` when there is none. NaN and infinities — a
/// run that measured nothing — are left out rather than sorted in.
///
/// # Examples
///
/// ```
/// use weft_bench_support::stats::median;
///
/// assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
/// assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
/// assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
/// assert_eq!(median(&[]), None);
/// ```
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    })
}

/// Median, minimum and maximum of a set of runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// See [`median`].
    pub median: f64,
    /// The smallest finite value.
    pub min: f64,
    /// The largest finite value.
    pub max: f64,
    /// How many finite values there were.
    pub n: usize,
}

/// The [`Summary`] of the finite values of `v`, or `None` when there is none.
///
/// # Examples
///
/// ```
/// let s = weft_bench_support::stats::summary(&[20.0, 10.0, 30.0]).unwrap();
/// assert_eq!((s.median, s.min, s.max, s.n), (20.0, 10.0, 30.0, 3));
/// ```
pub fn summary(v: &[f64]) -> Option<Summary> {
    let finite = || v.iter().copied().filter(|x| x.is_finite());
    Some(Summary {
        median: median(v)?,
        min: finite().fold(f64::INFINITY, f64::min),
        max: finite().fold(f64::NEG_INFINITY, f64::max),
        n: finite().count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_ignores_non_finite_values() {
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[f64::INFINITY, 1.0, 3.0]), Some(2.0));
        assert_eq!(median(&[7.0]), Some(7.0));
    }

    #[test]
    fn summary_of_one_run() {
        assert_eq!(
            summary(&[5.0]),
            Some(Summary {
                median: 5.0,
                min: 5.0,
                max: 5.0,
                n: 1
            })
        );
        assert_eq!(summary(&[]), None);
    }
}
