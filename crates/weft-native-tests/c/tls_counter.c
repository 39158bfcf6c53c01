/* A C shared library's thread-locals, reached through __tls_get_addr
 * (built with -fPIC: local- and general-dynamic TLS). */
static __thread long counter;
__thread long weft_c_global = 100;

long weft_c_counter_inc(void) { return ++counter; }
long weft_c_counter_get(void) { return counter; }
long *weft_c_counter_addr(void) { return &counter; }
long weft_c_global_add(long d) { weft_c_global += d; return weft_c_global; }
