//! Child processes: a harness re-running itself (or starting another
//! program) for one measurement, so that each figure's peak memory is that
//! run's alone, with a watchdog so a stuck child can never hang the
//! harness.
//!
//! Peak RSS is `VmHWM` from `/proc/<pid>/status` — read by the child itself
//! at the end of its run ([`vm_hwm_kib`]`("self")`), or by the parent just
//! before it stops a server ([`Worker::vm_hwm_kib`]). `wait4`'s
//! `ru_maxrss` ([`Exit::max_rss_kib`]) is only a fallback: Linux keeps the
//! parent's high-water mark across fork+exec (`setmax_mm_hiwater_rss` in
//! `exec_mmap`), so every child of a harness that has grown to 2 GB reports
//! at least 2 GB.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How to start a child: a program and the arguments that come first.
#[derive(Clone, Debug)]
pub struct Launcher {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before the ones given to [`Worker::start`].
    pub prefix: Vec<String>,
}

impl Launcher {
    /// This executable again, with `prefix` first (a harness's own child
    /// mode, e.g. `--child`).
    pub fn this_exe<S: Into<String>>(
        prefix: impl IntoIterator<Item = S>,
    ) -> Result<Launcher, String> {
        Ok(Launcher {
            program: std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?,
            prefix: prefix.into_iter().map(Into::into).collect(),
        })
    }

    /// A [`Command`] for `program prefix… args…`, for children that need
    /// more control than [`Worker`] gives (stdin, inherited stderr).
    pub fn command<S: Into<OsString>>(&self, args: impl IntoIterator<Item = S>) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.prefix)
            .args(args.into_iter().map(Into::into));
        cmd
    }
}

/// What a finished child left behind.
#[derive(Debug)]
pub struct Exit {
    /// `wait4`'s `ru_maxrss` in KiB: the fallback for peak RSS (see the
    /// module docs for why it can be too high).
    pub max_rss_kib: u64,
    /// Raw `wait4` status.
    pub status: i32,
    /// The last lines of its stderr (for error messages).
    pub stderr: String,
}

impl Exit {
    /// True when the process exited 0 or was ended by the SIGTERM of
    /// [`Worker::terminate`] (directly, or as a JVM does, exit status 143).
    pub fn ok_or_terminated(&self) -> bool {
        let s = self.status;
        (libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0)
            || (libc::WIFSIGNALED(s) && libc::WTERMSIG(s) == libc::SIGTERM)
            || (libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 128 + libc::SIGTERM)
    }

    /// `exit status 1: <stderr tail>`, `killed by signal 9`.
    pub fn describe(&self) -> String {
        let s = self.status;
        let how = if libc::WIFSIGNALED(s) {
            format!("killed by signal {}", libc::WTERMSIG(s))
        } else {
            format!("exit status {}", libc::WEXITSTATUS(s))
        };
        let tail = self.stderr.trim();
        if tail.is_empty() {
            how
        } else {
            format!("{how}: {tail}")
        }
    }
}

/// A running child with piped stdout, drained stderr and a watchdog.
pub struct Worker {
    child: Child,
    stdout: BufReader<ChildStdout>,
    stderr: std::thread::JoinHandle<String>,
    watchdog: mpsc::Sender<()>,
}

