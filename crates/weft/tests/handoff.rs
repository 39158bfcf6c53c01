//! Handoff (ARCHITECTURE.md, "Affinity and handoff"): a carrier held by
//! one virtual thread — computing, blocked in the kernel, or in a pinned
//! wait — strands none of its other threads. Those that may move run
//! elsewhere, and keep everything a thread owns (its thread-locals and
//! their addresses, its identity, a held `std::sync::MutexGuard`, its RNG,
//! its tracing span, its `weft::local!`s); those that stay wait for it.
//!
//! How a test holds a carrier: a *hog* is a virtual thread that called
//! `weft::stay_on_carrier()` (so it never leaves the carrier it started on)
//! and holds that carrier when asked — a CPU loop, a blocking `libc::read`
//! of a pipe, or a std or weft wait inside `weft::pinned` — until the test
//! releases it. Every check is structural: a condition reached while the
//! hog still holds its carrier, and the kernel thread id (`gettid`) says
//! where a thread ran. Every wait has a deadline after which the test
//! fails; no test measures time.

mod common;

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use common::{areas_supported, gettid, join_within, wait_until};
use weft::events::EventKind;
use weft::{JoinHandle, Runtime, State};

const LIMIT: Duration = Duration::from_secs(120);

/// Moves each soundness test makes its thread do, at least.
const MOVES: usize = 60;

/// How a hog holds its carrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    /// A CPU loop, no weft call in it.
    Cpu,
    /// A blocking `libc::read` of a pipe: the OS thread sleeps in the
    /// kernel.
    Kernel,
    /// A std blocking call (`mpsc::Receiver::recv_timeout`) inside
    /// `weft::pinned`.
    PinnedStd,
    /// A weft wait (a channel receive) inside `weft::pinned`: the pinned
    /// park, which keeps the carrier's OS thread.
    PinnedWeft,
}

impl Hold {
    const ALL: [Hold; 4] = [Hold::Cpu, Hold::Kernel, Hold::PinnedStd, Hold::PinnedWeft];

    fn code(self) -> u8 {
        self as u8 + 1
    }

    fn from_code(code: u8) -> Option<Hold> {
        Hold::ALL.get((code as usize).wrapping_sub(1)).copied()
    }
}

/// [`HogState::order`]: nothing asked.
const IDLE: u8 = 0;
/// [`HogState::order`]: the hog ends.
const QUIT: u8 = 0x7f;
/// [`HogState::order`], added to a hold's code: the hog took the order
/// (so a release owes it a token: a byte in the pipe, a message).
const CLAIMED: u8 = 0x80;

/// What a hog and the threads that drive it share.
#[derive(Default)]
struct HogState {
    /// [`IDLE`], [`QUIT`], or a hold's code (plus [`CLAIMED`] once the hog
    /// took it). The hog claims an order and a release withdraws it with
    /// one atomic each, so a release sends a token exactly when the hog
    /// will wait for one.
    order: AtomicU8,
    /// Up while the hog holds its carrier.
    holding: AtomicBool,
    /// A hold outlived [`LIMIT`] without being released.
    timed_out: AtomicBool,
    /// The hog's carrier (its kernel thread id), once it runs.
    tid: AtomicI32,
}

/// A virtual thread that stays on its carrier and holds it on demand.
struct Hog {
    state: Arc<HogState>,
    thread: weft::Thread,
    /// Its weft thread id (the monitor's events name it).
    id: u64,
    /// Its carrier's kernel thread id.
    tid: i32,
    pipe: OwnedFd,
    std_tx: std::sync::mpsc::Sender<()>,
    weft_tx: weft::channel::Sender<()>,
}

impl Hog {
    /// Asks the hog to hold its carrier; it does as soon as it runs.
    fn hold(&self, how: Hold) {
        let prev = self.state.order.swap(how.code(), Ordering::SeqCst);
        assert_eq!(prev, IDLE, "a hog asked to hold twice");
        self.thread.unpark();
    }

    fn holding(&self) -> bool {
        self.state.holding.load(Ordering::SeqCst)
    }

    /// Ends the hold (or withdraws the order if the hog has not taken it).
    fn release(&self) {
        let prev = self.state.order.swap(IDLE, Ordering::SeqCst);
        self.give_token(prev);
    }

    /// Ends the hog's life at its next look.
    fn quit(&self) {
        let prev = self.state.order.swap(QUIT, Ordering::SeqCst);
        self.give_token(prev);
        self.thread.unpark();
    }

    /// What ends a hold the hog took with order `prev`.
    fn give_token(&self, prev: u8) {
        if prev & CLAIMED == 0 {
            return;
        }
        match Hold::from_code(prev & !CLAIMED) {
            Some(Hold::Kernel) => {
                // SAFETY: a one-byte write from a valid buffer to a pipe
                // this hog owns.
                let n = unsafe { libc::write(self.pipe.as_raw_fd(), b"x".as_ptr().cast(), 1) };
                assert_eq!(n, 1, "write to the hog's pipe");
            }
            Some(Hold::PinnedStd) => {
                let _ = self.std_tx.send(());
            }
            Some(Hold::PinnedWeft) => {
                let _ = self.weft_tx.send(());
            }
            Some(Hold::Cpu) | None => {}
        }
    }
}

