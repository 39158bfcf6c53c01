//! Transparent blocking (Cargo feature `transparent`): blocking libc calls
//! made on a virtual thread park the virtual thread instead of its carrier.
//!
//! # How
//!
//! With the feature on, the `weft` crate defines C functions named like
//! libc's — `read`, `recv`, `connect`, `nanosleep`, … (the full list is
//! below) — as `#[no_mangle] extern "C"` symbols. A definition in the final
//! executable takes precedence over the shared C library's (symbol
//! interposition, as the C coroutine libraries libco and libgo do), so
//! `std::net`, `std::thread::sleep` and every crate or C library linked
//! into the program call Weft's definitions. Each one:
//!
//! - on an OS thread (or with `WEFT_TRANSPARENT=0`, or in a `fork` child)
//!   goes to the kernel with a raw `syscall(2)`, exactly as libc would;
//! - on a virtual thread, for a *socket* the user left blocking, makes the
//!   socket non-blocking in the kernel (remembering that the user did not),
//!   tries the call, and on `EAGAIN` parks the virtual thread on Weft's
//!   poller until the socket is ready; sleeps park on Weft's timers.
//!
//! Weft's own code never recurses into the hooks in a way that parks:
//! the poller, the carriers and the offload pool are OS threads (their
//! calls pass straight through), Weft's futexes are raw syscalls, and the
//! sockets of [`weft::net`](crate::net) are non-blocking by the user's
//! (Weft's) choice, which the hooks always respect.
//!
//! # Semantics kept
//!
//! - A descriptor the program made non-blocking (`O_NONBLOCK` through
//!   `fcntl`, `FIONBIO` through `ioctl`, `SOCK_NONBLOCK`, or `MSG_DONTWAIT`
//!   on the call) still returns `EAGAIN`; `fcntl(F_GETFL)` does not show the
//!   flag Weft set on its own. The program's flag is one per file
//!   description, as the kernel's is: set or cleared through one copy of a
//!   socket made with the hooked `dup`, `dup2`, `dup3` or `fcntl(F_DUPFD*)`,
//!   it is seen through the others, and a copy made before Weft managed the
//!   socket takes Weft's view of it, not the kernel's flag Weft set
//!   (`tests-transparent/tests/shared_description.rs`). Copies Weft did not
//!   see made (a raw `dup` syscall, a descriptor passed in `SCM_RIGHTS` to
//!   this same process) have a view of their own.
//! - `SO_RCVTIMEO` / `SO_SNDTIMEO` (what `set_read_timeout` and
//!   `set_write_timeout` set) become the park's deadline; the call then
//!   fails with `EAGAIN`, like the kernel's. A `connect` that times out
//!   fails with `EINPROGRESS`, like Linux's.
//! - `connect` completion errors come from `SO_ERROR` (`ECONNREFUSED`, …).
//!   A `connect` to a Unix listener whose backlog is full waits until it
//!   is accepted, as the kernel's blocking one does (retried after sleeps
//!   of 1 to 64 ms: that wait has nothing to poll for), up to
//!   `SO_SNDTIMEO` (then `EAGAIN`).
//! - A blocking stream write (`write`, `writev`, `send`, `sendto`,
//!   `sendmsg`) returns when all of it is written, and a stream read with
//!   `MSG_WAITALL` when all of it has arrived (or at end of file), as the
//!   kernel's do on a blocking socket; an interrupt, the `SO_*TIMEO`
//!   deadline or an error after some bytes moved returns the count so far
//!   (`tests-transparent/tests/blocking_semantics.rs`). Ancillary data of
//!   a `sendmsg` goes with its first part.
//! - An unconnected Unix datagram `sendto` to a receiver whose queue is
//!   full parks until the receiver reads: the failed non-blocking send
//!   puts the sender on the receiver's peer-wake queue, so the read wakes
//!   the sender's poller entry (`tests-transparent/tests/unix_dgram.rs`).
//! - On an OS thread, a call on a socket Weft made non-blocking waits in
//!   `poll`; a signal handler that interrupts that wait restarts the call
//!   if every installed handler has `SA_RESTART` (as Weft's sampling
//!   signal does) and the socket has no timeout, as the kernel restarts a
//!   blocking call; otherwise the call fails with `EINTR`, as it would.
//! - `clock_nanosleep` with `TIMER_ABSTIME` on `CLOCK_REALTIME` sleeps
//!   until the real-time clock reaches the deadline: the time left is
//!   read again at least every second, so a clock set back sleeps on, and
//!   one set forward past the deadline ends the sleep within a second
//!   (the kernel's ends at once). `CLOCK_MONOTONIC` and `CLOCK_BOOTTIME`
//!   deadlines become the monotonic time left when the call is made
//!   (`CLOCK_BOOTTIME`'s time in suspend is not counted during the sleep).
//! - [`Thread::interrupt`](crate::Thread::interrupt) ends a hooked wait
//!   with `EINTR` (and clears the flag); a sleep then fills in the time
//!   left, so `std::thread::sleep`, which retries on `EINTR`, sleeps on.
//! - `errno` is the program's across a park: a sleep leaves it as it was
//!   (while the thread is parked its carrier runs Weft's own code, whose
//!   system calls may set `errno`).
//! - A `dup2`/`dup3` that fails leaves its target as it was, in the kernel
//!   and in Weft's view of it (`tests-transparent/tests/descriptors.rs`).
//! - `close` of a socket another virtual thread waits on wakes that thread;
//!   its call then fails with `EBADF` without touching the number again,
//!   which may name another file by then (the kernel keeps the old file
//!   for a call in progress; `tests-transparent/tests/close_reuse.rs`). A
//!   `poll` of that one descriptor returns it with `POLLNVAL`. The same
//!   holds when `dup2` replaces the number, or when it is found reused
//!   after a close behind the hooks' back.
//! - A socket handed to a child — `dup2` onto 0, 1 or 2 in a fork child
//!   before `exec`, a `posix_spawn` file action (std's `Command` stdio) —
//!   gets the blocking mode the program set, not the `O_NONBLOCK` Weft set
//!   for itself, so an inetd-style child (`sh` reading the connection as
//!   its stdin) does not fail with `EAGAIN`. The flag belongs to the file
//!   description, which the parent shares: Weft's own calls on a socket it
//!   manages carry `MSG_DONTWAIT`, so they do not need the flag
//!   (ARCHITECTURE.md, "Descriptors handed to a child";
//!   `tests-transparent/tests/handover.rs`).
//! - The same descriptor used from an OS thread blocks that OS thread (with
//!   `poll(2)`) as it would have without Weft.
//! - On an OS thread the blocking calls are pthread cancellation points, as
//!   libc's are: every call Weft does not wait for itself is libc's own
//!   (found with `dlsym(RTLD_NEXT)` before `main`), and a wait on a socket
//!   Weft manages is in libc's `ppoll`, so `pthread_cancel` ends a C
//!   thread blocked in `read`, `accept`, `poll`, `nanosleep`, `waitpid`, …
//!   (`libc_next.rs`; `tests-transparent/tests/cancellation.rs`). Those hooks
//!   are `extern "C-unwind"` and hold nothing to drop across the call.
//!   Virtual threads are not cancellation targets.
//! - In a `fork` child every call passes through (the carriers it
//!   inherited do not exist; a virtual thread of a runtime the child
//!   builds blocks its carrier in a hooked call, as a C thread would) and
//!   takes no lock: a `pthread_atfork` handler (`crate::fork`), registered
//!   by a constructor before `main`, marks the child, so a fork made before
//!   the first hooked call is covered too, and the `dup2` std's child makes
//!   between `fork` and `exec` cannot wait on a lock another carrier held
//!   at the fork (`tests-transparent/tests/fork_lock.rs`,
//!   `fork_first.rs`). The child leaves the parent's poller registrations
//!   alone (it shares the parent's epoll set). A child made with `_Fork`,
//!   `vfork` or a raw `clone` is not marked: it must only `exec`.
//!
//! # Covered calls
//!
//! One row each of the hook table (`libc_next.rs`), by family and file:
//!
//! - read and write (`hooks/io.rs`): `read`, `write`, `readv`, `writev`,
//!   `recv`, `recvfrom`, `recvmsg`, `send`, `sendto`, `sendmsg`;
//! - connections (`hooks/connect.rs`): `connect`, `accept`, `accept4`;
//! - readiness (`hooks/poll.rs`): `poll`, `ppoll`, `select`, `epoll_wait`,
//!   `epoll_pwait`;
//! - sleeps (`hooks/sleep.rs`): `nanosleep`, `clock_nanosleep`, `usleep`,
//!   `sleep`;
//! - the descriptor table (`hooks/descriptors.rs`): `close`,
//!   `close_range`, `closefrom`, `fclose`, `dup`, `dup2`, `dup3`, `fcntl`,
//!   `ioctl`, `socket`, `socketpair`;
//! - processes (`hooks/process.rs`): `waitpid`,
//!   `posix_spawn_file_actions_adddup2`;
//! - name resolution (`hooks/getaddrinfo.rs`): `getaddrinfo`;
//! - signal handlers (`signals.rs`, see "Signal handlers"): `sigaction`,
//!   `signal`, `bsd_signal`, `sysv_signal`;
//! - futex waits (`futex.rs`): `syscall`, for `SYS_futex`;
//! - C condition variables (`hooks/cond.rs`, JEP 491's unpinned
//!   `Object.wait()`): `pthread_cond_wait`, `pthread_cond_timedwait`,
//!   `pthread_cond_clockwait`, `pthread_cond_signal`,
//!   `pthread_cond_broadcast`;
//! - a simulation's clock and entropy (`sim.rs`, see
//!   [`weft::sim`](crate::sim)): `clock_gettime`, `gettimeofday`, `time`,
//!   `getrandom`.
//!
//! An OS thread started inside a simulation is refused (`EPERM`) by Weft's
//! own `pthread_create`, which every build defines (`sched/starter.rs`).
//!
//! Through `syscall`'s `SYS_futex`, `std::sync` (`Mutex`, `RwLock`,
//! `Condvar`, `Once`), `std::thread::park`, std `mpsc`,
//! `crossbeam-channel` and `parking_lot` wait: their waits park the
//! virtual thread (`futex.rs` has the emulation and its contract), so a
//! `std::sync::Mutex` held across a park no longer deadlocks its carrier.
//!
//! - Sockets park on the poller. `poll`/`ppoll` with one socket wait on
//!   its registration; `poll`/`ppoll` on several descriptors or on
//!   non-sockets, and `select`, park on a temporary epoll set (see "Open-ended
//!   waits"); with no descriptor (`poll(NULL, 0, t)`, only negative ones,
//!   `select(0, …)`) they are sleeps. All of these honour interrupts
//!   (`EINTR`). `getaddrinfo` runs on Weft's offload pool
//!   ([`weft::blocking`](crate::blocking)) while the caller parks (not
//!   interruptible); the offload thread's `errno` (the reason of an
//!   `EAI_SYSTEM`) is the caller's afterwards
//!   (`tests-transparent/tests/gai_errno.rs`).
//! - `epoll_wait`/`epoll_pwait` with a timeout park on the poller (an
//!   epoll descriptor is itself pollable).
//! - Pipes and FIFOs (a child process's stdin, stdout and stderr) other
//!   than descriptors 0, 1 and 2: `read`, `write`, `readv` and `writev`
//!   that would wait park on the poller (Weft leaves a pipe's `O_NONBLOCK`
//!   alone: the other process shares it; see "Open-ended waits"); a
//!   blocking write returns when all of it is written. `waitpid` for one
//!   child parks on a pidfd. So `std::process` — `Command::output`,
//!   `Child::wait`, reading a child's stdout — unmounts.
//!
//! # Signal handlers
//!
//! A hooked call made inside a signal handler goes straight to the
//! kernel, as on an OS thread: it never parks (the carrier would run
//! other virtual threads with the handler half done and its signal
//! blocked in the OS thread's mask), takes the hooks' registrations lock
//! (the interrupted code may hold it) or allocates (a stream write that
//! moved part of its length returns the count instead of copying the
//! caller's iovecs for the rest). A `close`/`dup2` there leaves the
//! number as one closed behind the hooks' back (see "Freeing poller
//! states"). `tests-transparent/tests/signal_handlers.rs`.
//!
//! How a hook knows: `sigaction`, `signal`, `bsd_signal` and
//! `sysv_signal` are hooked, and install the program's handler as a small
//! wrapper that records (per thread) the frame of the innermost handler
//! running and calls the program's function; a hook is "in a handler"
//! while its stack pointer is below that frame. `sigaction` reports the
//! program's handler, never the wrapper. The check is one thread-local
//! read, made on the virtual-thread path only (and before taking the
//! registrations lock), so no call on an OS thread pays for it. Rejected:
//! a depth counter (a handler that leaves by `siglongjmp` would leave it
//! raised for good; with the frame, calls made after the jump, above the
//! frame, park again); reading the signal mask (a system call per hooked
//! call, and a blocked signal does not mean a handler runs). Handlers
//! installed by a raw `rt_sigaction` system call, or by glibc's `sigset`
//! (which calls its internal `sigaction`), are not wrapped, and calls
//! made in them are not recognised.
//!
//! `SIGURG` is Weft's stack-sampling signal (`sample.rs`). Weft's handler
//! is installed at the first sample even if the program handles `SIGURG`
//! (through these hooks), and stays: a program's `sigaction(SIGURG, …)`,
//! before or after, is recorded and reported back, and Weft's handler
//! calls the program's for every `SIGURG` that is not one of Weft's
//! requests (which are queued with a tag of Weft's), with the program's
//! `sa_mask`; never for a request (`tests-transparent/tests/sigurg.rs`).
//!
//! # Open-ended waits
//!
//! A wait whose end depends on other threads of the program — a pipe read
//! waiting for its writer, a `poll` on several descriptors, a `select`,
//! `waitpid` — must not hold a bounded resource. When each held one of
//! the offload pool's threads (at most 512), 512 such waits whose wakers
//! were queued behind them stopped the program for good
//! (`tests-transparent/tests/open_ended.rs`: 600 of each). They park on
//! Weft's poller instead, holding no OS thread:
//!
//! - **Pipes**: the call is tried with `preadv2`/`pwritev2(…, -1,
//!   RWF_NOWAIT)`, which returns `EAGAIN` instead of waiting on a
//!   *blocking* description (Linux 5.8+), and on `EAGAIN` the thread parks
//!   on the pipe's poller registration (epoll watches a pipe whatever its
//!   flags). Rejected: setting `O_NONBLOCK` around the call (the other
//!   process shares the file description and would see it, or lose a
//!   blocking call of its own to `EAGAIN`); waiting for `POLLIN` and then
//!   calling a blocking `read` (a competing reader — the other process, or
//!   another thread — can take the data in between, and the read then
//!   blocks the carrier, maybe for ever if the writer is one of its
//!   threads). `RWF_NOWAIT` is per call and affects no one else. Where the
//!   kernel refuses it (`EOPNOTSUPP`, remembered), pipes go back to the
//!   offload pool.
//! - **`poll`/`ppoll`/`select` on several descriptors or non-sockets**: a
//!   level-triggered epoll set made for the call watches the descriptors
//!   for the events asked (for `select`: read → `EPOLLIN | EPOLLRDNORM |
//!   EPOLLRDBAND`, write → `EPOLLOUT | …`, except → `EPOLLPRI`, which
//!   cover what `select` reports); the set is itself registered with the
//!   poller, and each wake-up re-runs the caller's call with a zero
//!   timeout (on copies of `select`'s sets), which alone decides what is
//!   returned. A descriptor epoll refuses (a regular file, always ready)
//!   was already reported by the zero-timeout call made first. It costs a
//!   few system calls per wait (`epoll_create1`, one `epoll_ctl` per
//!   descriptor, the registration, `close`). If no set can be made
//!   (`EMFILE`), the offload pool.
//! - **Sleeps written as `poll`/`select`** (no descriptor) are Weft
//!   sleeps.
//! - **`waitpid(pid > 0, …)`** without `WUNTRACED`/`WCONTINUED`: a pidfd
//!   (`pidfd_open`, Linux 5.3+) reads ready when the child exits; then
//!   `wait4(…, WNOHANG)` reaps it. An interrupt ends the wait with `EINTR`
//!   (std's `Child::wait` retries).
//!
//! Still on the bounded offload pool (documented limits): `waitpid` for
//! any child (`pid <= 0`) or with `WUNTRACED`/`WCONTINUED`, `getaddrinfo`
//! (bounded by the resolver's own timeouts), and the fallbacks above (no
//! `RWF_NOWAIT`, no pidfd — an old kernel or a seccomp filter —, no epoll
//! set). Rejected: an unbounded pool for open-ended waits. Every wait
//! would cost an OS thread (a kernel task and its stack) — what virtual
//! threads exist to avoid — and a pool must have *some* bound, past which
//! the same deadlock returns.
//!
//! # What pins
//!
//! A virtual thread that cannot unmount soundly keeps its carrier (it is
//! *pinned*, as Java pins a thread with a native frame): its waits hold the
//! carrier's OS thread, the carrier is counted as blocked so a spare can
//! run unstarted threads, and each wait is recorded as a
//! [`Pinned`](crate::events::EventKind::Pinned) event (with the reason in
//! its detail) or, for a wait the hooks do not see, as a stall. What pins:
//!
//! - holding a C lock: `pthread_mutex_*`, `pthread_rwlock_*`,
//!   `pthread_spin_*`, `flockfile` (counted with or without this feature;
//!   `thread/native.rs`) — so a C library's lock never has two owners;
//! - [`weft::pinned`](crate::pinned) sections;
//! - waits this layer does not emulate: shared (inter-process) and PI
//!   futexes, `pthread_cond_wait` and glibc's inline lock waits, system
//!   calls made with a raw `syscall` instruction, calls inside a signal
//!   handler, calls on a runtime without thread-local areas for futexes
//!   (`WEFT_THREAD_LOCALS=carrier`: the carrier's threads would share one
//!   std parker);
//! - `accept` and `connect` on a socket handed to a child that still
//!   shares it (ARCHITECTURE.md, "Descriptors handed to a child").
//!
//! # Not covered (documented limits)
//!
//! - Regular files, ttys, descriptors 0, 1 and 2 — whatever they are: a
//!   pipe, or a socket such as journald's stream socket under systemd —
//!   and other non-socket, non-pipe descriptors pass through and block the
//!   carrier as before (the monitor reports it; wrap such work in
//!   [`weft::blocking`](crate::blocking)). Stdio's file description is
//!   shared with other processes, which must not see an `O_NONBLOCK` Weft
//!   set, and a `println!` that parked would park holding std's stdout
//!   lock: on a runtime whose virtual threads share their carrier's
//!   thread-locals that lock is re-entrant per *OS* thread, so a second
//!   virtual thread of the carrier would enter it (an "already borrowed"
//!   panic), and before the futex hook a second printer blocked the
//!   carrier on it, a deadlock (`tests-transparent/tests/stdio.rs`). A
//!   socket Weft already made non-blocking that the program `dup2`s onto
//!   0, 1 or 2 stays so, but a call there blocks the carrier (with `poll`)
//!   instead of parking. Regular files never return `EAGAIN`, so there is
//!   nothing to wait for but the disk; offloading every small read would
//!   cost more than it saves.
//! - `pthread_*` waits (C code's pthread mutexes and condition variables:
//!   glibc issues their futex calls inline) still block the carrier, as do
//!   `std::sync`, `parking_lot` and `std::thread::park` waits on a runtime
//!   whose virtual threads share their carrier's thread-locals
//!   (`RuntimeBuilder::carrier_thread_locals`: one std parker per carrier).
//!   The monitor reports a carrier blocked behind a parked lock owner
//!   (`BlockedWithWaiters`). Inside [`weft::pinned`](crate::pinned) hooked
//!   calls keep the carrier.
//! - Hooked calls inside signal handlers pass through (see "Signal
//!   handlers"), futex calls included: a futex wake made in a handler
//!   reaches OS threads only, not virtual threads waiting on the word
//!   (`futex.rs`).
//! - `open`, `openat`, file `read`s (see above), `wait`/`waitid`, `flock`,
//!   `fcntl(F_SETLKW)`, `sigwait`, `msgrcv`, `io_uring`, `recvmmsg`,
//!   `sendmmsg`, `sendfile`, `splice`, `pselect` and `gethostbyname`.
//! - Calls that glibc makes internally (`fread`, `getaddrinfo`'s own
//!   sockets, …) use glibc-private names and are not interposed. The
//!   closes that matter are hooked where they enter glibc: `fclose`,
//!   `close_range` and `closefrom` forget the descriptors they close. A
//!   descriptor closed by a raw system call (`syscall(SYS_close)`, a crate
//!   on rustix's raw backend, `pclose`'s internal close) leaves Weft's view
//!   of its number stale until the number is next given out by a hooked
//!   call (`socket`, `accept`, `dup`, …): a call on a file that took the
//!   number meanwhile may block its carrier once (never a freed state;
//!   see "Freeing poller states").
//! - Descriptors above 2^20 pass through. A socket Weft made non-blocking
//!   that a child inherits under its own number (socket activation's
//!   descriptor 3, without a `dup2`) stays non-blocking there. After a
//!   listening or connecting socket was handed to a child, the parent's
//!   `accept` or `connect` on it waits in the kernel, blocking its carrier
//!   (the calls have no per-call `MSG_DONTWAIT`).
//! - Linux on x86_64 and aarch64, dynamically linked against glibc only:
//!   musl and fully static builds resolve libc's symbols inside libc
//!   itself, so nothing is interposed there; the feature is ignored on
//!   other platforms.
//!
//! # Freeing poller states (soundness)
//!
//! The poller's epoll set hands back a raw pointer to an `IoState`
//! (`poll.rs`); the state must outlive every epoll entry that names it.
//! Weft's own sockets (`weft::net`) own their descriptor and delete their
//! entry before they close it. The hooks register descriptors they do not
//! own, and an epoll entry is keyed by (descriptor number, open file
//! description): it goes away on `EPOLL_CTL_DEL` with that number while
//! the number still refers to that description, or when the description
//! itself is released — *not* when one descriptor is closed while another
//! (a `dup`, a child's copy) keeps the description alive. So a
//! registration whose number was closed behind the hooks' back (a raw
//! `close` system call, glibc-internal closes) and reused could leave
//! epoll naming a state that a later `EPOLL_CTL_DEL` by number (which then
//! names the *new* file) did not remove, and that was then freed: the next
//! event on the old file wrote to freed memory
//! (`tests-transparent/tests/stale.rs`,
//! `a_registration_outliving_a_raw_close_is_not_freed`, hung the poller
//! before).
//!
//! The rule now: the hooks free a registration's state only if its
//! `EPOLL_CTL_DEL` is *known* to have removed its own entry:
//!
//! 1. Each registration records the file it was made for (type, device,
//!    inode, from `fstat` at registration).
//! 2. Forgetting a number (`close`, `dup2` onto it, `fclose`,
//!    `close_range`, `closefrom`, or a new file given the number by
//!    `socket`/`accept`) first checks that the number still refers to
//!    that file, then issues `EPOLL_CTL_DEL`; the state is freed (through
//!    the poller's graveyard, as every state) only if the check held and
//!    the delete succeeded. For a socket, the inode identifies the open
//!    file description (a socket has exactly one: it cannot be reopened
//!    through `/proc`, and `dup`/`SCM_RIGHTS` share it). For other files
//!    (pipes, epoll sets) it may not (a FIFO reopened has a second
//!    description), but no one else registers a non-socket in the inner
//!    set under a number the hooks hold, so a successful delete removed
//!    the hooks' own entry.
//! 3. Otherwise — the number was closed and reused behind the hooks'
//!    back, or the check failed — the registration is *abandoned*: its
//!    waiters are woken (their calls end with `EBADF`), no
//!    `EPOLL_CTL_DEL` by number is issued (it could remove another file's
//!    entry), and its state is kept for the life of the process. An event
//!    on the old file then sets readiness bits nobody reads. The cost is a
//!    leak of one state (some 200 bytes) per descriptor closed behind the
//!    hooks' back; [`abandoned_registrations`] counts them.
//! 4. A registration found stale when a call fetches it (its number now
//!    names another file) is abandoned the same way, and a new one made.
//!
//! The argument assumes what I/O safety already asks: the program does not
//! close a descriptor while another of its threads is closing or
//! replacing the same number (the check and the delete of rule 2 are two
//! system calls).
//!
//! # Turning it off
//!
//! `WEFT_TRANSPARENT=0` in the environment (read once, at the first hooked
//! call on a virtual thread) makes every call pass through.
//!
//! # Diagnostics
//!
//! A thread parked in a hooked call shows in dumps as
//! [`Blocker::Call`](crate::Blocker::Call) — "parked in recv on fd 12" —
//! and [`metrics::prometheus`](crate::metrics::prometheus) gains
//! `weft_transparent_parks_total{call="…"}`; [`parks`] returns the same
//! counts.
//!
//! # Cargo feature unification
//!
//! Enabling `transparent` in one crate of a workspace enables it for every
//! binary built together with it in that cargo invocation. Keep binaries
//! that must not be hooked in another build (Weft's own hooked tests live in
//! the separate `tests-transparent` crate for that reason).
//!
//! # Examples
//!
//! ```
//! // With the feature on, this sleep parks only the virtual thread.
//! let h = weft::spawn(|| std::thread::sleep(std::time::Duration::from_millis(10)));
//! h.join().unwrap();
//! ```

