//! The thread-local area and the top of the stack share a page (issue
//! #40; ARCHITECTURE.md, "Thread-local areas"), so glibc's static-TLS
//! surplus — where a module `dlopen`ed later with initial-exec
//! thread-locals is placed — is no longer kept free below the area: it is
//! the top of the thread's stack. Such a load is refused once areas exist;
//! a library with dynamic TLS still loads; and a recycled slot starts its
//! next thread with a C library's thread-locals fresh from the template.

use std::ffi::{CStr, CString};
use std::time::Duration;

use weft::Runtime;
use weft_native_tests::*;

fn one_carrier() -> Runtime {
    Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .unwrap()
}

fn areas_supported() -> bool {
    std::env::var_os("WEFT_THREAD_LOCALS").is_none()
}

/// `dlopen(path, RTLD_NOW)`: the handle, or `dlerror()`'s message.
fn dlopen(path: &str) -> Result<*mut libc::c_void, String> {
    let c = CString::new(path).unwrap();
    // SAFETY: dlopen of a test library (its constructor is plain C);
    // dlerror's message is copied before any other dl call.
    unsafe {
        let h = libc::dlopen(c.as_ptr(), libc::RTLD_NOW);
        if !h.is_null() {
            return Ok(h);
        }
        let e = libc::dlerror();
        Err(if e.is_null() {
            String::new()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        })
    }
}

/// Once a runtime has made areas, a library whose thread-locals glibc
/// would place in static TLS below them (initial-exec TLS, loaded with
/// `dlopen`) is refused — from an OS thread and from a virtual thread,
/// whose stack (where that block would lie) is untouched by the attempt,
/// the library's constructor included — with a message naming the library
/// and `WEFT_THREAD_LOCALS=carrier`. A library with dynamic TLS still
/// loads, from a virtual thread too. Before: the load succeeded, and a
/// virtual thread read its stack's contents as the library's variable;
/// and with the check but the load run on the area, the constructor wrote
/// the top of the caller's stack (the `top` words below).
#[test]
fn an_initial_exec_library_loaded_after_areas_exist_is_refused() {
    if !areas_supported() {
        return;
    }
    let rt = one_carrier();
    // Areas exist from here on.
    rt.spawn(|| ()).join().unwrap();

    let e = dlopen(IE_TLS_LIB).expect_err("loaded from main");
    assert!(
        e.contains("WEFT_THREAD_LOCALS=carrier") && e.contains("libweft_ietls"),
        "dlerror: {e}"
    );

    let (refused, frame_ok, dyn_value) = rt
        .spawn(|| {
            // The top of the stack, right below the area: where glibc
            // places the library's initial-exec block (`tp - offset`),
            // which its constructor writes. The words belong to the
            // thread's outermost frames, suspended in calls: nothing else
            // changes them while `dlopen` runs (pinned, it never switches).
            let (lo, size) = own_stack();
            let top = || {
                // SAFETY: 128 bytes of the calling thread's own mapped
                // stack, read as plain words.
                unsafe { std::ptr::read_volatile((lo + size - 128) as *const [u64; 16]) }
            };
            let frame = std::hint::black_box([0x5au8; 2048]);
            let before = top();
            let refused = dlopen(IE_TLS_LIB).err();
            let frame_ok =
                top() == before && std::hint::black_box(frame).iter().all(|&b| b == 0x5a);
            let h = dlopen(DYN_TLS_LIB).expect("a library with dynamic TLS loads");
            // SAFETY: the test library's function of this signature; the
            // handle is kept for the process's life.
            let dyn_value = unsafe {
                let get = libc::dlsym(h, c"weft_dyn_get".as_ptr());
                assert!(!get.is_null());
                std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> libc::c_long>(get)()
            };
            (refused, frame_ok, dyn_value)
        })
        .join()
        .unwrap();
    let refused = refused.expect("loaded from a virtual thread");
    assert!(
        refused.contains("WEFT_THREAD_LOCALS=carrier"),
        "dlerror: {refused}"
    );
    assert!(frame_ok, "the virtual thread's stack changed");
    assert_eq!(dyn_value, 7);
}

