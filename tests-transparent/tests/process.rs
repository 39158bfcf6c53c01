//! `std::process` on virtual threads: reading a child's pipes and waiting
//! for a child park the virtual thread (the call runs on the offload
//! pool), so other virtual threads of the same carrier keep running.
//!
//! Each test runs its virtual threads on ONE carrier with no spares. If a
//! hooked call held the carrier, the thread that would unblock it could
//! never run: the test would deadlock. The main OS thread therefore waits
//! for the outcome with a generous limit and fails with a clear message
//! instead of hanging CI (a deadlock detector, not a speed assertion).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use weft_transparent_tests::strict_runtime;

/// Generous: the work takes milliseconds; only a deadlock reaches it.
const DEADLOCK: Duration = Duration::from_secs(60);

fn outcome<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(DEADLOCK)
        .expect("deadlock: a hooked call held the only carrier")
}

/// Parks the caller until `t` is parked in `call` (yielding the carrier
/// in between, so `t` can get there).
fn wait_parked_in(t: &weft::Thread, call: &str) {
    loop {
        if let weft::Blocker::Call { call: c, .. } = t.blocker()
            && c == call
        {
            return;
        }
        weft::yield_now();
    }
}

/// A virtual thread blocked reading a child's stdout does not hold the
/// carrier: a second thread of that carrier writes the child's input.
#[test]
fn reading_a_childs_stdout_parks_the_reader() {
    let (line, blocker) = outcome(|| {
        let rt = strict_runtime(1);
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("cat");
        let out = child.stdout.take().unwrap();
        let fd = out.as_raw_fd();
        let mut input = child.stdin.take().unwrap();
        let reader = rt.spawn(move || {
            let mut line = String::new();
            BufReader::new(out).read_line(&mut line).unwrap();
            line
        });
        let rt_reader = reader.thread().clone();
        let writer = rt.spawn(move || {
            wait_parked_in(&rt_reader, "read");
            let b = rt_reader.blocker();
            input.write_all(b"through the pipe\n").unwrap();
            drop(input); // cat sees end of input and exits
            b
        });
        let blocker = writer.join().unwrap();
        let line = reader.join().unwrap();
        assert!(child.wait().unwrap().success());
        assert_eq!(blocker, weft::Blocker::Call { call: "read", fd });
        (line, blocker)
    });
    assert_eq!(line, "through the pipe\n");
    assert!(matches!(blocker, weft::Blocker::Call { call: "read", .. }));
    let prom = weft::metrics::prometheus();
    assert!(
        prom.contains("weft_transparent_parks_total{call=\"read\"}"),
        "{prom}"
    );
    let parks = weft::transparent::parks();
    assert!(
        parks.iter().any(|&(c, n)| c == "read" && n > 0),
        "{parks:?}"
    );
}

/// `Child::wait` parks the waiting virtual thread: a second thread of the
/// same carrier closes the child's stdin, which is what lets it exit.
#[test]
fn waiting_for_a_child_parks_the_waiter() {
    let (status, blocker) = outcome(|| {
        let rt = strict_runtime(1);
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("cat");
        let input = child.stdin.take().unwrap();
        let waiter = rt.spawn(move || child.wait().unwrap());
        let w = waiter.thread().clone();
        let closer = rt.spawn(move || {
            wait_parked_in(&w, "waitpid");
            let b = w.blocker();
            drop(input);
            b
        });
        let blocker = closer.join().unwrap();
        (waiter.join().unwrap(), blocker)
    });
    assert!(status.success());
    assert_eq!(
        blocker,
        weft::Blocker::Call {
            call: "waitpid",
            fd: -1
        }
    );
}

/// `Command::output` (two pipes read together, then a wait) returns the
/// child's output on a virtual thread, as on an OS thread.
#[test]
fn command_output_on_a_virtual_thread() {
    let out = outcome(|| {
        let rt = strict_runtime(1);
        rt.spawn(|| {
            Command::new("sh")
                .args(["-c", "echo out; echo err >&2; exit 3"])
                .output()
                .unwrap()
        })
        .join()
        .unwrap()
    });
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.status.code(), Some(3));
}

/// A pipe the program made non-blocking still answers `EAGAIN` on a
/// virtual thread, and end of file reads as 0.
#[test]
fn a_non_blocking_pipe_keeps_eagain() {
    let (first, errno, eof) = outcome(|| {
        let rt = strict_runtime(1);
        rt.spawn(|| {
            let mut fds = [0; 2];
            // SAFETY: a valid two-element array for pipe2.
            assert_eq!(
                unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
                0
            );
            let mut b = [0u8; 4];
            // SAFETY: b is a writable 4-byte buffer.
            let first = unsafe { libc::read(fds[0], b.as_mut_ptr().cast(), 4) };
            let errno = std::io::Error::last_os_error().raw_os_error();
            // SAFETY: closing our own write end.
            unsafe { libc::close(fds[1]) };
            // SAFETY: as above.
            let eof = unsafe { libc::read(fds[0], b.as_mut_ptr().cast(), 4) };
            // SAFETY: closing our own read end.
            unsafe { libc::close(fds[0]) };
            (first, errno, eof)
        })
        .join()
        .unwrap()
    });
    assert_eq!(first, -1);
    assert_eq!(errno, Some(libc::EAGAIN));
    assert_eq!(eof, 0);
}

/// A blocking pipe between two virtual threads of one carrier: the reader
/// parks, the writer runs, the reader gets every byte (a write larger than
/// the pipe's buffer included).
#[test]
fn a_pipe_between_two_virtual_threads_of_one_carrier() {
    let total = outcome(|| {
        let rt = strict_runtime(1);
        let mut fds = [0; 2];
        // SAFETY: a valid two-element array for pipe.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fresh descriptors we own, each wrapped once.
        let (mut r, mut w) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        };
        let reader = rt.spawn(move || {
            let mut all = Vec::new();
            r.read_to_end(&mut all).unwrap();
            all
        });
        let writer = rt.spawn(move || {
            let data = vec![7u8; 1 << 20];
            w.write_all(&data).unwrap();
        });
        writer.join().unwrap();
        let all = reader.join().unwrap();
        assert!(all.iter().all(|&b| b == 7));
        all.len()
    });
    assert_eq!(total, 1 << 20);
}
