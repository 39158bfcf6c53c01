//! Child processes: the workers of every runtime, with their peak RSS and a
//! watchdog so that a stuck worker can never hang the suite.
//!
//! Peak RSS is `VmHWM` from `/proc/<pid>/status`: reported by the worker
//! itself at the end of a run, or read by us just before a server is
//! stopped. `wait4`'s `ru_maxrss` is not usable: Linux keeps the parent's
//! high-water mark across fork+exec (`setmax_mm_hiwater_rss` in
//! `exec_mmap`), so every child of a suite that has grown to 2 GB while
//! driving 10,000 HTTP users would report at least 2 GB. It is only the
//! fallback when the worker does not report.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How to start a worker of one runtime: a program and the arguments that
/// come before the workload name.
#[derive(Clone, Debug)]
pub struct Launcher {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before `<workload> <args…>`.
    pub prefix: Vec<String>,
}

/// What a finished worker left behind.
#[derive(Debug)]
pub struct Exit {
    /// Peak resident set size of the process (`ru_maxrss`), in KiB.
    pub max_rss_kib: u64,
    /// Raw `wait4` status.
    pub status: i32,
    /// The tail of its stderr (for error messages).
    pub stderr: String,
}

impl Exit {
    /// True when the process exited 0 or was ended by our SIGTERM.
    fn ok_or_terminated(&self) -> bool {
        let s = self.status;
        (libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0)
            || (libc::WIFSIGNALED(s) && libc::WTERMSIG(s) == libc::SIGTERM)
            // The JVM exits 143 (128 + SIGTERM) after running its hooks.
            || (libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 128 + libc::SIGTERM)
    }

    fn describe(&self) -> String {
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

/// A running worker.
pub struct Worker {
    child: Child,
    stdout: BufReader<ChildStdout>,
    stderr: std::thread::JoinHandle<String>,
    watchdog: mpsc::Sender<()>,
}

impl Worker {
    /// Starts `launcher <workload> <args…>`; the watchdog kills it after
    /// `limit`.
    pub fn start(
        launcher: &Launcher,
        workload: &str,
        args: &[u64],
        limit: Duration,
    ) -> Result<Worker, String> {
        let mut cmd = Command::new(&launcher.program);
        cmd.args(&launcher.prefix)
            .arg(workload)
            .args(args.iter().map(u64::to_string))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
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

    /// Reads the next stdout line (empty at EOF).
    pub fn line(&mut self) -> String {
        let mut s = String::new();
        let _ = self.stdout.read_line(&mut s);
        s.trim().to_string()
    }

    /// Sends SIGTERM (servers run until told).
    pub fn terminate(&self) {
        // SAFETY: as in the watchdog: our unreaped child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
    }

    /// Waits for the process and returns its peak RSS; errors when it failed.
    pub fn finish(mut self) -> Result<Exit, String> {
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
        if exit.ok_or_terminated() {
            Ok(exit)
        } else {
            Err(exit.describe())
        }
    }
}

/// `VmHWM` (peak RSS) in KiB of `/proc/<pid>/status` (`pid` may be `self`).
pub fn vm_hwm_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// One measured run of a workload that prints its own result.
pub struct Measured {
    /// The worker's figure (unit per workload).
    pub value: f64,
    /// Peak RSS in KiB.
    pub rss_kib: u64,
}

/// Runs a result-printing workload to completion.
pub fn measure(
    launcher: &Launcher,
    workload: &str,
    args: &[u64],
    limit: Duration,
) -> Result<Measured, String> {
    let mut w = Worker::start(launcher, workload, args, limit)?;
    let line = w.line();
    let exit = w.finish()?;
    let v: serde_json::Value = serde_json::from_str(&line)
        .map_err(|e| format!("bad result line {line:?}: {e}; stderr: {}", exit.stderr))?;
    let value = v["value"]
        .as_f64()
        .ok_or_else(|| format!("no numeric \"value\" in {line:?}"))?;
    let rss_kib = v["hwm_kib"]
        .as_u64()
        .filter(|&k| k > 0)
        .unwrap_or(exit.max_rss_kib);
    Ok(Measured { value, rss_kib })
}

/// A server worker, listening.
pub struct Server {
    worker: Worker,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Server {
    /// Starts `launcher <workload>` and waits for its `ready <port>` line.
    pub fn start(launcher: &Launcher, workload: &str, limit: Duration) -> Result<Server, String> {
        let mut worker = Worker::start(launcher, workload, &[], limit)?;
        let line = worker.line();
        let port = line
            .strip_prefix("ready ")
            .and_then(|p| p.trim().parse().ok());
        match port {
            Some(port) => Ok(Server { worker, port }),
            None => {
                worker.terminate();
                let why = match worker.finish() {
                    Ok(e) => e.stderr,
                    Err(e) => e,
                };
                Err(format!(
                    "server did not say `ready <port>` (got {line:?}): {why}"
                ))
            }
        }
    }

    /// Stops the server; returns its peak RSS in KiB.
    pub fn stop(self) -> Result<u64, String> {
        let hwm = vm_hwm_kib(&self.worker.child.id().to_string());
        self.worker.terminate();
        let exit = self.worker.finish()?;
        Ok(hwm.unwrap_or(exit.max_rss_kib))
    }
}
