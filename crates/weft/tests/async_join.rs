//! Virtual threads from async code: a `JoinHandle` awaited (`IntoFuture`)
//! and a channel's `recv_async`, on Tokio's and on `futures::executor`'s
//! executors, with a stress test for lost wake-ups (many handles awaited
//! from several executors while their threads finish) and the waker
//! protocol checked step by step with counting wakers.
//!
//! Run: `cargo test -p weft --profile ci --test async_join`.

mod common;

use std::future::{Future, IntoFuture};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// Against hangs on a loaded machine, not a timing.
const LIMIT: Duration = Duration::from_secs(120);

/// A waker that counts its wake-ups.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count::default());
    (Arc::clone(&c), Waker::from(c))
}

fn woken(c: &Count) -> usize {
    c.0.load(Ordering::SeqCst)
}

/// Runs `f` on an OS thread, failing the test if it does not end in time
/// (a lost wake-up hangs an executor).
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let t = std::thread::spawn(f);
    common::wait_until(what, LIMIT, || t.is_finished());
    t.join().unwrap()
}

#[test]
fn await_from_tokio() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let v = rt.block_on(async {
        let h = weft::spawn(|| {
            weft::sleep(Duration::from_millis(5)).unwrap();
            String::from("done")
        });
        h.await.unwrap()
    });
    assert_eq!(v, "done");
}

#[test]
fn await_from_a_tokio_current_thread_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let sum: u64 = rt.block_on(async {
        let hs: Vec<_> = (0..100u64).map(|i| weft::spawn(move || i)).collect();
        let mut sum = 0;
        for h in hs {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(sum, 4950);
}

#[test]
fn await_from_futures_executor() {
    let h = weft::spawn(|| [7u64; 8]); // larger than the record's two words
    let v = within("await", move || futures_executor::block_on(h.into_future()));
    assert_eq!(v.unwrap(), [7; 8]);
}

/// The panic's payload survives the await, `&str` and `String` alike.
#[test]
fn a_panic_survives_the_await() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let err = weft::spawn(|| -> u8 { panic!("static message") })
            .await
            .unwrap_err();
        assert_eq!(err.downcast_ref::<&str>(), Some(&"static message"));
        let n = 42;
        let err = weft::spawn(move || -> u8 { panic!("formatted {n}") })
            .await
            .unwrap_err();
        assert_eq!(
            err.downcast_ref::<String>().map(String::as_str),
            Some("formatted 42")
        );
    });
    let err =
        futures_executor::block_on(weft::spawn(|| -> () { panic!("on futures") }).into_future())
            .unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"on futures"));
}

/// A re-poll with another waker replaces the first: only the last one is
/// woken when the thread finishes.
#[test]
fn a_repoll_replaces_the_waker() {
    let (go_tx, go_rx) = weft::channel::bounded::<()>(0);
    let h = weft::spawn(move || {
        go_rx.recv().unwrap();
        5
    });
    let mut fut = pin!(h.into_future());
    let (a, wa) = counting();
    let (b, wb) = counting();
    assert!(
        fut.as_mut()
            .poll(&mut Context::from_waker(&wa))
            .is_pending()
    );
    assert!(
        fut.as_mut()
            .poll(&mut Context::from_waker(&wb))
            .is_pending()
    );
    // The same waker again is kept (no clone needed) and still woken.
    assert!(
        fut.as_mut()
            .poll(&mut Context::from_waker(&wb))
            .is_pending()
    );
    go_tx.send(()).unwrap();
    common::wait_until("the wake-up", LIMIT, || woken(&b) == 1);
    assert_eq!(woken(&a), 0, "the replaced waker was woken");
    match fut.as_mut().poll(&mut Context::from_waker(&wb)) {
        Poll::Ready(r) => assert_eq!(r.unwrap(), 5),
        Poll::Pending => panic!("woken but not ready"),
    }
}

/// A value whose drops are counted.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Dropping a pending future detaches the thread: its result is dropped
/// once (by the finishing thread), and the dropped waker is not woken.
#[test]
fn dropping_the_future_detaches() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (go_tx, go_rx) = weft::channel::bounded::<()>(0);
    let d = Arc::clone(&drops);
    let h = weft::spawn(move || {
        go_rx.recv().unwrap();
        Counted(d)
    });
    let (a, wa) = counting();
    {
        let mut fut = pin!(h.into_future());
        assert!(
            fut.as_mut()
                .poll(&mut Context::from_waker(&wa))
                .is_pending()
        );
    }
    go_tx.send(()).unwrap();
    common::wait_until("the result's drop", LIMIT, || {
        drops.load(Ordering::SeqCst) == 1
    });
    assert_eq!(woken(&a), 0);
    // Dropped after the thread finished: the future drops the result.
    let drops2 = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&drops2);
    let h = weft::spawn(move || Counted(d));
    common::wait_until("the thread's end", LIMIT, || h.is_finished());
    drop(h.into_future());
    assert_eq!(drops2.load(Ordering::SeqCst), 1);
}