// Layers, top down: a file imports only files of the layers below its
// own (`tests/layers.rs`, `TRANSPARENT_LAYERS`, checks it).
//
// - `hooks/` (one file per family), `sim`, `futex`: the interposed
//   functions (the hook table in `crate::libc_next` lists them all);
// - `call`: the socket-call engine (`kernel_waits`, `sock_call`);
// - `pipe`: calls on pipes;
// - `wait`: parking in a hooked call (poller, timers, offload pool);
// - `fds`: Weft's view of a descriptor (`classify`, `forget`,
//   `hand_over`);
// - this file: on/off, the park counters;
// - `copies`, `regs`: copies of a socket, poller registrations;
// - `signals`: whether a signal handler runs (and the `sigaction` hooks);
// - `state`, `fork`, `iov`, `sys`: the state table, the fork marker,
//   buffers, raw system calls.
//
// libc's own functions and the hook table are a leaf of the crate,
// `crate::libc_next`, shared with `tls/` and `thread/`.
mod call;
mod copies;
mod fds;
mod fork;
mod futex;
mod hooks;
mod iov;
mod pipe;
mod queue;
mod regs;
mod signals;
mod sim;
mod state;
mod sys;
mod wait;

use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

pub use crate::libc_next::CALLS;

static PARKS: [AtomicU64; CALLS.len()] = [const { AtomicU64::new(0) }; CALLS.len()];

