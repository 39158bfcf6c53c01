//! Scoped virtual threads, like `std::thread::scope`: threads that may
//! borrow from the caller's stack, all joined before `scope` returns.

use crate::unpoison::Unpoison;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::thread::{Thread, current, park};

/// A scope to spawn scoped virtual threads in. See [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    data: Arc<ScopeData>,
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

struct ScopeData {
    /// Dump container of the scope's threads.
    container: u64,
    running: AtomicUsize,
    /// A thread panicked and its handle was not joined (std's rule).
    a_thread_panicked: AtomicBool,
    owner: Thread,
}

impl ScopeData {
    fn thread_done(&self, panicked_unjoined: bool) {
        if panicked_unjoined {
            self.a_thread_panicked.store(true, Ordering::SeqCst);
        }
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.owner.unpark();
        }
    }
}

/// Result slot of one scoped thread. Shared by the thread and its handle;
/// when the last of them lets go, the thread counts as done for the scope
/// (std's rule: a panic whose result nobody took makes the scope panic).
struct ScopedPacket<T> {
    result: Mutex<Option<std::thread::Result<T>>>,
    scope: Arc<ScopeData>,
}

impl<T> Drop for ScopedPacket<T> {
    fn drop(&mut self) {
        let result = self.result.get_mut().unpoison().take();
        let unhandled = matches!(result, Some(Err(_)));
        // Drop the value (which may borrow 'scope data) before the scope
        // can end. A `Drop` that panics here must not unwind: the scope
        // would never hear that this thread is done and would wait forever
        // (std aborts the same way: "thread result panicked on drop").
        if catch_unwind(AssertUnwindSafe(move || drop(result))).is_err() {
            eprintln!("weft: a scoped thread's result panicked while being dropped; aborting");
            std::process::abort();
        }
        self.scope.thread_done(unhandled);
    }
}

/// An owned permission to join a scoped thread.
pub struct ScopedJoinHandle<'scope, T> {
    handle: crate::thread::JoinHandle<()>,
    packet: Arc<ScopedPacket<T>>,
    _scope: PhantomData<&'scope ()>,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the thread; `Err` carries its panic payload.
    pub fn join(self) -> std::thread::Result<T> {
        let _ = self.handle.join();
        self.packet
            .result
            .lock()
            .unpoison()
            .take()
            .expect("weft: scoped thread finished without a result")
    }

    /// The thread's handle.
    pub fn thread(&self) -> &Thread {
        self.handle.thread()
    }

    /// Whether the thread has finished.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// Creates a scope for spawning virtual threads that borrow local data.
///
/// All threads spawned in the scope are joined before `scope` returns. If
/// `f` panics, or a thread panicked and was not joined, `scope` panics after
/// joining them all — exactly like `std::thread::scope`.
///
/// # Examples
///
/// ```
/// let mut data = vec![1, 2, 3];
/// let total = std::sync::atomic::AtomicI32::new(0);
/// weft::scope(|s| {
///     s.spawn(|| {
///         for x in &data {
///             total.fetch_add(*x, std::sync::atomic::Ordering::Relaxed);
///         }
///     });
///     s.spawn(|| println!("len = {}", data.len()));
/// });
/// data.push(4); // borrows ended: every scoped thread has been joined
/// assert_eq!(total.into_inner(), 6);
/// ```
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let scope = Scope {
        data: Arc::new(ScopeData {
            container: crate::thread::registry::new_container(
                "Scope",
                crate::thread::registry::ROOT,
            ),
            running: AtomicUsize::new(0),
            a_thread_panicked: AtomicBool::new(false),
            owner: current(),
        }),
        scope: PhantomData,
        env: PhantomData,
    };
    let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    // Join everything, uninterruptibly (borrows must end before we return).
    while scope.data.running.load(Ordering::Acquire) != 0 {
        let was = crate::thread::take_interrupt();
        park();
        if was {
            current().interrupt_flag_restore();
        }
    }
    crate::thread::registry::drop_container(scope.data.container);
    match result {
        Err(e) => resume_unwind(e),
        Ok(_) if scope.data.a_thread_panicked.load(Ordering::SeqCst) => {
            panic!("a scoped virtual thread panicked")
        }
        Ok(v) => v,
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Spawns a virtual thread that may borrow from outside the scope.
    ///
    /// # Panics
    /// If the thread cannot be created (like `std::thread::Scope::spawn`).
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        self.spawn_with(crate::builder::Builder::new(), f)
            .unwrap_or_else(|e| panic!("weft: scoped spawn failed: {e}"))
    }

    /// Spawns with a [`Builder`](crate::Builder) (name, stack size).
    pub fn spawn_with<F, T>(
        &'scope self,
        builder: crate::builder::Builder,
        f: F,
    ) -> std::io::Result<ScopedJoinHandle<'scope, T>>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let rt = crate::runtime::for_spawn()?;
        self.data.running.fetch_add(1, Ordering::AcqRel);
        let packet = Arc::new(ScopedPacket {
            result: Mutex::new(None),
            scope: self.data.clone(),
        });
        let their_packet = packet.clone();
        let body = move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            *their_packet.result.lock().unpoison() = Some(r);
            // Our last touch of anything 'scope; if the handle is gone this
            // drop ends the thread's part in the scope.
            drop(their_packet);
        };
        // SAFETY: `scope` does not return before `running` drops to zero,
        // which happens only when both `body` and the handle have released
        // the packet, i.e. after every borrow of 'scope data has ended.
        let handle = unsafe {
            builder
                .container(self.data.container)
                .spawn_unchecked(&rt, body)
        }?;
        // (On error `body` and its packet clone were dropped, which
        // decremented `running` again.)
        Ok(ScopedJoinHandle {
            handle,
            packet,
            _scope: PhantomData,
        })
    }
}