/// The body of a stress thread: finishes at once, after a short spin,
/// after a yield, or after a short park, so that its end falls before,
/// during or after its awaiter's poll.
fn stress_body(i: u64) -> u64 {
    match i % 4 {
        0 => {}
        1 => (0..(i % 300)).for_each(|_| std::hint::spin_loop()),
        2 => weft::yield_now(),
        _ => weft::sleep(Duration::from_micros(20)).unwrap(),
    }
    i
}

/// Handles awaited from several executors at once — three
/// `futures::executor` threads and eight tasks on a Tokio runtime — each
/// awaited right after its spawn, so that the thread finishes while its
/// awaiter polls (the first registration racing the finisher), plus
/// batches of handles awaited together (`join_all`-style: re-polls with
/// the same waker). Every await ends with the right value; a lost wake-up
/// hangs one, and the progress watchdog fails the test.
#[test]
fn stress_awaits_from_several_executors() {
    const PER_AWAITER: u64 = 3000;
    let done = Arc::new(AtomicUsize::new(0));
    let expect: u64 = (0..PER_AWAITER).sum();
    let awaiter = |done: Arc<AtomicUsize>| async move {
        let mut sum = 0;
        for i in 0..PER_AWAITER {
            sum += weft::spawn(move || stress_body(i)).await.unwrap();
            done.fetch_add(1, Ordering::Relaxed);
        }
        // A batch polled together: each future is polled until ready,
        // round-robin, under the same waker.
        let mut batch: Vec<_> = (0..64u64)
            .map(|i| Some(weft::spawn(move || stress_body(i)).into_future()))
            .collect();
        let batch_sum = std::future::poll_fn(|cx| {
            let mut sum = 0;
            let mut pending = false;
            for f in batch.iter_mut() {
                if let Some(fut) = f {
                    match std::pin::Pin::new(fut).poll(cx) {
                        Poll::Ready(v) => {
                            sum += v.unwrap();
                            *f = None;
                        }
                        Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(sum)
            }
        });
        let _ = batch_sum.await;
        sum
    };
    let start = Arc::new(Barrier::new(4));
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let (start, done) = (Arc::clone(&start), Arc::clone(&done));
        waiters.push(std::thread::spawn(move || {
            start.wait();
            assert_eq!(futures_executor::block_on(awaiter(done)), expect);
        }));
    }
    let (s, d) = (Arc::clone(&start), Arc::clone(&done));
    waiters.push(std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        s.wait();
        rt.block_on(async {
            let tasks: Vec<_> = (0..8)
                .map(|_| tokio::spawn(awaiter(Arc::clone(&d))))
                .collect();
            for t in tasks {
                assert_eq!(t.await.unwrap(), expect);
            }
        });
    }));
    // Progress, not time: fails only if no await ends for LIMIT.
    let total = 11 * PER_AWAITER as usize;
    let mut last = (0, std::time::Instant::now());
    while done.load(Ordering::Relaxed) < total || !waiters.iter().all(|w| w.is_finished()) {
        let now = done.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, std::time::Instant::now());
        }
        assert!(
            last.1.elapsed() < LIMIT,
            "no await ended for {LIMIT:?}: {now} of {total} done (a lost wake-up)"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for w in waiters {
        w.join().unwrap();
    }
}

#[test]
fn recv_async_from_tokio() {
    within("the receives", recv_async_from_tokio_body);
}

