//! weft-http's server and client, unchanged, on `weft::sim::net`: a server
//! on host "api", clients on other hosts; replay by seed, a partition
//! that makes a request time out in virtual time, a crash of the server
//! host that fails the requests in flight.

use std::time::Duration;

use weft::sim::net::{self, Link};
use weft_http::client::ErrorKind;
use weft_http::{Client, Request, Response, ServerHandle};

const MS: Duration = Duration::from_millis(1);

/// The server: `/echo/<x>` answers `<x>@<host>`; `/slow` answers after a
/// second (virtual).
fn start_server() -> ServerHandle {
    net::host("api", || {
        weft_http::serve("0.0.0.0:80", |req: &mut Request<'_>| {
            if req.path() == "/slow" {
                // Interrupted if the host crashes meanwhile.
                let _ = weft::sleep(Duration::from_secs(1));
            }
            let host = net::current_host().unwrap_or_default();
            let x = req.path().trim_start_matches("/echo/").to_string();
            Response::text(format!("{x}@{host}"))
        })
        .unwrap()
    })
    .unwrap()
    .join()
    .unwrap()
}

/// Three clients on three hosts, two requests each over jittery links;
/// what each got, and when (virtual time).
fn exchange() -> Vec<(String, Duration)> {
    net::set_default_link(Link::new(2 * MS).jitter(3 * MS)).unwrap();
    let server = start_server();
    let clients: Vec<_> = ["a", "b", "c"]
        .into_iter()
        .map(|name| {
            net::host(name, move || {
                let client = Client::new();
                (0..2)
                    .map(|i| {
                        let url = format!("http://api/echo/{name}{i}");
                        let body = client.get(&url).send().unwrap().text().unwrap();
                        (body, weft::sim::elapsed().unwrap())
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap()
        })
        .collect();
    let mut got = Vec::new();
    for c in clients {
        got.extend(c.join().unwrap());
    }
    let report = server.shutdown(Duration::from_secs(1));
    assert!(report.drained, "{report:?}");
    assert_eq!(server.stats().requests, 6);
    for (body, t) in &got {
        weft::sim::trace(body.len() as u64);
        weft::sim::trace(t.as_nanos() as u64);
    }
    got
}

#[test]
fn requests_between_hosts_replay_by_seed() {
    let a = weft::sim::run(5, exchange).unwrap();
    let b = weft::sim::run(5, exchange).unwrap();
    assert_eq!(a.value, b.value);
    assert_eq!(a.trace, b.trace);
    let bodies: Vec<&str> = a.value.iter().map(|(b, _)| b.as_str()).collect();
    assert_eq!(
        bodies,
        ["a0@api", "a1@api", "b0@api", "b1@api", "c0@api", "c1@api"]
    );
    // Each request takes at least a handshake and an exchange: two round
    // trips of 4 to 10 ms.
    assert!(a.value.iter().all(|(_, t)| *t >= 8 * MS), "{:?}", a.value);
    let c = weft::sim::run(6, exchange).unwrap();
    assert_ne!(a.trace, c.trace);
}

#[test]
fn a_partition_times_a_request_out_in_virtual_time() {
    let r = weft::sim::run(7, partitioned).unwrap();
    let again = weft::sim::run(7, partitioned).unwrap();
    assert_eq!(r.trace, again.trace, "a timeout replays too");
    let (ok, kind, waited, again) = r.value;
    assert_eq!(ok, "1@api");
    assert_eq!(kind, ErrorKind::Timeout);
    assert_eq!(waited, Duration::from_secs(30));
    assert_eq!(again, "3@api");
}

/// A client on host "cut-off" is answered once, then partitioned from the
/// server: its next request (30 s timeout) times out; after the repair a
/// request goes through again.
fn partitioned() -> (String, ErrorKind, Duration, String) {
    let server = start_server();
    net::add_host("cut-off").unwrap();
    let client = net::host("cut-off", || {
        let client = Client::new();
        // Connected and answered once: the connection is pooled.
        let ok = client
            .get("http://api/echo/1")
            .send()
            .unwrap()
            .text()
            .unwrap();
        net::partition("cut-off", "api").unwrap();
        let t0 = weft::sim::elapsed().unwrap();
        let e = client
            .get("http://api/echo/2")
            .timeout(Duration::from_secs(30))
            .send()
            .unwrap_err();
        let waited = weft::sim::elapsed().unwrap() - t0;
        net::repair("cut-off", "api").unwrap();
        // After the repair a new request goes through.
        let again = Client::new()
            .get("http://api/echo/3")
            .send()
            .unwrap()
            .text()
            .unwrap();
        (ok, e.kind(), waited, again)
    })
    .unwrap();
    let got = client.join().unwrap();
    server.shutdown(Duration::from_secs(1));
    got
}

#[test]
fn a_crash_of_the_server_host_fails_requests_in_flight() {
    let r = weft::sim::run(8, || {
        net::set_default_link(Link::new(5 * MS)).unwrap();
        let server = start_server();
        let in_flight: Vec<_> = ["x", "y"]
            .into_iter()
            .map(|name| {
                net::host(name, || {
                    Client::new()
                        .get("http://api/slow")
                        .send()
                        .and_then(|r| r.text())
                })
                .unwrap()
            })
            .collect();
        // The requests are being handled (the handler sleeps a second).
        weft::sleep(Duration::from_millis(500)).unwrap();
        net::crash("api").unwrap();
        let errors: Vec<_> = in_flight
            .into_iter()
            .map(|h| h.join().unwrap().unwrap_err())
            .collect();
        // Down: new requests cannot connect (within their timeout).
        let e = Client::new()
            .get("http://api/echo/1")
            .timeout(Duration::from_secs(2))
            .send()
            .unwrap_err();
        server.shutdown(Duration::from_secs(1));
        (
            errors.iter().map(|e| e.kind()).collect::<Vec<_>>(),
            e.kind(),
        )
    })
    .unwrap();
    assert_eq!(
        r.value.0,
        [ErrorKind::Read, ErrorKind::Read],
        "{:?}",
        r.value
    );
    assert_eq!(r.value.1, ErrorKind::Timeout);
}
