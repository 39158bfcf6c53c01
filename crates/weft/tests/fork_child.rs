//! A `fork` child of a process that runs Weft: the runtimes it inherits
//! lost their carriers, so spawning on one is an error that says so, while
//! the default runtime, the offload pool and the report writer start
//! afresh in the child. Before, the child's first `weft::spawn(..).join()`
//! waited for ever.
//!
//! Its own test binary with one test: the child is forked from a process
//! whose other threads are Weft's own, idle, so none holds a lock of
//! Weft's at the fork (a test running beside it could).

use std::sync::atomic::{AtomicBool, Ordering};

mod common;
use std::time::{Duration, Instant};

/// What the child checks, each failure with its own exit code.
fn child(inherited: &weft::Runtime, inherited_socket: weft::net::TcpListener) -> i32 {
    // The default runtime, built afresh here.
    match weft::spawn(|| 40 + 2).join() {
        Ok(42) => {}
        _ => return 10,
    }
    // A runtime of the parent's: an error naming the fork, not a hang.
    match weft::Builder::new().spawn_on(inherited, || ()) {
        Err(e) if e.to_string().contains("fork") => {}
        Err(_) => return 11,
        Ok(_) => return 12,
    }
    // The offload pool, from a virtual thread of the child's runtime.
    match weft::spawn(|| weft::blocking(|| 7)).join() {
        Ok(7) => {}
        _ => return 13,
    }
    // Sockets: the child's own readiness source (its copy of the parent's
    // epoll set is the parent's set: the parent, waiting on it meanwhile,
    // would take the child's events and read the child's tokens).
    let echoed = weft::spawn(|| -> std::io::Result<Vec<u8>> {
        use std::io::{Read, Write};
        let listener = weft::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = weft::spawn(move || -> std::io::Result<()> {
            let (mut s, _) = listener.accept()?;
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf)?;
            s.write_all(&buf)
        });
        let mut c = weft::net::TcpStream::connect(addr)?;
        c.write_all(b"child")?;
        let mut back = vec![0u8; 5];
        c.read_exact(&mut back)?;
        server
            .join()
            .map_err(|_| std::io::Error::other("server panicked"))??;
        Ok(back)
    })
    .join();
    match echoed {
        Ok(Ok(b)) if b == b"child" => {}
        _ => return 15,
    }
    // A socket of the parent's, dropped here, is not counted off this
    // copy's readiness source (nor deleted from it: it was never in it).
    drop(inherited_socket);
    if weft::metrics::snapshot().sockets_registered != 0 {
        return 16;
    }
    // The report writer: a stall in the child is written up. A virtual
    // thread holds its carrier until this thread has seen its stall on
    // record (or a minute has passed: then the writer never ran).
    static RELEASE: AtomicBool = AtomicBool::new(false);
    let held = weft::spawn(|| {
        while !RELEASE.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
    });
    let id = held.thread().id().as_u64().get();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = false;
    while !seen && Instant::now() < deadline {
        seen = stall_recorded(id, false);
        std::thread::sleep(Duration::from_millis(5));
    }
    RELEASE.store(true, Ordering::Release);
    if held.join().is_err() || !seen {
        return 14;
    }
    0
}

/// Whether a stall of thread `id` is on record (and, with `ended`, its
/// end too).
fn stall_recorded(id: u64, ended: bool) -> bool {
    weft::events::recent().iter().any(|e| {
        e.thread_id == id
            && matches!(
                e.kind,
                weft::events::EventKind::StallCpu | weft::events::EventKind::StallBlocked
            )
            && !(ended && e.ongoing)
    })
}

#[test]
fn a_fork_child_gets_runtimes_of_its_own() {
    // The parent runs Weft: the default runtime, a runtime of its own, a
    // report writer (a stall), an offload thread.
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .build()
        .expect("build");
    // A socket of Weft's made before the fork (the child drops its copy).
    let inherited_socket = weft::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    assert_eq!(rt.spawn(|| 1).join().unwrap(), 1);
    assert_eq!(
        weft::spawn(|| weft::blocking(|| 2)).join().unwrap(),
        2,
        "offload in the parent"
    );
    let stalled = weft::spawn(|| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(60) {
            std::hint::spin_loop();
        }
    });
    let stalled_id = stalled.thread().id().as_u64().get();
    stalled.join().unwrap();
    // Fork once the writer has written the stall and its end up: a fork
    // while it resolves symbols would leave the symbolizer's lock held in
    // the child, and the child's reports unwritten (`fork.rs`).
    common::wait_until(
        "the parent's stall written up and ended",
        Duration::from_secs(60),
        || stall_recorded(stalled_id, true),
    );

    // SAFETY: the child calls only what `child` does, then `_exit`s: no
    // destructor or atexit handler of the parent's runs twice.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            child(&rt, inherited_socket)
        }))
        .unwrap_or(20);
        // SAFETY: ends the child at once, as a fork child should.
        unsafe { libc::_exit(code) };
    }

    // A thread of the parent waits on a socket of its own while the child
    // runs: its carriers wait on the parent's readiness set. Made after
    // the fork, so that the child cannot inherit a lock this work holds
    // (the poller's start, a carrier's stack cache refill).
    let parent_listener = weft::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let parent_addr = parent_listener.local_addr().unwrap();
    let parent_waiter = weft::spawn(move || -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        let (mut s, _) = parent_listener.accept()?;
        let mut got = Vec::new();
        s.read_to_end(&mut got)?;
        Ok(got)
    });

    // Wait for the child, and never for ever: a hung child is a failure.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child without blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        assert_eq!(r, 0, "waitpid: {}", std::io::Error::last_os_error());
        if Instant::now() > deadline {
            // SAFETY: kills and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            panic!("the fork child hung (it was killed after 120 s)");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        libc::WIFEXITED(status),
        "child ended by a signal: {status:#x}"
    );
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "child failed a check (10: default runtime, 11/12: inherited runtime's spawn, \
         13: offload, 14: report writer, 15: sockets, 16: an inherited socket counted off, \
         20: panic)"
    );
    // The parent's runtimes still run, and its socket still wakes it.
    assert_eq!(rt.spawn(|| 3).join().unwrap(), 3);
    assert_eq!(weft::spawn(|| 4).join().unwrap(), 4);
    {
        use std::io::Write;
        let mut c = std::net::TcpStream::connect(parent_addr).expect("connect");
        c.write_all(b"parent").unwrap();
    }
    assert_eq!(parent_waiter.join().unwrap().unwrap(), b"parent");
}
