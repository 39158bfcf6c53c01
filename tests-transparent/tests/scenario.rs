//! Step 5, the issue's own scenario: 5,000 virtual threads each
//! `std::thread::sleep(200 ms)` and make one `std::net` round trip to a
//! Weft server in the same process, on two carriers with no spares.
//! Without the feature this hangs: the clients' blocking reads hold every
//! carrier while the server's threads wait for one.

use weft_transparent_tests::{raise_fd_limit, scenario, strict_runtime};

#[test]
fn five_thousand_std_clients_on_two_carriers() {
    let n = 5000;
    let limit = raise_fd_limit(2 * n as u64 + 512);
    assert!(
        limit >= 2 * n as u64 + 64,
        "RLIMIT_NOFILE {limit} is too low for {n} connections (needs {})",
        2 * n + 64
    );
    let rt = strict_runtime(2);
    let r = scenario(&rt, n);
    assert_eq!(r.ok, n, "{r:?}");
    // Two carriers, the poller, the monitor, the test harness and a few
    // offload threads: nothing near one OS thread per client.
    assert!(r.peak_os_threads < 64, "{r:?}");
    assert_eq!(rt.active_carriers(), 2);
    println!("{r:?}");
}
