//! Thread dumps: every virtual thread, its state, what it waits on, who
//! holds that, and its stack — as `jstack`-like text or JSON in the shape of
//! JDK 25's `jcmd <pid> Thread.dump_to_file -format=json`.
//!
//! # How stacks of parked threads are taken
//!
//! A parked virtual thread is not running anywhere, and on x86-64 Linux the
//! dump reads its stack where it is (`dump/parked.rs`): it takes the thread
//! off its park with the park state machine's CAS, exactly like `unpark`
//! would (so no real wake-up can be lost or doubled, and nobody can resume
//! the thread meanwhile), unwinds its stack from the context corosensei
//! saved when it suspended (framehop over `.eh_frame`, unwind rules cached
//! per address), and puts it back on its park — or schedules it, if a real
//! `unpark` arrived meanwhile. The thread never runs for it, so its carrier
//! plays no part: a thread whose carrier is stalled by another still gets its
//! stack.
//!
//! Elsewhere (or should that path not apply) the dump *borrows* each
//! parked thread: it moves the thread out of PARKED the same way, marks it
//! for capture and schedules it. The thread resumes inside `park`, records
//! the return addresses of its own stack (no symbol lookup on that path),
//! and parks again — unless a real `unpark` arrived meanwhile, in which
//! case that permit ends the park as usual.
//!
//! Either way symbols are resolved afterwards, once per distinct stack and
//! address, off the carrier.
//!
//! # Registry
//!
//! The threads come from the registry (`thread/registry.rs`), which every
//! virtual thread is in from spawn to exit; a dump only iterates it.

use crate::thread::RecordArc;
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::blocking::blocking;
use crate::sample::sample;
use crate::sched::mounted_carriers;
use crate::symbols::{Frame, Resolver, format_stack};
#[cfg(not(loom))]
use crate::sync::{Mutex as WeftMutex, MutexGuard};
use crate::thread::capture::CaptureJob;
use crate::thread::registry::{ROOT, all_threads, containers};
use crate::thread::{
    Blocker, State, Thread, ThreadId, VThread, activity_of, blocker_of, borrow_parked, current,
    park_deadline, state_of, take_interrupt,
};
use crate::unpoison::Unpoison;

mod group;
mod json;
mod live;
mod parked;

use group::StackHasher;
pub use group::{StackGroup, ThreadGroups};
pub use live::{CarrierInfo, CarrierState, StateCounts, carriers, state_counts};

// ---------------------------------------------------------------------------
// The snapshot.

/// One thread in a dump.
#[derive(Clone, Debug)]
pub struct ThreadInfo {
    /// Thread id.
    pub id: ThreadId,
    /// Name, if any.
    pub name: Option<String>,
    /// Always true today (OS threads are not listed).
    pub is_virtual: bool,
    /// State when the dump looked.
    pub state: State,
    /// Carrier index when mounted.
    pub carrier: Option<usize>,
    /// The carrier this thread is bound to (it runs there only), once it
    /// has started; `None` before, and on a runtime that allows migration.
    pub home: Option<usize>,
    /// Its home carrier was held by another thread past the stall
    /// threshold (or in a pinned wait) when the dump looked: a runnable
    /// thread here is waiting behind it.
    pub home_stalled: bool,
    /// What it waits on.
    pub blocker: Blocker,
    /// How long it has waited on [`ThreadInfo::blocker`], to the kernel's
    /// timer tick (1–4 ms); `None` when it waits on nothing.
    pub waited: Option<Duration>,
    /// What it said it is doing ([`crate::set_activity`]), if anything.
    pub activity: Option<String>,
    /// Addresses of `weft::sync` locks it holds that others wait for.
    pub owns: Vec<usize>,
    /// Its stack, innermost frame first: at the park point for a parked
    /// thread; sampled from its carrier for a running or pinned one
    /// (empty if the sample could not be had, or the thread moved on).
    pub stack: Vec<Frame>,
    /// Container id (0 = root).
    pub container: u64,
}

/// A container of threads (root, an executor, a scope).
#[derive(Clone, Debug)]
pub struct Container {
    /// Id (0 for the root).
    pub id: u64,
    /// Display name (`"<root>"`, `"Executor@3"`, `"Scope@4"`).
    pub name: String,
    /// Parent container id.
    pub parent: Option<u64>,
    /// Indices into [`Dump::threads`].
    pub threads: Vec<usize>,
}

