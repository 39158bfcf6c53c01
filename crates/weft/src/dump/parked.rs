//! Stacks of parked threads, read in place (x86-64 Linux).
//!
//! A parked virtual thread is a coroutine suspended in corosensei's
//! `switch_yield`, which pushed the thread's resume address, RBX and RBP
//! onto its stack and handed the resulting stack pointer to the
//! `Coroutine` (its `stack_ptr`). A dump that *holds* the thread (below)
//! takes that context and unwinds the stack with framehop over the
//! process's `.eh_frame`, the unwind rule of each address cached: the
//! thread does not run, so its carrier is not involved at all — no
//! scheduling, no switch, and a thread whose carrier another thread holds
//! gets its stack too. 100,000 parked threads took 400 ms when each was
//! borrowed and unwound itself with `backtrace::trace`; see `dump.rs`.
//!
//! # Holding a parked thread
//!
//! The dump moves the thread PARKED → RUNNING with the park state machine's
//! CAS (`ParkState::borrow_parked`, the same one the borrowing path uses).
//! As for an unparker whose CAS succeeded (`crate::park`), that makes the
//! dump the one party that may schedule the thread: nobody resumes its
//! coroutine until the dump lets go, and a wake-up meanwhile only leaves
//! a permit (RUNNING → NOTIFIED). The dump hands the thread back the way a
//! thread and its carrier park — `begin_park` (RUNNING → PARKING) then
//! `publish_parked` (PARKING → PARKED) — and if a permit arrived while it
//! held the thread, those calls consume it and the dump schedules the
//! thread, which returns from `park` as after any wake-up. The carrier's
//! strong count leaked at park stays leaked while the thread is back in
//! PARKED, and goes to the scheduler when the dump schedules it.
//!
//! # Finding the stack pointer
//!
//! corosensei keeps a suspended coroutine's stack pointer in a private
//! field. At the first dump a probe coroutine of the same type is resumed
//! once and suspended: the one word of the `Coroutine` that changed, from
//! one of two equal in-stack words (the initial stack pointer kept twice)
//! to a lower in-stack address, is the stack pointer's. If the probe does
//! not find exactly that, dumps borrow every parked thread as before.

use crate::thread::RecordArc;
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(loom)))]
use std::sync::Arc;

use super::Stacks;

