//! What the kernel says about a carrier's time: on a CPU, or runnable and
//! waiting for one (`/proc/self/task/<tid>/schedstat`, Linux's
//! `CONFIG_SCHED_INFO`, on in every distribution kernel we know of).
//!
//! The monitor reads it to tell a carrier that one thread *holds* (it
//! computes, or sleeps in the kernel) from one the kernel has merely
//! *descheduled* (a neighbour's time slice, a throttled CPU quota): only
//! the first is a stall (ARCHITECTURE.md, "Sharing the cores").
//!
//! Two properties of the kernel's accounting shape how it is used:
//! - the wait is added when the waiting ends (`sched_info_arrive`): a wait
//!   still going on is not in the figure yet;
//! - the time on a CPU is brought up to date at every scheduler tick (1 to
//!   4 ms) and switch, so a thread that runs sees it grow between two looks
//!   of the monitor (10 ms apart).

use std::fs::File;
use std::os::unix::fs::FileExt;

/// One reading of a thread's schedstat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SchedStat {
    /// Nanoseconds on a CPU so far.
    pub(super) run_ns: u64,
    /// Nanoseconds runnable but not running so far (waits that have ended).
    pub(super) wait_ns: u64,
}

/// One carrier's schedstat file, kept open between the monitor's looks:
/// each look is one `pread` at offset 0, which makes the kernel write the
/// line afresh, instead of an open, a read and a close (three system calls
/// per busy carrier every 10 ms).
#[derive(Default)]
pub(super) struct Reader {
    /// The thread the file is of, and the file.
    open: Option<(i32, File)>,
}

impl Reader {
    /// Thread `tid` of this process, now; `None` where the kernel keeps no
    /// schedstat, or the thread has ended. A thread id that changed (a
    /// spare's new OS thread in the slot) or a failed read opens the file
    /// afresh at the next look.
    pub(super) fn read(&mut self, tid: i32) -> Option<SchedStat> {
        if tid <= 0 {
            return None;
        }
        if self.open.as_ref().is_none_or(|(t, _)| *t != tid) {
            self.open = File::open(format!("/proc/self/task/{tid}/schedstat"))
                .ok()
                .map(|f| (tid, f));
        }
        let (_, f) = self.open.as_ref()?;
        // "run wait slices\n": three decimal u64s, at most 62 bytes.
        let mut buf = [0u8; 80];
        match f.read_at(&mut buf, 0) {
            Ok(n) => parse(std::str::from_utf8(&buf[..n]).ok()?),
            Err(_) => {
                self.open = None;
                None
            }
        }
    }
}

/// The first two fields of a schedstat line.
fn parse(text: &str) -> Option<SchedStat> {
    let mut fields = text.split_ascii_whitespace();
    let run_ns = fields.next()?.parse().ok()?;
    let wait_ns = fields.next()?.parse().ok()?;
    Some(SchedStat { run_ns, wait_ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_line() {
        assert_eq!(
            parse("123456 789 12\n"),
            Some(SchedStat {
                run_ns: 123456,
                wait_ns: 789
            })
        );
        assert_eq!(parse("123456\n"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse("x 1 2"), None);
    }

    /// With the file kept open (`Reader`), not reopened: a `pread` at 0
    /// that returned the first line again fails here. Bounded by work, not
    /// time: 10,000 rounds are about a second of CPU, and the kernel brings
    /// a running thread's figure up to date at every tick (1 to 4 ms).
    #[test]
    fn a_computing_thread_sees_its_run_time_grow() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        // One reader throughout: each look at the open file is fresh.
        let mut reader = Reader::default();
        let Some(before) = reader.read(tid) else {
            eprintln!("skipped: this kernel keeps no schedstat");
            return;
        };
        let mut x = 1u64;
        for round in 0.. {
            assert!(round < 10_000, "run time did not grow over 10,000 rounds");
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            let now = reader.read(tid).expect("read again");
            assert!(now.wait_ns >= before.wait_ns, "waits only grow");
            if now.run_ns > before.run_ns {
                break;
            }
        }
    }
}
