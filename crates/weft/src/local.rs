//! `weft::local!`: storage per virtual thread, like Java's `ThreadLocal` on
//! virtual threads.
//!
//! On x86_64 Linux with glibc, `std::thread_local!` is per virtual thread
//! too (the crate docs, "Thread-locals"); `local!` is the storage that is
//! per virtual thread everywhere: on other platforms, on runtimes that share
//! their carriers' thread-locals (`RuntimeBuilder::carrier_thread_locals`),
//! and for the tasks of a fixed executor, which each get their own values
//! although they share an OS thread. Values live in the virtual thread
//! itself: one per virtual thread, borrowable across blocking calls,
//! dropped when the thread finishes. Outside virtual threads they fall back
//! to one value per OS thread.
//!
//! ```
//! use std::cell::Cell;
//! weft::local! {
//!     static REQUESTS: Cell<u32> = Cell::new(0);
//! }
//! let h = weft::spawn(|| {
//!     REQUESTS.with(|r| r.set(r.get() + 1));
//!     weft::sleep(std::time::Duration::from_millis(1)).unwrap(); // others run meanwhile
//!     REQUESTS.with(|r| r.get())
//! });
//! assert_eq!(h.join().unwrap(), 1);
//! ```

use std::any::Any;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::thread::current_locals;

/// A key for per-virtual-thread storage, created by [`local!`](crate::local!).
pub struct LocalKey<T: 'static> {
    init: fn() -> T,
    id: AtomicUsize,
    _marker: PhantomData<fn() -> T>,
}

static NEXT_KEY: AtomicUsize = AtomicUsize::new(1);

impl<T: 'static> LocalKey<T> {
    #[doc(hidden)]
    pub const fn new(init: fn() -> T) -> LocalKey<T> {
        LocalKey {
            init,
            id: AtomicUsize::new(0),
            _marker: PhantomData,
        }
    }

    fn index(&self) -> usize {
        let id = self.id.load(Ordering::Acquire);
        if id != 0 {
            return id - 1;
        }
        let new = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        match self
            .id
            .compare_exchange(0, new, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => new - 1,
            Err(won) => won - 1,
        }
    }

    /// Runs `f` with a reference to this thread's value, initialising it on
    /// first use. The reference stays valid across blocking calls.
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        let idx = self.index();
        let locals = current_locals();
        // SAFETY: `locals` belongs to the calling thread and only this thread
        // touches it; no `&mut` to it outlives this block.
        let existing = unsafe {
            let l = &*locals;
            l.slots
                .get(idx)
                .and_then(|s| s.as_ref())
                .map(|b| &**b as *const dyn Any)
        };
        let ptr = match existing {
            Some(p) => p,
            None => {
                // Initialise outside any borrow: `init` may use other locals.
                let value: Box<dyn Any> = Box::new((self.init)());
                // SAFETY: as above; the &mut ends within this block.
                unsafe {
                    let l = &mut *locals;
                    if l.slots.len() <= idx {
                        l.slots.resize_with(idx + 1, || None);
                    }
                    let slot = l.slots[idx].get_or_insert(value);
                    &**slot as *const dyn Any
                }
            }
        };
        // SAFETY: the value is boxed, so it does not move when `slots` grows;
        // it is dropped only at thread exit, after `f` has returned.
        let any = unsafe { &*ptr };
        f(any
            .downcast_ref::<T>()
            .expect("weft::local! slot holds its own type"))
    }
}

/// Declares per-virtual-thread storage, with the syntax of `thread_local!`.
///
/// See the [module docs](mod@crate::local) for an example.
#[macro_export]
macro_rules! local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident : $t:ty = $init:expr; $($rest:tt)*) => {
        $(#[$attr])* $vis static $name: $crate::LocalKey<$t> = $crate::LocalKey::new({
            fn __weft_local_init() -> $t { $init }
            __weft_local_init
        });
        $crate::local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident : $t:ty = $init:expr) => {
        $crate::local!($(#[$attr])* $vis static $name: $t = $init;);
    };
}