/// How many times a virtual thread parked in each hooked call, as
/// `(name, count)` in the order of [`CALLS`] (`recvfrom`/`recvmsg` count as
/// `recv`, `sendto`/`sendmsg` as `send`, `ppoll` as `poll`, `epoll_pwait`
/// as `epoll_wait`, `accept4` as `accept`, `syscall`'s futex waits as
/// `futex`).
///
/// ```
/// let total: u64 = weft::transparent::parks().iter().map(|(_, n)| n).sum();
/// let _ = total;
/// ```
pub fn parks() -> Vec<(&'static str, u64)> {
    CALLS
        .iter()
        .zip(&PARKS)
        .map(|(c, n)| (*c, n.load(Ordering::Relaxed)))
        .collect()
}

/// Futex waits ended by a re-check of their word rather than by a wake:
/// the word had changed while the waiter was still queued, so a wake went
/// behind the emulation's back (a raw `syscall` instruction). Each such
/// wait lasted at most `WEFT_FUTEX_RECHECK_MS` (1,000 ms by default)
/// longer than it should; see `futex.rs`, "Every wake that can reach an
/// emulated waiter".
pub fn futex_rechecks_found() -> usize {
    RECHECK_FOUND.load(Ordering::Relaxed)
}

/// See [`futex_rechecks_found`]; counted by `queue.rs`.
static RECHECK_FOUND: AtomicUsize = AtomicUsize::new(0);

