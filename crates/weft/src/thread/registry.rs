//! The registry: every live virtual thread, for whoever wants to look.
//!
//! Every virtual thread is in a sharded registry from spawn to exit (one
//! short lock on each): `Builder` registers it before it can run, and its
//! carrier unregisters it after it finishes, while the carrier still holds
//! it — in batches, one lock per shard (see `Carrier::finished`); a
//! terminated thread still waiting for its batch is skipped by readers.
//! The registry holds raw pointers; a thread leaves it before its
//! carrier lets go of it, so a pointer read under the shard lock is valid,
//! and [`all_threads`] turns each into a strong handle under that lock.
//!
//! A thread goes into its *spawner's* shard: each thread that spawns (an
//! OS thread, or a virtual thread with thread-locals of its own) takes a
//! shard, round robin, at its first spawn and keeps it. A loop that spawns
//! thread after thread then finds its shard's lock, free list and slots in
//! its own cache, and the carriers that unregister the threads touch them
//! once per batch. (Sharding by thread id instead moved the spawner to
//! another shard on every spawn, each last written by a carrier: three
//! cache misses per spawn, 9 % of a spawn loop's time in `perf`.) The
//! shard is kept in the record, in [`VThread::reg_key`]'s low bits.
//! Readers (dumps, metrics, the monitor naming the threads behind a stalled
//! carrier) iterate it; nothing here knows who they are.
//!
//! It also lists dump *containers*: the root, each executor, each scope
//! (a thread's container is fixed at spawn, `VThread::container`).

use super::record_ref::RecordArc;
use crate::unpoison::Unpoison;
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use super::VThread;

const SHARDS: usize = 16;
/// Bits of [`VThread::reg_key`] that name the shard; the rest is the
/// index in the shard's vector.
const SHARD_BITS: u32 = SHARDS.trailing_zeros();
const _: () = assert!(SHARDS == 1 << SHARD_BITS);
/// Threads one shard holds: as many as the key's index bits count.
const MAX_PER_SHARD: usize = 1 << (32 - SHARD_BITS);

struct Shard {
    slots: Vec<usize>,
    free: Vec<usize>,
}

static REGISTRY: [Mutex<Shard>; SHARDS] = [const {
    Mutex::new(Shard {
        slots: Vec::new(),
        free: Vec::new(),
    })
}; SHARDS];

/// The next shard a spawner takes.
static NEXT_SHARD: AtomicU32 = AtomicU32::new(0);

std::thread_local! {
    /// The calling spawner's shard, `u8::MAX` until its first spawn.
    static MY_SHARD: Cell<u8> = const { Cell::new(u8::MAX) };
}

/// The calling thread's shard (see the module docs).
fn my_shard() -> usize {
    MY_SHARD.with(|c| {
        if c.get() == u8::MAX {
            let s = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) as usize % SHARDS;
            c.set(s as u8);
        }
        c.get() as usize
    })
}

/// The shard and index a registered thread's key names.
fn split(key: u32) -> (usize, usize) {
    (key as usize & (SHARDS - 1), (key >> SHARD_BITS) as usize)
}

/// Adds a new virtual thread (before it can run).
pub(crate) fn register(thread: &RecordArc) {
    let s = my_shard();
    let mut sh = REGISTRY[s].lock().unpoison();
    let p = RecordArc::as_ptr(thread) as usize;
    let k = match sh.free.pop() {
        Some(k) => {
            sh.slots[k] = p;
            k
        }
        None => {
            // Checked before the pointer goes in: a panic must not leave
            // the registry a pointer to a record that unwinding frees.
            assert!(
                sh.slots.len() < MAX_PER_SHARD,
                "weft: over 2^28 threads registered by one spawner"
            );
            sh.slots.push(p);
            sh.slots.len() - 1
        }
    };
    thread
        .reg_key
        .store((k as u32) << SHARD_BITS | s as u32, Ordering::Relaxed);
}

/// Removes a finished thread (while its carrier still holds it).
pub(crate) fn unregister(thread: &VThread) {
    let (s, k) = split(thread.reg_key.load(Ordering::Relaxed));
    let mut sh = REGISTRY[s].lock().unpoison();
    if sh.slots.get(k) == Some(&(thread as *const VThread as usize)) {
        sh.slots[k] = 0;
        sh.free.push(k);
    }
}

