//! Child processes: the workers of every runtime, with their peak RSS and a
//! watchdog so that a stuck worker can never hang the suite — built on
//! [`weft_bench_support::child`], which says why peak RSS is `VmHWM`
//! (reported by the worker itself at the end of a run, or read by us just
//! before a server is stopped) and `wait4`'s `ru_maxrss` only the fallback.

use std::time::Duration;

pub use weft_bench_support::child::{Launcher, Worker, vm_hwm_kib};

/// Starts `launcher <workload> <args…>`.
fn start(
    launcher: &Launcher,
    workload: &str,
    args: &[u64],
    limit: Duration,
) -> Result<Worker, String> {
    let argv = std::iter::once(workload.to_string()).chain(args.iter().map(u64::to_string));
    Worker::start(launcher, argv, limit)
}

/// One measured run of a workload that prints its own result.
pub struct Measured {
    /// The worker's figure (unit per workload).
    pub value: f64,
    /// Peak RSS in KiB.
    pub rss_kib: u64,
    /// The `park` workload's second figure: ms until all threads are
    /// parked (`"parked_ms"`).
    pub parked_ms: Option<f64>,
}

/// Runs a result-printing workload to completion.
pub fn measure(
    launcher: &Launcher,
    workload: &str,
    args: &[u64],
    limit: Duration,
) -> Result<Measured, String> {
    let mut w = start(launcher, workload, args, limit)?;
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
    Ok(Measured {
        value,
        rss_kib,
        parked_ms: v["parked_ms"].as_f64(),
    })
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
        Server::start_with(launcher, workload, &[], limit)
    }

    /// Starts `launcher <workload> <args…>` (e.g. certificate paths) and
    /// waits for its `ready <port>` line.
    pub fn start_with(
        launcher: &Launcher,
        workload: &str,
        args: &[String],
        limit: Duration,
    ) -> Result<Server, String> {
        let argv = std::iter::once(workload.to_string()).chain(args.iter().cloned());
        let mut worker = Worker::start(launcher, argv, limit)?;
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

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.worker.id()
    }

    /// Stops the server; returns its peak RSS in KiB.
    pub fn stop(self) -> Result<u64, String> {
        let hwm = self.worker.vm_hwm_kib();
        self.worker.terminate();
        let exit = self.worker.finish()?;
        Ok(hwm.unwrap_or(exit.max_rss_kib))
    }
}

/// `VmRSS` + `VmPTE` of process `pid` (or `"self"`) in KiB, from one read of
/// `/proc/<pid>/status`: resident memory and the page tables that map it,
/// both of which a parked thread's or an idle connection's pages cost.
pub fn resident_kib(pid: &str) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("cannot read /proc/{pid}/status: {e}"))?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("no {key} in /proc/{pid}/status"))
    };
    Ok(field("VmRSS:")? + field("VmPTE:")?)
}
