//! A pool whose server cannot be reached fails fast: a checkout that
//! needs a new connection answers at once with the last connection error
//! (`Error::ServerDown`) instead of retrying for the whole
//! `connection_timeout`, and the pool keeps trying in the background.
//! No server needed: a loopback port nothing listens on refuses at once.
//!
//! The timeouts here are an hour, so a checkout that waits for its timeout
//! never returns within the test; a watchdog tells that apart from a slow
//! machine by progress, never by a time limit on the checkout: a checkout
//! that retries keeps making failed connection attempts (counted in the
//! pool's metrics) while it has not returned, and one that fails fast
//! makes one.

use std::sync::mpsc;
use std::time::Duration;

use weft_pg::{Config, Error, Pool};

/// Far longer than any test run: a checkout that waits this long is stuck.
const HOUR: Duration = Duration::from_secs(3600);

/// A loopback URL on a port that nothing listens on (bound, then closed:
/// the kernel refuses connections to it).
fn refused_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("postgres://app@127.0.0.1:{port}/app")
}

fn pool(min_idle: usize, fail_fast_when_down: bool) -> Pool {
    let config = Config::from_url(&refused_url())
        .unwrap()
        .fail_fast(false)
        .min_idle(min_idle)
        .max_size(4)
        .connection_timeout(HOUR)
        .fail_fast_when_down(fail_fast_when_down);
    Pool::new(config).unwrap()
}

/// Runs `pool.get()` on an OS thread and waits for its error. The
/// watchdog: while the checkout has not returned, a growing count of
/// failed connection attempts means it retries until its (hour-long)
/// timeout — stuck, fail now; a quiet count means a slow machine — keep
/// waiting.
fn get_error(pool: &Pool) -> Error {
    let (tx, rx) = mpsc::channel();
    let p = pool.clone();
    std::thread::spawn(move || {
        let _ = tx.send(p.get().map(drop));
    });
    let start = pool.metrics().connect_errors;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Ok(())) => panic!("a pool with no server handed out a connection"),
            Ok(Err(e)) => return e,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let attempts = pool.metrics().connect_errors - start;
                // The checkout's one attempt and the background's, whose
                // backoff keeps them few while the checkout runs; a
                // checkout that retries makes several a second.
                assert!(
                    attempts < 30,
                    "stuck: the checkout has not returned after {attempts} failed \
                     connection attempts; it retries until its connection_timeout"
                );
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the checkout panicked"),
        }
    }
}

#[test]
fn a_checkout_fails_at_once_with_the_last_connection_error() {
    // min_idle 0: no background top-up; the checkout is the first to try.
    let pool = pool(0, true);
    for _ in 0..3 {
        let e = get_error(&pool);
        let Error::ServerDown(down) = &e else {
            panic!("expected ServerDown, got {e:?}")
        };
        assert!(
            down.last_connect_error.contains("cannot connect to")
                && down.last_connect_error.contains("127.0.0.1:"),
            "{e}"
        );
        assert!(down.attempts >= 1, "{e}");
        assert!(e.is_connection_error());
        assert!(
            e.to_string().contains("keeps trying in the background"),
            "{e}"
        );
    }
    // Nothing is held or waiting. The pool keeps trying in the background,
    // so an attempt may be in flight (`creating`, counted in `total`): it
    // was, once, in a run beside a loaded machine.
    let m = pool.metrics();
    assert_eq!((m.active, m.idle, m.pending), (0, 0, 0), "{m:?}");
    assert_eq!(m.total, m.creating, "{m:?}");
}

#[test]
fn the_pool_keeps_trying_in_the_background() {
    let pool = pool(0, true);
    let first = get_error(&pool);
    assert!(matches!(first, Error::ServerDown(_)), "{first:?}");
    // Nobody asks: the housekeeper's own attempts still come, with
    // backoff. Waited for by progress (a count), not for a fixed time.
    let before = pool.metrics().connect_errors;
    let (tx, rx) = mpsc::channel();
    let p = pool.clone();
    std::thread::spawn(move || {
        while p.metrics().connect_errors < before + 3 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("no connection attempt in the background");
    // Later checkouts report the later attempts.
    let Error::ServerDown(down) = get_error(&pool) else {
        panic!("expected ServerDown")
    };
    assert!(down.attempts >= 4, "{down:?}");
}

#[test]
fn with_min_idle_the_housekeepers_failure_is_enough_to_fail_fast() {
    let pool = pool(4, true);
    let e = get_error(&pool);
    assert!(matches!(e, Error::ServerDown(_)), "{e:?}");
}

#[test]
fn the_knob_off_keeps_retrying_until_the_timeout() {
    // The old behaviour, on request: the checkout retries until its own
    // timeout (short here), and reports the last connection error then.
    let config = Config::from_url(&refused_url())
        .unwrap()
        .fail_fast(false)
        .min_idle(0)
        .connection_timeout(Duration::from_millis(300))
        .fail_fast_when_down(false);
    let pool = Pool::new(config).unwrap();
    let e = pool.get().unwrap_err();
    let Error::Timeout(t) = &e else {
        panic!("expected a timeout, got {e:?}")
    };
    assert!(
        t.last_connect_error
            .as_deref()
            .is_some_and(|l| l.contains("cannot connect")),
        "{e}"
    );
}
