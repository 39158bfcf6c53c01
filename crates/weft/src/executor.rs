//! Executors: one interface, two kinds — a virtual thread per task, or a
//! fixed pool of OS threads (Java's `newVirtualThreadPerTaskExecutor` and
//! `newFixedThreadPool`). The same task code runs on either; on the fixed
//! pool a blocking call really blocks its OS thread, which is the point of
//! comparing the two.

use crate::unpoison::Unpoison;
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::runtime::Runtime;
use crate::thread::{JoinHandle, State, Thread};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Runs submitted tasks either on a virtual thread each or on a fixed pool
/// of OS threads. Dropping it closes it (waits for submitted tasks).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// for exec in [weft::Executor::virtual_per_task(), weft::Executor::fixed(4)] {
///     let handles: Vec<_> = (0..8)
///         .map(|i| exec.submit(move || {
///             weft::sleep(Duration::from_millis(5)).unwrap();
///             i * 2
///         }))
///         .collect();
///     let sum: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
///     assert_eq!(sum, 56);
///     exec.close(); // waits for everything submitted
/// }
/// ```
pub struct Executor {
    inner: Arc<ExecInner>,
}

struct ExecInner {
    kind: Kind,
    /// Dump container of this executor's threads.
    container: u64,
    /// Tasks submitted and not finished.
    outstanding: Mutex<usize>,
    /// Threads waiting in `close` for `outstanding` to reach zero.
    closers: Mutex<Vec<Thread>>,
    closed: AtomicBool,
    submitted: AtomicUsize,
}

enum Kind {
    Virtual(Option<Runtime>),
    Fixed(Arc<Pool>),
}

struct Pool {
    queue: Mutex<PoolQueue>,
    available: Condvar,
    threads: usize,
    workers: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

struct PoolQueue {
    jobs: VecDeque<Job>,
    shutdown: bool,
}

impl Executor {
    /// One new virtual thread per task, on the runtime of the thread that
    /// submits it (the default runtime from an OS thread).
    pub fn virtual_per_task() -> Executor {
        Executor::from_kind(Kind::Virtual(None))
    }

    /// One new virtual thread per task, on `rt`.
    pub fn virtual_per_task_on(rt: &Runtime) -> Executor {
        Executor::from_kind(Kind::Virtual(Some(rt.clone())))
    }

    /// A fixed pool of `n` OS threads sharing one FIFO queue.
    ///
    /// # Panics
    /// If `n` is zero or the OS refuses to create the threads; see
    /// [`Executor::try_fixed`].
    pub fn fixed(n: usize) -> Executor {
        Executor::try_fixed(n).unwrap_or_else(|e| panic!("weft::Executor::fixed({n}): {e}"))
    }

