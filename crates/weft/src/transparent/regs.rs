//! The poller registrations the hooks make for the program's descriptors,
//! and when their states may be freed (module docs, "Freeing poller
//! states").

use crate::unpoison::Unpoison;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use libc::c_int;

use super::fork::forked;
use super::sys;
use crate::poll::Registration;

static REGS: Mutex<Option<HashMap<c_int, Arc<Hooked>>>> = Mutex::new(None);

/// A poller registration the hooks made for a program's descriptor, and
/// what identifies the file it was made for (module docs, "Freeing poller
/// states").
pub(super) struct Hooked {
    pub(super) reg: Registration,
    id: (libc::mode_t, u64, u64),
    /// Set when the hooks let go of it (the descriptor was closed, or
    /// found reused): a waiter on it fetches the number's registration
    /// again instead of waiting on a dead one.
    pub(super) dead: AtomicBool,
}

/// Registrations let go of without a certain `EPOLL_CTL_DEL`: kept for the
/// life of the process, never freed (epoll may still name their state).
static ABANDONED: AtomicUsize = AtomicUsize::new(0);

/// How many registrations were abandoned (a descriptor closed behind the
/// hooks' back), for tests and diagnostics.
pub(crate) fn abandoned() -> usize {
    ABANDONED.load(Ordering::Relaxed)
}

/// Entries in `REGS`: `forget` skips the lock while there are none.
static NREGS: AtomicUsize = AtomicUsize::new(0);

/// The poller registration for `fd`, made on first use. One made for a
/// file that is no longer the one open on `fd` (closed behind the hooks'
/// back, the number reused) is abandoned and a new one made.
pub(super) fn registration(fd: c_int) -> Option<Arc<Hooked>> {
    let id = sys::file_id(fd)?;
    let mut g = REGS.lock().unpoison();
    let map = g.get_or_insert_with(HashMap::new);
    if let Some(h) = map.get(&fd) {
        if h.id == id {
            return Some(h.clone());
        }
        let h = map.remove(&fd).expect("present");
        NREGS.fetch_sub(1, Ordering::Relaxed);
        // Not `EPOLL_CTL_DEL` by number: it would name the new file.
        let_go(h, false);
    }
    let saved = sys::errno();
    // EEXIST: a weft::net socket, registered by Weft itself.
    let r = Registration::new(fd).ok().map(|reg| {
        Arc::new(Hooked {
            reg,
            id,
            dead: AtomicBool::new(false),
        })
    });
    sys::set_errno(saved);
    if let Some(r) = &r {
        NREGS.fetch_add(1, Ordering::Relaxed);
        map.insert(fd, r.clone());
    }
    r
}

/// Lets go of a registration taken out of `REGS`: wakes its waiters (they
/// fetch the number's registration again, or their retried call fails),
/// and frees its state only if `removed` (its epoll entry is known gone);
/// otherwise keeps it for ever. Keeps errno.
fn let_go(h: Arc<Hooked>, removed: bool) {
    let saved = sys::errno();
    h.dead.store(true, Ordering::SeqCst);
    h.reg.state().set_closed();
    if !removed {
        ABANDONED.fetch_add(1, Ordering::Relaxed);
        // Its `Registration` never drops, so its state is never freed
        // (nor deleted by number from epoll later).
        std::mem::forget(h.clone());
    }
    drop(h);
    sys::set_errno(saved);
}

/// Forgets `fd`'s registration (`fds::forget`): takes it out of `REGS`
/// and lets go of it, freeing its state only if its epoll entry is known
/// gone.
pub(super) fn forget(fd: c_int) {
    if NREGS.load(Ordering::Relaxed) == 0 || forked() || super::signals::in_handler() {
        // Inside a signal handler the interrupted code may hold `REGS`:
        // the number is left as closed behind the hooks' back (module
        // docs, "Freeing poller states", rule 3).
        // In a fork child `REGS` may be locked for ever (its holder was
        // another carrier of the parent), and std's child calls `dup2`
        // between fork and exec: leave the parent's registrations alone
        // (the child shares the parent's epoll set and must not change it).
        return;
    }
    let h = REGS.lock().unpoison().as_mut().and_then(|m| m.remove(&fd));
    if let Some(h) = h {
        NREGS.fetch_sub(1, Ordering::Relaxed);
        // Out of the poller while `fd` is still open and still the file
        // it was registered for: then `EPOLL_CTL_DEL` by number removes
        // exactly its entry, and the state may be freed.
        let same = sys::file_id(fd) == Some(h.id);
        let removed = same && h.reg.deregister();
        let_go(h, removed);
    }
}

/// Forgets the registrations of every descriptor in `first..=last`
/// (`fds::forget_range`).
pub(super) fn forget_range(first: c_int, last: c_int) {
    if NREGS.load(Ordering::Relaxed) == 0 || super::signals::in_handler() {
        return;
    }
    let fds: Vec<c_int> = REGS
        .lock()
        .unpoison()
        .as_ref()
        .map(|m| {
            m.keys()
                .copied()
                .filter(|&fd| fd >= first && fd <= last)
                .collect()
        })
        .unwrap_or_default();
    for fd in fds {
        forget(fd);
    }
}
