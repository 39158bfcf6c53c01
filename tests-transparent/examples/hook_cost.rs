//! What a hooked call costs an OS thread: each call below made through
//! Weft's interposed definition (the one every caller in this binary
//! reaches, as `std` does) and through libc's own (found with
//! `dlsym(RTLD_NEXT, name)`, i.e. what the program would call without the
//! `transparent` feature), alternated batch by batch on one OS thread.
//! Prints the median ns per call of each and the difference (target: a
//! hooked call on an OS thread costs at most 20 ns more than libc's).
//!
//! `cargo run --release --example hook_cost -- [batches] [calls_per_batch]`
//! in `tests-transparent/` (defaults 41 and 20,000).
//!
//! The calls are cheap ones, so the hook's own work is a visible share:
//! `read` of an empty non-blocking pipe (`EAGAIN`), `write` of one byte to
//! `/dev/null`, `recv` on a non-blocking socket with nothing queued
//! (`EAGAIN`), `fcntl(F_GETFL)`, `poll` of one descriptor with a zero
//! timeout, and `close(-1)` (`EBADF`).

use std::ffi::CStr;
use std::hint::black_box;
use std::time::Instant;

use libc::{c_int, c_void, size_t, ssize_t};

type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
type RecvFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
type FcntlFn = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
type PollFn = unsafe extern "C" fn(*mut libc::pollfd, libc::nfds_t, c_int) -> c_int;
type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
type ClockFn = unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> c_int;
type GetrandomFn = unsafe extern "C" fn(*mut c_void, libc::size_t, libc::c_uint) -> libc::ssize_t;

/// libc's definition of `name`: the next one after this executable's.
/// A measured call: its name, the hooked form, libc's own.
type Row<'a> = (&'static str, Box<dyn Fn() + 'a>, Box<dyn Fn() + 'a>);

fn next<T: Copy>(name: &CStr) -> T {
    assert_eq!(size_of::<T>(), size_of::<*mut c_void>());
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT is valid from an executable.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    assert!(!p.is_null(), "dlsym({name:?}) found nothing");
    // SAFETY: `T` is a function pointer type of the symbol's C signature
    // (checked by the callers' types above) and pointer-sized (asserted).
    unsafe { std::mem::transmute_copy(&p) }
}

/// Median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One row: `hooked` and `libc` run `calls` times per batch, alternating,
/// `batches` batches each; returns (hooked ns/call, libc ns/call).
fn measure(batches: usize, calls: usize, hooked: &dyn Fn(), libc_own: &dyn Fn()) -> (f64, f64) {
    let (mut h, mut l) = (Vec::new(), Vec::new());
    for b in 0..batches {
        let time = |f: &dyn Fn()| {
            let t = Instant::now();
            for _ in 0..calls {
                f();
            }
            t.elapsed().as_nanos() as f64 / calls as f64
        };
        // Alternate which goes first so drift hits both alike.
        if b % 2 == 0 {
            h.push(time(hooked));
            l.push(time(libc_own));
        } else {
            l.push(time(libc_own));
            h.push(time(hooked));
        }
    }
    (median(&mut h), median(&mut l))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let batches: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(41);
    let calls: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    assert!(
        weft::transparent::is_enabled(),
        "the hooks are off (WEFT_TRANSPARENT=0?): nothing to compare"
    );

    let (mut p, mut sock) = ([0 as c_int; 2], [0 as c_int; 2]);
    // SAFETY: plain syscalls on arrays of the right length.
    let devnull = unsafe {
        assert_eq!(libc::pipe2(p.as_mut_ptr(), libc::O_NONBLOCK), 0);
        assert_eq!(
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK,
                0,
                sock.as_mut_ptr()
            ),
            0
        );
        libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY)
    };
    assert!(devnull >= 0);

    let libc_read: ReadFn = next(c"read");
    let libc_write: WriteFn = next(c"write");
    let libc_recv: RecvFn = next(c"recv");
    let libc_fcntl: FcntlFn = next(c"fcntl");
    let libc_poll: PollFn = next(c"poll");
    let libc_close: CloseFn = next(c"close");
    let libc_clock_gettime: ClockFn = next(c"clock_gettime");
    let libc_getrandom: GetrandomFn = next(c"getrandom");
    let ts = std::cell::UnsafeCell::new(libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    });
    let mut buf = [0u8; 16];
    let bp = buf.as_mut_ptr().cast::<c_void>();
    let pfd = std::cell::UnsafeCell::new(libc::pollfd {
        fd: p[0],
        events: libc::POLLIN,
        revents: 0,
    });

    // SAFETY (every closure below): valid descriptors or a deliberately bad
    // one (-1, which the kernel answers with EBADF), a 16-byte buffer for
    // lengths of at most 16, and a timespec (`ts`) only these closures use.
    let rows: Vec<Row> = vec![
        (
            "read, empty pipe (EAGAIN)",
            Box::new(|| {
                black_box(unsafe { libc::read(p[0], bp, 16) });
            }),
            Box::new(|| {
                black_box(unsafe { libc_read(p[0], bp, 16) });
            }),
        ),
        (
            "write 1 B to /dev/null",
            Box::new(|| {
                black_box(unsafe { libc::write(devnull, bp, 1) });
            }),
            Box::new(|| {
                black_box(unsafe { libc_write(devnull, bp, 1) });
            }),
        ),
        (
            "recv, empty socket (EAGAIN)",
            Box::new(|| {
                black_box(unsafe { libc::recv(sock[0], bp, 16, 0) });
            }),
            Box::new(|| {
                black_box(unsafe { libc_recv(sock[0], bp, 16, 0) });
            }),
        ),
        (
            "fcntl(F_GETFL)",
            Box::new(|| {
                black_box(unsafe { libc::fcntl(sock[0], libc::F_GETFL) });
            }),
            Box::new(|| {
                black_box(unsafe { libc_fcntl(sock[0], libc::F_GETFL) });
            }),
        ),
        (
            "poll 1 fd, timeout 0",
            Box::new(|| {
                black_box(unsafe { libc::poll(pfd.get(), 1, 0) });
            }),
            Box::new(|| {
                black_box(unsafe { libc_poll(pfd.get(), 1, 0) });
            }),
        ),
        (
            "clock_gettime(MONOTONIC)",
            Box::new(|| {
                black_box(unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, ts.get()) });
            }),
            Box::new(|| {
                black_box(unsafe { libc_clock_gettime(libc::CLOCK_MONOTONIC, ts.get()) });
            }),
        ),
        (
            "getrandom 16 B",
            Box::new(|| {
                black_box(unsafe { libc::getrandom(bp, 16, 0) });
            }),
            Box::new(|| {
                black_box(unsafe { libc_getrandom(bp, 16, 0) });
            }),
        ),
        (
            "close(-1) (EBADF)",
            Box::new(|| {
                black_box(unsafe { libc::close(-1) });
            }),
            Box::new(|| {
                black_box(unsafe { libc_close(-1) });
            }),
        ),
    ];

    println!(
        "hooked call vs libc's own, on an OS thread: median of {batches} batches of {calls} calls"
    );
    println!(
        "{:<30} {:>11} {:>11} {:>11}",
        "call", "hooked ns", "libc ns", "difference"
    );
    let mut worst = f64::MIN;
    for (name, hooked, own) in &rows {
        let (h, l) = measure(batches, calls, hooked.as_ref(), own.as_ref());
        worst = worst.max(h - l);
        println!("{name:<30} {h:>11.1} {l:>11.1} {:>+11.1}", h - l);
    }
    println!("largest difference: {worst:+.1} ns (target: at most +20 ns)");
}
