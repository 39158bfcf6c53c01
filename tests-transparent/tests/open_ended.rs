//! Open-ended waits do not hold an OS thread: more virtual threads than
//! the offload pool has threads (512) wait at once in a pipe `read`, a
//! `poll` on several descriptors, a `select`, a sleep written as `poll`,
//! and `waitpid`, and what they wait for comes from virtual threads started
//! after all of them are parked. When each wait held an offload thread,
//! the 513th and later waits, and then every pipe write (which queued
//! behind them), never ran: the test hung (its watchdog aborts it).
//!
//! Its own test binary, its tests one at a time: each needs the whole
//! offload pool.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;
use weft_transparent_tests::{one_at_a_time, raise_fd_limit, strict_runtime, watchdog};

/// More waits than `weft::offload`'s default bound of 512 threads.
const N: usize = 600;
const LIMIT: Duration = Duration::from_secs(120);

/// Waits (yielding) until every thread is parked in `call`.
fn all_parked_in(ts: &[weft::Thread], call: &str) {
    for t in ts {
        while !matches!(t.blocker(), weft::Blocker::Call { call: c, .. } if c == call) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[test]
fn six_hundred_pipe_readers_wait_at_once() {
    let _one = one_at_a_time();
    let _dog = watchdog("six_hundred_pipe_readers_wait_at_once", LIMIT);
    raise_fd_limit(8192);
    let rt = strict_runtime(1);
    let (readers, writers): (Vec<_>, Vec<_>) = (0..N).map(|_| std::io::pipe().unwrap()).unzip();
    let readers: Vec<_> = readers
        .into_iter()
        .map(|mut r| {
            rt.spawn(move || {
                let mut b = [0u8; 1];
                assert_eq!(r.read(&mut b).unwrap(), 1);
                b[0]
            })
        })
        .collect();
    let ts: Vec<_> = readers.iter().map(|h| h.thread().clone()).collect();
    all_parked_in(&ts, "read");
    let writers: Vec<_> = writers
        .into_iter()
        .map(|mut w| rt.spawn(move || w.write_all(&[7]).unwrap()))
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for r in readers {
        assert_eq!(r.join().unwrap(), 7);
    }
}

#[test]
fn six_hundred_polls_on_two_pipes_wait_at_once() {
    let _one = one_at_a_time();
    let _dog = watchdog("six_hundred_polls_on_two_pipes_wait_at_once", LIMIT);
    raise_fd_limit(8192);
    let rt = strict_runtime(1);
    let mut pollers = Vec::new();
    let mut writers = Vec::new();
    for _ in 0..N {
        let (r1, w1) = std::io::pipe().unwrap();
        let (r2, w2) = std::io::pipe().unwrap();
        pollers.push(rt.spawn(move || {
            let mut p = [
                libc::pollfd {
                    fd: r1.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: r2.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds.
            let r = unsafe { libc::poll(p.as_mut_ptr(), 2, -1) };
            (r, p[0].revents, p[1].revents)
        }));
        writers.push((w1, w2));
    }
    let ts: Vec<_> = pollers.iter().map(|h| h.thread().clone()).collect();
    all_parked_in(&ts, "poll");
    let writers: Vec<_> = writers
        .into_iter()
        .map(|(w1, mut w2)| {
            rt.spawn(move || {
                w2.write_all(&[1]).unwrap();
                (w1, w2) // kept open: an end of file would wake the poll too
            })
        })
        .collect();
    let open: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    for p in pollers {
        assert_eq!(p.join().unwrap(), (1, 0, libc::POLLIN));
    }
    drop(open);
}

#[test]
fn six_hundred_selects_wait_at_once() {
    let _one = one_at_a_time();
    let _dog = watchdog("six_hundred_selects_wait_at_once", LIMIT);
    raise_fd_limit(8192);
    let rt = strict_runtime(1);
    // select cannot watch descriptors at or above FD_SETSIZE (1024): the
    // write ends move above it, the read ends stay low. Every pipe is made
    // before any selector starts: a parked `select` holds a descriptor of
    // its own (a temporary epoll set), which would otherwise take low
    // numbers the later read ends need.
    let mut readers = Vec::new();
    let mut writers = Vec::new();
    for _ in 0..N {
        let (r, w) = std::io::pipe().unwrap();
        // SAFETY: duplicating our own descriptor; the copy is owned once.
        let w: std::io::PipeWriter = unsafe {
            use std::os::fd::FromRawFd;
            let high = libc::fcntl(w.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 2048);
            assert!(high >= 0);
            std::os::fd::OwnedFd::from_raw_fd(high).into()
        };
        let fd = r.as_raw_fd();
        assert!(fd < libc::FD_SETSIZE as i32, "descriptor {fd} too high");
        readers.push(r);
        writers.push(w);
    }
    let selectors: Vec<_> = readers
        .into_iter()
        .map(|r| {
            rt.spawn(move || {
                // SAFETY: an fd_set on our stack, a descriptor below FD_SETSIZE.
                unsafe {
                    let mut set: libc::fd_set = std::mem::zeroed();
                    libc::FD_SET(r.as_raw_fd(), &mut set);
                    let n = libc::select(
                        r.as_raw_fd() + 1,
                        &mut set,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    );
                    (n, libc::FD_ISSET(r.as_raw_fd(), &set))
                }
            })
        })
        .collect();
    let ts: Vec<_> = selectors.iter().map(|h| h.thread().clone()).collect();
    all_parked_in(&ts, "select");
    let writers: Vec<_> = writers
        .into_iter()
        .map(|mut w| rt.spawn(move || w.write_all(&[1]).unwrap()))
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for s in selectors {
        assert_eq!(s.join().unwrap(), (1, true));
    }
}

/// `poll(NULL, 0, -1)` (sleep until a signal) is a sleep: it parks, and an
/// interrupt ends it with `EINTR`, like a signal would. (On the offload
/// pool it could not be interrupted at all.)
#[test]
fn six_hundred_polls_without_descriptors_are_sleeps() {
    let _one = one_at_a_time();
    let _dog = watchdog("six_hundred_polls_without_descriptors_are_sleeps", LIMIT);
    let rt = strict_runtime(1);
    let sleepers: Vec<_> = (0..N)
        .map(|_| {
            rt.spawn(|| {
                // SAFETY: no descriptors.
                let r = unsafe { libc::poll(std::ptr::null_mut(), 0, -1) };
                (r, std::io::Error::last_os_error().raw_os_error())
            })
        })
        .collect();
    let ts: Vec<_> = sleepers.iter().map(|h| h.thread().clone()).collect();
    all_parked_in(&ts, "poll");
    for t in &ts {
        t.interrupt();
    }
    for s in sleepers {
        assert_eq!(s.join().unwrap(), (-1, Some(libc::EINTR)));
    }
}

/// `Child::wait` for children that exit once a virtual thread started
/// after all the waits writes to their stdin.
#[test]
fn six_hundred_child_waits_at_once() {
    let _one = one_at_a_time();
    let _dog = watchdog("six_hundred_child_waits_at_once", LIMIT);
    raise_fd_limit(8192);
    let rt = strict_runtime(1);
    let mut waiters = Vec::new();
    let mut inputs = Vec::new();
    for _ in 0..N {
        let mut child = std::process::Command::new("head")
            .args(["-c", "1"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn head");
        inputs.push(child.stdin.take().unwrap());
        waiters.push(rt.spawn(move || child.wait().unwrap().success()));
    }
    let ts: Vec<_> = waiters.iter().map(|h| h.thread().clone()).collect();
    all_parked_in(&ts, "waitpid");
    let writers: Vec<_> = inputs
        .into_iter()
        .map(|mut i| rt.spawn(move || i.write_all(b"x").unwrap()))
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for w in waiters {
        assert!(w.join().unwrap());
    }
}
