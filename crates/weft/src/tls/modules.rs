//! The loaded modules with thread-locals, and where glibc put each one's
//! block for the calling thread (static TLS or not).
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use super::tp::read_tp;
use libc::{c_int, c_void};

/// A loaded module with thread-locals, as `dl_iterate_phdr` lists it.
pub(super) struct Module {
    /// glibc's TLS module id (the module's `dtv` slot).
    pub(super) modid: usize,
    /// Its file name (empty for the executable).
    pub(super) name: std::ffi::CString,
    /// Its `PT_TLS` image, `filesz` bytes of `memsz`.
    pub(super) image: usize,
    pub(super) filesz: usize,
    pub(super) memsz: usize,
}

unsafe extern "C" fn each_module(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: glibc passes a valid info for the duration of the call, and
    // `data` is the `Vec` that `modules` passed in.
    let (info, found) = unsafe { (&*info, &mut *data.cast::<Vec<Module>>()) };
    if info.dlpi_tls_modid == 0 {
        return 0;
    }
    // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let Some(tls) = phdrs.iter().find(|p| p.p_type == libc::PT_TLS) else {
        return 0;
    };
    let name = if info.dlpi_name.is_null() {
        std::ffi::CString::default()
    } else {
        // SAFETY: glibc's NUL-terminated name of the module.
        unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_owned()
    };
    found.push(Module {
        modid: info.dlpi_tls_modid,
        name,
        image: info.dlpi_addr as usize + tls.p_vaddr as usize,
        filesz: tls.p_filesz as usize,
        memsz: tls.p_memsz as usize,
    });
    0
}

/// Every loaded module with thread-locals, in load order (the
/// executable first).
pub(super) fn modules() -> Vec<Module> {
    let mut found = Vec::new();
    // SAFETY: the callback matches dl_iterate_phdr's contract and only
    // reads what glibc passes it.
    unsafe { libc::dl_iterate_phdr(Some(each_module), (&raw mut found).cast()) };
    found
}

/// glibc's `tls_index`, the argument of `__tls_get_addr`.
#[repr(C)]
struct TlsIndex {
    module: usize,
    offset: usize,
}

unsafe extern "C" {
    /// glibc's (the dynamic linker's) general-dynamic TLS access.
    fn __tls_get_addr(ti: *const TlsIndex) -> *mut c_void;
}

/// glibc's static TLS size and alignment (`_dl_get_tls_static_info`):
/// every static block of a thread lies in `[tp - size, tp)`. Zeroes if
/// glibc does not say.
fn static_tls_info() -> (usize, usize) {
    static INFO: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();
    *INFO.get_or_init(|| {
        // SAFETY: dlsym with a NUL-terminated name; the function has
        // this signature in every glibc that exports it.
        let info: Option<unsafe extern "C" fn(*mut usize, *mut usize)> = unsafe {
            let p = libc::dlsym(libc::RTLD_DEFAULT, c"_dl_get_tls_static_info".as_ptr());
            (!p.is_null()).then(|| std::mem::transmute::<*mut c_void, _>(p))
        };
        let (mut size, mut align) = (0usize, 0usize);
        if let Some(info) = info {
            // SAFETY: writes two usizes.
            unsafe { info(&mut size, &mut align) };
        }
        (size, align)
    })
}

pub(super) fn static_tls_size() -> usize {
    static_tls_info().0
}

pub(super) fn static_tls_align() -> usize {
    static_tls_info().1
}

/// Where module `modid`'s block lies in the calling thread's static
/// TLS, as an offset below its thread pointer; `None` for a block of
/// dynamic TLS. Asks glibc for the calling thread's block
/// (`__tls_get_addr`, which brings the thread's `dtv` up to date and
/// makes a dynamic block if the thread had none yet: a module loaded
/// since the thread's `dtv` was last updated is seen too). Never
/// called inside `dl_iterate_phdr` (glibc's locks).
pub(super) fn static_off(modid: usize) -> Option<usize> {
    let ti = TlsIndex {
        module: modid,
        offset: 0,
    };
    // SAFETY: `modid` is a loaded module's TLS id (just listed by
    // `modules`; a module unloaded meanwhile by another thread is
    // glibc's undefined case for any access to its thread-locals,
    // which the callers do not make: they compare the address only).
    let a = unsafe { __tls_get_addr(&ti) } as usize;
    let tp = read_tp();
    (a != 0 && a < tp && tp - a <= static_tls_size()).then(|| tp - a)
}
