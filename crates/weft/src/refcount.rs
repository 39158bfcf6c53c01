//! The reference counts of a shared allocation that is not the global
//! allocator's: a thread record (`thread/record_ref.rs`), whose memory
//! comes from the record slab (`thread/slab.rs`).
//!
//! The protocol is `std::sync::Arc`'s, narrowed to 32-bit counts so that
//! the two counts take one word of every record:
//!
//! - **strong**: the owners of the value. The value is dropped by whoever
//!   takes the count from 1 to 0.
//! - **weak**: the owners of the memory, plus one held jointly by all
//!   strong owners (released by the one that drops the value). The memory
//!   is freed by whoever takes it from 1 to 0.
//!
//! # Orderings (as `Arc`'s, argued the same way)
//!
//! - A new reference is made from an existing one (`clone`, `downgrade`):
//!   `Relaxed` is enough, because the existing reference keeps the counts
//!   above zero and passing the new one to another thread synchronises by
//!   whatever means passes it.
//! - A release is `Release`, and the release that reaches zero is followed
//!   by an `Acquire` fence: every use of the value (or memory) through any
//!   other reference happens before their releases, which happen before
//!   the fence, which happens before the drop (or free).
//! - `upgrade` increments strong only from a non-zero value
//!   (compare-and-swap), so it never revives a value whose last strong
//!   reference is gone: the count that reaches zero stays there. Its
//!   success is `Acquire`, as `Arc`'s (which needs it for values
//!   initialised after their first weak reference; here every value is
//!   written before any reference to it exists, so it is a margin only).
//!
//! # Overflow
//!
//! A count past [`MAX`] aborts the process, as `Arc` does past
//! `isize::MAX`: with 32 bits a program can reach it by leaking handles
//! (`mem::forget` in a loop), and a wrapped count would free a value still
//! in use. An abort is what it gets instead.
//!
//! The model check is `tests/loom_refcount.rs`.

use std::sync::atomic::{AtomicU32, Ordering};

/// The largest count; one more aborts.
pub const MAX: u32 = i32::MAX as u32;

/// The 32-bit atomic the counts are made of: std's for every record, and
/// loom's in the model check, which so checks this very code.
pub trait Atomic32: Sized {
    /// An atomic holding `v`.
    fn new(v: u32) -> Self;
    /// As `AtomicU32::load`.
    fn load(&self, o: Ordering) -> u32;
    /// As `AtomicU32::fetch_add`.
    fn fetch_add(&self, v: u32, o: Ordering) -> u32;
    /// As `AtomicU32::fetch_sub`.
    fn fetch_sub(&self, v: u32, o: Ordering) -> u32;
    /// As `AtomicU32::compare_exchange_weak`.
    fn compare_exchange_weak(&self, c: u32, n: u32, s: Ordering, f: Ordering) -> Result<u32, u32>;
    /// The fence of the same world (`std::sync::atomic::fence` or loom's).
    fn fence(o: Ordering);
}

/// `Atomic32` for an atomic type whose methods have std's names, with the
/// fence of its own world.
macro_rules! atomic32 {
    ($t:ty, $fence:path) => {
        impl Atomic32 for $t {
            fn new(v: u32) -> Self {
                <$t>::new(v)
            }
            #[inline]
            fn load(&self, o: Ordering) -> u32 {
                <$t>::load(self, o)
            }
            #[inline]
            fn fetch_add(&self, v: u32, o: Ordering) -> u32 {
                <$t>::fetch_add(self, v, o)
            }
            #[inline]
            fn fetch_sub(&self, v: u32, o: Ordering) -> u32 {
                <$t>::fetch_sub(self, v, o)
            }
            #[inline]
            fn compare_exchange_weak(
                &self,
                c: u32,
                n: u32,
                s: Ordering,
                f: Ordering,
            ) -> Result<u32, u32> {
                <$t>::compare_exchange_weak(self, c, n, s, f)
            }
            #[inline]
            fn fence(o: Ordering) {
                $fence(o)
            }
        }
    };
}

atomic32!(AtomicU32, std::sync::atomic::fence);
#[cfg(loom)]
atomic32!(loom::sync::atomic::AtomicU32, loom::sync::atomic::fence);

/// A strong and a weak count (see the module docs).
pub struct Counts<A: Atomic32 = AtomicU32> {
    strong: A,
    weak: A,
}

impl<A: Atomic32> Default for Counts<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Atomic32> Counts<A> {
    /// One strong reference (and the weak count the strong ones share).
    pub fn new() -> Counts<A> {
        Counts {
            strong: A::new(1),
            weak: A::new(1),
        }
    }

    /// One more strong reference, made from an existing one.
    #[inline]
    pub fn inc_strong(&self) {
        if self.strong.fetch_add(1, Ordering::Relaxed) >= MAX {
            overflow();
        }
    }

    /// One strong reference fewer. `true`: it was the last, and the caller
    /// must drop the value and then call [`Counts::dec_weak`] (the weak
    /// count the strong ones shared); everything any other owner did with
    /// the value happens before this return.
    #[inline]
    pub fn dec_strong(&self) -> bool {
        if self.strong.fetch_sub(1, Ordering::Release) != 1 {
            return false;
        }
        A::fence(Ordering::Acquire);
        true
    }

    /// One more weak reference, made from an existing strong or weak one.
    #[inline]
    pub fn inc_weak(&self) {
        if self.weak.fetch_add(1, Ordering::Relaxed) >= MAX {
            overflow();
        }
    }

    /// One weak reference fewer. `true`: it was the last reference of any
    /// kind, and the caller frees the memory.
    #[inline]
    pub fn dec_weak(&self) -> bool {
        if self.weak.fetch_sub(1, Ordering::Release) != 1 {
            return false;
        }
        A::fence(Ordering::Acquire);
        true
    }

    /// A strong reference from a weak one, unless the value is gone (or
    /// being dropped).
    #[inline]
    pub fn upgrade(&self) -> bool {
        let mut n = self.strong.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return false;
            }
            if n >= MAX {
                overflow();
            }
            match self
                .strong
                .compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
    }

    /// The strong count: a snapshot, for tests.
    #[cfg(any(test, loom))]
    pub fn strong(&self) -> u32 {
        self.strong.load(Ordering::Relaxed)
    }
}

#[cold]
fn overflow() -> ! {
    eprintln!("weft: a thread record's reference count overflowed (2^31 handles leaked?)");
    std::process::abort()
}
