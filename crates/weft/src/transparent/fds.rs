//! Per-descriptor state: whether Weft made a socket non-blocking behind the
//! program's back, and the poller registrations the hooks wait on.

use crate::unpoison::Unpoison;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libc::c_int;

use super::next;
use super::sys::{self, raw};
use crate::poll::{Interest, Registration, WaitError};
use crate::thread::Blocker;

/// Descriptors at or above this pass through untouched.
pub(super) const MAX_FDS: usize = 1 << 20;

/// Not looked at since it was opened (or by an OS thread only).
pub(super) const UNKNOWN: u8 = 0;
/// Not a socket: calls pass through.
pub(super) const OTHER: u8 = 1;
/// A socket the program made non-blocking: calls pass through.
pub(super) const USER_NB: u8 = 2;
/// A socket the program believes blocking, non-blocking in the kernel
/// because Weft made it so: calls wait (park or poll) on `EAGAIN`.
pub(super) const MANAGED: u8 = 3;
/// A pipe or FIFO other than descriptors 0, 1 and 2: a call that would
/// wait runs on the offload pool while the virtual thread parks (see
/// [`pipe_call`]).
pub(super) const PIPE: u8 = 4;

// 1 MiB of zeroed .bss: committed by the kernel only where touched.
static STATE: [AtomicU8; MAX_FDS] = [const { AtomicU8::new(UNKNOWN) }; MAX_FDS];

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
    dead: AtomicBool,
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

/// Set in a `fork` child: it has no carriers, every call passes through,
/// and no hook takes a lock (another carrier may have held it at the fork:
/// its owner does not exist in the child).
static FORKED: AtomicBool = AtomicBool::new(false);

extern "C" fn in_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// Whether this process is a `fork` child of the one that loaded Weft.
pub(super) fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// Registers [`in_child`] with `pthread_atfork` before `main` (an
/// `.init_array` constructor): a fork made before the first hooked call
/// must mark its child too. A lazy registration (at the first call on a
/// virtual thread) left a child forked earlier by a virtual thread
/// believing it ran on one, parking on carriers it does not have.
extern "C" fn register_atfork() {
    // SAFETY: registers a handler that only stores an atomic; libc is
    // initialised before the executable's constructors run.
    unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
}

#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_ATFORK: extern "C" fn() = register_atfork;

fn slot(fd: c_int) -> Option<&'static AtomicU8> {
    usize::try_from(fd).ok().and_then(|i| STATE.get(i))
}

pub(super) fn state(fd: c_int) -> u8 {
    slot(fd).map_or(OTHER, |s| s.load(Ordering::Relaxed))
}

pub(super) fn set_state(fd: c_int, st: u8) {
    if let Some(s) = slot(fd) {
        s.store(st, Ordering::Relaxed);
    }
}

/// Whether the caller is a virtual thread whose hooked calls may park.
pub(crate) fn on_virtual() -> bool {
    if FORKED.load(Ordering::Relaxed) {
        return false;
    }
    // Inside a signal handler every call goes to the kernel (no park, no
    // lock, no allocation: `signals.rs`); checked on virtual threads only.
    crate::thread::current_virtual().is_some() && !super::signals::in_handler() && super::enabled()
}

/// Classifies `fd` for a virtual thread's call, making a blocking socket
/// non-blocking in the kernel (state `MANAGED`). Raw syscalls only.
pub(super) fn classify(fd: c_int) -> u8 {
    let st = state(fd);
    if st != UNKNOWN || slot(fd).is_none() {
        return st;
    }
    if fd <= 2 {
        // Standard input, output and error, whatever they are (a journald
        // stream socket under systemd, a pipe): their file description is
        // shared with other processes, which must not see an `O_NONBLOCK`
        // Weft set, and std's stdio locks are re-entrant per *OS* thread,
        // so a `println!` that parked holding one would let another
        // virtual thread of the same carrier into it.
        set_state(fd, OTHER);
        return OTHER;
    }
    let saved = sys::errno();
    let new = match sys::file_type(fd) {
        Some(libc::S_IFIFO) => PIPE,
        Some(libc::S_IFSOCK) => {
            let fl = sys::fcntl(fd, libc::F_GETFL, 0);
            if fl < 0 {
                OTHER
            } else if fl & libc::O_NONBLOCK != 0 {
                // Weft's own flag if a copy of this socket is Weft's.
                match adopt(fd) {
                    UNKNOWN => USER_NB,
                    st => st,
                }
            } else if sys::fcntl(fd, libc::F_SETFL, (fl | libc::O_NONBLOCK) as usize) < 0 {
                OTHER
            } else {
                MANAGED
            }
        }
        Some(_) => OTHER,
        None => UNKNOWN, // bad descriptor: let the call itself fail
    };
    sys::set_errno(saved);
    if new != UNKNOWN {
        set_state(fd, new);
    }
    new
}

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