/// A snapshot of every virtual thread. `Display` prints a `jstack`-like
/// text dump; [`Dump::to_json`] the JDK-shaped JSON.
#[derive(Clone, Debug)]
pub struct Dump {
    /// Process id.
    pub pid: u32,
    /// When the dump was taken.
    pub time: SystemTime,
    /// How long taking it took.
    pub took: Duration,
    /// Every thread.
    pub threads: Vec<ThreadInfo>,
    /// Containers, root first.
    pub containers: Vec<Container>,
    /// Deadlocks: cycles of threads each waiting for a lock the next holds.
    pub deadlocks: Vec<Vec<ThreadId>>,
}

impl Dump {
    /// The entry for thread `id`.
    pub fn thread(&self, id: ThreadId) -> Option<&ThreadInfo> {
        self.threads.iter().find(|t| t.id == id)
    }
}

/// What a dump reads of a thread before borrowing anyone for a stack.
struct Seen {
    state: State,
    blocker: Blocker,
    waited: Option<Duration>,
    activity: Option<String>,
    carrier: Option<usize>,
    home: Option<usize>,
    home_stalled: bool,
}

/// How long a dump waits for the next parked thread to report its stack.
/// The wait goes on while reports keep coming (a loaded machine is slow,
/// not stuck); after a whole timeout without one (every carrier that could
/// run them is busy), the rest are listed without a stack.
const CAPTURE_TIMEOUT: Duration = Duration::from_secs(1);

/// Takes a thread dump of every virtual thread in the process.
///
/// Parked threads are held off their park for a moment while their stacks
/// are read where they are (x86-64 Linux; elsewhere each is briefly resumed
/// to record its own: see the module docs); everything else is read without
/// stopping anyone.
/// [`Dump::groups`] folds the threads into groups of identical stacks.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let h = weft::Builder::new()
///     .name("napper")
///     .spawn(|| weft::sleep(Duration::from_secs(30)))
///     .unwrap();
/// // Wait until it is parked, then dump.
/// while h.thread().state() != weft::State::Parked {
///     std::thread::yield_now();
/// }
/// let dump = weft::dump();
/// let t = dump.thread(h.thread().id()).expect("listed");
/// assert_eq!(t.name.as_deref(), Some("napper"));
/// assert!(matches!(t.blocker, weft::Blocker::Sleep(_)));
/// assert!(dump.to_string().contains("napper"));
/// assert!(dump.to_json().contains("\"threadDump\""));
/// h.thread().interrupt();
/// assert!(h.join().unwrap().is_err());
/// ```
pub fn dump() -> Dump {
    let _one = one_at_a_time();
    let t0 = Instant::now();
    let threads = all_threads();
    // States, blockers and carriers first: borrowing a thread for its stack
    // passes it through Runnable and Running.
    let seen = read_states(&threads);
    // Running and pinned threads next, so that their samples match the
    // states just read; the parked ones can take a while on busy carriers.
    let mut stacks = Stacks::new(threads.len());
    sample_running(&threads, &seen, &mut stacks);
    // Parked threads: read in place where we can (`dump/parked.rs`), on an
    // offload thread (100,000 stacks take tens of milliseconds: not on the
    // caller's carrier); the rest are borrowed and record their own.
    let borrow = blocking(|| parked::read(&threads, &mut stacks))
        .unwrap_or_else(|| (0..threads.len()).collect());
    capture_parked(&threads, &seen, &borrow, &mut stacks);
    // The rest off the carrier too: the first symbol lookup of a process
    // reads its debug info (tens of milliseconds), and 100,000 entries
    // take as long to build.
    let (infos, deadlocks, containers) = blocking(|| {
        let frames = symbolize(&stacks.distinct);
        let mut infos = entries(&threads, seen, &frames, &stacks.of);
        // Ids are unique: an unstable sort gives the one order.
        infos.sort_unstable_by_key(|t| t.id);
        let ids: Vec<u64> = infos.iter().map(|t| t.id.as_u64().get()).collect();
        link_owners(&mut infos, &ids);
        let deadlocks = find_deadlocks(&infos, &ids);
        let containers = build_containers(&infos);
        (infos, deadlocks, containers)
    });
    Dump {
        pid: std::process::id(),
        time: SystemTime::now(),
        took: t0.elapsed(),
        threads: infos,
        containers,
        deadlocks,
    }
}

