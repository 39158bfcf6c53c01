//! The registry: every live virtual thread, for whoever wants to look.
//!
//! Every virtual thread is in a sharded registry from spawn to exit (one
//! short lock on each): `Builder` registers it before it can run, and its
//! carrier unregisters it after it finishes, while the carrier still holds
//! it — in batches, one lock per shard (see `Carrier::finished`); a
//! terminated thread still waiting for its batch is skipped by readers. The registry holds raw pointers; a thread leaves it before its
//! carrier lets go of it, so a pointer read under the shard lock is valid,
//! and [`all_threads`] turns each into a strong handle under that lock.
//! Readers (dumps, metrics, the monitor naming the threads behind a stalled
//! carrier) iterate it; nothing here knows who they are.
//!
//! It also lists dump *containers*: the root, each executor, each scope
//! (a thread's container is fixed at spawn, `VThread::container`).

use crate::unpoison::Unpoison;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::{Thread, VThread};

const SHARDS: usize = 16;

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

fn shard_of(inner: &VThread) -> usize {
    (Thread::peek_name_id(inner).1 as usize) % SHARDS
}

/// Adds a new virtual thread (before it can run).
pub(crate) fn register(inner: &Arc<VThread>) {
    let mut sh = REGISTRY[shard_of(inner)].lock().unpoison();
    let p = Arc::as_ptr(inner) as usize;
    let key = match sh.free.pop() {
        Some(k) => {
            sh.slots[k] = p;
            k
        }
        None => {
            sh.slots.push(p);
            sh.slots.len() - 1
        }
    };
    let key = u32::try_from(key).expect("weft: over 2^32 threads in one registry shard");
    inner.reg_key.store(key, Ordering::Relaxed);
}

/// Removes a finished thread (while its carrier still holds it).
pub(crate) fn unregister(inner: &VThread) {
    let mut sh = REGISTRY[shard_of(inner)].lock().unpoison();
    let k = inner.reg_key.load(Ordering::Relaxed) as usize;
    if sh.slots.get(k) == Some(&(inner as *const VThread as usize)) {
        sh.slots[k] = 0;
        sh.free.push(k);
    }
}

/// Removes finished threads in one pass: sorted by shard, one lock per
/// shard. Their records are released after the locks (`batch` is left
/// empty). The caller keeps each record alive until then, as for
/// [`unregister`]; a registered thread that has terminated is invisible to
/// readers meanwhile.
pub(crate) fn unregister_batch(batch: &mut Vec<Arc<VThread>>) {
    batch.sort_unstable_by_key(|t| shard_of(t));
    let mut rest = &batch[..];
    while let Some(first) = rest.first() {
        let s = shard_of(first);
        let n = rest.iter().take_while(|t| shard_of(t) == s).count();
        let mut sh = REGISTRY[s].lock().unpoison();
        for inner in &rest[..n] {
            let k = inner.reg_key.load(Ordering::Relaxed) as usize;
            if sh.slots.get(k) == Some(&(Arc::as_ptr(inner) as usize)) {
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
pub(crate) fn all_threads() -> Vec<Arc<VThread>> {
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
                Arc::increment_strong_count(p);
                out.push(Arc::from_raw(p));
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
