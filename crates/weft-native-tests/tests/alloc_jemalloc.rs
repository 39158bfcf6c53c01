//! jemalloc (`tikv-jemallocator`) as the global allocator: the tests of
//! `alloc_common` (RSS after 200,000 short threads within 2x std threads';
//! long-lived threads allocating across parks and moves).

#[global_allocator]
static A: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[path = "alloc_common/mod.rs"]
mod alloc_common;

alloc_common::allocator_tests!();