/// One dump at a time: a thread holds one capture request at a time, so a
/// second, concurrent dump would find it taken and list it without a
/// stack. A weft mutex: a virtual thread waiting here parks. (Loom builds
/// model the primitives, whose `new` is not `const`.)
#[cfg(not(loom))]
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: WeftMutex<()> = WeftMutex::new(());
    ONE_AT_A_TIME.lock().unpoison()
}

/// Under loom there is no lock to take: a guard that holds nothing.
#[cfg(loom)]
struct OneAtATime;

#[cfg(loom)]
fn one_at_a_time() -> OneAtATime {
    OneAtATime
}

/// What each thread is doing, read without stopping it.
fn read_states(threads: &[RecordArc]) -> Vec<Seen> {
    let carriers = mounted_carriers();
    threads
        .iter()
        .map(|t| {
            let home = t.home_carrier();
            Seen {
                state: state_of(t),
                blocker: blocker_of(t),
                waited: t.blocker.waited(),
                activity: activity_of(t),
                carrier: carriers.get(&(RecordArc::as_ptr(t) as usize)).copied(),
                home,
                home_stalled: home
                    .is_some_and(|h| t.runtime_shared().is_some_and(|s| s.carrier_held(h))),
            }
        })
        .collect()
}

/// Return addresses of the threads running on a carrier (or blocked in
/// the kernel there), into `stacks`: the carrier's stack, sampled by a
/// signal (`sample.rs`), kept only if the carrier was still on the same
/// thread and switch afterwards.
fn sample_running(threads: &[RecordArc], seen: &[Seen], stacks: &mut Stacks) {
    for (i, (t, seen)) in threads.iter().zip(seen).enumerate() {
        let (Some(c), State::Running | State::Pinned) = (seen.carrier, seen.state) else {
            continue;
        };
        let Some(shared) = t.runtime_shared() else {
            continue;
        };
        let Some((tid, sw)) = shared.carrier_running(c, t) else {
            continue;
        };
        if let Some(ips) = sample(tid)
            && shared
                .carrier_running(c, t)
                .is_some_and(|(_, now)| now == sw)
        {
            stacks.set(i, &ips);
        }
    }
}

/// Return addresses of the parked threads among `threads[i]` for `i` in
/// `which`, into `stacks`: each is borrowed and records its own stack (see
/// the module docs).
fn capture_parked(threads: &[RecordArc], seen: &[Seen], which: &[usize], stacks: &mut Stacks) {
    if which.is_empty() {
        return;
    }
    let job = Arc::new(CaptureJob {
        results: Mutex::new(Vec::new()),
        pending: AtomicUsize::new(1),
        waiter: current(),
    });
    for &i in which {
        let (t, seen) = (&threads[i], &seen[i]);
        // A thread bound to a carrier that another thread holds (a stall,
        // a pinned wait) cannot run to record its stack: list it without
        // one rather than wait for it.
        if t.park.is_parked() && !seen.home_stalled && !in_running_simulation(t) {
            request_capture(&job, t);
        }
    }
    // Our own initial count.
    if job.pending.fetch_sub(1, Ordering::AcqRel) != 1 {
        wait_for_captures(&job);
    }
    let results = std::mem::take(&mut *job.results.lock().unpoison());
    let index: HashMap<u64, usize> = which
        .iter()
        .map(|&i| (Thread::peek_name_id(&threads[i]).1, i))
        .collect();
    for (id, ips) in results {
        if let Some(&i) = index.get(&id) {
            stacks.set(i, &ips);
        }
    }
}

/// Whether `t` belongs to a simulation that is still running (`crate::sim`):
/// a dump must not hold or borrow it — a wake-up that finds it held, or a
/// thread scheduled from the dump's OS thread, would change the run (a
/// false deadlock, a different schedule). It is listed without a stack.
pub(crate) fn in_running_simulation(t: &VThread) -> bool {
    t.runtime_shared().is_some_and(|s| s.simulation_running())
}

