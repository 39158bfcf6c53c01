//! RSS after 20,000, 100,000 and 200,000 short threads, each returning a
//! heap value its joiner frees, with mimalloc as the global allocator: std
//! threads and virtual threads (2 carriers, no spares), each in a process
//! of its own (`weft_native_tests::churn::report`).
//!
//! `cargo run --release -p weft-native-tests --example alloc_rss_mimalloc`

#[global_allocator]
static A: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    weft_native_tests::churn::report("mimalloc");
}
