//! `futures-io` and `tokio::io` traits on weft sockets, driven by an
//! external executor (and by `weft::block_on` in a virtual thread).
//!
//! Run: `cargo test -p weft --release --features futures-io,tokio --test net_async`.
#![cfg(all(feature = "futures-io", feature = "tokio"))]

use std::future::Future;
use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use weft::net::{TcpListener, TcpStream, UnixStream};

const SAFETY: Duration = Duration::from_secs(60);

/// A minimal executor of its own (no weft, no Tokio): polls on the calling
/// OS thread, parks it while pending.
fn os_block_on<F: Future>(f: F) -> F::Output {
    struct W(std::thread::Thread);
    impl Wake for W {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(W(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed.wrapping_mul(7)) % 251) as u8)
        .collect()
}

/// A blocking weft echo server on virtual threads (`n` connections).
fn echo_server(n: usize) -> (SocketAddr, weft::JoinHandle<()>) {
    use std::io::{Read, Write};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    let h = weft::spawn(move || {
        for s in l.incoming().take(n) {
            let mut s = s.unwrap();
            weft::spawn(move || {
                s.set_read_timeout(Some(SAFETY)).unwrap();
                let mut buf = [0u8; 8192];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => s.write_all(&buf[..n]).unwrap(),
                    }
                }
            });
        }
    });
    (a, h)
}

#[test]
fn futures_io_copy_over_a_weft_socket() {
    use futures_util::io::{AsyncReadExt, AsyncWriteExt};
    const LEN: usize = 4 << 20;
    let (addr, server) = echo_server(2);
    let data = pattern(3, LEN);

    // Driven by a plain OS-thread executor.
    let s = TcpStream::connect(addr).unwrap();
    let back = os_block_on(async {
        // Writing all 4 MiB before reading would deadlock against the echo
        // server: copy in and read back concurrently, through `&TcpStream`.
        let (mut r, mut w) = (&s, &s);
        let write = async {
            let n = futures_util::io::copy(&mut futures_util::io::Cursor::new(&data), &mut w)
                .await
                .unwrap();
            w.close().await.unwrap(); // shutdown(Write): the server sees EOF
            n
        };
        let read = async {
            let mut back = Vec::new();
            r.read_to_end(&mut back).await.unwrap();
            back
        };
        let (n, back) = futures_util::future::join(write, read).await;
        assert_eq!(n, LEN as u64);
        back
    });
    assert!(back == data, "echo differs");

    // Driven by weft::block_on inside a virtual thread.
    let data2 = data.clone();
    weft::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        weft::block_on(async {
            s.write_all(b"ping").await.unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"ping");
            s.write_all(&data2[..100_000]).await.unwrap();
            let mut b = vec![0u8; 100_000];
            s.read_exact(&mut b).await.unwrap();
            assert!(b[..] == data2[..100_000]);
        });
    })
    .join()
    .unwrap();
    server.join().unwrap();
}

/// Writes `data` (from a second thread) and reads everything back.
fn std_echo_client(addr: SocketAddr, data: &[u8]) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(SAFETY)).unwrap();
    let mut c2 = c.try_clone().unwrap();
    let d = data.to_vec();
    let writer = std::thread::spawn(move || {
        c2.write_all(&d).unwrap();
        c2.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    c.read_to_end(&mut back).unwrap();
    writer.join().unwrap();
    back
}

#[test]
fn tokio_io_copy_bidirectional_between_weft_and_tokio_sockets() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const LEN: usize = 4 << 20;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // A Tokio echo server.
    let tokio_echo = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let (mut r, mut w) = s.split();
            tokio::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
        });
        a
    });

    // A proxy in a Tokio task: weft socket <-> Tokio socket.
    let front = TcpListener::bind("127.0.0.1:0").unwrap();
    let front_addr = front.local_addr().unwrap();
    let proxy = rt.spawn(async move {
        let (mut weft_side, _) = front.accept().unwrap(); // client connects first
        let mut tokio_side = tokio::net::TcpStream::connect(tokio_echo).await.unwrap();
        tokio::io::copy_bidirectional(&mut weft_side, &mut tokio_side)
            .await
            .unwrap()
    });

    // A blocking client on an OS thread.
    let data = pattern(5, LEN);
    let back = std_echo_client(front_addr, &data);
    assert!(back == data, "echo through the proxy differs");
    let (up, down) = rt.block_on(proxy).unwrap();
    assert_eq!((up, down), (LEN as u64, LEN as u64));

    // tokio::io traits under weft::block_on in a virtual thread, on a Unix
    // pair, with a pending read woken by a write from another thread.
    let (a, b) = UnixStream::pair().unwrap();
    let reader = weft::spawn(move || {
        let mut b = b;
        weft::block_on(async {
            let mut buf = [0u8; 5];
            b.read_exact(&mut buf).await.unwrap();
            let mut rest = Vec::new();
            b.read_to_end(&mut rest).await.unwrap();
            (buf, rest)
        })
    });
    let mut a = a;
    rt.block_on(async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        a.write_all(b"hello").await.unwrap();
        a.write_all(b" world").await.unwrap();
        AsyncWriteExt::shutdown(&mut a).await.unwrap(); // the inherent `shutdown(how)` would shadow it
    });
    let (head, rest) = reader.join().unwrap();
    assert_eq!((&head[..], &rest[..]), (&b"hello"[..], &b" world"[..]));

    // The async and blocking forms mix on one socket.
    let (x, y) = UnixStream::pair().unwrap();
    std::io::Write::write_all(&mut &x, b"sync").unwrap();
    let mut y = y;
    let got = rt.block_on(async {
        let mut b = [0u8; 4];
        y.read_exact(&mut b).await.unwrap();
        b
    });
    assert_eq!(&got, b"sync");
    drop(x);
    let e = rt.block_on(async { y.read_u8().await.unwrap_err().kind() });
    assert_eq!(e, ErrorKind::UnexpectedEof);
}