/// The body of a hog: the carrier it first runs on is its for good; it
/// holds that carrier whenever it is asked.
fn hog_body(
    state: Arc<HogState>,
    started: Arc<AtomicUsize>,
    hogs: usize,
    pipe: OwnedFd,
    std_rx: std::sync::mpsc::Receiver<()>,
    weft_rx: weft::channel::Receiver<()>,
) {
    weft::stay_on_carrier();
    // All hogs run at once, so each is on a carrier of its own.
    started.fetch_add(1, Ordering::SeqCst);
    let t0 = Instant::now();
    while started.load(Ordering::SeqCst) < hogs {
        assert!(t0.elapsed() < LIMIT, "the hogs never ran at the same time");
        std::hint::spin_loop();
    }
    state.tid.store(gettid(), Ordering::SeqCst);
    loop {
        let order = state.order.load(Ordering::SeqCst);
        if order == QUIT {
            return;
        }
        let Some(how) = Hold::from_code(order) else {
            weft::park();
            continue;
        };
        let claimed = order | CLAIMED;
        if state
            .order
            .compare_exchange(order, claimed, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            continue; // released (or quit) before we took it
        }
        state.holding.store(true, Ordering::SeqCst);
        let t0 = Instant::now();
        let released = match how {
            Hold::Cpu => loop {
                if state.order.load(Ordering::SeqCst) != claimed {
                    break true;
                }
                if t0.elapsed() > LIMIT {
                    break false;
                }
                std::hint::spin_loop();
            },
            Hold::Kernel => loop {
                let mut b = 0u8;
                // SAFETY: a one-byte read into a valid buffer from a pipe
                // this hog owns.
                let n = unsafe { libc::read(pipe.as_raw_fd(), (&raw mut b).cast(), 1) };
                if n == 1 {
                    break true;
                }
                let err = std::io::Error::last_os_error();
                assert_eq!(err.kind(), std::io::ErrorKind::Interrupted, "{err}");
            },
            Hold::PinnedStd => weft::pinned(|| std_rx.recv_timeout(LIMIT).is_ok()),
            Hold::PinnedWeft => weft::pinned(|| weft_rx.recv().is_ok()),
        };
        state.holding.store(false, Ordering::SeqCst);
        if !released {
            state.timed_out.store(true, Ordering::SeqCst);
            let _ = state
                .order
                .compare_exchange(claimed, IDLE, Ordering::SeqCst, Ordering::SeqCst);
        }
    }
}

/// `n` hogs of `rt`, each on a carrier of its own.
struct Hogs {
    hogs: Vec<Arc<Hog>>,
    handles: Vec<JoinHandle<()>>,
}

impl Hogs {
    fn start(rt: &Runtime, n: usize) -> Hogs {
        let started = Arc::new(AtomicUsize::new(0));
        let mut hogs = Vec::new();
        let mut handles = Vec::new();
        for _ in 0..n {
            let state = Arc::new(HogState::default());
            let mut fds = [0; 2];
            // SAFETY: `fds` has room for the two descriptors.
            assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
            // SAFETY: pipe2 just opened both descriptors; each is owned
            // once.
            let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            let (std_tx, std_rx) = std::sync::mpsc::channel();
            let (weft_tx, weft_rx) = weft::channel::unbounded();
            let (s, st) = (state.clone(), started.clone());
            let h = weft::Builder::new()
                .name("hog")
                .spawn_on(rt, move || hog_body(s, st, n, r, std_rx, weft_rx))
                .unwrap();
            hogs.push((state, h.thread().clone(), w, std_tx, weft_tx));
            handles.push(h);
        }
        let hogs: Vec<Arc<Hog>> = hogs
            .into_iter()
            .map(|(state, thread, pipe, std_tx, weft_tx)| {
                wait_until("a hog starts", LIMIT, || {
                    state.tid.load(Ordering::SeqCst) != 0
                });
                Arc::new(Hog {
                    tid: state.tid.load(Ordering::SeqCst),
                    id: thread.id().as_u64().get(),
                    state,
                    thread,
                    pipe,
                    std_tx,
                    weft_tx,
                })
            })
            .collect();
        let tids: HashSet<i32> = hogs.iter().map(|h| h.tid).collect();
        assert_eq!(tids.len(), n, "two hogs on one carrier");
        Hogs { hogs, handles }
    }

    /// Ends every hog and checks that none outlived a hold's deadline.
    fn finish(mut self) {
        for h in &self.hogs {
            h.quit();
        }
        for h in std::mem::take(&mut self.handles) {
            join_within("a hog", LIMIT, h).unwrap();
        }
        for h in &self.hogs {
            assert!(
                !h.state.timed_out.load(Ordering::SeqCst),
                "a hog held its carrier for {LIMIT:?} without being released"
            );
        }
    }
}

impl Drop for Hogs {
    /// A failed test still ends its hogs (no CPU loop outlives it).
    fn drop(&mut self) {
        for h in &self.hogs {
            h.quit();
        }
    }
}