/// Removes finished threads in one pass: sorted by shard, one lock per
/// shard. Their records are released after the locks (`batch` is left
/// empty). The caller keeps each record alive until then, as for
/// [`unregister`]; a registered thread that has terminated is invisible to
/// readers meanwhile.
pub(crate) fn unregister_batch(batch: &mut Vec<RecordArc>) {
    let shard_of = |t: &RecordArc| split(t.reg_key.load(Ordering::Relaxed)).0;
    batch.sort_unstable_by_key(shard_of);
    let mut rest = &batch[..];
    while let Some(first) = rest.first() {
        let s = shard_of(first);
        let n = rest.iter().take_while(|t| shard_of(t) == s).count();
        let mut sh = REGISTRY[s].lock().unpoison();
        for inner in &rest[..n] {
            let (_, k) = split(inner.reg_key.load(Ordering::Relaxed));
            if sh.slots.get(k) == Some(&(RecordArc::as_ptr(inner) as usize)) {
                sh.slots[k] = 0;
                sh.free.push(k);
            }
        }
        drop(sh);
        rest = &rest[n..];
    }
    batch.clear();
}

/// Strong handles to every registered thread.
pub(crate) fn all_threads() -> Vec<RecordArc> {
    let mut out = Vec::new();
    for s in REGISTRY.iter() {
        let sh = s.lock().unpoison();
        for &p in sh.slots.iter().filter(|&&p| p != 0) {
            let p = p as *const VThread;
            // SAFETY: registered pointers are live (module docs).
            if unsafe { (*p).state.load(Ordering::Relaxed) } == super::State::Terminated as u8 {
                continue; // finished, waiting for its carrier's batch
            }
            // SAFETY: registered pointers are live (module docs: a thread
            // leaves the registry, under this lock, before it can be freed),
            // so adding a strong count under the lock is sound.
            unsafe {
                RecordArc::increment_strong_count(p);
                out.push(RecordArc::from_raw(p));
            }
        }
    }
    out
}

/// Calls `f` with every registered thread.
pub(crate) fn for_each_thread(mut f: impl FnMut(&VThread)) {
    for t in all_threads() {
        f(&t);
    }
}
/// Id of the root container.
pub(crate) const ROOT: u64 = 0;

/// The last container id handed out. Ids are 32 bits (a record keeps its
/// container in 4 bytes) and wrap, skipping [`ROOT`]: two containers share
/// an id only if both are alive 2^32 containers apart, and then a dump
/// groups their threads together; nothing else reads the id.
static LAST_CONTAINER: AtomicU32 = AtomicU32::new(0);
static CONTAINERS: Mutex<Vec<(u64, String, u64)>> = Mutex::new(Vec::new());

/// Registers a container (an executor or a scope) and returns its id.
pub(crate) fn new_container(kind: &str, parent: u64) -> u64 {
    let mut id = ROOT;
    while id == ROOT {
        id = u64::from(
            LAST_CONTAINER
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_add(1),
        );
    }
    CONTAINERS
        .lock()
        .unpoison()
        .push((id, format!("{kind}@{id}"), parent));
    id
}

/// Forgets a container (closed executor, finished scope).
pub(crate) fn drop_container(id: u64) {
    CONTAINERS.lock().unpoison().retain(|c| c.0 != id);
}

/// Every container: `(id, name, parent id)`.
pub(crate) fn containers() -> Vec<(u64, String, u64)> {
    CONTAINERS.lock().unpoison().clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::record::Kind;
    use std::sync::OnceLock;

    fn record() -> RecordArc {
        RecordArc::new(VThread::new(None, Kind::Os(OnceLock::new()), ROOT))
    }

    fn listed(t: &RecordArc) -> bool {
        all_threads().iter().any(|r| RecordArc::ptr_eq(r, t))
    }

    /// Threads registered by several spawners each go into their spawner's
    /// shard, are all listed, and all leave when another thread unregisters
    /// them mixed in one batch (a key that named the wrong shard or index
    /// would leave a thread listed).
    #[test]
    fn a_spawners_threads_share_its_shard_and_leave_it_in_any_batch() {
        let per = 300;
        let spawned: Vec<Vec<RecordArc>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(move || {
                        let ts: Vec<_> = (0..per).map(|_| record()).collect();
                        ts.iter().for_each(register);
                        ts
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for ts in &spawned {
            let shard = split(ts[0].reg_key.load(Ordering::Relaxed)).0;
            for t in ts {
                assert_eq!(split(t.reg_key.load(Ordering::Relaxed)).0, shard);
                assert!(listed(t));
            }
        }
        let mut all: Vec<_> = spawned.iter().flatten().cloned().collect();
        let keep = all.clone();
        // Interleave the spawners, as carriers finish them.
        all.sort_by_key(|t| t.id.as_u64());
        unregister_batch(&mut all);
        assert!(all.is_empty());
        assert!(keep.iter().all(|t| !listed(t)));
        // A spawner keeps its shard from one spawn to the next.
        let (a, b) = (record(), record());
        register(&a);
        unregister(&a);
        register(&b);
        let shard = |t: &VThread| split(t.reg_key.load(Ordering::Relaxed)).0;
        assert_eq!(shard(&a), shard(&b));
        assert!(!listed(&a) && listed(&b));
        unregister(&b);
        assert!(!listed(&b));
    }
}