/// Forgets `fd` before it is closed (or replaced by `dup2`), or after the
/// kernel gave its number to a new file (`socket`, `accept`): wakes the
/// threads waiting on it (their retried call then fails with `EBADF`).
pub(super) fn forget(fd: c_int) {
    set_state(fd, UNKNOWN);
    forget_copy(fd);
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

/// Forgets every descriptor in `first..=last` (`close_range`,
/// `closefrom`): their states, and their registrations.
pub(super) fn forget_range(first: c_int, last: c_int) {
    if forked() || first < 0 || last < first {
        return;
    }
    let top = last.min(MAX_FDS as c_int - 1);
    for fd in first..=top {
        if state(fd) != UNKNOWN {
            set_state(fd, UNKNOWN);
        }
    }
    if copies_usable() {
        let mut g = COPIES.lock().unpoison();
        if let Some(c) = g.as_mut() {
            let gone: Vec<(c_int, FileId)> = c
                .by_fd
                .iter()
                .filter(|&(&fd, _)| fd >= first && fd <= last)
                .map(|(&fd, &id)| (fd, id))
                .collect();
            for (fd, id) in gone {
                c.by_fd.remove(&fd);
                remove_member(c, fd, id);
            }
            NCOPIES.store(c.by_fd.len(), Ordering::Relaxed);
        }
    }
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

/// What identifies an open file, as [`sys::file_id`] reads it. A socket
/// has one file description (it cannot be opened again by name), so two
/// descriptors of one socket share its description exactly when their
/// identities are equal.
type FileId = (libc::mode_t, u64, u64);

/// Sockets open on more than one descriptor through the hooked `dup`,
/// `dup2`, `dup3` and `fcntl(F_DUPFD*)`, so that what the program sets
/// through one (`O_NONBLOCK`) is seen through the others, as the kernel's
/// per-description flag would be (module docs, "Semantics kept"). Only
/// copies are here: a socket on one descriptor costs nothing.
#[derive(Default)]
struct Copies {
    by_fd: HashMap<c_int, FileId>,
    by_file: HashMap<FileId, Vec<c_int>>,
}

static COPIES: Mutex<Option<Copies>> = Mutex::new(None);
/// Entries of `COPIES.by_fd`: callers skip the lock while there are none.
static NCOPIES: AtomicUsize = AtomicUsize::new(0);

/// Whether [`COPIES`] may be locked by this caller: not in a fork child
/// (its holder may be a carrier the child does not have) nor in a signal
/// handler (the interrupted code may hold it).
fn copies_usable() -> bool {
    NCOPIES.load(Ordering::Relaxed) != 0 && !forked() && !super::signals::in_handler()
}

/// Records that `new` is a copy of `old` (a successful `dup` of it), if
/// `old` is a socket. Keeps errno.
pub(super) fn note_copy(old: c_int, new: c_int) {
    let st = state(old);
    if old == new || st == OTHER || st == PIPE || forked() || super::signals::in_handler() {
        return;
    }
    let Some(id) = sys::file_id(old) else { return };
    if id.0 != libc::S_IFSOCK {
        return;
    }
    let mut g = COPIES.lock().unpoison();
    let c = g.get_or_insert_with(Copies::default);
    for fd in [old, new] {
        if let Some(prev) = c.by_fd.insert(fd, id)
            && prev != id
        {
            remove_member(c, fd, prev);
        }
        let members = c.by_file.entry(id).or_default();
        if !members.contains(&fd) {
            members.push(fd);
        }
    }
    NCOPIES.store(c.by_fd.len(), Ordering::Relaxed);
}

/// Takes `fd` out of its socket's list; a list left with one member is
/// dropped (that socket is on one descriptor again).
fn remove_member(c: &mut Copies, fd: c_int, id: FileId) {
    let Some(members) = c.by_file.get_mut(&id) else {
        return;
    };
    members.retain(|&m| m != fd);
    if members.len() <= 1 {
        for m in c.by_file.remove(&id).unwrap_or_default() {
            c.by_fd.remove(&m);
        }
    }
}

/// `fd` is closed or about to be replaced: it is no copy of anything now.
fn forget_copy(fd: c_int) {
    if !copies_usable() {
        return;
    }
    let mut g = COPIES.lock().unpoison();
    let Some(c) = g.as_mut() else { return };
    if let Some(id) = c.by_fd.remove(&fd) {
        remove_member(c, fd, id);
    }
    NCOPIES.store(c.by_fd.len(), Ordering::Relaxed);
}

/// The other descriptors still open on `fd`'s socket, each checked
/// against the socket's identity (a number closed behind the hooks' back
/// and reused by another file is dropped). Keeps errno.
pub(super) fn copies_of(fd: c_int) -> Vec<c_int> {
    if !copies_usable() {
        return Vec::new();
    }
    let mut g = COPIES.lock().unpoison();
    let Some(c) = g.as_mut() else {
        return Vec::new();
    };
    let Some(&id) = c.by_fd.get(&fd) else {
        return Vec::new();
    };
    let (live, stale): (Vec<c_int>, Vec<c_int>) = c.by_file[&id]
        .iter()
        .copied()
        .partition(|&m| sys::file_id(m) == Some(id));
    for m in stale {
        c.by_fd.remove(&m);
        remove_member(c, m, id);
    }
    NCOPIES.store(c.by_fd.len(), Ordering::Relaxed);
    if !live.contains(&fd) {
        return Vec::new();
    }
    live.into_iter().filter(|&m| m != fd).collect()
}

/// For a descriptor Weft has no view of yet: the view of a copy of the
/// same socket that Weft manages or the program made non-blocking (the
/// kernel's `O_NONBLOCK` on it may be Weft's), recorded for `fd` too;
/// `UNKNOWN` if there is none.
pub(super) fn adopt(fd: c_int) -> u8 {
    let st = copies_of(fd)
        .into_iter()
        .map(state)
        .find(|&st| st == MANAGED || st == USER_NB)
        .unwrap_or(UNKNOWN);
    if st != UNKNOWN {
        set_state(fd, st);
    }
    st
}

/// Records `st` (`MANAGED` or `USER_NB`) for `fd` and for every copy of its
/// socket: the program's `O_NONBLOCK` is one per file description.
pub(super) fn set_shared_state(fd: c_int, st: u8) {
    set_state(fd, st);
    for m in copies_of(fd) {
        set_state(m, st);
    }
}

/// Why a park ended without the operation completing.
pub(super) enum Stop {
    TimedOut,
    Interrupted,
    /// The registration waited on was let go of (see [`park_hooked`]).
    Gone,
}

/// Runs `op` (`None` = would block) on a virtual thread, parking on the
/// poller between attempts. `Err(None)` if `fd` cannot be registered.
pub(super) fn park_io<R>(
    fd: c_int,
    i: Interest,
    deadline: Option<Instant>,
    call: &'static str,
    mut op: impl FnMut() -> Option<R>,
) -> Result<R, Option<Stop>> {
    loop {
        let h = registration(fd).ok_or(None)?;
        let b = Blocker::Call { call, fd };
        match park_hooked(&h, i, deadline, b, call, &mut op) {
            Err(Stop::Gone) => {} // closed or reused under us: fetch again
            r => return r.map_err(Some),
        }
    }
}

/// [`park_reg`] on one of the hooks' registrations: ends with
/// [`Stop::Gone`] when the hooks let go of it while the call waited.
pub(super) fn park_hooked<R>(
    h: &Hooked,
    i: Interest,
    deadline: Option<Instant>,
    b: Blocker,
    call: &'static str,
    mut op: impl FnMut() -> Option<R>,
) -> Result<R, Stop> {
    let mut gone = false;
    let r = park_reg(&h.reg, i, deadline, b, call, || {
        if gone {
            return Some(None);
        }
        let r = op();
        if r.is_none() && h.dead.load(Ordering::SeqCst) {
            gone = true;
            return Some(None);
        }
        r.map(Some)
    })?;
    r.ok_or(Stop::Gone)
}

/// [`park_io`] on a registration the caller holds: a descriptor of the
/// program's (through [`registration`]), or one the hook made for this
/// call only (a temporary epoll set, a pidfd), shown in dumps as `b`.
pub(super) fn park_reg<R>(
    reg: &Registration,
    i: Interest,
    deadline: Option<Instant>,
    b: Blocker,
    call: &'static str,
    mut op: impl FnMut() -> Option<R>,
) -> Result<R, Stop> {
    let mut counted = false;
    loop {
        let (ready, snap) = reg.snapshot(i);
        if ready {
            if let Some(r) = op() {
                return Ok(r);
            }
            reg.clear_if(i, snap);
        }
        if !counted {
            counted = true;
            super::count_park(call);
        }
        let saved = sys::errno();
        let w = reg.wait_as(i, deadline, b.clone());
        sys::set_errno(saved);
        match w {
            Ok(()) => {}
            Err(WaitError::TimedOut) => return Err(Stop::TimedOut),
            Err(WaitError::Interrupted) => return Err(Stop::Interrupted),
        }
    }
}

/// Parks on a descriptor the hook itself opened for this one wait (an
/// epoll set, a pidfd): registers it, runs `op` until it is `Some` with
/// [`park_reg`] (waiting for `fd` to read ready), deregisters it and
/// closes it. `None` if it cannot be registered (the caller falls back);
/// `fd` is closed in every case.
pub(super) fn park_on_own<R>(
    fd: c_int,
    deadline: Option<Instant>,
    b: Blocker,
    call: &'static str,
    op: impl FnMut() -> Option<R>,
) -> Option<Result<R, Stop>> {
    let saved = sys::errno();
    let reg = Registration::new(fd).ok();
    sys::set_errno(saved);
    let r = reg
        .as_ref()
        .map(|reg| park_reg(reg, Interest::Read, deadline, b, call, op));
    // Out of the poller while `fd` is open (`Registration`'s drop), then
    // closed: the number is ours until then.
    drop(reg);
    let saved = sys::errno();
    raw!(libc::SYS_close, fd);
    sys::set_errno(saved);
    r
}

/// A raw call's result: `Some` unless it failed with `EAGAIN`.
pub(super) fn unless_eagain(r: isize) -> Option<isize> {
    if r < 0 {
        let e = sys::errno();
        if e == libc::EAGAIN || e == libc::EWOULDBLOCK {
            return None;
        }
    }
    Some(r)
}

/// A stream/datagram call on a socket: the shared logic of the read and
/// write families. `op(done)` is the raw call for the caller's buffers
/// past their first `done` bytes (only ever 0 unless `whole`); `dontwait`
/// if the caller passed `MSG_DONTWAIT`; `iov` the buffers if the call is
/// one a pipe takes (see [`pipe_call`]).
///
/// `whole` (the total length) makes a call on a managed socket go on
/// until all of it is transferred, as the kernel does on a blocking socket:
/// every stream write (`write`, `send`, …, which the kernel completes
/// unless a signal, a timeout or an error ends it, returning the count so
/// far), and a stream read with `MSG_WAITALL`. A partial count is returned
/// if an interrupt, the `SO_*TIMEO` deadline, end of file or an error
/// ends it after some bytes moved.
/// Whether a call on `fd` is left to the kernel, Weft not waiting for it
/// (then it is libc's own call: `next.rs`): the caller asked not to wait,
/// the program made the descriptor non-blocking, Weft does not manage it,
/// or an OS thread calls on a descriptor no virtual thread made Weft's.
/// `sock_call` waits for exactly the others.
pub(super) fn kernel_waits(fd: c_int, dontwait: bool) -> bool {
    let st = state(fd);
    dontwait || st == OTHER || st == USER_NB || ((st == UNKNOWN || st == PIPE) && !on_virtual())
}

pub(super) fn sock_call(
    fd: c_int,
    read: bool,
    call: &'static str,
    dontwait: bool,
    iov: Iov,
    whole: Option<fn(Iov) -> usize>,
    mut op: impl FnMut(usize) -> isize,
) -> isize {
    let mut st = state(fd);
    if dontwait || st == OTHER || st == USER_NB {
        return op(0);
    }
    let virt = on_virtual();
    if st == UNKNOWN {
        if !virt {
            return op(0);
        }
        st = classify(fd);
    }
    if st == PIPE {
        return pipe_call(fd, read, call, iov, || op(0));
    }
    if st != MANAGED {
        return op(0);
    }
    if !virt {
        // A cancellation point acts on a pending cancellation on entry,
        // even when the call would not wait (`next.rs`).
        // SAFETY: glibc's pthread_testcancel takes nothing; it may unwind
        // (a forced unwind, through frames without destructors).
        unsafe { pthread_testcancel() };
    }
    // MANAGED from here on. Inside a signal handler a call that moved
    // part of its length returns the count (no copy of the caller's
    // iovecs is made for the rest: no allocation there).
    let whole = if !virt && super::signals::in_handler() {
        None
    } else {
        whole
    };
    let mut p = Progress {
        fd,
        read,
        iov,
        whole,
        done: 0,
        total: usize::MAX,
    };
    if let Some(r) = unless_eagain(op(0))
        && let Some(end) = p.step(r)
    {
        return end;
    }
    let timeout = sys::sock_timeout(fd, read);
    let deadline = timeout.and_then(|d| crate::clock::now().checked_add(d));
    // A socket Weft manages that was `dup2`ed onto 0, 1 or 2 keeps its
    // `O_NONBLOCK` (the file description is already Weft's), but a call
    // on those numbers blocks the carrier (std's stdio locks, above).
    if !(virt && fd > 2) {
        return poll_loop(p, deadline, op);
    }
    match registration(fd) {
        Some(h) => park_loop(h, p, call, deadline, op),
        None => poll_loop(p, deadline, op),
    }
}

/// Where a managed socket call stands: what moved so far, and what makes
/// it whole. Plain data (no destructor: `poll_loop` runs under it, and a
/// cancelled OS thread unwinds through its frame).
#[derive(Clone, Copy)]
struct Progress {
    fd: c_int,
    read: bool,
    iov: Iov,
    /// The length that ends the call (`write`, `MSG_WAITALL`), if any.
    whole: Option<fn(Iov) -> usize>,
    done: usize,
    /// `whole`'s length once read (`usize::MAX` before).
    total: usize,
}

impl Progress {
    /// Counts a completed attempt `r`; `Some(result)` ends the call.
    fn step(&mut self, r: isize) -> Option<isize> {
        if r <= 0 || self.whole.is_none() {
            return Some(if self.done > 0 { self.done as isize } else { r });
        }
        if self.total == usize::MAX {
            self.total = self.whole.map_or(0, |len| len(self.iov));
            if self.done == 0 && (r as usize >= self.total || (self.read && !is_stream(self.fd))) {
                return Some(r);
            }
        }
        self.done += r as usize;
        (self.done >= self.total).then_some(self.done as isize)
    }

    /// What ends the call with error `e` after `done` bytes: the count,
    /// or the error.
    fn partial(&self, e: c_int) -> isize {
        if self.done > 0 {
            self.done as isize
        } else {
            fail(e)
        }
    }

    fn interest(&self) -> Interest {
        if self.read {
            Interest::Read
        } else {
            Interest::Write
        }
    }
}

/// A virtual thread's wait for a managed socket: parks on the poller
/// between attempts.
fn park_loop(
    mut h: Arc<Hooked>,
    mut p: Progress,
    call: &'static str,
    deadline: Option<Instant>,
    mut op: impl FnMut(usize) -> isize,
) -> isize {
    let fd = p.fd;
    loop {
        let b = Blocker::Call { call, fd };
        let done = p.done;
        let r = match park_hooked(&h, p.interest(), deadline, b, call, || {
            unless_eagain(op(done))
        }) {
            Ok(r) => r,
            Err(Stop::TimedOut) => return p.partial(libc::EAGAIN),
            Err(Stop::Interrupted) => return p.partial(libc::EINTR),
            Err(Stop::Gone) => match registration(fd) {
                Some(again) => {
                    h = again;
                    continue;
                }
                None => {
                    drop(h);
                    return poll_loop(p, deadline, op);
                }
            },
        };
        if let Some(end) = p.step(r) {
            return end;
        }
    }
}

unsafe extern "C-unwind" {
    fn pthread_testcancel();
}

/// Blocks until `fd` has `events` or `timeout` passes: 1 ready, 0 timed
/// out, -1 error (errno set). In libc's `ppoll` (a cancellation point),
/// else a raw one.
pub(super) fn wait_one(fd: c_int, events: i16, timeout: Option<Duration>) -> c_int {
    match next::PPOLL.get() {
        // SAFETY: one pollfd and an optional timespec, locals of
        // `poll_one_via`'s frame (which, like this one, drops nothing).
        Some(f) => sys::poll_one_via(fd, events, timeout, |p, tsp| unsafe {
            f(p, 1, tsp, std::ptr::null())
        }),
        None => sys::poll_one(fd, events, timeout),
    }
}

/// An OS thread's wait for a managed socket (or a virtual thread's with
/// no registration to be had): blocks in libc's `ppoll`, a cancellation
/// point (`next.rs`); nothing in this frame or its callers' up to the hook
/// has a destructor.
fn poll_loop(
    mut p: Progress,
    deadline: Option<Instant>,
    mut op: impl FnMut(usize) -> isize,
) -> isize {
    let ev = if p.read { libc::POLLIN } else { libc::POLLOUT };
    loop {
        let left = match deadline {
            None => None,
            Some(d) => match d.checked_duration_since(crate::clock::now()) {
                Some(l) if !l.is_zero() => Some(l),
                _ => return p.partial(libc::EAGAIN),
            },
        };
        let r = wait_one(p.fd, ev, left);
        if r < 0 {
            let e = sys::errno();
            // A signal handler ran. The kernel would have restarted the
            // blocking call if every handler asked for it (`SA_RESTART`),
            // as Weft's own sampling signal does.
            if e == libc::EINTR && deadline.is_none() && all_handlers_restart() {
                continue;
            }
            return p.partial(e);
        }
        if r == 0 {
            return p.partial(libc::EAGAIN);
        }
        if let Some(r) = unless_eagain(op(p.done))
            && let Some(end) = p.step(r)
        {
            return end;
        }
    }
}

/// Whether `fd` is a stream socket (`SO_TYPE`), where a read with
/// `MSG_WAITALL` waits for all of its length; on a datagram socket it is
/// one message.
fn is_stream(fd: c_int) -> bool {
    let mut ty: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
    let saved = sys::errno();
    let r = raw!(
        libc::SYS_getsockopt,
        fd,
        libc::SOL_SOCKET,
        libc::SO_TYPE,
        &mut ty as *mut c_int,
        &mut len as *mut libc::socklen_t
    );
    sys::set_errno(saved);
    r == 0 && ty == libc::SOCK_STREAM
}

/// Whether every signal with a handler has `SA_RESTART` (the kernel then
/// restarts a blocking socket call without a timeout that a handler
/// interrupted). Read only after an `EINTR`, with raw `rt_sigaction`. The
/// signal that interrupted is not known: one handler without the flag
/// anywhere makes the answer `EINTR`, as before.
fn all_handlers_restart() -> bool {
    // The kernel's struct sigaction (x86-64, AArch64): handler, flags,
    // restorer (x86-64 only, unused here), mask.
    #[repr(C)]
    struct KSigaction {
        handler: usize,
        flags: libc::c_ulong,
        restorer: usize,
        mask: u64,
    }
    let saved = sys::errno();
    let mut ok = true;
    for sig in 1..=64 {
        // Faults are delivered by the faulting instruction, never to a
        // thread waiting in the kernel (std handles SIGSEGV and SIGBUS
        // without SA_RESTART, for its stack overflow message).
        if matches!(
            sig,
            libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP
        ) {
            continue;
        }
        let mut old = KSigaction {
            handler: 0,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        let r = raw!(
            libc::SYS_rt_sigaction,
            sig,
            0usize,
            &mut old as *mut KSigaction,
            8usize
        );
        let has_handler = old.handler != libc::SIG_DFL && old.handler != libc::SIG_IGN;
        if r == 0 && has_handler && old.flags & libc::SA_RESTART as libc::c_ulong == 0 {
            ok = false;
            break;
        }
    }
    sys::set_errno(saved);
    ok
}

/// The total length of `iov`'s buffers.
pub(super) fn iov_len(iov: Iov) -> usize {
    match iov {
        Iov::None => 0,
        Iov::One(_, n) | Iov::Sock(n) => n,
        Iov::Msg(m) => {
            // SAFETY: the caller's (sendmsg/recvmsg's) contract: `m` is a
            // valid msghdr.
            let m = unsafe { &*m };
            iov_len(Iov::Vec(m.msg_iov, m.msg_iovlen as c_int))
        }
        Iov::Vec(v, c) => {
            let c = usize::try_from(c).unwrap_or(0);
            if c == 0 {
                return 0;
            }
            // SAFETY: the caller's (writev's) contract: `v` points to `c`
            // iovecs.
            unsafe { std::slice::from_raw_parts(v, c) }
                .iter()
                .map(|x| x.iov_len)
                .sum()
        }
    }
}

/// A copy of the `c` iovecs at `v` without their first `skip` bytes.
pub(super) fn iov_past(v: *const libc::iovec, c: usize, skip: usize) -> Vec<libc::iovec> {
    let mut out = if c == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller's (writev/sendmsg's) contract: `v` points to
        // `c` iovecs.
        unsafe { std::slice::from_raw_parts(v, c) }.to_vec()
    };
    advance(&mut out, skip);
    out
}

/// The buffers of a call: for `read`/`write` (`One`) and `readv`/`writev`
/// (`Vec`) what a pipe's `RWF_NOWAIT` form of the call needs; for the
/// socket-only calls (which a pipe refuses with `ENOTSOCK`) their length
/// (`Sock`) or message (`Msg`), or nothing.
#[derive(Clone, Copy)]
pub(super) enum Iov {
    None,
    One(usize, usize),
    Vec(*const libc::iovec, c_int),
    Sock(usize),
    Msg(*const libc::msghdr),
}

/// `RWF_NOWAIT` on pipes: 0 not tried yet, 1 works, 2 refused
/// (`EOPNOTSUPP`/`EINVAL`/`ENOSYS`: a kernel older than 5.8).
static NOWAIT: AtomicU8 = AtomicU8::new(0);

fn nowait_refused(r: isize) -> bool {
    r < 0 && matches!(sys::errno(), libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS)
}

/// `preadv2`/`pwritev2(fd, iov, cnt, -1, RWF_NOWAIT)`: the call at the
/// file's own position (a pipe has none) that returns `EAGAIN` instead of
/// waiting, whatever the description's `O_NONBLOCK` says.
fn rw_nowait(fd: c_int, read: bool, iov: *const libc::iovec, cnt: c_int) -> isize {
    let n = if read {
        libc::SYS_preadv2
    } else {
        libc::SYS_pwritev2
    };
    raw!(n, fd, iov, cnt, usize::MAX, 0usize, libc::RWF_NOWAIT) as isize
}

/// A call on a pipe (state [`PIPE`]) from a virtual thread. Pipes are
/// shared with another process, so Weft does not change their
/// `O_NONBLOCK` flag as it does a socket's. Instead the call is tried with
/// `RWF_NOWAIT` (Linux 5.8+: a non-blocking attempt on a blocking
/// description, which affects no one else), and on `EAGAIN` the virtual
/// thread parks on Weft's poller (a pipe can be registered with epoll
/// whatever its flags) until the pipe is ready, then tries again. No OS
/// thread is held while it waits (module docs, "Open-ended waits").
///
/// - On an OS thread, or on a pipe the program made non-blocking, the call
///   passes through (`EAGAIN` stays `EAGAIN`).
/// - A blocking write returns when all of it is written, as the kernel's
///   does; a write of at most `PIPE_BUF` bytes stays atomic (`RWF_NOWAIT`
///   writes it whole or not at all, as `O_NONBLOCK` does). An interrupt
///   ([`Thread::interrupt`](crate::Thread::interrupt)) ends the wait: with
///   the count written so far, or `EINTR` if nothing was.
/// - Where the kernel refuses `RWF_NOWAIT` the call runs on the offload
///   pool while the virtual thread parks, as before (not interruptible).
fn pipe_call(
    fd: c_int,
    read: bool,
    call: &'static str,
    iov: Iov,
    mut op: impl FnMut() -> isize,
) -> isize {
    if !on_virtual() || fd <= 2 {
        return op();
    }
    let fl = sys::fcntl(fd, libc::F_GETFL, 0);
    if fl < 0 || fl & libc::O_NONBLOCK != 0 {
        return op();
    }
    let one;
    let (v, cnt) = match iov {
        Iov::None | Iov::Sock(_) | Iov::Msg(_) => return op(), // ENOTSOCK
        Iov::One(p, n) => {
            one = libc::iovec {
                iov_base: p as *mut libc::c_void,
                iov_len: n,
            };
            (&one as *const libc::iovec, 1)
        }
        Iov::Vec(v, c) => (v, c),
    };
    if NOWAIT.load(Ordering::Relaxed) != 2 {
        match pipe_nowait(fd, read, call, v, cnt) {
            Some(r) => return r,
            None => NOWAIT.store(2, Ordering::Relaxed),
        }
    }
    pipe_offload(fd, read, call, op)
}

/// [`pipe_call`]'s `RWF_NOWAIT` form; `None` if the kernel refuses it
/// (nothing was transferred).
fn pipe_nowait(
    fd: c_int,
    read: bool,
    call: &'static str,
    v: *const libc::iovec,
    cnt: c_int,
) -> Option<isize> {
    if read {
        let r = rw_nowait(fd, true, v, cnt);
        if nowait_refused(r) {
            return None;
        }
        NOWAIT.store(1, Ordering::Relaxed);
        if unless_eagain(r).is_some() {
            return Some(r);
        }
        let op = || unless_eagain(rw_nowait(fd, true, v, cnt));
        return Some(match park_io(fd, Interest::Read, None, call, op) {
            Ok(r) => r,
            Err(Some(Stop::Interrupted)) => fail(libc::EINTR),
            Err(Some(Stop::TimedOut | Stop::Gone)) => fail(libc::EAGAIN), // no deadline
            Err(None) => pipe_blocking(fd, true, v, cnt),
        });
    }
    // A write: what is left of the caller's buffers, in a copy of its
    // iovec array (the kernel's limit, IOV_MAX, bounds `cnt`).
    let cnt = usize::try_from(cnt).unwrap_or(0);
    // SAFETY: `writev`'s contract: `v` points to `cnt` iovecs (one of
    // ours for `write`).
    let mut left: Vec<libc::iovec> = unsafe { std::slice::from_raw_parts(v, cnt) }.to_vec();
    let total: usize = left.iter().map(|x| x.iov_len).sum();
    let done = Cell::new(0usize);
    // `Err(())`: the kernel refused RWF_NOWAIT (nothing written).
    let attempt = |left: &mut Vec<libc::iovec>, first: bool| -> Result<Option<isize>, ()> {
        loop {
            let r = rw_nowait(fd, false, left.as_ptr(), left.len() as c_int);
            if first && done.get() == 0 {
                if nowait_refused(r) {
                    return Err(());
                }
                NOWAIT.store(1, Ordering::Relaxed);
            }
            if r < 0 {
                if unless_eagain(r).is_none() {
                    return Ok(None);
                }
                // EPIPE, EBADF, ...: what was written counts, as for a
                // blocking write that a signal ends.
                let d = done.get();
                return Ok(Some(if d > 0 { d as isize } else { -1 }));
            }
            done.set(done.get() + r as usize);
            if done.get() >= total {
                return Ok(Some(done.get() as isize));
            }
            advance(left, r as usize);
        }
    };
    match attempt(&mut left, true) {
        Err(()) => return None,
        Ok(Some(r)) => return Some(r),
        Ok(None) => {}
    }
    loop {
        let Some(h) = registration(fd) else {
            let r = pipe_blocking(fd, false, left.as_ptr(), left.len() as c_int);
            let d = done.get();
            return Some(if r < 0 && d == 0 {
                r
            } else {
                (d + r.max(0) as usize) as isize
            });
        };
        let b = Blocker::Call { call, fd };
        let op = || attempt(&mut left, false).unwrap_or(None);
        return Some(match park_hooked(&h, Interest::Write, None, b, call, op) {
            Ok(r) => r,
            Err(Stop::Gone) => continue,
            Err(_) if done.get() > 0 => done.get() as isize,
            Err(_) => fail(libc::EINTR),
        });
    }
}

/// Drops the first `n` bytes of `v`.
fn advance(v: &mut Vec<libc::iovec>, mut n: usize) {
    let mut k = 0;
    while k < v.len() && n >= v[k].iov_len {
        n -= v[k].iov_len;
        k += 1;
    }
    v.drain(..k);
    if let Some(f) = v.first_mut() {
        f.iov_base = (f.iov_base as usize + n) as *mut libc::c_void;
        f.iov_len -= n;
    }
}

/// The plain blocking form, on the carrier (the pipe could not be
/// registered with the poller: out of memory, a closed descriptor).
fn pipe_blocking(fd: c_int, read: bool, v: *const libc::iovec, cnt: c_int) -> isize {
    let n = if read {
        libc::SYS_readv
    } else {
        libc::SYS_writev
    };
    raw!(n, fd, v, cnt) as isize
}

/// The pre-5.8 fallback: a call that would wait runs on the offload pool.
/// A write cannot be tried without waiting (`POLLOUT` promises room for
/// `PIPE_BUF` bytes, not for the whole write), so every write goes there.
fn pipe_offload(fd: c_int, read: bool, call: &'static str, mut op: impl FnMut() -> isize) -> isize {
    if read && sys::poll_one(fd, libc::POLLIN, Some(Duration::ZERO)) != 0 {
        return op(); // data or end of file (or poll failed: let read say)
    }
    super::count_park(call);
    let job = Offloaded(&mut op);
    let (r, e) = crate::blocking::blocking_as(Blocker::Call { call, fd }, move || job.run());
    sys::set_errno(e);
    r
}

/// A hooked call's raw system call, sent to the offload pool.
pub(super) struct Offloaded<'a, F>(pub(super) &'a mut F);

// SAFETY: the closure only makes one raw system call with the caller's
// arguments (integers, and pointers into buffers the caller owns). The
// caller is a virtual thread parked inside `blocking` until the offload
// thread has returned from the closure, so those buffers outlive the call
// and nothing else touches them meanwhile; `blocking` runs the closure
// exactly once and does not unwind the caller before it finished.
unsafe impl<F> Send for Offloaded<'_, F> {}

impl<F: FnMut() -> isize> Offloaded<'_, F> {
    /// Runs the call; its result and the offload thread's `errno`.
    pub(super) fn run(self) -> (isize, c_int) {
        let r = (self.0)();
        (r, sys::errno())
    }
}

pub(super) fn fail(e: c_int) -> isize {
    sys::set_errno(e);
    -1
}

/// `Duration` to a deadline, `None` for "forever" or overflow.
pub(super) fn deadline_after(d: Option<Duration>) -> Option<Instant> {
    d.and_then(|d| crate::clock::now().checked_add(d))
}
