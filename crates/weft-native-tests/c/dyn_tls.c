/* Loaded with dlopen (not at start-up): its thread-locals are dynamic TLS,
 * made on first use by each thread. */
__thread long weft_dyn_value = 7;

long weft_dyn_get(void) { return weft_dyn_value; }
void weft_dyn_set(long v) { weft_dyn_value = v; }
