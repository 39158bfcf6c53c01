/* A lock shaped like CPython's GIL (Python/ceval_gil.h): a flag guarded
 * by a pthread mutex, and a condition variable that takers wait on with a
 * timeout (CPython's switch interval) while the flag is set. Built by
 * tests-transparent/build.rs for tests/c_cond.rs. */
#include <pthread.h>
#include <time.h>
#include <errno.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int locked = 0;
static long waiting = 0;
static long waits = 0;

/* Takes the lock, waiting in pthread_cond_timedwait (5 ms at a time)
 * while another holds it. */
void weft_gil_take(void) {
    pthread_mutex_lock(&mu);
    while (locked) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec += 1;
            ts.tv_nsec -= 1000000000;
        }
        waiting++;
        waits++;
        pthread_cond_timedwait(&cv, &mu, &ts);
        waiting--;
    }
    locked = 1;
    pthread_mutex_unlock(&mu);
}

/* Gives the lock back and wakes one taker. */
void weft_gil_drop(void) {
    pthread_mutex_lock(&mu);
    locked = 0;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

/* How many takers are waiting for the lock now. */
long weft_gil_waiting(void) {
    pthread_mutex_lock(&mu);
    long n = waiting;
    pthread_mutex_unlock(&mu);
    return n;
}

/* An untimed wait: blocks in pthread_cond_wait until *flag is non-zero
 * (set by weft_flag_set, which broadcasts). */
static pthread_cond_t flag_cv = PTHREAD_COND_INITIALIZER;
static int flag = 0;

void weft_flag_wait(void) {
    pthread_mutex_lock(&mu);
    while (!flag)
        pthread_cond_wait(&flag_cv, &mu);
    pthread_mutex_unlock(&mu);
}

void weft_flag_set(int v) {
    pthread_mutex_lock(&mu);
    flag = v;
    pthread_cond_broadcast(&flag_cv);
    pthread_mutex_unlock(&mu);
}
