//! The C and C++ test libraries of `tests/identity.rs` and
//! `tests/migration.rs` (built by `build.rs`), and what the tests share.

pub mod churn;

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::time::Duration;

unsafe extern "C" {
    /// Increments the C library's `static __thread long` and returns it.
    pub fn weft_c_counter_inc() -> libc::c_long;
    /// The C library's `static __thread long`.
    pub fn weft_c_counter_get() -> libc::c_long;
    /// The address of the C library's `static __thread long`.
    pub fn weft_c_counter_addr() -> *mut libc::c_long;
    /// Adds to the C library's global `__thread long` (starts at 100).
    pub fn weft_c_global_add(d: libc::c_long) -> libc::c_long;
    /// Pushes onto the C++ library's `thread_local std::vector<long>`;
    /// returns its length.
    pub fn weft_cxx_push(x: libc::c_long) -> libc::c_long;
    /// The sum of the C++ library's thread-local vector.
    pub fn weft_cxx_sum() -> libc::c_long;
    /// How many of the C++ library's thread-local objects were destroyed.
    pub fn weft_cxx_destroyed() -> libc::c_long;
    /// libc's `flockfile` (not in the `libc` crate).
    pub fn flockfile(f: *mut libc::FILE);
    /// libc's `funlockfile`.
    pub fn funlockfile(f: *mut libc::FILE);
}

/// The path of the library for `dlopen` (its thread-locals are dynamic TLS).
pub const DYN_TLS_LIB: &str = env!("WEFT_DYN_TLS_LIB");

/// The same library as [`DYN_TLS_LIB`] under another name, for the one
/// test that needs a module loaded after its threads started.
pub const DYN_TLS_LATE_LIB: &str = env!("WEFT_DYN_TLS_LATE_LIB");

/// The path of a library for `dlopen` whose thread-locals are
/// initial-exec (glibc places them in static TLS); its constructor sets its
/// `weft_ie_value` (5 in the template) to 11 on the loading thread.
pub const IE_TLS_LIB: &str = env!("WEFT_IE_TLS_LIB");

/// The calling thread's `errno`.
pub fn errno() -> i32 {
    // SAFETY: __errno_location has no preconditions.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(v: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = v }
}

/// The calling OS thread's kernel id (on a virtual thread: its carrier's).
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// The stack glibc reports for the calling thread
/// (`pthread_getattr_np(pthread_self())`), as (low end, size).
pub fn own_stack() -> (usize, usize) {
    // SAFETY: attr is initialised by pthread_getattr_np before use and
    // destroyed after.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
        let (mut addr, mut size) = (std::ptr::null_mut(), 0usize);
        assert_eq!(libc::pthread_attr_getstack(&attr, &mut addr, &mut size), 0);
        libc::pthread_attr_destroy(&mut attr);
        (addr as usize, size)
    }
}

/// How long a test waits for something that takes milliseconds before it
/// calls it stuck: minutes, so that a loaded machine never trips it.
pub const STUCK: Duration = Duration::from_secs(120);

/// Waits for `f` on an OS thread; fails the test when it has not returned
/// after [`STUCK`] (a deadlock: the work itself takes milliseconds).
pub fn within_watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(STUCK)
        .unwrap_or_else(|_| panic!("{what}: no progress for {STUCK:?}: deadlocked"))
}

/// A pthread mutex of the given type, shared by a test's threads.
pub struct CMutex(UnsafeCell<libc::pthread_mutex_t>);
// SAFETY: a pthread mutex is made to be shared between threads.
unsafe impl Sync for CMutex {}

impl CMutex {
    /// A mutex of type `kind` (`PTHREAD_MUTEX_RECURSIVE`, …).
    pub fn new(kind: libc::c_int) -> Arc<CMutex> {
        let m = Arc::new(CMutex(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER)));
        // SAFETY: attr is initialised before use and destroyed after; the
        // mutex is initialised once, before it is shared.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_settype(&mut attr, kind);
            assert_eq!(libc::pthread_mutex_init(m.0.get(), &attr), 0);
            libc::pthread_mutexattr_destroy(&mut attr);
        }
        m
    }

    /// `pthread_mutex_lock`.
    pub fn lock(&self) -> i32 {
        // SAFETY: an initialised mutex.
        unsafe { libc::pthread_mutex_lock(self.0.get()) }
    }

    /// `pthread_mutex_trylock`.
    pub fn trylock(&self) -> i32 {
        // SAFETY: as above.
        unsafe { libc::pthread_mutex_trylock(self.0.get()) }
    }

    /// `pthread_mutex_unlock`.
    pub fn unlock(&self) -> i32 {
        // SAFETY: as above.
        unsafe { libc::pthread_mutex_unlock(self.0.get()) }
    }
}