/// Leaves `job` in parked thread `t` and borrows it to answer; withdraws
/// the request if `t` woke up on its own meanwhile.
fn request_capture(job: &Arc<CaptureJob>, t: &RecordArc) {
    let raw = Arc::into_raw(job.clone()) as *mut CaptureJob as *mut ();
    if t.capture_slot()
        .compare_exchange(
            std::ptr::null_mut(),
            raw,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        // SAFETY: not published; reclaim our count.
        drop(unsafe { Arc::from_raw(raw as *const CaptureJob) });
        return;
    }
    job.pending.fetch_add(1, Ordering::AcqRel);
    if !borrow_parked(t) {
        // It woke up on its own: it will see the job at its next park, or
        // never. Withdraw the request if it is still there.
        let p = t.take_capture_job();
        if !p.is_null() {
            // SAFETY: we took back the count we published.
            drop(unsafe { Arc::from_raw(p as *const CaptureJob) });
            job.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Waits while the borrowed threads keep reporting: a slow machine
/// finishes, a carrier that never comes back costs one
/// [`CAPTURE_TIMEOUT`]. The caller's interrupt flag is kept.
fn wait_for_captures(job: &CaptureJob) {
    let mut deadline = Instant::now() + CAPTURE_TIMEOUT;
    let mut left = job.pending.load(Ordering::Acquire);
    let was = take_interrupt();
    loop {
        let now_left = job.pending.load(Ordering::Acquire);
        if now_left == 0 {
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            if now_left >= left {
                break; // no thread reported for a whole timeout
            }
            left = now_left;
            deadline = now + CAPTURE_TIMEOUT;
        }
        park_deadline(Some(deadline));
    }
    if was {
        current().interrupt_flag_restore();
    }
}

/// Every distinct stack of a dump (return addresses, innermost first) once,
/// and which thread has which: 100,000 threads parked at a few places have
/// a few stacks, symbolized once each.
struct Stacks {
    ids: HashMap<Vec<usize>, u32, BuildHasherDefault<StackHasher>>,
    /// The distinct stacks, by id.
    distinct: Vec<Vec<usize>>,
    /// The stack id of each thread (by index in the dump's thread list),
    /// or [`NO_STACK`].
    of: Vec<u32>,
}

/// [`Stacks::of`] a thread whose stack could not be had.
const NO_STACK: u32 = u32::MAX;

impl Stacks {
    fn new(threads: usize) -> Stacks {
        Stacks {
            ids: HashMap::default(),
            distinct: Vec::new(),
            of: vec![NO_STACK; threads],
        }
    }

    /// Thread `thread`'s stack is `ips`.
    fn set(&mut self, thread: usize, ips: &[usize]) {
        let id = match self.ids.get(ips) {
            Some(&id) => id,
            None => {
                let id = self.distinct.len() as u32;
                self.distinct.push(ips.to_vec());
                self.ids.insert(ips.to_vec(), id);
                id
            }
        };
        self.of[thread] = id;
    }
}

/// The frames of each distinct stack.
fn symbolize(distinct: &[Vec<usize>]) -> Vec<Vec<Frame>> {
    let mut resolver = Resolver::default();
    distinct.iter().map(|ips| resolver.frames(ips)).collect()
}

/// The dump's entries, in the order of `threads`: what was read (`seen`),
/// with the symbolized stacks (`frames` by stack id, `of` each thread's).
fn entries(
    threads: &[RecordArc],
    seen: Vec<Seen>,
    frames: &[Vec<Frame>],
    of: &[u32],
) -> Vec<ThreadInfo> {
    threads
        .iter()
        .zip(seen)
        .zip(of)
        .map(|((t, seen), &stack)| {
            let th = Thread { inner: t.clone() };
            ThreadInfo {
                id: th.id(),
                name: th.name().map(str::to_owned),
                is_virtual: true,
                state: seen.state,
                carrier: seen.carrier,
                home: seen.home,
                home_stalled: seen.home_stalled,
                blocker: seen.blocker,
                waited: seen.waited,
                activity: seen.activity,
                owns: Vec::new(),
                stack: frames.get(stack as usize).cloned().unwrap_or_default(),
                container: t.container(),
            }
        })
        .collect()
}

/// The index of thread `id` in a dump's entries, from their `ids` (sorted:
/// 800 KB for 100,000 threads, where the entries themselves are 20 MB).
fn index_of(ids: &[u64], id: u64) -> Option<usize> {
    ids.binary_search(&id).ok()
}

/// Fills [`ThreadInfo::owns`] from what the waiters are blocked on.
fn link_owners(infos: &mut [ThreadInfo], ids: &[u64]) {
    let mut owns: Vec<(usize, usize)> = Vec::new();
    for t in infos.iter() {
        if let Blocker::Lock {
            addr,
            owner: Some(o),
            ..
        } = t.blocker
            && let Some(i) = index_of(ids, o)
        {
            owns.push((i, addr));
        }
    }
    for (i, addr) in owns {
        if !infos[i].owns.contains(&addr) {
            infos[i].owns.push(addr);
        }
    }
}

fn build_containers(infos: &[ThreadInfo]) -> Vec<Container> {
    let table = containers();
    let mut out = vec![Container {
        id: ROOT,
        name: "<root>".into(),
        parent: None,
        threads: Vec::new(),
    }];
    for (id, name, parent) in table {
        out.push(Container {
            id,
            name,
            parent: Some(parent),
            threads: Vec::new(),
        });
    }
    for (i, t) in infos.iter().enumerate() {
        let c = out.iter().position(|c| c.id == t.container).unwrap_or(0);
        out[c].threads.push(i);
    }
    out
}

/// Cycles in "waits for a lock owned by", each from where the walk from
/// the lowest thread first entered it. Each thread waits for at most one
/// other, so one walk per unvisited thread finds them all: linear.
fn find_deadlocks(infos: &[ThreadInfo], ids: &[u64]) -> Vec<Vec<ThreadId>> {
    let next = |i: usize| -> Option<usize> {
        match infos[i].blocker {
            Blocker::Lock { owner: Some(o), .. } => index_of(ids, o),
            _ => None,
        }
    };
    // The walk (its start + 1) that first reached each thread, 0 for none.
    let mut walk_of = vec![0usize; infos.len()];
    let mut path: Vec<usize> = Vec::new();
    let mut cycles = Vec::new();
    for start in 0..infos.len() {
        let walk = start + 1;
        let mut cur = Some(start);
        while let Some(i) = cur {
            if walk_of[i] != 0 {
                // Back on this walk: a cycle. On an earlier one: that walk
                // found whatever lies ahead.
                if walk_of[i] == walk
                    && let Some(pos) = path.iter().position(|&p| p == i)
                {
                    cycles.push(path[pos..].iter().map(|&c| infos[c].id).collect());
                }
                break;
            }
            walk_of[i] = walk;
            path.push(i);
            cur = next(i);
        }
        path.clear();
    }
    cycles
}

// ---------------------------------------------------------------------------
// Output.

/// A state's name as dumps print it: upper case, as the JDK's.
fn state_name(s: State) -> String {
    s.as_str().to_ascii_uppercase()
}

fn describe_blocker(b: &Blocker) -> Option<String> {
    Some(match *b {
        Blocker::None => return None,
        Blocker::Sleep(until) => format!(
            "sleeping, {} ms left",
            until.saturating_duration_since(Instant::now()).as_millis()
        ),
        Blocker::Park => "parked".into(),
        Blocker::Io { fd, read } => format!(
            "waiting to {} fd {fd}",
            if read { "read from" } else { "write to" }
        ),
        Blocker::Lock { kind, addr, owner } => match owner {
            Some(o) => format!("{} {kind} <{addr:#x}> owned by #{o}", kind.verb()),
            None => format!("{} {kind} <{addr:#x}>", kind.verb()),
        },
        Blocker::Channel { recv } => {
            format!(
                "waiting to {} a channel",
                if recv { "receive from" } else { "send on" }
            )
        }
        Blocker::Join(id) => format!("joining #{id}"),
        Blocker::Other(s) => s.to_string(),
        Blocker::Call { call, fd } if fd >= 0 => format!("parked in {call} on fd {fd}"),
        Blocker::Call { call, .. } => format!("parked in {call}"),
    })
}

/// A wait's length as a reader wants it: `850 ms`, `12 s`, `3 minutes`,
/// `2 hours` (Go's dumps print `12 minutes`).
pub(crate) fn for_how_long(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{} ms", d.as_millis()),
        1..120 => format!("{s} s"),
        120..7_200 => format!("{} minutes", s / 60),
        _ => format!("{} hours", s / 3_600),
    }
}

fn unix_secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

impl fmt::Display for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Weft thread dump (pid {}, weft {}, {} virtual threads, taken in {:.1} ms):",
            self.pid,
            env!("CARGO_PKG_VERSION"),
            self.threads.len(),
            self.took.as_secs_f64() * 1e3
        )?;
        for c in &self.containers {
            if c.threads.is_empty() && c.id != ROOT {
                continue;
            }
            writeln!(
                f,
                "\n--- container {} ({} threads)",
                c.name,
                c.threads.len()
            )?;
            for &i in &c.threads {
                let t = &self.threads[i];
                writeln!(
                    f,
                    "\n\"{}\" #{} virtual {}{}",
                    t.name.as_deref().unwrap_or(""),
                    t.id.as_u64(),
                    state_name(t.state),
                    t.carrier
                        .map(|c| format!(" on carrier {c}"))
                        .unwrap_or_default()
                )?;
                if let Some(a) = &t.activity {
                    writeln!(f, "   - doing: {a}")?;
                }
                if let Some(b) = describe_blocker(&t.blocker) {
                    match t.waited {
                        Some(d) => writeln!(f, "   - {b} (for {})", for_how_long(d))?,
                        None => writeln!(f, "   - {b}")?,
                    }
                }
                if let Some(h) = t.home {
                    if t.home_stalled && t.state == State::Runnable {
                        writeln!(
                            f,
                            "   - runnable, waiting behind carrier {h} (held by another thread; it runs there only)"
                        )?;
                    } else if t.carrier.is_none() {
                        writeln!(f, "   - bound to carrier {h}")?;
                    }
                }
                for a in &t.owns {
                    writeln!(f, "   - owns weft::sync::Mutex <{a:#x}>")?;
                }
                f.write_str(&format_stack(&t.stack))?;
            }
        }
        for cyc in &self.deadlocks {
            let ids: Vec<String> = cyc.iter().map(|i| format!("#{}", i.as_u64())).collect();
            writeln!(
                f,
                "\nFound a deadlock: {} (each waits for a lock the next holds)",
                ids.join(" -> ")
            )?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// SIGQUIT.

static SIGQUIT_FD: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The process copy (`fork.rs`) whose eventfd [`SIGQUIT_FD`] is; stored
/// after it.
static SIGQUIT_GENERATION: AtomicU32 = AtomicU32::new(0);

/// Installs the SIGQUIT handler once (unless `WEFT_DUMP_ON_SIGQUIT=0`): the
/// text dump goes to stderr, or the JSON to `WEFT_DUMP_PATH`, and the
/// process continues, like the JVM.
pub(crate) fn install_sigquit() {
    // Per process copy: a `fork` child's dump thread and eventfd are its
    // own (its copy of the parent's eventfd would wake the parent's).
    static ONCE: crate::fork::PerProcess<()> = crate::fork::PerProcess::new();
    ONCE.get_or_init(|| {
        if std::env::var("WEFT_DUMP_ON_SIGQUIT").is_ok_and(|v| v.trim() == "0") {
            return;
        }
        // SAFETY: creating an eventfd, a plain syscall.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return;
        }
        SIGQUIT_FD.store(fd as usize, Ordering::SeqCst);
        SIGQUIT_GENERATION.store(crate::fork::generation(), Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name("weft-dump".into())
            .spawn(move || {
                loop {
                    let mut buf = 0u64;
                    // SAFETY: reading 8 bytes from our eventfd into a u64.
                    let r = unsafe { libc::read(fd, (&mut buf as *mut u64).cast(), 8) };
                    if r < 0 {
                        if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                        {
                            continue;
                        }
                        return;
                    }
                    let d = dump();
                    match std::env::var_os("WEFT_DUMP_PATH") {
                        Some(p) => {
                            if let Err(e) = std::fs::write(&p, d.to_json()) {
                                eprintln!(
                                    "weft: cannot write thread dump to {}: {e}",
                                    p.to_string_lossy()
                                );
                            } else {
                                eprintln!("weft: thread dump written to {}", p.to_string_lossy());
                            }
                        }
                        None => eprintln!("{d}"),
                    }
                }
            });
        if spawned.is_err() {
            return;
        }
        // SAFETY: installing a handler that only writes to an eventfd
        // (async-signal-safe).
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_sigquit as *const () as usize;
            act.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGQUIT, &act, std::ptr::null_mut());
        }
    });
}

extern "C" fn on_sigquit(_: libc::c_int) {
    // A fork child that has not installed its own (it built no runtime):
    // its copy of the eventfd would wake the parent's dump thread, and
    // print the parent's threads. It gets SIGQUIT's default action, as if
    // Weft had installed nothing.
    if SIGQUIT_GENERATION.load(Ordering::SeqCst) != crate::fork::generation() {
        // SAFETY: sigaction and raise are async-signal-safe; the action
        // is a zeroed one with SIG_DFL (0) as its handler.
        unsafe {
            let dfl: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGQUIT, &dfl, std::ptr::null_mut());
            libc::raise(libc::SIGQUIT);
        }
        return;
    }
    let fd = SIGQUIT_FD.load(Ordering::SeqCst);
    if fd != usize::MAX {
        let one = 1u64;
        // SAFETY: write(2) to our eventfd is async-signal-safe.
        unsafe {
            libc::write(fd as i32, (&one as *const u64).cast(), 8);
        }
    }
}