/// A runtime with one core carrier (everything starts there) and room for
/// spares: a hold brings one in and the held carrier's threads move to it.
///
/// The runtimes here never lower a held carrier (`held_carrier_nice(0)`):
/// a lowered carrier's OS thread leaves the runtime after the hold
/// (`held_carrier.rs`), and these tests find their hogs by their
/// carriers' thread ids.
fn one_carrier(threshold: Duration) -> Runtime {
    Runtime::builder()
        .parallelism(1)
        .max_pool_size(4)
        .stall_threshold(threshold)
        .held_carrier_nice(0)
        .build()
        .unwrap()
}

/// A runtime of exactly two carriers (no spare may come in): a thread
/// moved off one runs on the other. Its carriers never cover for each
/// other (`cover_carriers(false)`): on a loaded machine a covering carrier
/// could take a hog woken to hold its carrier, and hold the other.
fn two_carriers(threshold: Duration) -> weft::RuntimeBuilder {
    Runtime::builder()
        .parallelism(2)
        .max_pool_size(2)
        .stall_threshold(threshold)
        .held_carrier_nice(0)
        .cover_carriers(false)
}

// ---------------------------------------------------------------------
// Threads homed on a held carrier run elsewhere.
// ---------------------------------------------------------------------

/// 1,000 started threads, parked on the one core carrier, are woken while
/// a hog holds that carrier `how`: all of them finish while it still
/// holds it (before handoff they waited for it: the hog's deadline).
fn thousand_threads_finish_while_held(how: Hold) {
    if !areas_supported() {
        return;
    }
    const N: usize = 1000;
    let rt = one_carrier(Duration::from_millis(20));
    let hogs = Hogs::start(&rt, 1);
    let hog = hogs.hogs[0].clone();
    let go = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..N)
        .map(|_| {
            let (go, done) = (go.clone(), done.clone());
            rt.spawn(move || {
                // Parked here, so homed here.
                let before = gettid();
                while !go.load(Ordering::SeqCst) {
                    weft::park();
                }
                let after = gettid();
                done.fetch_add(1, Ordering::SeqCst);
                (before, after)
            })
        })
        .collect();
    wait_until("the workers park", LIMIT, || {
        workers.iter().all(|w| w.thread().state() == State::Parked)
    });
    let moved_before = rt.threads_moved();
    hog.hold(how);
    wait_until("the hog holds its carrier", LIMIT, || hog.holding());
    go.store(true, Ordering::SeqCst);
    for w in &workers {
        w.thread().unpark();
    }
    wait_until(
        "the workers finish while the carrier is held",
        LIMIT,
        || done.load(Ordering::SeqCst) == N,
    );
    assert!(hog.holding(), "the hold ended before the workers finished");
    hog.release();
    let ran: Vec<(i32, i32)> = workers
        .into_iter()
        .map(|w| join_within("a worker", LIMIT, w).unwrap())
        .collect();
    hogs.finish();
    // On a quiet machine all 1,000 were homed on the hog's carrier; a
    // carrier descheduled past the threshold during the set-up may have
    // brought in a spare that started some.
    let homed = ran.iter().filter(|&&(before, _)| before == hog.tid).count();
    assert!(homed > 0, "no worker was homed on the held carrier");
    let stayed = ran
        .iter()
        .filter(|&&(before, after)| before == hog.tid && after == hog.tid)
        .count();
    assert_eq!(stayed, 0, "workers ran on the carrier while it was held");
    assert!(
        rt.threads_moved() - moved_before >= homed,
        "{homed} workers moved, threads_moved() says {}",
        rt.threads_moved() - moved_before
    );
}

#[test]
fn thousand_started_threads_finish_while_a_cpu_bound_thread_holds_their_carrier() {
    thousand_threads_finish_while_held(Hold::Cpu);
}

#[test]
fn thousand_started_threads_finish_while_a_thread_blocked_in_the_kernel_holds_their_carrier() {
    thousand_threads_finish_while_held(Hold::Kernel);
}

#[test]
fn thousand_started_threads_finish_while_a_pinned_std_wait_holds_their_carrier() {
    thousand_threads_finish_while_held(Hold::PinnedStd);
}

#[test]
fn thousand_started_threads_finish_while_a_pinned_weft_wait_holds_their_carrier() {
    thousand_threads_finish_while_held(Hold::PinnedWeft);
}

