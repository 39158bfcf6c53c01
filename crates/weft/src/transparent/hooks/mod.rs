//! The interposed C functions. Each is `unsafe extern "C"` with libc's
//! signature; its safety contract is libc's for the function of that name
//! (pointers valid for the sizes given), which every caller in C or Rust
//! already keeps. None of them unwinds, except the cancellation points
//! (`extern "C-unwind"`): where Weft does not wait itself they are libc's
//! own call, which glibc unwinds out of when the OS thread is cancelled
//! (`libc_next.rs`, "Cancellation points").

//!
//! One file per family: `io` (read and write), `connect` (connect and
//! accept), `poll` (poll, select, epoll), `sleep`, `descriptors` (close,
//! dup, fcntl, ioctl, socket), `process` (waitpid), `getaddrinfo` and
//! `cond` (C condition variables' waits and wakes).
//! Hook files import the layers below (`call`, `fds`, `wait`, `sys`),
//! never each other.

mod cond;
mod connect;
mod descriptors;
mod getaddrinfo;
mod io;
mod poll;
mod process;
mod sleep;
