//! Weft's per-descriptor view stays true to the kernel's descriptor table:
//! a failed `dup2`/`dup3` changes nothing, and errno survives a hooked
//! sleep. Its own test binary, its tests one at a time: they watch
//! descriptor numbers, which any other test running beside them could take.

use std::time::Duration;
use weft_transparent_tests::{one_at_a_time, parked_in, socketpair, strict_runtime, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

fn errno() -> Option<i32> {
    std::io::Error::last_os_error().raw_os_error()
}

/// Parks the caller's loop until `h` is parked in `call` or finished.
/// A socket Weft manages (a virtual thread read it) is the target of a
/// `dup2` that fails (bad source) and a `dup3` that fails (bad flags). Its
/// next read on a virtual thread still parks until data comes, as a
/// blocking socket's does (a forgotten socket read back as one the program
/// made non-blocking, and the read failed with `EAGAIN`).
#[test]
fn a_failed_dup2_or_dup3_leaves_the_target_alone() {
    let _one = one_at_a_time();
    let _dog = watchdog("a_failed_dup2_or_dup3_leaves_the_target_alone", LIMIT);
    let rt = strict_runtime(1);
    let sv = socketpair();
    let fd = sv[0];
    // SAFETY: writing one byte to our own socket.
    assert_eq!(unsafe { libc::write(sv[1], [1u8].as_ptr().cast(), 1) }, 1);
    let first = rt
        .spawn(move || {
            let mut b = [0u8; 1];
            // SAFETY: reading into a local buffer.
            unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) }
        })
        .join()
        .unwrap();
    assert_eq!(first, 1);
    // SAFETY: dup2/dup3 calls that fail (a closed source; unknown flags).
    let (d2, e2, d3, e3) = unsafe {
        let d2 = libc::dup2(1 << 19, fd);
        let e2 = errno();
        let d3 = libc::dup3(sv[1], fd, 0x4000_0000);
        (d2, e2, d3, errno())
    };
    assert_eq!((d2, e2), (-1, Some(libc::EBADF)));
    assert_eq!((d3, e3), (-1, Some(libc::EINVAL)));
    let reader = rt.spawn(move || {
        let mut b = [0u8; 1];
        // SAFETY: reading into a local buffer.
        let r = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) };
        (r, errno(), b[0])
    });
    parked_in(&reader, "read");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::write(sv[1], [2u8].as_ptr().cast(), 1) }, 1);
    let (r, e, b) = reader.join().unwrap();
    assert_eq!((r, b), (1, 2), "read failed: errno {e:?}");
    // SAFETY: closing our own descriptors.
    unsafe {
        libc::close(sv[0]);
        libc::close(sv[1]);
    }
}

/// `errno` is the program's across a hooked sleep: set before, read after
/// (sleeps on several virtual threads of one carrier, so the carrier waits
/// in the kernel between them).
#[test]
fn errno_survives_a_sleep_on_a_virtual_thread() {
    let _one = one_at_a_time();
    let _dog = watchdog("errno_survives_a_sleep_on_a_virtual_thread", LIMIT);
    let rt = strict_runtime(1);
    let hs: Vec<_> = (0..8)
        .map(|i| {
            rt.spawn(move || {
                let mut seen = Vec::new();
                for k in 0..20 {
                    let want = 1000 + i * 100 + k;
                    // SAFETY: this OS thread's errno slot.
                    unsafe { *libc::__errno_location() = want };
                    std::thread::sleep(Duration::from_micros(300));
                    // SAFETY: as above.
                    seen.push((want, unsafe { *libc::__errno_location() }));
                }
                seen
            })
        })
        .collect();
    for h in hs {
        for (want, got) in h.join().unwrap() {
            assert_eq!(got, want, "errno changed across a sleep");
        }
    }
}
