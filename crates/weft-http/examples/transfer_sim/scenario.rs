//! The simulated scenario of the transfer example (used by `main.rs` and
//! `tests/transfer_sim.rs`).

use std::time::Duration;

use super::service::{Bank, Variant, check_invariants, pay};
use weft::sim::net::{self, Link};
/// Three clients on three hosts each pay `PAYMENTS` transfers to the bank
/// on a fourth, over links that lose 0.2 % of segments (each loss costs a
/// 200 ms retransmission, the client's read timeout); then the invariants.
pub fn run(variant: Variant) {
    net::set_default_link(
        Link::new(Duration::from_millis(1))
            .jitter(Duration::from_micros(500))
            .loss(0.002)
            .retransmit_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    let bank = Bank::new(
        variant,
        &[("alice", 1_000), ("bob", 1_000), ("carol", 1_000)],
    );
    let routes = bank.router();
    let server = net::host("bank", move || {
        weft_http::Server::bind("0.0.0.0:80", weft_http::ServerConfig::default())
            .unwrap()
            .serve(routes)
            .unwrap()
    })
    .unwrap()
    .join()
    .unwrap();
    let clients: Vec<_> = [("alice", "bob"), ("bob", "carol"), ("carol", "alice")]
        .into_iter()
        .map(|(from, to)| {
            net::host(&format!("client-{from}"), move || {
                pay("http://bank:80", from, from, to, 10, PAYMENTS)
            })
            .unwrap()
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    server.shutdown(Duration::from_secs(1));
    check_invariants(&bank, 3_000);
}

const PAYMENTS: usize = 5;
