//! A `fork` made by a virtual thread before any hooked call of the
//! process: the child has no carriers, so every hooked call there must pass
//! through. (The `pthread_atfork` handler that marks the child used to be
//! registered at the first hooked call on a virtual thread; a child forked
//! earlier believed it was still on one.)
//!
//! Its own test binary, with one test: nothing else may make a hooked call
//! first.

use std::time::Duration;

use weft_transparent_tests::{strict_runtime, watchdog};

fn usleep_parks() -> u64 {
    weft::transparent::parks()
        .into_iter()
        .find(|(c, _)| *c == "usleep")
        .map_or(0, |(_, n)| n)
}

#[test]
fn a_fork_before_any_hooked_call_passes_through_in_the_child() {
    let _dog = watchdog(
        "a_fork_before_any_hooked_call_passes_through_in_the_child",
        Duration::from_secs(60),
    );
    let rt = strict_runtime(1);
    let status = rt
        .spawn(|| {
            // SAFETY: the child only sleeps, reads a counter and exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let before = usleep_parks();
                // SAFETY: plain calls; `_exit` skips the parent's atexit work.
                unsafe {
                    libc::usleep(1000);
                    // 0: the sleep went to the kernel, as in any process
                    // without carriers; 1: it parked as a virtual thread.
                    libc::_exit(i32::from(usleep_parks() != before));
                }
            }
            assert!(pid > 0, "fork failed");
            let mut st = 0;
            // SAFETY: waiting for our own child into a local.
            let r = unsafe { libc::waitpid(pid, &mut st, 0) };
            assert_eq!(r, pid);
            st
        })
        .join()
        .unwrap();
    assert!(libc::WIFEXITED(status), "child status {status:#x}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "the child's usleep parked as a virtual thread"
    );
}
