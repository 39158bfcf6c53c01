//! [`Barrier`]: lets a fixed number of threads meet.

use std::fmt;

use super::condvar::Condvar;
use super::mutex::Mutex;

struct State {
    arrived: usize,
    generation: u64,
}

/// Mirrors [`std::sync::Barrier`]: `n` threads call
/// [`wait`](Barrier::wait); all of them park until the `n`-th arrives, then
/// all continue, and exactly one of them — the last to arrive — is told it
/// is the leader. The barrier is reusable: the next `n` waits form the next
/// generation.
///
/// Waiting parks the virtual thread (or blocks the OS thread). Like std's,
/// it is not interruptible (an interrupt stays pending).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use weft::sync::Barrier;
///
/// let barrier = Arc::new(Barrier::new(4));
/// let handles: Vec<_> = (0..4)
///     .map(|_| {
///         let barrier = Arc::clone(&barrier);
///         weft::spawn(move || barrier.wait().is_leader())
///     })
///     .collect();
/// let leaders = handles
///     .into_iter()
///     .map(|h| h.join().unwrap())
///     .filter(|&is_leader| is_leader)
///     .count();
/// assert_eq!(leaders, 1);
/// ```
pub struct Barrier {
    state: Mutex<State>,
    cvar: Condvar,
    n: usize,
}

/// Returned by [`Barrier::wait`].
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// `true` for exactly one thread per generation (the last to arrive).
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl fmt::Debug for BarrierWaitResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BarrierWaitResult")
            .field("is_leader", &self.0)
            .finish()
    }
}

impl Barrier {
    /// A barrier for `n` threads. `0` behaves like `1`: every wait returns
    /// at once as leader.
    #[cfg(not(loom))]
    #[must_use]
    pub const fn new(n: usize) -> Barrier {
        Barrier {
            state: Mutex::new(State {
                arrived: 0,
                generation: 0,
            }),
            cvar: Condvar::new(),
            n,
        }
    }

    /// A barrier for `n` threads. `0` behaves like `1`: every wait returns
    /// at once as leader.
    #[cfg(loom)]
    #[must_use]
    pub fn new(n: usize) -> Barrier {
        Barrier {
            state: Mutex::new(State {
                arrived: 0,
                generation: 0,
            }),
            cvar: Condvar::new(),
            n,
        }
    }

    /// Parks until `n` threads have called `wait` in this generation.
    pub fn wait(&self) -> BarrierWaitResult {
        // The state is only mutated by code that cannot panic, so poisoning
        // is meaningless here.
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        st.arrived += 1;
        if st.arrived < self.n {
            let generation = st.generation;
            let _st = self
                .cvar
                .wait_while(st, |s| s.generation == generation)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            BarrierWaitResult(false)
        } else {
            st.arrived = 0;
            st.generation = st.generation.wrapping_add(1);
            drop(st);
            self.cvar.notify_all();
            BarrierWaitResult(true)
        }
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}
