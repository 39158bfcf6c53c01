// A C++ shared library with a thread_local that owns heap memory and has a
// destructor (registered with __cxa_thread_atexit_impl on first use).
#include <atomic>
#include <vector>

static std::atomic<long> destroyed{0};

struct Tracked {
    std::vector<long> v;
    ~Tracked() { destroyed.fetch_add(1); }
};

thread_local Tracked tracked;

extern "C" {
long weft_cxx_push(long x) {
    tracked.v.push_back(x);
    return static_cast<long>(tracked.v.size());
}
long weft_cxx_sum(void) {
    long s = 0;
    for (long x : tracked.v) s += x;
    return s;
}
long weft_cxx_destroyed(void) { return destroyed.load(); }
}
