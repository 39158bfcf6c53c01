//! What a thread registers to run when it ends: glibc's per-thread entry
//! points (`__cxa_thread_atexit_impl`, `pthread_{get,set}specific`,
//! `pthread_key_{create,delete}`), kept in the area on a virtual thread,
//! and run when its body has returned.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use super::header::{AREA, Dtor};
use crate::libc_next::{
    CXA_THREAD_ATEXIT_IMPL, PTHREAD_GETSPECIFIC, PTHREAD_KEY_CREATE, PTHREAD_KEY_DELETE,
    PTHREAD_SETSPECIFIC,
};
use libc::{c_int, c_void, pthread_key_t};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs the destructors the calling virtual thread registered
/// (thread-local values, then pthread key values), until none is left.
/// Called by the thread itself when its body has returned. Nothing on
/// an OS thread.
pub(crate) fn run_dtors() {
    let h = AREA.with(Cell::get);
    if h.is_null() {
        return;
    }
    // glibc's PTHREAD_DESTRUCTOR_ITERATIONS for keys; thread-local
    // destructors run until their list is empty, as glibc's do.
    for _ in 0..4 {
        // SAFETY: the header belongs to the running thread (AREA is
        // per area) and only this thread touches it.
        unsafe {
            loop {
                let d = (*h).dtors;
                if d.is_null() {
                    break;
                }
                let Dtor { func, obj, next } = *Box::from_raw(d);
                (*h).dtors = next;
                func(obj);
            }
            let keys = (*h).keys;
            if keys.is_null() {
                return;
            }
            let mut ran = false;
            let mut i = 0;
            loop {
                // A short borrow: a destructor may set keys again.
                let (key, value) = {
                    let v = &mut *keys;
                    let Some(e) = v.get_mut(i) else { break };
                    (e.0, std::mem::replace(&mut e.1, std::ptr::null_mut()))
                };
                i += 1;
                if value.is_null() {
                    continue;
                }
                if let Some(dtor) = key_dtor(key) {
                    ran = true;
                    dtor(value);
                }
            }
            if !ran && (*h).dtors.is_null() {
                drop(Box::from_raw(keys));
                (*h).keys = std::ptr::null_mut();
                return;
            }
        }
    }
}

// -----------------------------------------------------------------
// The entry points std (and C code) registers per-thread clean-up
// with: on an area, they keep it in the area; elsewhere, glibc's.

/// Destructors of pthread keys created through [`pthread_key_create`],
/// by key (glibc's keys are below PTHREAD_KEYS_MAX, 1024).
static KEY_DTORS: [AtomicUsize; 1024] = [const { AtomicUsize::new(0) }; 1024];

fn key_dtor(key: pthread_key_t) -> Option<unsafe extern "C" fn(*mut c_void)> {
    let p = KEY_DTORS.get(key as usize)?.load(Ordering::Acquire);
    // SAFETY: non-zero values were stored from such a function pointer.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(*mut c_void)>(p) })
}

/// Registers `func(obj)` to run when the calling thread ends: what std
/// calls for every `thread_local!` with a destructor. (Interposes
/// glibc's; on an OS thread it forwards there.)
///
/// # Safety
///
/// As glibc's: `func` may be called with `obj` once, on this thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __cxa_thread_atexit_impl(
    func: unsafe extern "C" fn(*mut c_void),
    obj: *mut c_void,
    dso: *mut c_void,
) -> c_int {
    let h = AREA.with(Cell::get);
    if h.is_null() {
        let real = CXA_THREAD_ATEXIT_IMPL.get_or_abort();
        // SAFETY: forwarded unchanged.
        return unsafe { real(func, obj, dso) };
    }
    let d = Box::into_raw(Box::new(Dtor {
        func,
        obj,
        // SAFETY: the running thread's own header.
        next: unsafe { (*h).dtors },
    }));
    // SAFETY: as above.
    unsafe { (*h).dtors = d };
    0
}

/// `pthread_getspecific`: per virtual thread on an area.
///
/// # Safety
///
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_getspecific(key: pthread_key_t) -> *mut c_void {
    let h = AREA.with(Cell::get);
    if h.is_null() {
        let real = PTHREAD_GETSPECIFIC.get_or_abort();
        // SAFETY: forwarded unchanged.
        return unsafe { real(key) };
    }
    // SAFETY: the running thread's own header.
    let keys = unsafe { (*h).keys };
    if keys.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: as above.
    unsafe {
        (*keys)
            .iter()
            .find(|e| e.0 == key)
            .map_or(std::ptr::null_mut(), |e| e.1)
    }
}

/// `pthread_setspecific`: per virtual thread on an area.
///
/// # Safety
///
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_setspecific(key: pthread_key_t, value: *const c_void) -> c_int {
    let h = AREA.with(Cell::get);
    if h.is_null() {
        let real = PTHREAD_SETSPECIFIC.get_or_abort();
        // SAFETY: forwarded unchanged.
        return unsafe { real(key, value) };
    }
    if key as usize >= KEY_DTORS.len() {
        return libc::EINVAL;
    }
    // SAFETY: the running thread's own header.
    unsafe {
        if (*h).keys.is_null() {
            (*h).keys = Box::into_raw(Box::default());
        }
        let keys = &mut *(*h).keys;
        match keys.iter_mut().find(|e| e.0 == key) {
            Some(e) => e.1 = value.cast_mut(),
            None => keys.push((key, value.cast_mut())),
        }
    }
    0
}

/// `pthread_key_delete`: glibc's, forgetting the key's destructor (a
/// virtual thread that still holds a value of it does not run it at
/// its end, as glibc would not).
///
/// # Safety
///
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_key_delete(key: pthread_key_t) -> c_int {
    if let Some(slot) = KEY_DTORS.get(key as usize) {
        slot.store(0, Ordering::Release);
    }
    let real = PTHREAD_KEY_DELETE.get_or_abort();
    // SAFETY: forwarded unchanged.
    unsafe { real(key) }
}

/// `pthread_key_create`: glibc's, remembering the destructor so that a
/// virtual thread's values can be destroyed when it ends.
///
/// # Safety
///
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_key_create(
    key: *mut pthread_key_t,
    dtor: Option<unsafe extern "C" fn(*mut c_void)>,
) -> c_int {
    let real = PTHREAD_KEY_CREATE.get_or_abort();
    // SAFETY: forwarded unchanged.
    let r = unsafe { real(key, dtor) };
    if r == 0 {
        // SAFETY: glibc wrote the key.
        let k = unsafe { *key } as usize;
        if let Some(slot) = KEY_DTORS.get(k) {
            slot.store(dtor.map_or(0, |d| d as usize), Ordering::Release);
        }
    }
    r
}
