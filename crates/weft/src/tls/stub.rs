//! No areas on this platform: virtual threads share their carrier's
//! thread-locals (see the module docs, "Limits").
#![cfg(not(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu")))]

/// No areas on this platform: see the module docs.
pub(crate) enum Layout {}
impl Layout {
    pub(crate) fn reserve(&self) -> usize {
        match *self {}
    }
    pub(crate) fn movable(&self) -> bool {
        match *self {}
    }
}
pub(crate) fn layout() -> Option<&'static Layout> {
    None
}
/// # Safety
///
/// As the x86_64 glibc version's (never called: no `Layout` exists here).
pub(crate) unsafe fn init_area(
    l: &Layout,
    _slot_top: usize,
    _stack_lo: usize,
    _spare: Option<SpareDtv>,
) -> usize {
    match *l {}
}
/// No `dtv`s on this platform.
pub(crate) enum SpareDtv {}
/// # Safety
///
/// As the x86_64 glibc version's (never called: no `Layout` exists here).
pub(crate) unsafe fn release_area(_tp: usize) -> SpareDtv {
    unreachable!("no areas on this platform")
}
/// # Safety
///
/// As the x86_64 glibc version's (never called: no `Layout` exists here).
pub(crate) unsafe fn adopt(l: &Layout, _tp: usize) -> bool {
    match *l {}
}
/// # Safety
///
/// As the x86_64 glibc version's (never called: no `Layout` exists here).
pub(crate) unsafe fn seed<T>(_tp: usize, _var: *const T, _value: T) {}
/// # Safety
///
/// As the x86_64 glibc version's (never called: no `Layout` exists here).
pub(crate) unsafe fn run_on<R>(l: &Layout, _tp: usize, _f: impl FnOnce() -> R) -> R {
    match *l {}
}
pub(crate) fn run_dtors() {}
pub(crate) fn set_pin(_pin: fn(bool)) {}