/// A thread parked on the held carrier and woken by `unpark`, by a
/// channel message, or by its timer (`weft::sleep`) runs elsewhere while
/// the hog still holds the carrier.
#[test]
fn parked_threads_woken_while_their_carrier_is_held_run_elsewhere() {
    if !areas_supported() {
        return;
    }
    let rt = one_carrier(Duration::from_millis(5));
    let hogs = Hogs::start(&rt, 1);
    let hog = hogs.hogs[0].clone();
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let unparked = rt.spawn(move || {
        let before = gettid();
        while !f.load(Ordering::SeqCst) {
            weft::park();
        }
        (before, gettid())
    });
    let (tx, rx) = weft::channel::bounded::<u32>(1);
    let received = rt.spawn(move || {
        let before = gettid();
        assert_eq!(rx.recv().unwrap(), 7);
        (before, gettid())
    });
    // Sleeps until it wakes to find the hold on: that sleep began on the
    // carrier before the hog took it (the two cannot run there at once),
    // and its timer fired after.
    let state = hog.state.clone();
    let slept = rt.spawn(move || {
        loop {
            let before = gettid();
            weft::sleep(Duration::from_millis(30)).unwrap();
            if state.holding.load(Ordering::SeqCst) {
                return (before, gettid());
            }
        }
    });
    wait_until("the waiters park", LIMIT, || {
        [&unparked, &received, &slept]
            .iter()
            .all(|h| h.thread().state() == State::Parked)
    });
    hog.hold(Hold::Cpu);
    wait_until("the hog holds its carrier", LIMIT, || hog.holding());
    flag.store(true, Ordering::SeqCst);
    unparked.thread().unpark();
    tx.send(7).unwrap();
    wait_until(
        "the woken threads finish while the carrier is held",
        LIMIT,
        || {
            [&unparked, &received, &slept]
                .iter()
                .all(|h| h.is_finished())
        },
    );
    assert!(hog.holding(), "the hold ended before the woken threads ran");
    hog.release();
    for (what, h) in [
        ("unpark", unparked),
        ("channel", received),
        ("timer", slept),
    ] {
        let (before, after) = join_within(what, LIMIT, h).unwrap();
        assert_eq!(before, hog.tid, "{what}: not homed on the held carrier");
        assert_ne!(after, hog.tid, "{what}: ran on the held carrier");
    }
    hogs.finish();
}

// ---------------------------------------------------------------------
// What a moved thread keeps.
// ---------------------------------------------------------------------

/// Moves the thread that calls it from carrier to carrier: it asks the hog
/// of its carrier to hold it and yields until it runs on the other one.
/// Holds rotate through the ways to hold a carrier.
struct Mover {
    hogs: Vec<Arc<Hog>>,
    moves: Cell<usize>,
}

impl Mover {
    fn move_once(&self) {
        let from = gettid();
        let hog = self
            .hogs
            .iter()
            .find(|h| h.tid == from)
            .expect("the thread runs on a carrier with a hog");
        let how = Hold::ALL[self.moves.get() % Hold::ALL.len()];
        hog.hold(how);
        let t0 = Instant::now();
        while gettid() == from {
            assert!(
                t0.elapsed() < LIMIT,
                "never moved off a carrier held {how:?}"
            );
            weft::yield_now();
        }
        hog.release();
        self.moves.set(self.moves.get() + 1);
    }
}

/// Runs `f` on a virtual thread of a two-carrier runtime (stall threshold
/// 2 ms) with a [`Mover`]; checks that it moved at least [`MOVES`] times.
fn moving<T, F>(f: F) -> T
where
    T: Send + 'static,
    F: FnOnce(&Mover) -> T + Send + 'static,
{
    let rt = two_carriers(Duration::from_millis(2)).build().unwrap();
    let hogs = Hogs::start(&rt, 2);
    let mover = Mover {
        hogs: hogs.hogs.clone(),
        moves: Cell::new(0),
    };
    let h = weft::Builder::new()
        .name("mover")
        .spawn_on(&rt, move || {
            let out = f(&mover);
            (out, mover.moves.get())
        })
        .unwrap();
    let result = join_within("the moving thread", LIMIT, h);
    hogs.finish();
    let (out, moves) = result.unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert!(moves >= MOVES, "moved only {moves} times");
    assert!(
        rt.threads_moved() >= moves,
        "{moves} moves, threads_moved() says {}",
        rt.threads_moved()
    );
    out
}

std::thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
    static LOG: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

#[test]
fn thread_locals_keep_their_values_and_addresses_across_moves() {
    if !areas_supported() {
        return;
    }
    moving(|m| {
        let count_at = COUNT.with(|c| c as *const Cell<u64>);
        let log_at = LOG.with(|l| l as *const RefCell<Vec<u64>>);
        let mut tids = HashSet::new();
        for round in 0..MOVES as u64 / 2 {
            tids.insert(gettid());
            // A reference taken before the move, used after it.
            COUNT.with(|c| {
                let v = c.get();
                m.move_once();
                tids.insert(gettid());
                assert_eq!(c.get(), v);
                c.set(v + 1);
            });
            // A RefCell borrowed across a move.
            LOG.with(|l| {
                let mut g = l.borrow_mut();
                g.push(round);
                m.move_once();
                assert_eq!(g.last(), Some(&round));
            });
            assert_eq!(COUNT.with(|c| c as *const Cell<u64>), count_at);
            assert_eq!(LOG.with(|l| l as *const RefCell<Vec<u64>>), log_at);
            assert_eq!(COUNT.with(Cell::get), round + 1);
        }
        let n = MOVES as u64 / 2;
        assert_eq!(LOG.with(|l| l.borrow().clone()), (0..n).collect::<Vec<_>>());
        assert_eq!(tids.len(), 2, "ran on {tids:?}");
    });
}