fn recv_async_from_tokio_body() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (tx, rx) = weft::channel::bounded(4);
    let producers: Vec<_> = (0..4u64)
        .map(|p| {
            let tx = tx.clone();
            weft::spawn(move || {
                for i in 0..1000 {
                    tx.send(p * 1000 + i).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let sum = rt.block_on(async {
        let mut sum = 0u64;
        while let Ok(v) = rx.recv_async().await {
            sum += v;
        }
        sum
    });
    assert_eq!(sum, (0..4000).sum::<u64>());
    for p in producers {
        p.join().unwrap();
    }
}

/// Ping-pong between virtual threads and async receives (a Tokio task,
/// and a `futures::executor` thread): each message is sent while its
/// receive registers or sleeps, one at a time, so a lost wake-up stops
/// the exchange and the watchdog fails the test.
#[test]
fn stress_recv_async_ping_pong() {
    const ROUNDS: u64 = 20_000;
    let exchange = |(ping, pong): (weft::channel::Receiver<u64>, weft::channel::Sender<u64>)| async move {
        let mut n = 0;
        while let Ok(v) = ping.recv_async().await {
            pong.send(v + 1).unwrap();
            n += 1;
        }
        n
    };
    let pair = || {
        let (ping_tx, ping_rx) = weft::channel::bounded::<u64>(1);
        let (pong_tx, pong_rx) = weft::channel::bounded::<u64>(1);
        let player = weft::spawn(move || {
            for i in 0..ROUNDS {
                ping_tx.send(i).unwrap();
                assert_eq!(pong_rx.recv().unwrap(), i + 1);
            }
        });
        (player, (ping_rx, pong_tx))
    };
    let (p1, ends1) = pair();
    let (p2, ends2) = pair();
    let on_tokio = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async { tokio::spawn(exchange(ends1)).await.unwrap() })
    });
    let on_futures = std::thread::spawn(move || futures_executor::block_on(exchange(ends2)));
    for p in [p1, p2] {
        common::join_within("a ping-pong", LIMIT, p).unwrap();
    }
    assert_eq!(on_tokio.join().unwrap(), ROUNDS);
    assert_eq!(on_futures.join().unwrap(), ROUNDS);
}

/// A rendezvous channel: the sender parks until the async receive takes
/// the message.
#[test]
fn recv_async_rendezvous() {
    let (tx, rx) = weft::channel::bounded::<u32>(0);
    let sender = weft::spawn(move || {
        for i in 0..100 {
            tx.send(i).unwrap();
        }
    });
    let got = within("rendezvous", move || {
        futures_executor::block_on(async {
            let mut got = Vec::new();
            while let Ok(v) = rx.recv_async().await {
                got.push(v);
            }
            got
        })
    });
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    sender.join().unwrap();
}

/// One message wakes one waiting receive; that receive dropped unpolled
/// hands its wake-up to the next; the last sender's drop wakes the rest.
#[test]
fn recv_async_wake_ups() {
    let (tx, rx) = weft::channel::unbounded::<u32>();
    let (a, wa) = counting();
    let (b, wb) = counting();
    let mut fa = Box::pin(rx.recv_async());
    let mut fb = Box::pin(rx.recv_async());
    assert!(fa.as_mut().poll(&mut Context::from_waker(&wa)).is_pending());
    assert!(fb.as_mut().poll(&mut Context::from_waker(&wb)).is_pending());
    tx.send(1).unwrap();
    assert_eq!((woken(&a), woken(&b)), (1, 0), "the first waiter, only");
    drop(fa);
    assert_eq!(
        woken(&b),
        1,
        "the dropped receive's wake-up was not handed on"
    );
    match fb.as_mut().poll(&mut Context::from_waker(&wb)) {
        Poll::Ready(Ok(1)) => {}
        other => panic!("expected the message, got {other:?}"),
    }
    drop(fb);
    let (c, wc) = counting();
    let mut fc = Box::pin(rx.recv_async());
    assert!(fc.as_mut().poll(&mut Context::from_waker(&wc)).is_pending());
    drop(tx);
    assert_eq!(woken(&c), 1, "disconnection wakes");
    assert!(matches!(
        fc.as_mut().poll(&mut Context::from_waker(&wc)),
        Poll::Ready(Err(weft::channel::RecvError::Disconnected))
    ));
}

/// Async receives on two executors and parked receivers on virtual
/// threads share one channel fed by virtual threads: every message is
/// received exactly once, and every receiver ends at disconnection.
#[test]
fn stress_recv_async_with_parked_receivers() {
    const N: u64 = 20_000;
    let (tx, rx) = weft::channel::bounded::<u64>(8);
    let producers: Vec<_> = (0..4u64)
        .map(|p| {
            let tx = tx.clone();
            weft::spawn(move || {
                for i in 0..N / 4 {
                    tx.send(p * (N / 4) + i).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let parked: Vec<_> = (0..2)
        .map(|_| {
            let rx = rx.clone();
            weft::spawn(move || rx.iter().collect::<Vec<_>>())
        })
        .collect();
    let tokio_rt = tokio::runtime::Runtime::new().unwrap();
    let async_tokio: Vec<_> = (0..4)
        .map(|_| {
            let rx = rx.clone();
            tokio_rt.spawn(async move {
                let mut got = Vec::new();
                while let Ok(v) = rx.recv_async().await {
                    got.push(v);
                }
                got
            })
        })
        .collect();
    let rx2 = rx.clone();
    let on_futures = within("async receives", move || {
        futures_executor::block_on(async move {
            let mut got = Vec::new();
            while let Ok(v) = rx2.recv_async().await {
                got.push(v);
            }
            got
        })
    });
    drop(rx);
    common::wait_until("the Tokio tasks' receives", LIMIT, || {
        async_tokio.iter().all(|t| t.is_finished())
    });
    let mut all = on_futures;
    for t in async_tokio {
        all.extend(tokio_rt.block_on(t).unwrap());
    }
    for p in parked {
        all.extend(common::join_within("a parked receiver", LIMIT, p).unwrap());
    }
    for p in producers {
        p.join().unwrap();
    }
    all.sort_unstable();
    assert_eq!(all, (0..N).collect::<Vec<_>>());
}
