//! RSS after 20,000, 100,000 and 200,000 short threads, each returning a
//! heap value its joiner frees, with jemalloc as the global allocator: std
//! threads and virtual threads (2 carriers, no spares), each in a process
//! of its own (`weft_native_tests::churn::report`).
//!
//! `cargo run --release -p weft-native-tests --example alloc_rss_jemalloc`

#[global_allocator]
static A: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    weft_native_tests::churn::report("jemalloc");
}
