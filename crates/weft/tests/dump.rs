//! Thread dumps: states, blockers, lock owners, stacks, deadlocks, SIGQUIT.

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft::sync::{CountDownLatch, Mutex};
use weft::{Blocker, State, Thread};

fn wait_state(t: &Thread, s: State) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while t.state() != s {
        assert!(Instant::now() < deadline, "{t:?} never reached {s:?}");
        std::thread::yield_now();
    }
}

#[inline(never)]
fn dump_test_sleeper_fn() {
    // black_box: not a tail call, so this frame is on the stack in every build.
    let _ = std::hint::black_box(weft::sleep(Duration::from_secs(60)));
}

#[inline(never)]
fn dump_test_locker_fn(m: &Mutex<u32>) {
    let g = m.lock().unwrap();
    drop(g);
}

#[test]
fn dump_shows_states_blockers_owners_and_stacks() {
    // A sleeper.
    let sleeper = weft::Builder::new()
        .name("sleeper")
        .spawn(dump_test_sleeper_fn)
        .unwrap();
    // A mutex held by one thread, awaited by another.
    let m = Arc::new(Mutex::new(0u32));
    let held = Arc::new(CountDownLatch::new(1));
    let release = Arc::new(CountDownLatch::new(1));
    let (m1, h1, r1) = (m.clone(), held.clone(), release.clone());
    let holder = weft::Builder::new()
        .name("holder")
        .spawn(move || {
            let _g = m1.lock().unwrap();
            h1.count_down();
            r1.wait().unwrap();
        })
        .unwrap();
    held.wait().unwrap();
    let m2 = m.clone();
    let waiter = weft::Builder::new()
        .name("waiter")
        .spawn(move || dump_test_locker_fn(&m2))
        .unwrap();
    // A socket reader.
    let listener = weft::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = weft::Builder::new()
        .name("reader")
        .spawn(move || {
            let mut s = weft::net::TcpStream::connect(addr).unwrap();
            let mut b = [0u8; 1];
            let _ = s.read(&mut b);
        })
        .unwrap();
    let (_peer, _) = listener.accept().unwrap();
    // A joiner.
    let st = sleeper.thread().clone();
    let joiner = weft::Builder::new()
        .name("joiner")
        .spawn(move || sleeper.join().unwrap())
        .unwrap();

    for t in [
        &st,
        holder.thread(),
        waiter.thread(),
        reader.thread(),
        joiner.thread(),
    ] {
        wait_state(t, State::Parked);
    }
    let d = weft::dump();

    let s = d.thread(st.id()).expect("sleeper listed");
    assert_eq!(s.name.as_deref(), Some("sleeper"));
    assert_eq!(s.state, State::Parked);
    assert!(matches!(s.blocker, Blocker::Sleep(_)), "{:?}", s.blocker);
    assert!(
        s.stack
            .iter()
            .any(|f| f.function.contains("dump_test_sleeper_fn")),
        "sleeper stack does not name its function: {:#?}",
        s.stack
    );

    let w = d.thread(waiter.thread().id()).unwrap();
    match w.blocker {
        Blocker::Lock { owner, .. } => {
            assert_eq!(owner, Some(holder.thread().id().as_u64().get()))
        }
        ref b => panic!("waiter blocker {b:?}"),
    }
    assert!(
        w.stack
            .iter()
            .any(|f| f.function.contains("dump_test_locker_fn")),
        "waiter stack: {:#?}",
        w.stack
    );
    let h = d.thread(holder.thread().id()).unwrap();
    assert_eq!(h.owns.len(), 1, "holder owns the mutex");

    let r = d.thread(reader.thread().id()).unwrap();
    assert!(
        matches!(r.blocker, Blocker::Io { read: true, .. }),
        "{:?}",
        r.blocker
    );
    let j = d.thread(joiner.thread().id()).unwrap();
    assert_eq!(j.blocker, Blocker::Join(st.id().as_u64().get()));
    assert!(d.deadlocks.is_empty());

    let text = d.to_string();
    for name in ["sleeper", "holder", "waiter", "reader", "joiner"] {
        assert!(
            text.contains(&format!("\"{name}\"")),
            "text dump lacks {name}:\n{text}"
        );
    }
    assert!(text.contains("owned by #"), "{text}");
    let json = d.to_json();
    assert!(json.starts_with("{\"threadDump\":{\"processId\":"));
    assert!(json.contains("\"name\":\"waiter\""));

    // The dump borrowed parked threads; they must still work.
    release.count_down();
    holder.join().unwrap();
    waiter.join().unwrap();
    drop(_peer);
    reader.join().unwrap();
    st.interrupt();
    joiner.join().unwrap();
}

