//! `fork` while carriers use the hooks' descriptor map: std's child calls
//! `dup2` between `fork` and `exec` (piped stdio with `pre_exec`); if the
//! child took the map's lock, which another carrier of the parent may have
//! held at the fork, it would never exec and `Command::output` would hang.
//!
//! Its own test binary: it forks hundreds of times while eight virtual
//! threads open and close sockets as fast as they can.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use weft_transparent_tests::{strict_runtime, watchdog};

/// Forks made while the connectors run.
const FORKS: usize = 300;

#[test]
fn command_with_pre_exec_while_virtual_threads_connect_and_close() {
    let _dog = watchdog(
        "command_with_pre_exec_while_virtual_threads_connect_and_close",
        Duration::from_secs(120),
    );
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: listen on our own listening socket (a deep backlog).
    unsafe { libc::listen(l.as_raw_fd(), 4096) };
    let addr = l.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let acceptor = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            l.set_nonblocking(true).unwrap();
            while !stop.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => drop(s),
                    Err(_) => std::thread::sleep(Duration::from_micros(200)),
                }
            }
        })
    };
    let rt = strict_runtime(2);
    let rounds = Arc::new(AtomicUsize::new(0));
    let connectors: Vec<_> = (0..8)
        .map(|_| {
            let (stop, rounds) = (stop.clone(), rounds.clone());
            rt.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(mut c) = TcpStream::connect(addr) {
                        let _ = c.write_all(b"x");
                    }
                    rounds.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    while rounds.load(Ordering::Relaxed) == 0 {
        std::thread::yield_now();
    }
    for _ in 0..FORKS {
        let mut cmd = Command::new("true");
        cmd.stdout(Stdio::piped());
        // SAFETY: the closure does nothing (it only makes std fork).
        unsafe { cmd.pre_exec(|| Ok(())) };
        let out = cmd.output().expect("spawn true");
        assert!(out.status.success());
    }
    stop.store(true, Ordering::Relaxed);
    for c in connectors {
        c.join().unwrap();
    }
    acceptor.join().unwrap();
    assert!(rounds.load(Ordering::Relaxed) > 0);
}