#[test]
fn std_and_weft_identity_survive_moves() {
    if !areas_supported() {
        return;
    }
    moving(|m| {
        let std_id = std::thread::current().id();
        let std_name = std::thread::current().name().map(str::to_owned);
        let weft_id = weft::current().id();
        assert_eq!(weft::current().name(), Some("mover"));
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        for _ in 0..MOVES {
            let tid = gettid();
            m.move_once();
            assert_ne!(gettid(), tid);
            assert_eq!(std::thread::current().id(), std_id);
            assert_eq!(std::thread::current().name().map(str::to_owned), std_name);
            assert_eq!(weft::current().id(), weft_id);
            assert_eq!(weft::current().name(), Some("mover"));
            // SAFETY: as above.
            assert_eq!(unsafe { libc::pthread_self() }, me);
        }
    });
}

/// A `std::sync::MutexGuard` taken on one OS thread, held across a move
/// and dropped on the other: the mutex is free and usable after (std's
/// futex mutex has no owner thread).
#[test]
fn std_mutex_guard_held_across_a_move_is_released_on_the_new_os_thread() {
    if !areas_supported() {
        return;
    }
    let lock = Arc::new(std::sync::Mutex::new(0usize));
    let l = lock.clone();
    moving(move |m| {
        for round in 0..MOVES {
            let mut g = l.lock().unwrap();
            let tid = gettid();
            m.move_once();
            assert_ne!(gettid(), tid);
            *g += 1;
            drop(g);
            let g = l
                .try_lock()
                .expect("the mutex is free after the guard dropped");
            assert_eq!(*g, round + 1);
        }
    });
    let seen = std::thread::spawn(move || *lock.lock().unwrap())
        .join()
        .unwrap();
    assert_eq!(seen, MOVES);
}

/// `fastrand`'s thread-local generator follows its thread: seeded, it
/// gives its seed's sequence across moves, while another thread on the
/// same carriers draws its own sequence from its own generator.
#[test]
fn a_thread_local_rng_keeps_its_state_across_moves() {
    if !areas_supported() {
        return;
    }
    moving(|m| {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let other = weft::spawn(move || {
            fastrand::seed(2);
            let mut mine = fastrand::Rng::with_seed(2);
            let mut draws = 0usize;
            while !s.load(Ordering::SeqCst) {
                assert_eq!(fastrand::u64(..), mine.u64(..));
                draws += 1;
                weft::yield_now();
            }
            draws
        });
        fastrand::seed(1);
        let mut mine = fastrand::Rng::with_seed(1);
        for _ in 0..MOVES {
            assert_eq!(fastrand::u64(..), mine.u64(..));
            m.move_once();
            assert_eq!(fastrand::u64(..), mine.u64(..));
        }
        stop.store(true, Ordering::SeqCst);
        assert!(other.join().unwrap() > 0);
    });
}

/// A tracing span entered before the moves is still the current one after
/// each (the registry keeps its span stack per thread), and one entered
/// and left across a move nests and unwinds as on one OS thread.
#[test]
fn a_tracing_span_stays_current_across_moves() {
    if !areas_supported() {
        return;
    }
    moving(|m| {
        let _default = tracing::subscriber::set_default(tracing_subscriber::registry());
        let outer = tracing::info_span!("outer");
        let _entered = outer.enter();
        let outer_id = outer.id().expect("the registry enables every span");
        for _ in 0..MOVES / 2 {
            m.move_once();
            assert_eq!(tracing::Span::current().id(), Some(outer_id.clone()));
            let inner = tracing::info_span!("inner");
            let g = inner.enter();
            m.move_once();
            assert_eq!(tracing::Span::current().id(), inner.id());
            drop(g);
            assert_eq!(tracing::Span::current().id(), Some(outer_id.clone()));
        }
    });
}

weft::local! {
    static LOCAL_COUNT: Cell<u64> = Cell::new(0);
    static LOCAL_LOG: RefCell<Vec<u64>> = RefCell::new(Vec::new());
}

#[test]
fn weft_locals_keep_their_values_across_moves() {
    if !areas_supported() {
        return;
    }
    moving(|m| {
        let at = LOCAL_COUNT.with(|c| c as *const Cell<u64>);
        for round in 0..MOVES as u64 / 2 {
            LOCAL_COUNT.with(|c| {
                m.move_once();
                c.set(c.get() + 1);
            });
            LOCAL_LOG.with(|l| {
                let mut g = l.borrow_mut();
                g.push(round);
                m.move_once();
                assert_eq!(g.last(), Some(&round));
            });
            assert_eq!(LOCAL_COUNT.with(|c| c as *const Cell<u64>), at);
            assert_eq!(LOCAL_COUNT.with(Cell::get), round + 1);
        }
        let n = MOVES as u64 / 2;
        assert_eq!(
            LOCAL_LOG.with(|l| l.borrow().clone()),
            (0..n).collect::<Vec<_>>()
        );
    });
}

// ---------------------------------------------------------------------
// Threads that stay.
// ---------------------------------------------------------------------

