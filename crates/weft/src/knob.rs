//! Counts set in the environment and read where there is nobody to
//! return an error to — the monitor, the offload pool, the report writer:
//! a bad value is reported on stderr and the default kept. (The default
//! runtime's settings, read where `spawn` can fail, are errors instead:
//! `runtime.rs`.)

/// The number in `var`, at least `min`; `default` when it is not set, or
/// (said on stderr) when it is not such a number. `what` names the unit
/// in that message ("records", "threads").
pub(crate) fn count(var: &str, default: usize, min: usize, what: &str) -> usize {
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => default,
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n >= min => n,
            _ => {
                eprintln!(
                    "weft: {var}={v:?} is not a number of {what} (at least {min}); using {default}"
                );
                default
            }
        },
        Err(_) => {
            eprintln!("weft: {var} is not valid UTF-8; using {default}");
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::count;

    /// Set, unset, too small and not a number (each variable is this
    /// test's own: no other test reads it).
    #[test]
    fn counts_fall_back_to_their_default() {
        // SAFETY: the variables are this test's own; no thread reads or
        // writes them meanwhile.
        unsafe {
            std::env::set_var("WEFT_KNOB_TEST_SET", " 12 ");
            std::env::set_var("WEFT_KNOB_TEST_SMALL", "0");
            std::env::set_var("WEFT_KNOB_TEST_WORD", "many");
        }
        assert_eq!(count("WEFT_KNOB_TEST_SET", 5, 1, "things"), 12);
        assert_eq!(count("WEFT_KNOB_TEST_UNSET", 5, 1, "things"), 5);
        assert_eq!(count("WEFT_KNOB_TEST_SMALL", 5, 1, "things"), 5);
        assert_eq!(count("WEFT_KNOB_TEST_SMALL", 5, 0, "things"), 0);
        assert_eq!(count("WEFT_KNOB_TEST_WORD", 5, 0, "things"), 5);
    }
}