#[test]
fn two_lock_deadlock_is_reported_as_a_cycle() {
    let a = Arc::new(Mutex::new(()));
    let b = Arc::new(Mutex::new(()));
    let both = Arc::new(CountDownLatch::new(2));
    let spawn = |first: Arc<Mutex<()>>, second: Arc<Mutex<()>>, name: &str| {
        let both = both.clone();
        weft::Builder::new()
            .name(name)
            .spawn(move || {
                let _g1 = first.lock().unwrap();
                both.count_down();
                both.wait().unwrap();
                let _g2 = second.lock().unwrap();
            })
            .unwrap()
    };
    let t1 = spawn(a.clone(), b.clone(), "dl-1");
    let t2 = spawn(b.clone(), a.clone(), "dl-2");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let d = weft::dump();
        let ids = [t1.thread().id(), t2.thread().id()];
        if let Some(c) = d
            .deadlocks
            .iter()
            .find(|c| ids.iter().all(|i| c.contains(i)))
        {
            assert_eq!(c.len(), 2);
            assert!(d.to_string().contains("Found a deadlock"));
            break;
        }
        assert!(Instant::now() < deadline, "no deadlock found:\n{d}");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The threads stay deadlocked (leaked) — that is the point.
}

#[test]
fn many_parked_threads_dump() {
    let n = 10_000;
    let latch = Arc::new(CountDownLatch::new(1));
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let l = latch.clone();
            weft::spawn(move || l.wait().unwrap())
        })
        .collect();
    for h in &hs {
        wait_state(h.thread(), State::Parked);
    }
    let d = weft::dump();
    let mine: Vec<_> = hs
        .iter()
        .map(|h| d.thread(h.thread().id()).expect("listed"))
        .collect();
    assert!(
        mine.iter().all(|t| !t.stack.is_empty()),
        "every parked thread has a stack"
    );
    latch.count_down();
    for h in hs {
        h.join().unwrap();
    }
}

/// SIGQUIT prints the dump to stderr and the process keeps running.
///
/// The child raises SIGQUIT and then waits for its stdin to close; the
/// parent closes it only once the dump has appeared on the child's stderr
/// (the first dump of a debug build resolves symbols for a while).
#[test]
fn sigquit_prints_dump_and_process_continues() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    if std::env::var("WEFT_DUMP_CHILD").is_ok() {
        let h = weft::Builder::new()
            .name("quit-sleeper")
            .spawn(|| weft::sleep(Duration::from_secs(600)))
            .unwrap();
        wait_state(h.thread(), State::Parked);
        // SAFETY: raising a signal on ourselves.
        unsafe { libc::raise(libc::SIGQUIT) };
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        h.thread().interrupt();
        assert!(h.join().unwrap().is_err(), "the sleeper was interrupted");
        println!("child still alive");
        return;
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sigquit_prints_dump_and_process_continues",
            "--nocapture",
        ])
        .env("WEFT_DUMP_CHILD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    // Read stderr on a thread, so a child that never dumps fails the test
    // at the deadline instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut seen = String::new();
    let mut header = false;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                header |= line.contains("Weft thread dump");
                let sleeper = header && line.contains("quit-sleeper");
                seen.push_str(&line);
                seen.push('\n');
                if sleeper {
                    break;
                }
            }
            Err(_) => {
                let _ = child.kill();
                panic!("no dump listing quit-sleeper on stderr within 120 s:\n{seen}");
            }
        }
    }
    drop(stdin); // the child may finish now
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {seen}");
    assert!(stdout.contains("child still alive"), "{stdout}");
}