impl Worker {
    /// Starts `launcher args…` with stdin closed; the watchdog kills it
    /// (SIGKILL) after `limit`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use weft_bench_support::child::{Launcher, Worker};
    ///
    /// let sh = Launcher { program: "sh".into(), prefix: vec!["-c".into()] };
    /// let mut w = Worker::start(&sh, ["echo ready 8080"], Duration::from_secs(10)).unwrap();
    /// assert_eq!(w.line(), "ready 8080");
    /// assert!(w.finish().unwrap().ok_or_terminated());
    /// ```
    pub fn start<S: Into<OsString>>(
        launcher: &Launcher,
        args: impl IntoIterator<Item = S>,
        limit: Duration,
    ) -> Result<Worker, String> {
        let mut child = launcher
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", launcher.program.display()))?;
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut err = child.stderr.take().expect("piped stderr");
        // Drain stderr so the child never blocks on a full pipe; keep the tail.
        let stderr = std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = err.read_to_end(&mut all);
            let s = String::from_utf8_lossy(&all);
            let lines: Vec<&str> = s.lines().collect();
            lines[lines.len().saturating_sub(8)..].join("\n")
        });
        let pid = child.id() as libc::pid_t;
        let (watchdog, disarm) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = disarm.recv_timeout(limit) {
                // SAFETY: kill(2) on our own child's pid; it has not been
                // reaped yet (reaping disarms this watchdog first), so the
                // pid cannot have been reused.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        });
        Ok(Worker {
            child,
            stdout,
            stderr,
            watchdog,
        })
    }

    /// Reads the next stdout line, trimmed (empty at end of file).
    pub fn line(&mut self) -> String {
        let mut s = String::new();
        let _ = self.stdout.read_line(&mut s);
        s.trim().to_string()
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its peak RSS so far (`VmHWM`) in KiB, while it runs.
    pub fn vm_hwm_kib(&self) -> Option<u64> {
        vm_hwm_kib(&self.child.id().to_string())
    }

    /// Sends SIGTERM (servers run until told).
    pub fn terminate(&self) {
        // SAFETY: as in the watchdog: our unreaped child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
    }

    /// Reads the rest of stdout, waits for the process and returns how it
    /// ended; `Err` (with [`Exit::describe`]) unless it exited 0 or by our
    /// SIGTERM.
    pub fn finish(self) -> Result<Exit, String> {
        let (exit, _) = self.finish_with_output()?;
        if exit.ok_or_terminated() {
            Ok(exit)
        } else {
            Err(exit.describe())
        }
    }

    /// Like [`finish`](Self::finish), but returns the exit whatever it was,
    /// with the rest of stdout; `Err` only when `wait4` fails.
    pub fn finish_with_output(mut self) -> Result<(Exit, String), String> {
        let mut rest = String::new();
        let _ = self.stdout.read_to_string(&mut rest);
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child with valid out-pointers; the Child
        // is never waited on again (it is dropped without wait, which does
        // not reap or kill).
        let r = unsafe { libc::wait4(self.child.id() as libc::pid_t, &mut status, 0, &mut usage) };
        let _ = self.watchdog.send(());
        let stderr = self.stderr.join().unwrap_or_default();
        if r < 0 {
            return Err(format!("wait4: {}", std::io::Error::last_os_error()));
        }
        let exit = Exit {
            max_rss_kib: usage.ru_maxrss as u64,
            status,
            stderr,
        };
        Ok((exit, rest))
    }
}

/// `VmHWM` (peak RSS) in KiB from `/proc/<pid>/status`; `pid` may be
/// `"self"`.
///
/// # Examples
///
/// ```
/// let kib = weft_bench_support::child::vm_hwm_kib("self").unwrap();
/// assert!(kib > 0);
/// ```
pub fn vm_hwm_kib(pid: &str) -> Option<u64> {
    status_field(pid, "VmHWM:")
}

/// `VmRSS` (resident memory now) in KiB from `/proc/<pid>/status`; `pid`
/// may be `"self"`.
///
/// ```
/// assert!(weft_bench_support::child::vm_rss_kib("self").unwrap() > 0);
/// ```
pub fn vm_rss_kib(pid: &str) -> Option<u64> {
    status_field(pid, "VmRSS:")
}

/// The process's open file descriptors (entries of `/proc/<pid>/fd`);
/// `pid` may be `"self"`.
///
/// ```
/// // At least standard input, output and error, and the directory read.
/// assert!(weft_bench_support::child::open_fds("self").unwrap() >= 3);
/// ```
pub fn open_fds(pid: &str) -> Option<u64> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(dir.count() as u64)
}

/// The process's OS thread count (`Threads:` in `/proc/<pid>/status`);
/// `pid` may be `"self"`.
///
/// ```
/// assert!(weft_bench_support::child::os_threads("self").unwrap() >= 1);
/// ```
pub fn os_threads(pid: &str) -> Option<u64> {
    status_field(pid, "Threads:")
}

/// The first number after `key` in `/proc/<pid>/status`.
fn status_field(pid: &str, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, limit: Duration) -> Worker {
        let sh = Launcher {
            program: "sh".into(),
            prefix: vec!["-c".into()],
        };
        Worker::start(&sh, [script], limit).unwrap()
    }

    #[test]
    fn failure_is_described_with_stderr() {
        let w = sh("echo oops >&2; exit 3", Duration::from_secs(10));
        let err = w.finish().unwrap_err();
        assert_eq!(err, "exit status 3: oops");
    }

    #[test]
    fn watchdog_kills_a_stuck_child() {
        let w = sh("exec sleep 30", Duration::from_millis(200));
        let (exit, _) = w.finish_with_output().unwrap();
        assert!(libc::WIFSIGNALED(exit.status));
        assert_eq!(libc::WTERMSIG(exit.status), libc::SIGKILL);
        assert_eq!(exit.describe(), "killed by signal 9");
    }

    #[test]
    fn terminate_counts_as_success_and_peak_rss_is_read_while_running() {
        let mut w = sh("echo up; exec sleep 30", Duration::from_secs(30));
        assert_eq!(w.line(), "up");
        assert!(w.vm_hwm_kib().is_some_and(|k| k > 0));
        w.terminate();
        assert!(w.finish().is_ok());
    }

    #[test]
    fn missing_program_is_an_error() {
        let l = Launcher {
            program: "/nonexistent/weft-bench-child".into(),
            prefix: vec![],
        };
        let err = Worker::start(&l, Vec::<String>::new(), Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(
            err.starts_with("cannot start /nonexistent/weft-bench-child"),
            "{err}"
        );
        assert_eq!(vm_hwm_kib("0"), None);
    }
}
