//! Without areas (`RuntimeBuilder::carrier_thread_locals`, the cure the
//! refusal names) a library with initial-exec thread-locals loads at any
//! time, from a virtual thread too (its own process: no runtime of it
//! ever makes an area).

use weft_native_tests::IE_TLS_LIB;

#[test]
fn without_areas_an_initial_exec_library_loads_from_a_virtual_thread() {
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .carrier_thread_locals()
        .build()
        .unwrap();
    rt.spawn(|| ()).join().unwrap();
    let value = rt
        .spawn(|| {
            let path = std::ffi::CString::new(IE_TLS_LIB).unwrap();
            // SAFETY: dlopen/dlsym of the test library, whose function has
            // the signature below; the handle is kept for the process's
            // life.
            unsafe {
                let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW);
                assert!(!h.is_null(), "dlopen {IE_TLS_LIB}");
                let get = libc::dlsym(h, c"weft_ie_get".as_ptr());
                assert!(!get.is_null());
                std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> libc::c_long>(get)()
            }
        })
        .join()
        .unwrap();
    // The constructor ran on the carrier, whose thread-locals the virtual
    // thread shares.
    assert_eq!(value, 11);
}
