//! Copies of one socket on several descriptors (`dup`, `dup2`, `dup3`,
//! `fcntl(F_DUPFD*)`): the program's `O_NONBLOCK` is one per file
//! description, so what it sets through one copy is seen through the
//! others.

use crate::unpoison::Unpoison;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::c_int;

use super::fork::forked;
use super::state::{OTHER, PIPE, state};
use super::sys;

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
pub(super) fn forget_copy(fd: c_int) {
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

/// Forgets every descriptor in `first..=last` as a copy (`close_range`,
/// `closefrom`).
pub(super) fn forget_range(first: c_int, last: c_int) {
    if !copies_usable() {
        return;
    }
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