/// Parked virtual threads that answer each round the test calls: they
/// record the carrier they answer on. Parked between rounds, they are woken
/// only by the test, so a carrier descheduled past the stall threshold on
/// a busy machine moves none of them.
struct Responders {
    round: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    /// Per thread: the last round it answered, and where.
    answers: Vec<Arc<(AtomicUsize, AtomicI32)>>,
    handles: Vec<JoinHandle<()>>,
}

impl Responders {
    /// `n` responders (that stay on their carrier if `stay`); returns once
    /// each has answered round 0 and parked.
    fn start(rt: &Runtime, n: usize, stay: bool) -> Responders {
        let round = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut answers = Vec::new();
        let mut handles = Vec::new();
        for _ in 0..n {
            let answer = Arc::new((AtomicUsize::new(usize::MAX), AtomicI32::new(0)));
            let (a, round, stop) = (answer.clone(), round.clone(), stop.clone());
            answers.push(answer);
            handles.push(rt.spawn(move || {
                if stay {
                    weft::stay_on_carrier();
                }
                while !stop.load(Ordering::SeqCst) {
                    let r = round.load(Ordering::SeqCst);
                    if a.0.load(Ordering::SeqCst) != r {
                        a.1.store(gettid(), Ordering::SeqCst);
                        a.0.store(r, Ordering::SeqCst);
                    }
                    weft::park();
                }
            }));
        }
        let r = Responders {
            round,
            stop,
            answers,
            handles,
        };
        wait_until("the responders answer and park", LIMIT, || {
            r.answered(0) == n
                && r.handles
                    .iter()
                    .all(|h| h.thread().state() == State::Parked)
        });
        r
    }

    /// Where each one last answered.
    fn tids(&self) -> Vec<i32> {
        self.answers
            .iter()
            .map(|a| a.1.load(Ordering::SeqCst))
            .collect()
    }

    /// Calls round `r`: wakes them all.
    fn call(&self, r: usize) {
        self.round.store(r, Ordering::SeqCst);
        for h in &self.handles {
            h.thread().unpark();
        }
    }

    /// How many answered round `r`.
    fn answered(&self, r: usize) -> usize {
        self.answers
            .iter()
            .filter(|a| a.0.load(Ordering::SeqCst) == r)
            .count()
    }

    fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles {
            h.thread().unpark();
            join_within("a responder", LIMIT, h).unwrap();
        }
    }
}

/// A thread that called `weft::stay_on_carrier()` never changes OS thread
/// while its carrier is held again and again: runnable, it makes no
/// progress during a hold; woken during one, it answers only after it —
/// while the threads homed there that may move answer from the other
/// carrier during the hold.
#[test]
fn a_thread_that_stays_waits_for_its_held_carrier_while_others_move() {
    if !areas_supported() {
        return;
    }
    const MOVERS: usize = 16;
    const HOLDS: usize = 20;
    let rt = two_carriers(Duration::from_millis(2)).build().unwrap();
    let hogs = Hogs::start(&rt, 2);
    // A runnable thread that stays: it yields in a loop, counting its runs.
    let stop = Arc::new(AtomicBool::new(false));
    let runs = Arc::new(AtomicUsize::new(0));
    let yielder_at = Arc::new(AtomicI32::new(0));
    let (s, n, at) = (stop.clone(), runs.clone(), yielder_at.clone());
    let yielder = rt.spawn(move || {
        weft::stay_on_carrier();
        let tid = gettid();
        at.store(tid, Ordering::SeqCst);
        let mut changes = 0;
        while !s.load(Ordering::SeqCst) {
            changes += usize::from(gettid() != tid);
            n.fetch_add(1, Ordering::SeqCst);
            weft::yield_now();
        }
        changes
    });
    wait_until("the yielder runs", LIMIT, || {
        runs.load(Ordering::SeqCst) > 0
    });
    let yielder_tid = yielder_at.load(Ordering::SeqCst);
    // Two carriers, a hog on each: its carrier is held every other round.
    assert!(hogs.hogs.iter().any(|h| h.tid == yielder_tid));
    // Parked threads that stay, and parked threads that may move.
    let stayers = Responders::start(&rt, 4, true);
    let stayer_tids = stayers.tids();
    let movers = Responders::start(&rt, MOVERS, false);
    let mut yielder_held = 0;
    let mut stayers_held = 0;
    for round in 1..=HOLDS {
        let hog = &hogs.hogs[round % 2];
        hog.hold(Hold::Cpu);
        wait_until("the hog holds its carrier", LIMIT, || hog.holding());
        // From here no thread homed on the hog's carrier runs there.
        let yielder_runs = runs.load(Ordering::SeqCst);
        let before = movers.tids();
        let here = before.iter().filter(|&&t| t == hog.tid).count();
        if round > 1 {
            // The previous hold moved every one of them off the other
            // carrier, and they answered here.
            assert_eq!(
                here, MOVERS,
                "round {round}: {here} homed on the held carrier"
            );
        }
        stayers.call(round);
        movers.call(round);
        wait_until("the movers answer while the carrier is held", LIMIT, || {
            movers.answered(round) == MOVERS
        });
        assert!(hog.holding(), "the hold ended before the movers answered");
        assert!(movers.tids().iter().all(|&t| t != hog.tid));
        let held_stayers = stayer_tids.iter().filter(|&&t| t == hog.tid).count();
        assert_eq!(
            stayers.answered(round),
            stayer_tids.len() - held_stayers,
            "a staying thread answered off its held carrier"
        );
        stayers_held += held_stayers;
        if hog.tid == yielder_tid {
            assert_eq!(
                runs.load(Ordering::SeqCst),
                yielder_runs,
                "the staying yielder ran while its carrier was held"
            );
            yielder_held += 1;
        }
        hog.release();
        wait_until("the staying threads answer", LIMIT, || {
            stayers.answered(round) == stayer_tids.len()
        });
        assert_eq!(stayers.tids(), stayer_tids, "a staying thread moved");
        wait_until("the hold ends", LIMIT, || !hog.holding());
    }
    stop.store(true, Ordering::SeqCst);
    let changes = join_within("the yielder", LIMIT, yielder).unwrap();
    assert_eq!(changes, 0, "the staying yielder changed OS thread");
    assert_eq!(yielder_held, HOLDS / 2);
    assert!(
        stayers_held > 0,
        "no staying thread was homed on a held carrier"
    );
    assert!(rt.threads_moved() >= (HOLDS - 1) * MOVERS);
    stayers.finish();
    movers.finish();
    hogs.finish();
}

