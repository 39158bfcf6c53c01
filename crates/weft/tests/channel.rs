//! Integration tests of `weft::channel`, on virtual and OS threads.
#![cfg(not(loom))]

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use weft::channel::{
    self, Receiver, RecvError, RecvTimeoutError, SendError, SendTimeoutError, Sender, TryRecvError,
    TrySendError,
};

/// A virtual or an OS thread, joined the same way (never join an OS thread
/// from a virtual one: that would block its carrier).
enum Handle<T> {
    Virtual(weft::JoinHandle<T>),
    Os(std::thread::JoinHandle<T>),
}

impl<T> Handle<T> {
    fn join(self) -> T {
        match self {
            Handle::Virtual(h) => h.join().unwrap(),
            Handle::Os(h) => h.join().unwrap(),
        }
    }
}

fn spawn_on<T: Send + 'static>(os: bool, f: impl FnOnce() -> T + Send + 'static) -> Handle<T> {
    if os {
        Handle::Os(std::thread::spawn(f))
    } else {
        Handle::Virtual(weft::spawn(f))
    }
}

/// Polls until `t` is parked (blocked inside a weft call). Gives up after
/// 10 s; no assertion depends on it, it only makes the tests exercise the
/// "woken while parked" paths.
fn wait_until_parked(t: &weft::Thread) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.state() != weft::State::Parked && Instant::now() < deadline {
        std::thread::yield_now();
    }
}

#[test]
fn handles_are_clone_send_sync() {
    fn assert_all<T: Clone + Send + Sync>() {}
    assert_all::<Sender<String>>();
    assert_all::<Receiver<String>>();
}

