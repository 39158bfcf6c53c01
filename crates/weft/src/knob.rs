//! Counts set in the environment and read where there is nobody to
//! return an error to — the monitor, the offload pool, the report writer:
//! a bad value is reported on stderr and the default kept. (The default
//! runtime's settings, read where `spawn` can fail, are errors instead:
//! `runtime.rs`.)

use std::env::VarError;

/// The number in `var`, at least `min`; `default` when it is not set, or
/// (said on stderr) when it is not such a number. `what` names the unit
/// in that message ("records", "threads").
pub(crate) fn count(var: &str, default: usize, min: usize, what: &str) -> usize {
    match parse(std::env::var(var), default, min) {
        Ok(n) => n,
        Err(value) => {
            let floor = if min > 0 {
                format!(" (at least {min})")
            } else {
                String::new()
            };
            eprintln!("weft: {var}={value} is not a number of {what}{floor}; keeping {default}");
            default
        }
    }
}

/// [`count`]'s reading of a variable's value; `Err` carries the bad value
/// as the message shows it.
fn parse(value: Result<String, VarError>, default: usize, min: usize) -> Result<usize, String> {
    match value {
        Err(VarError::NotPresent) => Ok(default),
        Err(VarError::NotUnicode(v)) => Err(format!("{v:?} (not UTF-8)")),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n >= min => Ok(n),
            _ => Err(format!("{v:?}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::parse;
    use std::env::VarError;

    /// Set, unset, too small, not a number, not UTF-8.
    #[test]
    fn counts_fall_back_to_their_default() {
        let set = |v: &str| Ok(v.to_string());
        assert_eq!(parse(set(" 12 "), 5, 1), Ok(12));
        assert_eq!(parse(Err(VarError::NotPresent), 5, 1), Ok(5));
        assert_eq!(parse(set("0"), 5, 1), Err("\"0\"".to_string()));
        assert_eq!(parse(set("0"), 5, 0), Ok(0));
        assert_eq!(parse(set("many"), 5, 0), Err("\"many\"".to_string()));
        assert_eq!(parse(set("-3"), 5, 0), Err("\"-3\"".to_string()));
        let odd = <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(vec![0xff]);
        assert!(parse(Err(VarError::NotUnicode(odd)), 5, 0).is_err());
    }
}