/// Counts a futex wait ended by a re-check of its word (`queue.rs`).
pub(crate) fn count_recheck_found() {
    RECHECK_FOUND.fetch_add(1, Ordering::Relaxed);
}

/// The hook table (`libc_next.rs`): every function Weft defines in place
/// of libc's — the transparent hooks and the rest (`tls/`, `thread/`) —
/// with the file under `src/` that defines it; for the test that checks
/// the table against the definitions, the docs and the dynamic symbols.
#[doc(hidden)]
pub fn hook_table() -> &'static [(&'static str, &'static str)] {
    crate::libc_next::HOOKED
}

/// How many poller registrations the hooks abandoned: made for a
/// descriptor that was then closed behind their back (a raw `close`
/// system call, …), so that epoll may still name their state, which is
/// therefore never freed (module docs, "Freeing poller states").
#[doc(hidden)]
pub fn abandoned_registrations() -> usize {
    regs::abandoned()
}

/// Whether hooked calls on virtual threads park them (false with
/// `WEFT_TRANSPARENT=0`).
pub fn is_enabled() -> bool {
    enabled()
}

static ENABLED: AtomicU8 = AtomicU8::new(0); // 0 unknown, 1 on, 2 off

pub(crate) fn enabled() -> bool {
    match ENABLED.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            // SAFETY: getenv with a NUL-terminated name; the result is only
            // read before this function returns. (libc's getenv takes no
            // lock; std's env lock is not needed for a read here.)
            let on = unsafe {
                let v = libc::getenv(c"WEFT_TRANSPARENT".as_ptr());
                v.is_null() || {
                    let s = std::ffi::CStr::from_ptr(v).to_bytes();
                    !(s == b"0" || s.eq_ignore_ascii_case(b"false") || s == b"off")
                }
            };
            ENABLED.store(if on { 1 } else { 2 }, Ordering::Relaxed);
            if !on {
                crate::events::note_transparent_off();
            }
            on
        }
    }
}

/// Counts a park in `call` (`metrics::prometheus` reads the counts): a
/// hook's name, counted as its row of the hook table says (`libc_next.rs`).
pub(crate) fn count_park(call: &'static str) {
    if let Some(i) = crate::libc_next::counter(call) {
        PARKS[i].fetch_add(1, Ordering::Relaxed);
    }
}