/// With carrier thread-locals (`RuntimeBuilder::carrier_thread_locals`) a
/// thread has nothing of its own to take along: no thread ever moves,
/// whatever holds its carrier; the ones homed there answer only after the
/// hold.
#[test]
fn with_carrier_thread_locals_no_thread_ever_moves() {
    const N: usize = 16;
    const HOLDS: usize = 10;
    let rt = two_carriers(Duration::from_millis(2))
        .carrier_thread_locals()
        .build()
        .unwrap();
    let hogs = Hogs::start(&rt, 2);
    let threads = Responders::start(&rt, N, false);
    let tids = threads.tids();
    for round in 1..=HOLDS {
        let hog = &hogs.hogs[round % 2];
        let asked = SystemTime::now();
        hog.hold(Hold::ALL[round % Hold::ALL.len()]);
        wait_until("the hog holds its carrier", LIMIT, || hog.holding());
        threads.call(round);
        let held = tids.iter().filter(|&&t| t == hog.tid).count();
        wait_until("the others answer", LIMIT, || {
            threads.answered(round) == N - held
        });
        // The monitor has seen the hold (and handed off what may move, in
        // the same look) once it reports it: a stall, or threads waiting
        // behind a pinned wait (which is not reported as a stall).
        if held > 0 {
            wait_until("an event of this hold", LIMIT, || {
                weft::events::recent().iter().any(|e| {
                    e.thread_id == hog.id
                        && matches!(
                            e.kind,
                            EventKind::StallCpu
                                | EventKind::StallBlocked
                                | EventKind::BlockedWithWaiters
                        )
                        && e.at >= asked
                })
            });
        }
        assert_eq!(
            threads.answered(round),
            N - held,
            "a thread ran off its held carrier"
        );
        hog.release();
        wait_until("all answer", LIMIT, || threads.answered(round) == N);
        assert_eq!(threads.tids(), tids, "a thread changed OS thread");
    }
    assert_eq!(rt.threads_moved(), 0);
    threads.finish();
    hogs.finish();
}

// ---------------------------------------------------------------------
// No wake-up lost in a handoff.
// ---------------------------------------------------------------------

