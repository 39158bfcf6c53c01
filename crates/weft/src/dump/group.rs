//! Threads grouped by identical stack, state and blocker, largest group
//! first: Go's `goroutine?debug=1` for a dump of 100,000 threads.
//!
//! Two threads fall in one group when they are in the same [`State`],
//! wait on the same *kind* of blocker and have equal stacks. The kind
//! drops what is particular to one thread — the descriptor a reader waits
//! on, the deadline of a sleep, the thread a joiner joins, the owner of a
//! lock's waiters (each saw it at its own moment) aside — so that 10,000
//! connection threads waiting to read form one group; it keeps which
//! primitive a lock waiter waits for (its kind and address, and the owner
//! of a mutex), since threads queued on one lock are the group worth
//! seeing and its owner is the thread to look at.
//!
//! Grouping hashes each stack once (function names and lines, with a
//! multiplicative hash) and compares stacks only within a bucket, so it
//! is linear in the size of the dump.

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant, SystemTime};

use super::{Dump, ThreadInfo, describe_blocker, for_how_long, state_name};
use crate::symbols::{Frame, first_user_frame, format_stack};
use crate::thread::{Blocker, State, SyncKind, ThreadId};

/// Threads of a dump with the same stack, state and kind of blocker.
#[derive(Clone, Debug)]
pub struct StackGroup {
    /// How many threads.
    pub count: usize,
    /// Their state.
    pub state: State,
    /// What they wait on, without what is particular to one thread
    /// (`"sleeping"`, `"waiting to read"`, `"waiting for
    /// weft::sync::Mutex <0x…> owned by #7"`); `None` when not blocked in a
    /// weft primitive.
    pub blocker: Option<String>,
    /// The longest any of them has waited on its blocker (to the kernel's
    /// timer tick), as Go prints `[chan receive, 12 minutes]`.
    pub longest_wait: Option<Duration>,
    /// The stack they share, innermost frame first (empty when no stack
    /// could be had).
    pub stack: Vec<Frame>,
    /// Index in [`StackGroup::stack`] of the first frame outside Weft and
    /// std: the user code that parked or blocked.
    pub first_user_frame: Option<usize>,
    /// The threads, by ascending id.
    pub threads: Vec<ThreadId>,
}

impl StackGroup {
    /// The first frame outside Weft and std, if any.
    pub fn user_frame(&self) -> Option<&Frame> {
        self.first_user_frame.and_then(|i| self.stack.get(i))
    }
}

/// A dump's threads grouped by identical stack, state and blocker
/// ([`Dump::groups`]). `Display` prints Go's `goroutine?debug=1` shape;
/// [`ThreadGroups::to_json`] the same as JSON.
#[derive(Clone, Debug)]
pub struct ThreadGroups {
    /// Process id.
    pub pid: u32,
    /// When the dump was taken.
    pub time: SystemTime,
    /// Threads in the dump.
    pub total: usize,
    /// The groups, largest first (ties: by state, blocker, then lowest
    /// thread id).
    pub groups: Vec<StackGroup>,
    /// How long grouping took (not counting the dump).
    pub took: Duration,
}

