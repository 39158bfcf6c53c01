/* Loaded with dlopen, but its thread-locals are initial-exec (built with
 * -ftls-model=initial-exec): glibc places them in its static-TLS surplus,
 * at a fixed offset below each thread's thread pointer, and initialises
 * them only in the threads glibc made. Its constructor writes one. */
__thread long weft_ie_value = 5;
long weft_ie_constructed;

static void __attribute__((constructor)) weft_ie_init(void) {
    weft_ie_value = 11;
    weft_ie_constructed = 1;
}

long weft_ie_get(void) { return weft_ie_value; }
void weft_ie_set(long v) { weft_ie_value = v; }