/// Reads the stack of every thread in `threads` that is parked now into
/// `stacks` (see the module docs) and returns the indices of those left to
/// the borrowing path. `None` where stacks cannot be read in place (another
/// architecture, or the probe failed): then every parked thread is.
pub(super) fn read(threads: &[RecordArc], stacks: &mut Stacks) -> Option<Vec<usize>> {
    imp::read(threads, stacks)
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux", not(loom))))]
mod imp {
    use super::*;

    pub(super) fn read(_: &[RecordArc], _: &mut Stacks) -> Option<Vec<usize>> {
        None
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux", not(loom)))]
mod imp {
    use std::collections::VecDeque;
    use std::ops::Range;
    use std::sync::{Mutex, OnceLock};

    use corosensei::CoroutineResult;
    use corosensei::trap::CoroutineTrapHandler;
    use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
    use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};

    use super::*;
    use crate::park::{AfterSwitch, BeginPark};
    use crate::stack::{Stack, StackPool};
    use crate::thread::{CoroSlot, Kind, State, Suspend, set_state_of};
    use crate::unpoison::Unpoison;

    /// A virtual thread's coroutine (`thread::record::Coro`; [`coro_of`]
    /// does not compile if the two differ).
    type Coro = corosensei::Coroutine<(), Suspend, (), Stack>;

    /// Words in a [`Coro`].
    const WORDS: usize = size_of::<Coro>() / size_of::<usize>();

    /// The most frames kept per stack (as `thread::capture`).
    const MAX_FRAMES: usize = 64;

    /// How many threads are held at once: each is taken this many threads
    /// before its stack is read, and the lines of its stack that the last
    /// stacks read are prefetched meanwhile. 100,000 stacks are 100,000
    /// cold pages: read one after the other, each waits for memory.
    const AHEAD: usize = 8;

    /// The process's unwind information and the per-address rule cache,
    /// kept from one dump to the next while no module is loaded or
    /// unloaded (`dl_phdr_info::dlpi_adds`/`dlpi_subs`).
    struct Unwind {
        adds: u64,
        subs: u64,
        unwinder: UnwinderX86_64<Vec<u8>>,
        cache: CacheX86_64,
    }

    static UNWIND: Mutex<Option<Unwind>> = Mutex::new(None);

    pub(super) fn read(threads: &[RecordArc], stacks: &mut Stacks) -> Option<Vec<usize>> {
        let mut unwind = UNWIND.lock().unpoison();
        let (adds, subs) = load_counts();
        if !unwind
            .as_ref()
            .is_some_and(|u| u.adds == adds && u.subs == subs)
        {
            *unwind = Some(modules());
        }
        let unwind = unwind.as_mut()?;
        let word = stack_ptr_word(threads, unwind)?;
        let mut left = Vec::new();
        let mut held: VecDeque<Held<'_>> = VecDeque::with_capacity(AHEAD + 1);
        let mut ips = Vec::with_capacity(MAX_FRAMES);
        // Stack lines (64 bytes, from the saved stack pointer's line) that
        // the last few unwinds read: prefetched for the next threads.
        let mut lines = [0u64; 4];
        for (i, t) in threads.iter().enumerate() {
            if let Some(t) = threads.get(i + 2 * AHEAD) {
                prefetch_record(t);
            }
            if t.park.is_parked()
                && let Some(h) = Held::take(i, t, word)
            {
                match h.ctx {
                    Some((sp, _)) => prefetch_lines(sp, lines.iter().fold(0, |a, l| a | l)),
                    None => left.push(i),
                }
                held.push_back(h);
            }
            if held.len() > AHEAD {
                let h = held.pop_front().expect("held");
                read_held(h, unwind, &mut ips, &mut lines, stacks);
            }
        }
        while let Some(h) = held.pop_front() {
            read_held(h, unwind, &mut ips, &mut lines, stacks);
        }
        Some(left)
    }

    /// Unwinds held thread `h` into `stacks`, and lets it go.
    fn read_held(
        h: Held<'_>,
        unwind: &mut Unwind,
        ips: &mut Vec<usize>,
        lines: &mut [u64; 4],
        stacks: &mut Stacks,
    ) {
        let Some((sp, bounds)) = &h.ctx else {
            return; // left to the borrowing path
        };
        ips.clear();
        // SAFETY: `h` holds the thread, so its coroutine stays suspended
        // and its stack unwritten; `sp` and `bounds` are that coroutine's.
        let read = unsafe { unwind_suspended(*sp, bounds, unwind, ips) };
        lines.rotate_left(1);
        lines[3] = read;
        stacks.set(h.index, ips);
    }

    /// A parked thread held by the dump (module docs), handed back when
    /// dropped.
    pub(super) struct Held<'a> {
        index: usize,
        thread: &'a RecordArc,
        /// Its saved stack pointer and its stack's bounds; `None` if its
        /// context did not check out (then it is left to the borrowing
        /// path).
        ctx: Option<(u64, CoroutineTrapHandler<()>)>,
    }

    impl<'a> Held<'a> {
        /// Takes parked thread `t` (`None` if it is not parked any more).
        pub(super) fn take(index: usize, t: &'a RecordArc, word: usize) -> Option<Held<'a>> {
            let Kind::Virtual { coro, .. } = &t.kind else {
                return None;
            };
            if crate::dump::in_running_simulation(t) || !t.park.borrow_parked() {
                return None;
            }
            // SAFETY: the CAS above made us the thread's one owner until
            // `Held::drop` hands it back (module docs): its carrier
            // published PARKED after the coroutine had suspended (the CAS's
            // acquire orders us after everything the thread and its carrier
            // wrote), no one else resumes or touches the coroutine until
            // the thread is scheduled, and only we may schedule it now. We
            // only read the slot; the carrier's `&mut` to it from the run
            // that parked the thread is not written through after
            // `publish_parked`.
            let slot = unsafe { &*coro.get() };
            let ctx = coro_of(slot).and_then(|c| {
                let bounds = c.trap_handler();
                // SAFETY: `Coro` has no padding (`stack_ptr_word` checked
                // it before handing out `word`).
                let sp = unsafe { words(c) }[word];
                // The three words `switch_yield` pushed are in the stack.
                let ok = sp % 8 == 0
                    && bounds.stack_ptr_in_bounds(sp)
                    && bounds.stack_ptr_in_bounds(sp + 23);
                ok.then_some((sp as u64, bounds))
            });
            Some(Held {
                index,
                thread: t,
                ctx,
            })
        }
    }

    impl Drop for Held<'_> {
        /// Hands the thread back as a parking thread and its carrier would.
        fn drop(&mut self) {
            let t = self.thread;
            let woken = match t.park.begin_park() {
                BeginPark::Consumed => true,
                BeginPark::Suspend => t.park.publish_parked() == AfterSwitch::Reschedule,
            };
            if woken && let Kind::Virtual { sched, .. } = &t.kind {
                // A permit arrived while we held it, and is consumed now:
                // the thread resumes in `park` as after any wake-up (its
                // `dump_borrowed` is not set, so it does not park again).
                set_state_of(t, State::Runnable);
                // SAFETY: moving the thread out of PARKED made the count
                // its carrier leaked at park ours (as in `Thread::unpark`).
                let thread = unsafe { RecordArc::from_raw(RecordArc::as_ptr(t)) };
                sched.schedule(thread);
            }
        }
    }

    /// Prefetches what [`Held::take`] reads of a record.
    fn prefetch_record(t: &RecordArc) {
        prefetch(&t.park as *const _ as usize);
        prefetch(&t.kind as *const _ as usize);
        prefetch(&t.kind as *const _ as usize + 64);
    }

    /// Prefetches the stack lines in `mask` (bit n: the nth 64-byte line
    /// from `sp`'s).
    fn prefetch_lines(sp: u64, mask: u64) {
        let base = sp as usize & !63;
        let mut m = mask | 1;
        while m != 0 {
            let n = m.trailing_zeros() as usize;
            prefetch(base + n * 64);
            m &= m - 1;
        }
    }

    fn prefetch(addr: usize) {
        // SAFETY: a prefetch is a hint: it reads nothing the program sees
        // and never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8)
        }
    }

    /// The coroutine of a started thread, as a [`Coro`].
    fn coro_of(slot: &CoroSlot) -> Option<&Coro> {
        match slot {
            CoroSlot::Running(c) => Some(c),
            _ => None,
        }
    }

    /// The words of a coroutine.
    ///
    /// # Safety
    ///
    /// Every byte of a [`Coro`] must be initialized: true of corosensei
    /// 0.3's `Coroutine` over weft's `Stack` — a `Stack` (a `usize` and a
    /// reference), an `Option<StackPointer>` (a `NonZeroUsize`), a
    /// `StackPointer`, a `fn` pointer and zero-sized fields — five
    /// word-sized fields and no padding, which [`stack_ptr_word`] checks
    /// (size, then the values) before anyone relies on a word.
    unsafe fn words(c: &Coro) -> [usize; WORDS] {
        // SAFETY: `c` is a valid, aligned `Coro` of `WORDS` words, all
        // initialized (the caller's promise); a read only.
        unsafe { std::ptr::read((c as *const Coro).cast::<[usize; WORDS]>()) }
    }

    /// Which word of a [`Coro`] holds the suspended stack pointer, found
    /// once by the probe (module docs); `None` if it could not be, or if
    /// unwinding from it does not give the stack the thread sees itself.
    fn stack_ptr_word(threads: &[RecordArc], unwind: &mut Unwind) -> Option<usize> {
        static WORD: OnceLock<Option<usize>> = OnceLock::new();
        if let Some(w) = WORD.get() {
            return *w;
        }
        // A pool to take the probe's stack from: any runtime's.
        let pool = threads
            .iter()
            .find_map(|t| t.runtime_shared().map(|s| s.stacks))?;
        *WORD.get_or_init(|| probe(pool, unwind))
    }

    /// [`stack_ptr_word`], for tests.
    #[cfg(test)]
    pub(super) fn probed_word(threads: &[RecordArc]) -> Option<usize> {
        let mut unwind = UNWIND.lock().unpoison();
        if unwind.is_none() {
            *unwind = Some(modules());
        }
        stack_ptr_word(threads, unwind.as_mut()?)
    }

    /// Resumes a coroutine of type [`Coro`] once and finds the word that
    /// took the stack pointer it suspended at; then checks that unwinding
    /// the suspended coroutine in place gives the frames `backtrace::trace`
    /// gave inside it (so that the unwind information is there, and read
    /// right).
    fn probe(pool: &'static StackPool, unwind: &mut Unwind) -> Option<usize> {
        if size_of::<Coro>() != 5 * size_of::<usize>() || align_of::<Coro>() != align_of::<usize>()
        {
            return None;
        }
        let traced = Arc::new(Mutex::new(Vec::new()));
        let into = traced.clone();
        let mut c = Coro::with_stack(pool.alloc().ok()?, move |y, ()| probe_body(y, &into));
        let bounds = c.trap_handler();
        // SAFETY: five word-sized fields of this corosensei, no padding
        // (checked above by size; the values are checked below).
        let before = unsafe { words(&c) };
        let suspended = matches!(c.resume(()), CoroutineResult::Yield(Suspend::Yield));
        // SAFETY: as above.
        let after = unsafe { words(&c) };
        let changed: Vec<usize> = (0..WORDS).filter(|&i| before[i] != after[i]).collect();
        let word = match changed.as_slice() {
            &[i] if suspended => {
                let initial = before[i];
                let twice = before.iter().filter(|&&w| w == initial).count() == 2;
                let ok = twice
                    && bounds.stack_ptr_in_bounds(initial)
                    && after[i] < initial
                    && after[i] % 8 == 0
                    && bounds.stack_ptr_in_bounds(after[i])
                    && bounds.stack_ptr_in_bounds(after[i] + 23);
                ok.then_some(i)
            }
            _ => None,
        };
        let agrees = word.is_some_and(|i| {
            let mut ips = Vec::new();
            // SAFETY: `c` is ours and suspended until we resume it below;
            // `after[i]` is its saved stack pointer, inside its stack
            // (checked above).
            unsafe { unwind_suspended(after[i] as u64, &bounds, unwind, &mut ips) };
            same_outer_frames(&ips, &traced.lock().unpoison())
        });
        // Let it finish, so that dropping it needs no unwinding.
        let finished = suspended && matches!(c.resume(()), CoroutineResult::Return(()));
        drop(c);
        word.filter(|_| finished && agrees)
    }

    /// The probe coroutine's body: records its stack as the thread would
    /// (`thread::capture`), then suspends.
    #[inline(never)]
    fn probe_body(y: &corosensei::Yielder<(), Suspend>, traced: &Mutex<Vec<usize>>) {
        let mut ips = Vec::with_capacity(MAX_FRAMES);
        backtrace::trace(|f| {
            ips.push(f.ip() as usize);
            ips.len() < MAX_FRAMES
        });
        *traced.lock().unpoison() = ips;
        y.suspend(Suspend::Yield);
        // Not a tail call: this frame stays on the stack while suspended.
        std::hint::black_box(traced);
    }

    /// Whether the frames unwound in place (innermost first), from the
    /// first one outside the suspending function on, are the ones the
    /// coroutine recorded itself (`traced`, which goes on into the stack
    /// that resumed it): at least two of them, and all but perhaps the last
    /// — corosensei's trampoline at the stack's base, which
    /// `backtrace::trace` steps over (a signal frame) where the in-place
    /// unwinder lists it and stops.
    fn same_outer_frames(in_place: &[usize], traced: &[usize]) -> bool {
        (1..in_place.len())
            .find_map(|k| {
                let j = traced.iter().position(|&a| a == in_place[k])?;
                Some((&in_place[k..], &traced[j..]))
            })
            .is_some_and(|(ours, theirs)| {
                let same = ours.iter().zip(theirs).take_while(|(a, b)| a == b).count();
                same >= 2 && same + 1 >= ours.len()
            })
    }

    /// Pushes the return addresses of a suspended coroutine onto `ips`,
    /// innermost first (the first one is its resume address); returns the
    /// stack lines it read (bit n: the nth 64-byte line from `sp`'s).
    ///
    /// # Safety
    ///
    /// `sp` must be the saved stack pointer of a suspended coroutine whose
    /// stack `bounds` describes, and the coroutine must stay suspended
    /// (nobody resuming it, nobody writing its stack) until this returns.
    unsafe fn unwind_suspended(
        sp: u64,
        bounds: &CoroutineTrapHandler<()>,
        unwind: &mut Unwind,
        ips: &mut Vec<usize>,
    ) -> u64 {
        let line0 = sp & !63;
        let mut lines = 0u64;
        // Readable: aligned words between the saved stack pointer and the
        // stack's base. Everything the unwinder reads is checked against
        // that, so it never leaves the thread's own stack — in particular
        // not through corosensei's link into the carrier's stack above the
        // thread's outermost frame, which is where unwinding stops.
        let mut read_stack = |a: u64| {
            if a.is_multiple_of(8)
                && a >= sp
                && bounds.stack_ptr_in_bounds(a as usize)
                && bounds.stack_ptr_in_bounds(a as usize + 7)
            {
                let line = (a - line0) / 64;
                if line < 64 {
                    lines |= 1 << line;
                }
                // SAFETY: a word of the suspended thread's live stack
                // (checked just above), which nobody writes while it stays
                // suspended (the caller's promise).
                Ok(unsafe { (a as *const u64).read() })
            } else {
                Err(())
            }
        };
        // `switch_yield` pushed RBP, RBX, then the resume address: RSP after
        // the resume (the state the unwind rules describe) is 3 words up.
        let (Ok(pc), Ok(bp)) = (read_stack(sp), read_stack(sp + 16)) else {
            return lines;
        };
        let regs = UnwindRegsX86_64::new(pc, sp + 24, bp);
        let mut frames = unwind
            .unwinder
            .iter_frames(pc, regs, &mut unwind.cache, &mut read_stack);
        while ips.len() < MAX_FRAMES {
            match frames.next() {
                Ok(Some(f)) => ips.push(f.address() as usize),
                _ => break,
            }
        }
        lines
    }

    /// How many modules were loaded and unloaded so far (glibc's counts).
    fn load_counts() -> (u64, u64) {
        let mut counts = (0u64, 0u64);
        unsafe extern "C" fn first(
            info: *mut libc::dl_phdr_info,
            _: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: glibc passes a valid `dl_phdr_info` for the call, and
            // `data` is the `counts` below, alive for the whole iteration.
            unsafe {
                let info = &*info;
                *data.cast::<(u64, u64)>() = (info.dlpi_adds, info.dlpi_subs);
            }
            1 // one module is enough: every one carries the same counts
        }
        // SAFETY: `first` only writes `counts` through the pointer we pass.
        unsafe { libc::dl_iterate_phdr(Some(first), (&mut counts as *mut (u64, u64)).cast()) };
        counts
    }

    /// One loaded module's unwind information, copied while the loader's
    /// lock is held (so a module unloaded later leaves no dangling slice).
    fn modules() -> Unwind {
        struct Found {
            adds: u64,
            subs: u64,
            modules: Vec<Module<Vec<u8>>>,
        }
        unsafe extern "C" fn each(
            info: *mut libc::dl_phdr_info,
            _: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: glibc passes a valid `dl_phdr_info` whose program
            // headers and mapped segments stay put during the call (it holds
            // the loader lock); `data` is the `Found` below.
            unsafe {
                let info = &*info;
                let found = &mut *data.cast::<Found>();
                found.adds = info.dlpi_adds;
                found.subs = info.dlpi_subs;
                if let Some(m) = module(info) {
                    found.modules.push(m);
                }
            }
            0
        }
        let mut found = Found {
            adds: 0,
            subs: 0,
            modules: Vec::new(),
        };
        // SAFETY: `each` only touches `found` through the pointer we pass.
        unsafe { libc::dl_iterate_phdr(Some(each), (&mut found as *mut Found).cast()) };
        let mut unwinder = UnwinderX86_64::new();
        for m in found.modules {
            unwinder.add_module(m);
        }
        Unwind {
            adds: found.adds,
            subs: found.subs,
            unwinder,
            cache: CacheX86_64::new(),
        }
    }

    /// The module `info` describes, with copies of its `.eh_frame_hdr` and
    /// `.eh_frame`; `None` without them.
    ///
    /// # Safety
    ///
    /// `info` must come from `dl_iterate_phdr`, inside its callback.
    unsafe fn module(info: &libc::dl_phdr_info) -> Option<Module<Vec<u8>>> {
        if info.dlpi_phdr.is_null() {
            return None;
        }
        // SAFETY: glibc's program headers of a loaded module.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
        let base = info.dlpi_addr;
        let mut text: Option<Range<u64>> = None;
        for p in phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0)
        {
            let r = p.p_vaddr..p.p_vaddr + p.p_memsz;
            text = Some(match text {
                Some(t) => t.start.min(r.start)..t.end.max(r.end),
                None => r,
            });
        }
        let text = text?;
        let hdr = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME)?;
        let hdr_svma = hdr.p_vaddr..hdr.p_vaddr + hdr.p_memsz;
        // SAFETY: the segment is mapped for as long as the module is loaded
        // (this call); copied out at once.
        let hdr_bytes = unsafe { mapped(base + hdr_svma.start, hdr.p_memsz) }.to_vec();
        let eh_frame_avma = eh_frame_ptr(&hdr_bytes, base + hdr_svma.start)?;
        let eh_frame_svma_start = eh_frame_avma.checked_sub(base)?;
        // `.eh_frame`'s length is not in the program headers: take the rest
        // of the loaded segment it starts in (FDEs are found by offset).
        let seg = phdrs.iter().find(|p| {
            p.p_type == libc::PT_LOAD
                && (p.p_vaddr..p.p_vaddr + p.p_filesz).contains(&eh_frame_svma_start)
        })?;
        let len = seg.p_vaddr + seg.p_filesz - eh_frame_svma_start;
        // SAFETY: within a loaded segment's file-backed part, mapped for as
        // long as the module is loaded; copied out at once.
        let eh_frame = unsafe { mapped(eh_frame_avma, len) }.to_vec();
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: glibc's NUL-terminated module name.
            unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }
                .to_string_lossy()
                .into_owned()
        };
        let sections = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: Some(text.clone()),
            eh_frame_svma: Some(eh_frame_svma_start..eh_frame_svma_start + len),
            eh_frame: Some(eh_frame),
            eh_frame_hdr_svma: Some(hdr_svma),
            eh_frame_hdr: Some(hdr_bytes),
            ..Default::default()
        };
        Some(Module::new(
            name,
            base + text.start..base + text.end,
            base,
            sections,
        ))
    }

    /// `len` bytes of mapped memory at `addr`.
    ///
    /// # Safety
    ///
    /// They must be mapped, readable and not written for the returned
    /// lifetime.
    unsafe fn mapped<'a>(addr: u64, len: u64) -> &'a [u8] {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(addr as *const u8, len as usize) }
    }

    /// Where `.eh_frame` starts, from `.eh_frame_hdr` (at `hdr_avma`): its
    /// `eh_frame_ptr`, in the encodings linkers write.
    fn eh_frame_ptr(hdr: &[u8], hdr_avma: u64) -> Option<u64> {
        const PCREL_SDATA4: u8 = 0x1b;
        const SDATA4: u8 = 0x0b;
        const UDATA4: u8 = 0x03;
        const UDATA8: u8 = 0x04;
        const ABSPTR: u8 = 0x00;
        if hdr.len() < 4 || hdr[0] != 1 {
            return None;
        }
        let at = |n: usize| hdr.get(4..4 + n);
        match hdr[1] {
            PCREL_SDATA4 => {
                let v = i32::from_le_bytes(at(4)?.try_into().ok()?);
                (hdr_avma + 4).checked_add_signed(v.into())
            }
            SDATA4 => u64::try_from(i32::from_le_bytes(at(4)?.try_into().ok()?)).ok(),
            UDATA4 => Some(u32::from_le_bytes(at(4)?.try_into().ok()?).into()),
            UDATA8 | ABSPTR => Some(u64::from_le_bytes(at(8)?.try_into().ok()?)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    /// Only x86-64 Linux reads stacks in place.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    mod in_place {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::Duration;

        use super::super::super::{NO_STACK, Stacks, capture_parked, read_states};
        use super::super::*;
        use crate::symbols::{Frame, Resolver};
        use crate::thread::{JoinHandle, State};

        #[inline(never)]
        fn parked_in_a_sleep() {
            let _ = crate::thread::sleep(Duration::from_secs(600));
        }

        #[inline(never)]
        fn parked_on_a_lock(m: &crate::sync::Mutex<()>) {
            drop(m.lock());
        }

        #[inline(never)]
        fn parked_deep(n: u32, m: &crate::sync::Mutex<()>) {
            if n == 0 {
                parked_on_a_lock(m);
            } else {
                parked_deep(n - 1, m);
            }
            std::hint::black_box(n);
        }

        /// A thread parked until its flag is raised (and it is unparked).
        fn parked_until_go() -> (JoinHandle<()>, Arc<AtomicBool>) {
            let go = Arc::new(AtomicBool::new(false));
            let g = go.clone();
            let h = crate::spawn(move || {
                while !g.load(Ordering::Acquire) {
                    crate::thread::park();
                }
            });
            wait_parked(std::slice::from_ref(&h));
            (h, go)
        }

        fn wait_parked(hs: &[JoinHandle<()>]) {
            while hs.iter().any(|h| h.thread().state() != State::Parked) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }

        fn frames(stacks: &Stacks, i: usize) -> Vec<Frame> {
            let id = stacks.of[i];
            assert_ne!(id, NO_STACK, "thread {i} has no stack");
            Resolver::default().frames(&stacks.distinct[id as usize])
        }

        /// The in-place unwinder and the thread's own `backtrace::trace` (the
        /// borrowing path) see the same stack, frame for frame, once the
        /// plumbing at both ends is trimmed.
        #[test]
        fn stacks_read_in_place_are_the_ones_threads_record_themselves() {
            let m = Arc::new(crate::sync::Mutex::new(()));
            let held = m.lock().unwrap();
            let mut hs = Vec::new();
            for i in 0..6 {
                let m = m.clone();
                hs.push(crate::spawn(move || match i % 3 {
                    0 => parked_in_a_sleep(),
                    1 => parked_on_a_lock(&m),
                    _ => parked_deep(5 + i, &m),
                }));
            }
            wait_parked(&hs);
            let threads: Vec<RecordArc> = hs.iter().map(|h| h.thread().inner.clone()).collect();
            let mut in_place = Stacks::new(threads.len());
            let left = read(&threads, &mut in_place).expect("x86-64 Linux reads in place");
            assert!(left.is_empty(), "left to borrowing: {left:?}");
            let seen = read_states(&threads);
            let all: Vec<usize> = (0..threads.len()).collect();
            let mut borrowed = Stacks::new(threads.len());
            capture_parked(&threads, &seen, &all, &mut borrowed);
            for i in 0..threads.len() {
                let (a, b) = (frames(&in_place, i), frames(&borrowed, i));
                assert_eq!(a, b, "thread {i}");
                let want = ["parked_in_a_sleep", "parked_on_a_lock", "parked_deep"][i % 3];
                assert!(
                    a.iter().any(|f| f.function.contains(want)),
                    "{want} in {a:#?}"
                );
            }
            // Five more frames of `parked_deep` in the last thread than in the
            // first one of its kind.
            let deep = |i| {
                frames(&in_place, i)
                    .iter()
                    .filter(|f| f.function.contains("parked_deep"))
                    .count()
            };
            assert_eq!(deep(5), deep(2) + 3);
            drop(held);
            for h in hs.iter().step_by(3) {
                h.thread().interrupt();
            }
            for h in hs {
                h.join().unwrap();
            }
        }

        /// A wake-up that arrives while a dump holds a parked thread is not
        /// lost: handing the thread back consumes it and schedules the thread.
        #[test]
        fn a_wake_up_while_held_is_delivered() {
            let (h, go) = parked_until_go();
            let word = super::super::imp::probed_word(std::slice::from_ref(&h.thread().inner))
                .expect("probe");
            let held = super::super::imp::Held::take(0, &h.thread().inner, word).expect("parked");
            go.store(true, Ordering::Release);
            h.thread().unpark();
            assert_eq!(h.thread().state(), State::Parked, "not running while held");
            drop(held);
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || tx.send(h.join().is_ok()));
            assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(true));
        }

        /// A held thread handed back without a wake-up is parked as before,
        /// and the next wake-up runs it.
        #[test]
        fn a_thread_handed_back_stays_parked_until_woken() {
            let (h, go) = parked_until_go();
            let t = h.thread().inner.clone();
            let word = super::super::imp::probed_word(std::slice::from_ref(&t)).expect("probe");
            drop(super::super::imp::Held::take(0, &t, word).expect("parked"));
            assert!(t.park.is_parked());
            std::thread::sleep(Duration::from_millis(20));
            assert!(t.park.is_parked(), "stays parked");
            go.store(true, Ordering::Release);
            h.thread().unpark();
            h.join().unwrap();
        }
    }
}
