//! Platform mode's fixed pool of OS worker threads
//! ([`ThreadMode::Platform`](super::ThreadMode::Platform)): a bounded job
//! queue of [`ServerConfig::accept_queue`](super::ServerConfig::accept_queue)
//! entries feeding `threads` OS threads. Started by
//! [`Server::serve`](super::Server::serve); the connection loop submits one
//! request at a time; shutdown closes it.

use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use weft::sync::Unpoison;

pub(super) type Job = Box<dyn FnOnce() + Send + 'static>;

pub(super) struct Pool {
    tx: Mutex<Option<weft::channel::Sender<Job>>>,
}

impl Pool {
    pub(super) fn start(threads: usize, queue: usize) -> io::Result<Pool> {
        let (tx, rx) = weft::channel::bounded::<Job>(queue);
        static POOL_ID: AtomicUsize = AtomicUsize::new(1);
        let id = POOL_ID.fetch_add(1, Ordering::Relaxed);
        for i in 0..threads {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("http-{id}-worker-{i}"))
                .stack_size(256 * 1024)
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        // A stale interrupt from a forced shutdown must not
                        // hit the next request.
                        let _ = weft::interrupted();
                        job();
                    }
                })?;
        }
        Ok(Pool {
            tx: Mutex::new(Some(tx)),
        })
    }

    pub(super) fn sender(&self) -> Option<weft::channel::Sender<Job>> {
        self.tx.lock().unpoison().clone()
    }

    /// Lets the workers exit once the queue is empty.
    pub(super) fn close(&self) {
        self.tx.lock().unpoison().take();
    }
}
