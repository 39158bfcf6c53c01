//! The C and C++ test libraries of `tests/identity.rs` (built by
//! `build.rs`), and what the tests share.

unsafe extern "C" {
    /// Increments the C library's `static __thread long` and returns it.
    pub fn weft_c_counter_inc() -> libc::c_long;
    /// The C library's `static __thread long`.
    pub fn weft_c_counter_get() -> libc::c_long;
    /// The address of the C library's `static __thread long`.
    pub fn weft_c_counter_addr() -> *mut libc::c_long;
    /// Adds to the C library's global `__thread long` (starts at 100).
    pub fn weft_c_global_add(d: libc::c_long) -> libc::c_long;
    /// Pushes onto the C++ library's `thread_local std::vector<long>`;
    /// returns its length.
    pub fn weft_cxx_push(x: libc::c_long) -> libc::c_long;
    /// The sum of the C++ library's thread-local vector.
    pub fn weft_cxx_sum() -> libc::c_long;
    /// How many of the C++ library's thread-local objects were destroyed.
    pub fn weft_cxx_destroyed() -> libc::c_long;
    /// libc's `flockfile` (not in the `libc` crate).
    pub fn flockfile(f: *mut libc::FILE);
    /// libc's `funlockfile`.
    pub fn funlockfile(f: *mut libc::FILE);
}

/// The path of the library for `dlopen` (its thread-locals are dynamic TLS).
pub const DYN_TLS_LIB: &str = env!("WEFT_DYN_TLS_LIB");

/// The calling thread's `errno`.
pub fn errno() -> i32 {
    // SAFETY: __errno_location has no preconditions.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(v: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = v }
}