/// `weft_dyn_get` and `weft_dyn_set` of the dynamic-TLS test library
/// loaded at `h` (a handle kept for the process's life).
fn dyn_fns(h: usize) -> (extern "C" fn() -> libc::c_long, extern "C" fn(libc::c_long)) {
    // SAFETY: the test library's functions of these signatures; the
    // handle stays open.
    unsafe {
        let get = libc::dlsym(h as *mut libc::c_void, c"weft_dyn_get".as_ptr());
        let set = libc::dlsym(h as *mut libc::c_void, c"weft_dyn_set".as_ptr());
        assert!(!get.is_null() && !set.is_null());
        (
            std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> libc::c_long>(get),
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(libc::c_long)>(set),
        )
    }
}

/// A carrier keeps the `dtv` of an area whose thread ended for the next
/// area it makes: the next thread still gets a block of its own for a
/// `dlopen`ed library's thread-locals, from the template, nothing of the
/// previous thread's (whose block was freed with its area). Threads one
/// after another on one carrier, each changing the value.
#[test]
fn a_spare_dtv_starts_a_dlopened_librarys_thread_locals_afresh() {
    let rt = one_carrier();
    let h = dlopen(DYN_TLS_LIB).expect("a library with dynamic TLS loads") as usize;
    for round in 0..32 {
        let (first, after) = rt
            .spawn(move || {
                let (get, set) = dyn_fns(h);
                let first = get();
                set(1_000 + round);
                weft::yield_now();
                (first, get())
            })
            .join()
            .unwrap();
        assert_eq!((first, after), (7, 1_000 + round), "round {round}");
    }
}

/// An area's `dtv` has the slots of the modules loaded when it was made,
/// none spare: a library loaded while threads already run (a module id
/// past the end of theirs) makes glibc grow each thread's `dtv` at its
/// first use of the library's thread-locals, and each thread gets its own
/// block from the template. The threads park before the load and use the
/// library after, each from its own stack.
#[test]
fn a_library_loaded_while_threads_run_gets_a_slot_in_their_dtv() {
    let rt = one_carrier();
    let lib = std::sync::Arc::new(std::sync::OnceLock::<usize>::new());
    // weft's barrier: the threads wait without holding the one carrier.
    let (started, loaded) = (
        std::sync::Arc::new(weft::sync::Barrier::new(5)),
        std::sync::Arc::new(weft::sync::Barrier::new(5)),
    );
    let handles: Vec<_> = (0..4i64)
        .map(|i| {
            let (lib, started, loaded) = (lib.clone(), started.clone(), loaded.clone());
            rt.spawn(move || {
                started.wait();
                loaded.wait();
                let (get, set) = dyn_fns(*lib.get().unwrap());
                let first = get();
                set(100 + i);
                weft::yield_now();
                (first, get())
            })
        })
        .collect();
    // Every thread has its area (and its dtv) before the load.
    started.wait();
    let h = dlopen(DYN_TLS_LATE_LIB).expect("a library with dynamic TLS loads");
    lib.set(h as usize).unwrap();
    loaded.wait();
    for (i, t) in handles.into_iter().enumerate() {
        assert_eq!(t.join().unwrap(), (7, 100 + i as i64), "thread {i}");
    }
}

/// A C library's `__thread` variables (a static one, reached through
/// `__tls_get_addr`, and a global one starting at 100) start from the
/// template in a thread that takes a slot another thread used and left:
/// nothing of that thread is visible. Checked over rounds until the slot
/// was seen reused (the variable's address, the slot's, is the same).
#[test]
fn a_reused_slot_starts_a_c_librarys_thread_locals_afresh() {
    if !areas_supported() {
        return;
    }
    let rt = one_carrier();
    let mut prev = None;
    let mut reused = 0;
    for round in 0..64 {
        let h = rt.spawn(move || {
            // SAFETY: plain C functions of the test library.
            unsafe {
                let start = (weft_c_counter_get(), weft_c_global_add(0));
                weft_c_counter_inc();
                weft_c_global_add(round + 1);
                weft::sleep(Duration::from_millis(1)).unwrap();
                (start, weft_c_counter_addr() as usize)
            }
        });
        let (start, addr) = h.join().unwrap();
        assert_eq!(start, (0, 100), "round {round}: a previous thread's values");
        if prev == Some(addr) {
            reused += 1;
        }
        prev = Some(addr);
    }
    assert!(
        reused > 0,
        "no slot was reused in 64 rounds: nothing checked"
    );
}
