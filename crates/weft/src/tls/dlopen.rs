//! The `dlopen` guard: no module placed in static TLS after the area
//! layout was fixed (`dlopen`, `dlmopen`).
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use super::header::AREA;
use super::layout::{AREAS_FIXED, LAYOUT};
use super::modules::{Module, modules, static_off};
use super::switch::run_on;
use crate::libc_next::{DLMOPEN, DLOPEN};
use libc::{c_int, c_void};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

// -----------------------------------------------------------------
// `dlopen` and `dlmopen`: no module placed in static TLS after the
// area layout was fixed. glibc keeps a surplus of static TLS for
// modules loaded later whose thread-locals are initial-exec (reached
// `%fs`-relative, at `tp - offset`), and places such a module's block
// there — below the blocks of the modules loaded at start-up, which
// is where an area's stack starts. So a load that places a block
// there after areas exist is undone: the handle is closed and the load
// fails, naming the library and the cure.

/// The deepest static block of the loaded modules (its offset below
/// the thread pointer; 0 for none).
fn deepest_static() -> usize {
    modules()
        .iter()
        .filter_map(|m| static_off(m.modid))
        .max()
        .unwrap_or(0)
}

/// Runs `f` with the thread pointer on the carrier's own TCB when the
/// caller is a virtual thread with an area (else just runs it), pinned
/// meanwhile. For glibc's `dlopen`: the constructors of the modules it
/// loads run inside it, and glibc initialises a block it places in
/// static TLS only in its own threads — a constructor that wrote its
/// initial-exec thread-local on an area would write into the thread's
/// stack. On the carrier's TCB that block is initialised and the
/// carrier's own. libc's block is handed over both ways (as `run_on`
/// mirrors it), so `dlerror` and errno are the thread's. Pinned (a
/// `weft::pinned` section): every wait inside holds the carrier, so
/// the thread is never unmounted with the thread pointer switched —
/// nor while glibc holds its loader lock.
fn on_carrier<R>(f: impl FnOnce() -> R) -> R {
    let h = AREA.with(Cell::get);
    let (false, Some(Some(l))) = (h.is_null(), LAYOUT.get()) else {
        return f();
    };
    let pin = PIN.load(Ordering::Acquire);
    if pin == 0 {
        return f(); // unreachable: set before the first area was made
    }
    // SAFETY: stored by `set_pin` from a function of this type.
    let pin = unsafe { std::mem::transmute::<usize, fn(bool)>(pin) };
    pin(true);
    // SAFETY: the header is the running thread's, naming the carrier
    // that runs it (refreshed by `adopt` after a handoff), whose TCB
    // is complete and alive while it runs us; pinned, the thread stays
    // mounted on it until the area is put back. `f` is
    // `load_and_check`, not inlined.
    let r = unsafe { run_on(l, (*h).carrier_tp, f) };
    pin(false);
    r
}

/// How [`on_carrier`] pins the calling virtual thread and unpins it
/// (`fn(true)`, `fn(false)`): given by the scheduler before it makes
/// an area (`set_pin`), as the thread's record is in a layer above
/// this one.
static PIN: AtomicUsize = AtomicUsize::new(0);

/// Sets how [`on_carrier`] pins and unpins the calling virtual thread;
/// called before an area is made (so before any thread runs on one).
pub(crate) fn set_pin(pin: fn(bool)) {
    PIN.store(pin as usize, Ordering::Release);
}

/// Runs glibc's `load`, then undoes it if it placed a block in static
/// TLS below what areas hold (see above).
fn checked_load(load: impl FnOnce() -> *mut c_void) -> *mut c_void {
    if matches!(LAYOUT.get(), Some(None)) {
        return load(); // no areas in this process, ever
    }
    on_carrier(|| load_and_check(load))
}

/// [`checked_load`]'s work, on the carrier's TCB. Not inlined into
/// [`run_on`]: the thread-locals it touches (`eprintln!`'s) are
/// reached after the switch.
#[inline(never)]
fn load_and_check(load: impl FnOnce() -> *mut c_void) -> *mut c_void {
    let before = deepest_static();
    let handle = load();
    if handle.is_null() || !AREAS_FIXED.load(Ordering::SeqCst) {
        return handle;
    }
    let late: Vec<Module> = modules()
        .into_iter()
        .filter(|m| static_off(m.modid).is_some_and(|off| off > before))
        .collect();
    if late.is_empty() {
        return handle;
    }
    refuse(handle, &late)
}

/// Closes `handle` and fails the load: on stderr and in `dlerror`.
#[cold]
fn refuse(handle: *mut c_void, late: &[Module]) -> *mut c_void {
    let names: Vec<_> = late.iter().map(|m| m.name.to_string_lossy()).collect();
    // SAFETY: closing the handle glibc's `dlopen` just returned (Weft
    // does not define `dlclose`: this is glibc's).
    unsafe { libc::dlclose(handle) };
    let msg = format!(
        "weft: refused to load {}: its thread-locals are initial-exec, and glibc placed \
         them in static TLS below a virtual thread's thread-local area, where its stack \
         lies; run with WEFT_THREAD_LOCALS=carrier to load it",
        names.join(", ")
    );
    eprintln!("{msg}");
    // glibc has no call that sets `dlerror`'s message; a failed load of
    // a file named by the message does (`RTLD_NOLOAD`: nothing is ever
    // loaded), with glibc's "cannot open shared object file" after it.
    let msg = std::ffi::CString::new(msg.replace('\0', "")).unwrap_or_default();
    let open = DLOPEN.get_or_abort();
    // SAFETY: glibc's `dlopen` with a NUL-terminated name.
    unsafe { open(msg.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    std::ptr::null_mut()
}

/// `dlopen`: glibc's, refused when it would place a module's
/// thread-locals where an area's stack lies (see above). glibc sees
/// this function as the caller: a relative name is searched with the
/// executable's run path, not the calling library's.
///
/// # Safety
///
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlopen(file: *const libc::c_char, mode: c_int) -> *mut c_void {
    let open = DLOPEN.get_or_abort();
    // SAFETY: forwarded unchanged.
    checked_load(|| unsafe { open(file, mode) })
}

/// `dlmopen`: as [`dlopen`], into namespace `lmid`.
///
/// # Safety
///
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlmopen(
    lmid: libc::Lmid_t,
    file: *const libc::c_char,
    mode: c_int,
) -> *mut c_void {
    let open = DLMOPEN.get_or_abort();
    // SAFETY: forwarded unchanged.
    checked_load(|| unsafe { open(lmid, file, mode) })
}
