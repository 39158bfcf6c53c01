//! mimalloc (v3, the crate's default) as the global allocator: short
//! virtual threads that each return a heap value their joiner frees keep
//! nothing per thread (issue 53: 138 KiB per thread ever run, 2.8 GiB
//! after 20,000, before the result was boxed ahead of the thread's
//! destructors — `thread::Outcome`); and long-lived threads allocate
//! across parks and moves without corruption.

#[global_allocator]
static A: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "alloc_common/mod.rs"]
mod alloc_common;

alloc_common::allocator_tests!();