#[test]
fn rendezvous_send_waits_for_receiver() {
    let (tx, rx) = channel::bounded::<u32>(0);
    assert_eq!(tx.capacity(), Some(0));
    assert!(tx.is_full() && rx.is_empty());
    // Nobody is receiving: try_send cannot hand over.
    assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));

    let sent = Arc::new(AtomicBool::new(false));
    let sent2 = Arc::clone(&sent);
    let t = weft::spawn(move || {
        tx.send(42).unwrap();
        sent2.store(true, Ordering::SeqCst);
        tx
    });
    wait_until_parked(t.thread());
    // A rendezvous send cannot complete before a receive.
    assert!(!sent.load(Ordering::SeqCst));
    assert_eq!(rx.len(), 0);
    assert_eq!(rx.recv(), Ok(42));
    let tx = t.join().unwrap();
    assert!(sent.load(Ordering::SeqCst));

    // A parked receiver makes try_send succeed.
    let r = weft::spawn(move || rx.recv());
    wait_until_parked(r.thread());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut v = 7;
    loop {
        match tx.try_send(v) {
            Ok(()) => break,
            Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                v = back;
                std::thread::yield_now();
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(r.join().unwrap(), Ok(7));
}

#[test]
fn rendezvous_pairs_many_threads() {
    let (tx, rx) = channel::bounded::<u64>(0);
    let senders: Vec<_> = (0..8u64)
        .map(|p| {
            let tx = tx.clone();
            spawn_on(p == 0, move || {
                for i in 0..500 {
                    tx.send(p * 1000 + i).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let receivers: Vec<_> = (0..4)
        .map(|c| {
            let rx = rx.clone();
            spawn_on(c == 0, move || {
                rx.iter().fold((0u64, 0usize), |(s, n), v| (s + v, n + 1))
            })
        })
        .collect();
    drop(rx);
    for s in senders {
        s.join();
    }
    let (sum, n) = receivers
        .into_iter()
        .map(Handle::join)
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert_eq!(n, 8 * 500);
    let expected: u64 = (0..8u64)
        .map(|p| (0..500).map(|i| p * 1000 + i).sum::<u64>())
        .sum();
    assert_eq!(sum, expected);
}

#[test]
fn bounded_backpressure() {
    const CAP: usize = 4;
    let (tx, rx) = channel::bounded::<usize>(CAP);
    assert_eq!(rx.capacity(), Some(CAP));
    for i in 0..CAP {
        tx.try_send(i).unwrap();
    }
    assert!(tx.is_full());
    assert_eq!(tx.len(), CAP);
    assert_eq!(tx.try_send(99), Err(TrySendError::Full(99)));
    assert_eq!(
        tx.send_timeout(99, Duration::from_millis(10)),
        Err(SendTimeoutError::Timeout(99))
    );
    for i in 0..CAP {
        assert_eq!(rx.recv(), Ok(i));
    }

    // A producer can never get more than CAP messages ahead.
    const N: usize = 2_000;
    let sent = Arc::new(AtomicUsize::new(0));
    let sent2 = Arc::clone(&sent);
    let producer = weft::spawn(move || {
        for i in 0..N {
            tx.send(i).unwrap();
            sent2.fetch_add(1, Ordering::SeqCst);
        }
    });
    for received in 0..N {
        assert!(sent.load(Ordering::SeqCst) <= received + CAP);
        assert!(rx.len() <= CAP);
        assert_eq!(rx.recv(), Ok(received), "FIFO order");
        if received % 100 == 0 {
            // Let the producer fill the buffer and park on it.
            wait_until_parked(producer.thread());
            assert!(sent.load(Ordering::SeqCst) <= received + 1 + CAP);
        }
    }
    producer.join().unwrap();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
}

#[test]
fn all_senders_dropped_drains_then_disconnects() {
    let (tx, rx) = channel::unbounded();
    assert_eq!(tx.capacity(), None);
    let tx2 = tx.clone();
    tx.send(1).unwrap();
    tx2.send(2).unwrap();
    drop(tx);
    tx2.send(3).unwrap();
    drop(tx2);
    assert_eq!(rx.recv(), Ok(1));
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), [2, 3]);
    assert_eq!(rx.recv(), Err(RecvError::Disconnected));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(1)),
        Err(RecvTimeoutError::Disconnected)
    );

    // A parked receiver is woken by the disconnection.
    let (tx, rx) = channel::bounded::<u8>(1);
    let r = weft::spawn(move || rx.recv());
    wait_until_parked(r.thread());
    drop(tx);
    assert_eq!(r.join().unwrap(), Err(RecvError::Disconnected));
}

#[test]
fn all_receivers_dropped_fails_send_with_value() {
    let (tx, rx) = channel::bounded::<String>(1);
    let rx2 = rx.clone();
    drop(rx);
    tx.send("a".into()).unwrap(); // rx2 still alive
    drop(rx2);
    match tx.send("b".into()) {
        Err(SendError::Disconnected(v)) => assert_eq!(v, "b"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        tx.try_send("c".into()),
        Err(TrySendError::Disconnected("c".into()))
    );
    assert!(
        tx.is_empty(),
        "buffered messages are dropped with the last receiver"
    );

    // A sender parked on a full channel gets its message back.
    let (tx, rx) = channel::bounded::<String>(0);
    let s = weft::spawn(move || tx.send("parked".to_string()));
    wait_until_parked(s.thread());
    drop(rx);
    match s.join().unwrap() {
        Err(SendError::Disconnected(v)) => assert_eq!(v, "parked"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn buffered_messages_are_dropped_exactly_once() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = channel::bounded(8);
    for _ in 0..5 {
        tx.send(Counted(Arc::clone(&drops))).unwrap();
    }
    drop(rx.recv().unwrap());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(rx);
    assert_eq!(drops.load(Ordering::SeqCst), 5);
    let e = tx.send(Counted(Arc::clone(&drops))).unwrap_err();
    assert_eq!(drops.load(Ordering::SeqCst), 5);
    drop(e);
    assert_eq!(drops.load(Ordering::SeqCst), 6);
    drop(tx);
    assert_eq!(drops.load(Ordering::SeqCst), 6);
}

#[test]
fn recv_timeout_and_deadline() {
    let (tx, rx) = channel::bounded::<u8>(1);
    let start = Instant::now();
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(20)),
        Err(RecvTimeoutError::Timeout)
    );
    assert!(start.elapsed() >= Duration::from_millis(20));
    tx.send(5).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_millis(20)), Ok(5));
    assert_eq!(
        rx.recv_deadline(Instant::now() + Duration::from_millis(5)),
        Err(RecvTimeoutError::Timeout)
    );

    // On a virtual thread.
    let r = weft::spawn(move || {
        let start = Instant::now();
        (rx.recv_timeout(Duration::from_millis(20)), start.elapsed())
    });
    let (res, waited) = r.join().unwrap();
    assert_eq!(res, Err(RecvTimeoutError::Timeout));
    assert!(waited >= Duration::from_millis(20));
    drop(tx);
}

#[test]
fn recv_timeout_gets_message_sent_while_parked() {
    let (tx, rx) = channel::unbounded::<u8>();
    let r = weft::spawn(move || rx.recv_timeout(Duration::from_secs(30)));
    wait_until_parked(r.thread());
    tx.send(9).unwrap();
    assert_eq!(r.join().unwrap(), Ok(9));
}

#[test]
fn recv_interrupted() {
    let (tx, rx) = channel::bounded::<u8>(1);
    let r = weft::spawn(move || {
        let e = rx.recv();
        (e, weft::current().is_interrupted(), rx)
    });
    wait_until_parked(r.thread());
    r.thread().interrupt();
    let (res, flag, rx) = r.join().unwrap();
    assert_eq!(res, Err(RecvError::Interrupted));
    assert!(!flag, "flag is cleared when Interrupted is reported");
    // The channel is intact and the interrupted receiver left the queue.
    tx.send(1).unwrap();
    assert_eq!(rx.recv(), Ok(1));

    // A message that is already there is received even if interrupted, and
    // the flag stays set.
    let t = weft::spawn(move || {
        tx.send(2).unwrap();
        weft::current().interrupt();
        let r = rx.recv();
        (r, weft::interrupted())
    });
    assert_eq!(t.join().unwrap(), (Ok(2), true));

    let e: io::Error = RecvError::Interrupted.into();
    assert_eq!(e.kind(), io::ErrorKind::Interrupted);
}

#[test]
fn recv_timeout_interrupted() {
    let (_tx, rx) = channel::unbounded::<u8>();
    let r = weft::spawn(move || rx.recv_timeout(Duration::from_secs(30)));
    wait_until_parked(r.thread());
    r.thread().interrupt();
    assert_eq!(r.join().unwrap(), Err(RecvTimeoutError::Interrupted));
}

#[test]
fn blocked_send_interrupted_returns_value() {
    let (tx, rx) = channel::bounded::<String>(0);
    let s = weft::spawn(move || {
        let r = tx.send("keep me".to_string());
        (r, weft::current().is_interrupted(), tx)
    });
    wait_until_parked(s.thread());
    s.thread().interrupt();
    let (r, flag, tx) = s.join().unwrap();
    match r {
        Err(SendError::Interrupted(v)) => assert_eq!(v, "keep me"),
        other => panic!("{other:?}"),
    }
    assert!(!flag);
    // The interrupted sender left nothing behind.
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    drop(tx);
    assert_eq!(rx.recv(), Err(RecvError::Disconnected));

    // send_timeout too.
    let (tx, _rx) = channel::bounded::<u8>(0);
    let s = weft::spawn(move || tx.send_timeout(3, Duration::from_secs(30)));
    wait_until_parked(s.thread());
    s.thread().interrupt();
    assert_eq!(s.join().unwrap(), Err(SendTimeoutError::Interrupted(3)));
}

fn mpmc_stress(cap: Option<usize>, producers: u64, consumers: usize, per_producer: u64) {
    let (tx, rx) = match cap {
        Some(c) => channel::bounded::<u64>(c),
        None => channel::unbounded(),
    };
    let prods: Vec<_> = (0..producers)
        .map(|p| {
            let tx = tx.clone();
            spawn_on(p == 0, move || {
                for i in 0..per_producer {
                    tx.send(p * per_producer + i + 1).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let cons: Vec<_> = (0..consumers)
        .map(|c| {
            let rx = rx.clone();
            spawn_on(c == 0, move || {
                let (mut sum, mut n) = (0u64, 0u64);
                for v in &rx {
                    sum += v;
                    n += 1;
                }
                (sum, n)
            })
        })
        .collect();
    drop(rx);
    for p in prods {
        p.join();
    }
    let (sum, n) = cons
        .into_iter()
        .map(Handle::join)
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let total = producers * per_producer;
    assert_eq!(n, total);
    assert_eq!(sum, total * (total + 1) / 2);
}

#[test]
fn mpmc_stress_bounded() {
    mpmc_stress(Some(64), 4, 4, 250_000);
}

#[test]
fn mpmc_stress_unbounded() {
    mpmc_stress(None, 4, 4, 250_000);
}

#[test]
fn mpmc_stress_small_buffer() {
    mpmc_stress(Some(1), 4, 4, 20_000);
}

#[test]
fn mpmc_stress_rendezvous() {
    mpmc_stress(Some(0), 4, 4, 20_000);
}

#[test]
fn per_producer_fifo() {
    let (tx, rx) = channel::bounded::<(u64, u64)>(16);
    let prods: Vec<_> = (0..4u64)
        .map(|p| {
            let tx = tx.clone();
            weft::spawn(move || {
                for i in 0..5_000 {
                    tx.send((p, i)).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut next = [0u64; 4];
    for (p, i) in rx.iter() {
        assert_eq!(
            next[p as usize], i,
            "messages of one producer stay in order"
        );
        next[p as usize] += 1;
    }
    assert_eq!(next, [5_000; 4]);
    for p in prods {
        p.join().unwrap();
    }
}

#[test]
fn into_iter_and_errors_display() {
    let (tx, rx) = channel::unbounded();
    for i in 0..10 {
        tx.send(i).unwrap();
    }
    drop(tx);
    assert_eq!(rx.into_iter().sum::<i32>(), 45);
    assert_eq!(
        RecvError::Disconnected.to_string(),
        "receiving on an empty and disconnected channel"
    );
    assert_eq!(
        format!("{:?}", SendError::Disconnected(1)),
        "Disconnected(..)"
    );
    assert_eq!(SendError::Interrupted(5).into_inner(), 5);
    assert!(SendTimeoutError::Timeout(()).is_timeout());
}