/// What of a blocker a group keeps: its kind, never a thread's own
/// descriptor, deadline, owner or joinee.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    None,
    Sleep,
    Park,
    Io {
        read: bool,
    },
    Lock {
        kind: SyncKind,
        addr: usize,
        owner: Option<u64>,
    },
    Channel {
        recv: bool,
    },
    Join,
    Other(&'static str),
    Call(&'static str),
}

impl Kind {
    fn of(b: &Blocker) -> Kind {
        match *b {
            Blocker::None => Kind::None,
            Blocker::Sleep(_) => Kind::Sleep,
            Blocker::Park => Kind::Park,
            Blocker::Io { read, .. } => Kind::Io { read },
            Blocker::Lock { kind, addr, owner } => Kind::Lock { kind, addr, owner },
            Blocker::Channel { recv } => Kind::Channel { recv },
            Blocker::Join(_) => Kind::Join,
            Blocker::Other(s) => Kind::Other(s),
            Blocker::Call { call, .. } => Kind::Call(call),
        }
    }

    fn describe(self) -> Option<String> {
        Some(match self {
            Kind::None => return None,
            Kind::Sleep => "sleeping".into(),
            Kind::Park => "parked".into(),
            Kind::Io { read: true } => "waiting to read".into(),
            Kind::Io { read: false } => "waiting to write".into(),
            Kind::Lock { kind, addr, owner } => {
                return describe_blocker(&Blocker::Lock { kind, addr, owner });
            }
            Kind::Join => "joining a thread".into(),
            Kind::Call(call) => format!("parked in {call}"),
            Kind::Channel { recv } => {
                return describe_blocker(&Blocker::Channel { recv });
            }
            Kind::Other(s) => s.into(),
        })
    }
}

/// FxHash's multiply-rotate over 8-byte words: stacks are hashed once per
/// thread, so the hash must be cheap; collisions are resolved by comparing
/// stacks.
#[derive(Default)]
pub(super) struct StackHasher(u64);

impl Hasher for StackHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl StackHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Function names and lines: file names add bytes, not distinctions.
fn stack_hash(stack: &[Frame]) -> u64 {
    let mut h = StackHasher::default();
    h.write_usize(stack.len());
    for f in stack {
        f.function.hash(&mut h);
        h.write_u32(f.line.unwrap_or(0));
    }
    h.finish()
}

/// The key of a group, without its stack (compared separately).
type Key = (State, Kind, u64);

impl Dump {
    /// The threads grouped by identical stack, state and kind of blocker,
    /// largest group first (see [`ThreadGroups`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// let sleepers: Vec<_> = (0..3)
    ///     .map(|_| weft::spawn(|| weft::sleep(Duration::from_secs(30))))
    ///     .collect();
    /// for h in &sleepers {
    ///     while h.thread().state() != weft::State::Parked {
    ///         std::thread::yield_now();
    ///     }
    /// }
    /// let groups = weft::dump().groups();
    /// let g = &groups.groups[0];
    /// assert!(g.count >= 3);
    /// assert_eq!(g.blocker.as_deref(), Some("sleeping"));
    /// assert!(groups.to_string().contains("sleeping"));
    /// # for h in sleepers { h.thread().interrupt(); let _ = h.join(); }
    /// ```
    pub fn groups(&self) -> ThreadGroups {
        let t0 = Instant::now();
        let mut groups = collect_groups(&self.threads);
        order_groups(&mut groups);
        ThreadGroups {
            pid: self.pid,
            time: self.time,
            total: self.threads.len(),
            groups,
            took: t0.elapsed(),
        }
    }
}

/// One group per distinct key and stack, in first-seen order.
fn collect_groups(threads: &[ThreadInfo]) -> Vec<StackGroup> {
    let mut groups: Vec<(Kind, StackGroup)> = Vec::new();
    // Usually one group per key; more only on a hash collision.
    let mut by_key: HashMap<Key, Vec<usize>> = HashMap::new();
    // The groups last joined, most recent first: threads of one group tend
    // to come together (or take turns), and comparing with a group's stack
    // reads the thread's stack once where hashing and comparing read it
    // twice.
    let mut recent: [usize; 4] = [usize::MAX; 4];
    for t in threads {
        let kind = Kind::of(&t.blocker);
        if let Some(r) = recent.iter().position(|&g| {
            groups
                .get(g)
                .is_some_and(|(k, g)| *k == kind && g.state == t.state && g.stack == t.stack)
        }) {
            let g = recent[r];
            recent[..=r].rotate_right(1);
            let g = &mut groups[g].1;
            g.count += 1;
            g.threads.push(t.id);
            g.longest_wait = g.longest_wait.max(t.waited);
            continue;
        }
        let key = (t.state, kind, stack_hash(&t.stack));
        let candidates = by_key.entry(key).or_default();
        match candidates
            .iter()
            .copied()
            .find(|&g| groups[g].1.stack == t.stack)
        {
            Some(g) => {
                recent.rotate_right(1);
                recent[0] = g;
                let g = &mut groups[g].1;
                g.count += 1;
                g.threads.push(t.id);
                g.longest_wait = g.longest_wait.max(t.waited);
            }
            None => {
                recent.rotate_right(1);
                recent[0] = groups.len();
                candidates.push(groups.len());
                groups.push((
                    kind,
                    StackGroup {
                        count: 1,
                        state: t.state,
                        blocker: None,
                        longest_wait: t.waited,
                        stack: t.stack.clone(),
                        first_user_frame: first_user_frame(&t.stack),
                        threads: vec![t.id],
                    },
                ));
            }
        }
    }
    groups
        .into_iter()
        .map(|(kind, mut g)| {
            g.blocker = kind.describe();
            g.threads.sort_unstable();
            g
        })
        .collect()
}

/// Largest first; ties by state, blocker and lowest thread id, so that the
/// order does not depend on the registry's.
fn order_groups(groups: &mut [StackGroup]) {
    groups.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| (a.state as u8).cmp(&(b.state as u8)))
            .then_with(|| a.blocker.cmp(&b.blocker))
            .then_with(|| a.threads.first().cmp(&b.threads.first()))
    });
}

impl fmt::Display for ThreadGroups {
    /// ```text
    /// Weft thread groups (pid 4242, 10003 virtual threads in 3 groups):
    ///
    /// 10000 threads: PARKED, waiting to receive from a channel
    ///       at app::worker (src/main.rs:12)   <== first frame outside Weft and std
    ///       ...
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Weft thread groups (pid {}, {} virtual threads in {} groups):",
            self.pid,
            self.total,
            self.groups.len()
        )?;
        for g in &self.groups {
            write!(
                f,
                "\n{} thread{}: {}",
                g.count,
                if g.count == 1 { "" } else { "s" },
                state_name(g.state)
            )?;
            if let Some(b) = &g.blocker {
                write!(f, ", {b}")?;
            }
            if let Some(d) = g.longest_wait {
                write!(
                    f,
                    " ({}{})",
                    if g.count > 1 { "longest " } else { "for " },
                    for_how_long(d)
                )?;
            }
            writeln!(f)?;
            if g.stack.is_empty() {
                writeln!(f, "      (no stack)")?;
            }
            f.write_str(&format_stack(&g.stack))?;
        }
        Ok(())
    }
}
