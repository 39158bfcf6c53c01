//! Weft in an async program, async crates on Weft.
//!
//! Much of Rust's ecosystem is async-only (cloud SDKs, gRPC clients,
//! `sqlx`, `reqwest`'s async client), and an async service may want to hand
//! blocking work to virtual threads. Both directions work with no glue.
//!
//! # Async crates on virtual threads
//!
//! [`block_on`](crate::block_on) runs a future to completion, parking the
//! virtual thread (not its carrier) while it is pending. With the `tokio`
//! feature it runs the future inside a Tokio runtime's context, so a
//! future that needs Tokio's reactor, timers or `tokio::spawn` works as it
//! is — the runtime, in order:
//!
//! 1. the calling thread's own, if it is in a multi-thread Tokio runtime
//!    (inside `#[tokio::main]`, a task, or after `Handle::enter`);
//! 2. else the one given to the Weft runtime's builder
//!    (`RuntimeBuilder::tokio_handle`, feature `tokio`),
//!    on that runtime's virtual threads;
//! 3. else one Weft starts at the first `block_on` that finds neither
//!    (whether or not its future needs Tokio): a multi-thread Tokio runtime
//!    whose worker threads (`WEFT_TOKIO_THREADS`, default 2) are named
//!    `weft-tokio-N`; they drive sockets and timers and run what the
//!    futures spawn, while the futures themselves are polled on their own
//!    virtual threads. It lives as long as the process.
//!
//! The context is entered around each poll and left before the thread
//! parks, so it works the same with threads that share their carrier's
//! thread-locals, and there is no "Cannot start a runtime from within a
//! runtime" panic wherever `block_on` is called — on a virtual thread, an
//! OS thread, inside `#[tokio::main]`, or in a Tokio task (where the wait
//! goes through `tokio::task::block_in_place`, so that the worker's other
//! tasks move). A current-thread Tokio runtime the caller is in is passed
//! over for step 2 or 3: its only driver may be the very thread that is
//! about to block.
//!
//! ```
//! # #[cfg(feature = "tokio")] {
//! use std::time::Duration;
//!
//! // 100 virtual threads, each awaiting a Tokio timer and a Tokio task:
//! // nothing set up, no runtime in sight.
//! let threads: Vec<_> = (0..100u64)
//!     .map(|i| {
//!         weft::spawn(move || {
//!             weft::block_on(async move {
//!                 tokio::time::sleep(Duration::from_millis(10)).await;
//!                 tokio::spawn(async move { i * 2 }).await.unwrap()
//!             })
//!         })
//!     })
//!     .collect();
//! let sum: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
//! assert_eq!(sum, 9900);
//! # }
//! ```
//!
//! An async-only HTTP client, from plain blocking code:
//!
//! ```no_run
//! # #[cfg(feature = "tokio")] {
//! fn fetch(url: &str) -> reqwest::Result<String> {
//!     weft::block_on(async { reqwest::get(url).await?.text().await })
//! }
//! let pages: Vec<_> = (0..200)
//!     .map(|_| weft::spawn(|| fetch("http://127.0.0.1:8080/")))
//!     .collect();
//! for p in pages {
//!     println!("{} bytes", p.join().unwrap().unwrap().len());
//! }
//! # }
//! ```
//!
//! To use a runtime of your own on a Weft runtime's threads:
//!
//! ```
//! # #[cfg(feature = "tokio")] {
//! let tokio_rt = tokio::runtime::Builder::new_multi_thread()
//!     .thread_name("mine")
//!     .enable_all()
//!     .build()
//!     .unwrap();
//! let rt = weft::Runtime::builder()
//!     .tokio_handle(tokio_rt.handle().clone())
//!     .build()
//!     .unwrap();
//! let ran_on = rt
//!     .spawn(|| {
//!         weft::block_on(async {
//!             tokio::spawn(async { std::thread::current().name().map(String::from) }).await
//!         })
//!     })
//!     .join()
//!     .unwrap()
//!     .unwrap();
//! assert_eq!(ran_on.as_deref(), Some("mine"));
//! # }
//! ```
//!
//! # Virtual threads from async code
//!
//! A [`JoinHandle`](crate::JoinHandle) is [`IntoFuture`]:
//! `handle.await` waits for the thread without blocking the executor's
//! thread, on any executor (Tokio's, `futures::executor`, `smol`), and
//! gives what `join` gives — `Err` with the panic's payload if the thread
//! panicked. A channel's [`Receiver::recv_async`](crate::channel::Receiver::recv_async)
//! receives from virtual threads the same way. Neither needs a feature.
//!
//! ```
//! #[tokio::main]
//! async fn main() {
//!     // Blocking work goes to virtual threads, not to `spawn_blocking`'s
//!     // pool of (at most 512) OS threads.
//!     let jobs: Vec<_> = (0..1000u64)
//!         .map(|i| {
//!             weft::spawn(move || {
//!                 weft::sleep(std::time::Duration::from_millis(10)).unwrap();
//!                 i
//!             })
//!         })
//!         .collect();
//!     let mut sum = 0;
//!     for job in jobs {
//!         sum += job.await.unwrap();
//!     }
//!     assert_eq!(sum, 499_500);
//!
//!     // A panic's payload survives the await.
//!     let err = weft::spawn(|| -> u32 { panic!("no such user") }).await.unwrap_err();
//!     assert_eq!(err.downcast_ref::<&str>(), Some(&"no such user"));
//!
//!     // A stream of results from a virtual thread.
//!     let (tx, rx) = weft::channel::bounded(16);
//!     weft::spawn(move || {
//!         for line in ["a", "b", "c"] {
//!             tx.send(line).unwrap();
//!         }
//!     });
//!     let mut got = Vec::new();
//!     while let Ok(line) = rx.recv_async().await {
//!         got.push(line);
//!     }
//!     assert_eq!(got, ["a", "b", "c"]);
//! }
//! ```
