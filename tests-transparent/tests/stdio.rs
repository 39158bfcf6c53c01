//! A socket on standard output (journald's stream socket under systemd)
//! is not managed: Weft does not make it non-blocking (other processes
//! share the file description) and a `println!` never parks while it holds
//! std's stdout lock, which is re-entrant per OS thread: a second virtual
//! thread of the same carrier would enter it ("already borrowed").
//!
//! The scenario runs in a child process (this test binary again, with an
//! environment variable set), so the harness's own stdout is not touched.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;

use weft_transparent_tests::{strict_runtime, watchdog};

const CHILD: &str = "WEFT_TEST_STDIO_CHILD";
const NAME: &str = "a_socket_on_stdout_is_not_managed";
/// 4 KiB lines written by thread A: far more than a Unix socket buffers.
const LINES: usize = 128;

#[test]
fn a_socket_on_stdout_is_not_managed() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let _dog = watchdog(NAME, Duration::from_secs(60));
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child: {:?} (signal {:?})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.status.signal(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One carrier; stdout is one end of a socket pair nobody reads for the
/// first 300 ms. A prints 4 KiB lines (it fills the socket and waits); B
/// sleeps 10 ms and prints one line. Neither may panic or deadlock (with
/// stdout managed, A parked holding std's stdout lock and B, on the same
/// carrier, then blocked the carrier on that lock or re-entered it), and
/// the kernel's `O_NONBLOCK` stays clear.
fn child() {
    // Before the fix the child deadlocked: B blocked the only carrier on
    // the stdout lock that A, parked in its write, held.
    let _dog = watchdog("the stdio child", Duration::from_secs(30));
    let rt = strict_runtime(1);
    let mut s = [0; 2];
    // SAFETY: socketpair into a two-element array; dup/dup2 of our own fds.
    let saved = unsafe {
        assert_eq!(
            libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, s.as_mut_ptr()),
            0
        );
        let saved = libc::dup(1);
        assert!(saved >= 0);
        assert_eq!(libc::dup2(s[0], 1), 1);
        saved
    };
    let peer = s[1];
    let drainer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0;
        while total < LINES * 4096 {
            // SAFETY: reading into our own buffer.
            let r = unsafe { libc::read(peer, buf.as_mut_ptr().cast(), buf.len()) };
            assert!(r > 0, "read from stdout's peer: {r}");
            total += r as usize;
        }
    });
    let a = rt.spawn(|| {
        let line = "a".repeat(4095);
        for _ in 0..LINES {
            println!("{line}");
        }
    });
    let b = rt.spawn(|| {
        std::thread::sleep(Duration::from_millis(10));
        println!("B");
    });
    let (ra, rb) = (a.join(), b.join());
    drainer.join().unwrap();
    // The kernel's flag, not the one the hooked fcntl shows.
    // SAFETY: F_GETFL on our own descriptor, a raw system call.
    let fl = unsafe { libc::syscall(libc::SYS_fcntl, 1, libc::F_GETFL) } as i32;
    // SAFETY: putting the harness's stdout back.
    unsafe { libc::dup2(saved, 1) };
    assert!(ra.is_ok(), "thread A panicked");
    assert!(rb.is_ok(), "thread B panicked (stdout lock re-entered)");
    assert_eq!(fl & libc::O_NONBLOCK, 0, "Weft made stdout non-blocking");
}
