//! glibc's malloc (the system allocator): the tests of `alloc_common`
//! (RSS after 200,000 short threads within 2x std threads'; long-lived
//! threads allocating across parks and moves).

#[path = "alloc_common/mod.rs"]
mod alloc_common;

alloc_common::allocator_tests!();