    /// A fixed pool of `n` OS threads, or an error.
    pub fn try_fixed(n: usize) -> io::Result<Executor> {
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "weft: a fixed executor needs at least one thread",
            ));
        }
        static POOL_ID: AtomicUsize = AtomicUsize::new(1);
        let id = POOL_ID.fetch_add(1, Ordering::Relaxed);
        let pool = Arc::new(Pool {
            queue: Mutex::new(PoolQueue {
                jobs: VecDeque::new(),
                shutdown: false,
            }),
            available: Condvar::new(),
            threads: n,
            workers: Mutex::new(Vec::with_capacity(n)),
        });
        for i in 0..n {
            let p = pool.clone();
            let h = std::thread::Builder::new()
                .name(format!("pool-{id}-thread-{}", i + 1))
                .spawn(move || p.work())?;
            pool.workers.lock().unpoison().push(h);
        }
        Ok(Executor::from_kind(Kind::Fixed(pool)))
    }

    fn from_kind(kind: Kind) -> Executor {
        let name = match kind {
            Kind::Virtual(_) => "VirtualPerTaskExecutor",
            Kind::Fixed(_) => "FixedThreadPool",
        };
        Executor {
            inner: Arc::new(ExecInner {
                container: crate::thread::registry::new_container(
                    name,
                    crate::thread::registry::ROOT,
                ),
                kind,
                outstanding: Mutex::new(0),
                closers: Mutex::new(Vec::new()),
                closed: AtomicBool::new(false),
                submitted: AtomicUsize::new(0),
            }),
        }
    }

    /// Whether tasks run on virtual threads.
    pub fn is_virtual(&self) -> bool {
        matches!(self.inner.kind, Kind::Virtual(_))
    }

    /// Number of OS threads of a fixed pool (`None` for virtual).
    pub fn pool_size(&self) -> Option<usize> {
        match &self.inner.kind {
            Kind::Fixed(p) => Some(p.threads),
            Kind::Virtual(_) => None,
        }
    }

    /// Submits a task.
    ///
    /// # Panics
    /// If the executor is closed or the task cannot be started; see
    /// [`Executor::try_submit`].
    pub fn submit<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.try_submit(f)
            .unwrap_or_else(|e| panic!("weft::Executor::submit: {e}"))
    }

    /// Submits a task, or returns an error if the executor is closed (Java's
    /// `RejectedExecutionException`) or the thread cannot be created.
    pub fn try_submit<F, T>(&self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(io::Error::other("weft: executor is closed"));
        }
        *self.inner.outstanding.lock().unpoison() += 1;
        self.inner.submitted.fetch_add(1, Ordering::Relaxed);
        let done = DoneGuard(self.inner.clone());
        match &self.inner.kind {
            Kind::Virtual(rt) => {
                let rt = match rt {
                    Some(rt) => rt.clone(),
                    None => crate::runtime::for_spawn()?,
                };
                crate::builder::Builder::new()
                    .container(self.inner.container)
                    .spawn_on(&rt, move || {
                        let _done = done;
                        f()
                    })
            }
            Kind::Fixed(pool) => {
                let thread = crate::thread::new_os_task(None);
                let t2 = thread.clone();
                let job: Job = Box::new(move || {
                    let r =
                        crate::thread::run_as_os_task(&t2, || catch_unwind(AssertUnwindSafe(f)));
                    t2.set_state(State::Terminated);
                    crate::thread::complete(&t2.inner, r);
                    drop(done);
                });
                let mut q = pool.queue.lock().unpoison();
                if q.shutdown {
                    return Err(io::Error::other("weft: executor is closed"));
                }
                q.jobs.push_back(job);
                drop(q);
                pool.available.notify_one();
                Ok(JoinHandle::new(thread))
            }
        }
    }

    /// Stops accepting tasks and waits until every submitted task has
    /// finished (Java's `ExecutorService.close`). Idempotent.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.wait_idle();
        crate::thread::registry::drop_container(self.inner.container);
        if let Kind::Fixed(pool) = &self.inner.kind {
            pool.queue.lock().unpoison().shutdown = true;
            pool.available.notify_all();
            let workers = std::mem::take(&mut *pool.workers.lock().unpoison());
            for w in workers {
                let _ = w.join();
            }
        }
    }

    /// Whether `close` has been called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Tasks submitted and not yet finished.
    pub fn outstanding(&self) -> usize {
        *self.inner.outstanding.lock().unpoison()
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.close();
    }
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("virtual", &self.is_virtual())
            .field("pool_size", &self.pool_size())
            .field("outstanding", &self.outstanding())
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Counts a task as finished when dropped (also on panic or if the task is
/// never started).
struct DoneGuard(Arc<ExecInner>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        let mut n = self.0.outstanding.lock().unpoison();
        *n -= 1;
        if *n == 0 {
            drop(n);
            let closers = std::mem::take(&mut *self.0.closers.lock().unpoison());
            for t in closers {
                t.unpark();
            }
        }
    }
}

impl ExecInner {
    fn wait_idle(&self) {
        let me = crate::thread::current();
        loop {
            if *self.outstanding.lock().unpoison() == 0 {
                return;
            }
            self.closers.lock().unpoison().push(me.clone());
            // Re-check after registering, so a finish in between is not lost.
            if *self.outstanding.lock().unpoison() == 0 {
                return;
            }
            let was = crate::thread::take_interrupt();
            crate::thread::park();
            if was {
                me.interrupt_flag_restore();
            }
        }
    }
}

impl Pool {
    fn work(&self) {
        loop {
            let job = {
                let mut q = self.queue.lock().unpoison();
                loop {
                    if let Some(j) = q.jobs.pop_front() {
                        break j;
                    }
                    if q.shutdown {
                        return;
                    }
                    q = self.available.wait(q).unpoison();
                }
            };
            job();
        }
    }
}
