//! A socket a virtual thread used, handed to a child as its standard
//! input (inetd, socket activation: accept, read a preface, give the
//! connection to a program): the child gets the blocking mode the program
//! set, not the `O_NONBLOCK` Weft set for itself, whether `Command` spawns
//! with `posix_spawn` (a file action) or with `fork` and `dup2`. The
//! parent's own calls on the socket, whose file description the child now
//! shares blocking, still park instead of blocking their carrier.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use weft_transparent_tests::{strict_runtime, watchdog};

/// The `flags:` of the child's descriptor 0, as the kernel shows them.
fn child_stdin_flags(stdin: OwnedFd, fork: bool) -> i32 {
    let mut cmd = Command::new("cat");
    cmd.arg("/proc/self/fdinfo/0")
        .stdin(Stdio::from(stdin))
        .stderr(Stdio::inherit());
    if fork {
        // A `pre_exec` closure makes std fork and `dup2` in the child
        // instead of using `posix_spawn`.
        // SAFETY: the closure does nothing.
        unsafe { cmd.pre_exec(|| Ok(())) };
    }
    let out = cmd.output().expect("run cat");
    assert!(out.status.success(), "cat failed: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let flags = text
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .unwrap_or_else(|| panic!("no flags in {text:?}"));
    i32::from_str_radix(flags.trim(), 8).unwrap()
}

fn handed_over(fork: bool) {
    let _dog = watchdog("handover", Duration::from_secs(60));
    let (mut ours, mut peer) = UnixStream::pair().unwrap();
    peer.write_all(b"hello\n").unwrap();
    let rt = strict_runtime(1);
    let server = rt.spawn(move || {
        // The preface, read on a virtual thread: Weft now manages the
        // socket (non-blocking in the kernel, blocking to the program).
        let mut preface = [0u8; 6];
        ours.read_exact(&mut preface).unwrap();
        assert_eq!(&preface, b"hello\n");
        let flags = child_stdin_flags(ours.try_clone().unwrap().into(), fork);
        // Still the program's own socket: a read with nothing to read
        // parks. The writer runs on the same and only carrier, so only
        // once this thread parked (a carrier blocked in the kernel here
        // would never run it: the watchdog fails the test). It writes once
        // the reader is parked on its socket: on its way there the reader
        // may first park on a lock another test's threads hold (Weft's
        // global ones, a futex wait), and the writer then yields to it.
        let me = weft::current();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&ours);
        let writer = weft::spawn(move || {
            loop {
                match me.blocker() {
                    weft::Blocker::Call { fd: f, .. } if f == fd => break,
                    weft::Blocker::Call { call: "futex", .. } => weft::yield_now(),
                    b => panic!("the reader is not parked on its socket: {b:?}"),
                }
            }
            peer.write_all(b"world").unwrap();
            peer
        });
        let mut rest = [0u8; 5];
        ours.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"world");
        drop(writer.join().unwrap());
        flags
    });
    let flags = server.join().unwrap();
    assert_eq!(
        flags & libc::O_NONBLOCK,
        0,
        "the child's stdin is non-blocking (flags {flags:o})"
    );
}

#[test]
fn a_socket_given_to_a_posix_spawned_child_is_blocking_there() {
    handed_over(false);
}

#[test]
fn a_socket_dup2ed_onto_stdin_in_a_fork_child_is_blocking_there() {
    handed_over(true);
}
