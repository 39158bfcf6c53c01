//! A library with initial-exec thread-locals `dlopen`ed before any
//! runtime made an area is part of the area layout (its own process:
//! which modules were loaded when the layout was fixed is per process).

use weft_native_tests::IE_TLS_LIB;

/// Loaded before the first area, the library's initial-exec block is one
/// of the area's static blocks: each virtual thread starts it from the
/// template (5; the constructor set the loading thread's to 11) and keeps
/// its own across a switch.
#[test]
fn an_initial_exec_library_loaded_before_areas_is_per_virtual_thread() {
    let path = std::ffi::CString::new(IE_TLS_LIB).unwrap();
    // SAFETY: dlopen/dlsym of the test library, whose functions have the
    // signatures below; the handle is kept for the process's life.
    let (get, set) = unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW);
        assert!(!h.is_null(), "dlopen {IE_TLS_LIB}");
        let get = libc::dlsym(h, c"weft_ie_get".as_ptr());
        let set = libc::dlsym(h, c"weft_ie_set".as_ptr());
        assert!(!get.is_null() && !set.is_null());
        (
            std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> libc::c_long>(get),
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(libc::c_long)>(set),
        )
    };
    assert_eq!(get(), 11, "the constructor ran on this thread");
    let rt = weft::Runtime::builder().parallelism(1).build().unwrap();
    let handles: Vec<_> = (0..3)
        .map(|i| {
            rt.spawn(move || {
                let first = get();
                set(100 + i);
                weft::yield_now();
                (first, get())
            })
        })
        .collect();
    let areas = std::env::var_os("WEFT_THREAD_LOCALS").is_none();
    for (i, h) in handles.into_iter().enumerate() {
        let (first, last) = h.join().unwrap();
        if areas {
            assert_eq!((first, last), (5, 100 + i as i64), "thread {i}");
        }
    }
}
