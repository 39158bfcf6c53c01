//! `getaddrinfo` on a virtual thread runs on Weft's offload pool; when it
//! fails with `EAI_SYSTEM` the reason is in `errno` — the offload
//! thread's. It used to be lost: the caller saw whatever its own `errno`
//! held. Now the offload thread's `errno` is the caller's after every
//! call, as if it had run on the caller's thread. Provoked here by
//! running out of descriptors (the resolver cannot open its files: glibc
//! answers `EAI_NONAME` with `errno` `EMFILE` for this name; the errno
//! was lost the same way).
//!
//! Its own test binary: it lowers the process's descriptor limit.

use std::time::Duration;

use weft_transparent_tests::{strict_runtime, watchdog};

/// `getaddrinfo(name)` and the `errno` it left (set to a marker first).
fn resolve(name: &std::ffi::CStr) -> (i32, i32) {
    let mut res: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: errno is this thread's; getaddrinfo with a valid name, no
    // service or hints, into a local; the result is freed.
    unsafe {
        *libc::__errno_location() = 4242;
        let r = libc::getaddrinfo(name.as_ptr(), std::ptr::null(), std::ptr::null(), &mut res);
        let e = *libc::__errno_location();
        if r == 0 {
            libc::freeaddrinfo(res);
        }
        (r, e)
    }
}

#[test]
fn eai_system_keeps_the_resolvers_errno() {
    let _w = watchdog(
        "eai_system_keeps_the_resolvers_errno",
        Duration::from_secs(60),
    );
    let rt = strict_runtime(1);
    // Start the offload pool's thread while descriptors are to be had.
    rt.spawn(|| weft::blocking(|| ())).join().unwrap();
    let name = c"weft-no-such-host.invalid";
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid struct: no new descriptor
    // can be opened from here on (until restored).
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        let low = libc::rlimit {
            rlim_cur: 3,
            rlim_max: lim.rlim_max,
        };
        libc::setrlimit(libc::RLIMIT_NOFILE, &low);
    }
    let on_os = resolve(name);
    let on_virtual = rt.spawn(move || resolve(name)).join().unwrap();
    // SAFETY: as above: restores the limit.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    eprintln!("OS thread: {on_os:?}, virtual thread: {on_virtual:?}");
    assert_eq!(on_virtual.0, on_os.0, "same result");
    assert_ne!(on_os.1, 4242, "the resolver set errno");
    assert_eq!(on_virtual.1, on_os.1, "the resolver's errno");
}