/// 1,000 pairs of threads ping-pong — weft channel messages, a shared
/// `weft::sync::Mutex`, park/unpark handshakes — while hogs hold one
/// carrier after the other, each way in turn (stall threshold 1 ms).
/// A wake-up lost while a thread moves leaves a pair stuck: everything
/// must finish and every count add up.
///
/// The pairs go on past their `ROUNDS` until a hold has moved a thread:
/// judged by progress, not by how fast the pairs run (once carriers slept
/// at once instead of yielding, 30 rounds could end before the first
/// hold moved anything, and the test failed 1 run in 20 on "no hold moved
/// a thread").
#[test]
fn ping_pong_under_repeated_holds_loses_no_wake_up() {
    if !areas_supported() {
        return;
    }
    const PAIRS: usize = 1000;
    const ROUNDS: usize = 30;
    let rt = Runtime::builder()
        .parallelism(2)
        .max_pool_size(4)
        .stall_threshold(Duration::from_millis(1))
        .held_carrier_nice(0)
        .cover_carriers(false)
        .build()
        .unwrap();
    let hogs = Hogs::start(&rt, 2);
    let lock = Arc::new(weft::sync::Mutex::new(0usize));
    let messages = Arc::new(AtomicUsize::new(0));
    let handshakes = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    // Rounds of each kind the threads did (they go on until `moved_once`).
    let done_kinds: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let moved_once = Arc::new(AtomicBool::new(false));

    // The driver: holds one carrier after the other until the pairs are
    // done (a hold ends once the monitor moved something, or after a
    // while if nothing was there to move).
    let stop = Arc::new(AtomicBool::new(false));
    let driver = {
        let (hogs, stop, rt, moved_once) = (
            hogs.hogs.clone(),
            stop.clone(),
            rt.clone(),
            moved_once.clone(),
        );
        std::thread::spawn(move || {
            let mut holds = 0usize;
            let mut during = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let hog = &hogs[holds % hogs.len()];
                let moved = rt.threads_moved();
                hog.hold(Hold::ALL[(holds / hogs.len()) % Hold::ALL.len()]);
                let t0 = Instant::now();
                while !hog.holding() && !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_micros(200));
                }
                while rt.threads_moved() == moved
                    && t0.elapsed() < Duration::from_millis(50)
                    && !stop.load(Ordering::SeqCst)
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
                during += usize::from(rt.threads_moved() != moved);
                if during > 0 {
                    moved_once.store(true, Ordering::SeqCst);
                }
                hog.release();
                while hog.holding() {
                    std::thread::sleep(Duration::from_micros(200));
                }
                holds += 1;
            }
            (holds, during)
        })
    };
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop_guard = Stop(stop);

    let mut handles = Vec::with_capacity(2 * PAIRS);
    for _ in 0..PAIRS {
        let (to_b, from_a) = weft::channel::bounded::<usize>(1);
        let (to_a, from_b) = weft::channel::bounded::<usize>(1);
        let a_turn = Arc::new(AtomicUsize::new(usize::MAX));
        let b_turn = Arc::new(AtomicUsize::new(usize::MAX));
        let a_thread = Arc::new(OnceLock::<weft::Thread>::new());
        let b_thread = Arc::new(OnceLock::<weft::Thread>::new());
        for side in 0..2 {
            let (tx, rx) = if side == 0 {
                (to_b.clone(), from_b.clone())
            } else {
                (to_a.clone(), from_a.clone())
            };
            let (mine, theirs, me, peer) = if side == 0 {
                (
                    a_turn.clone(),
                    b_turn.clone(),
                    a_thread.clone(),
                    b_thread.clone(),
                )
            } else {
                (
                    b_turn.clone(),
                    a_turn.clone(),
                    b_thread.clone(),
                    a_thread.clone(),
                )
            };
            let (lock, messages, handshakes, finished, done_kinds, moved_once) = (
                lock.clone(),
                messages.clone(),
                handshakes.clone(),
                finished.clone(),
                done_kinds.clone(),
                moved_once.clone(),
            );
            handles.push(rt.spawn(move || {
                me.set(weft::current()).unwrap();
                // Learn the peer's handle (a message each way).
                tx.send(usize::MAX).unwrap();
                assert_eq!(rx.recv().unwrap(), usize::MAX);
                let peer = peer.get().expect("the peer set its handle").clone();
                // Side 0 decides, at each message round, whether the pair
                // stops (past ROUNDS, once a hold moved a thread); side 1
                // echoes the decision.
                const STOP: usize = usize::MAX - 1;
                let mut r = 0;
                loop {
                    match r % 3 {
                        0 => {
                            let got = if side == 0 {
                                let stop = r >= ROUNDS && moved_once.load(Ordering::SeqCst);
                                let msg = if stop { STOP } else { r };
                                tx.send(msg).unwrap();
                                let got = rx.recv().unwrap();
                                assert_eq!(got, msg);
                                got
                            } else {
                                let got = rx.recv().unwrap();
                                tx.send(got).unwrap();
                                got
                            };
                            if got == STOP {
                                break;
                            }
                            assert_eq!(got, r);
                            messages.fetch_add(1, Ordering::Relaxed);
                        }
                        1 => {
                            let mut g = lock.lock().unwrap();
                            *g += 1;
                            if r % 2 == 0 {
                                weft::yield_now(); // contended while held
                            }
                        }
                        _ => {
                            // Each side tells the other "round r" and waits
                            // to be told.
                            theirs.store(r, Ordering::SeqCst);
                            peer.unpark();
                            while mine.load(Ordering::SeqCst) != r {
                                weft::park();
                            }
                            handshakes.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    done_kinds[r % 3].fetch_add(1, Ordering::Relaxed);
                    r += 1;
                }
                finished.fetch_add(1, Ordering::SeqCst);
            }));
        }
    }
    wait_until("every pair finishes", LIMIT, || {
        finished.load(Ordering::SeqCst) == 2 * PAIRS
    });
    drop(stop_guard);
    let (holds, during) = driver.join().unwrap();
    for h in handles {
        join_within("a ping-pong thread", LIMIT, h).unwrap();
    }
    hogs.finish();
    let per_kind = |k: usize| done_kinds[k].load(Ordering::SeqCst);
    // Every thread did at least ROUNDS rounds.
    assert!(per_kind(0) + per_kind(1) + per_kind(2) >= 2 * PAIRS * ROUNDS);
    assert_eq!(messages.load(Ordering::SeqCst), per_kind(0));
    assert_eq!(*lock.lock().unwrap(), per_kind(1));
    assert_eq!(handshakes.load(Ordering::SeqCst), per_kind(2));
    assert!(during > 0, "no hold moved a thread ({holds} holds)");
    assert!(rt.threads_moved() > 0);
}
