//! A money-transfer service with idempotency keys, and its clients: the
//! example of `weft::sim` finding a concurrency bug that ordinary tests
//! pass.
//!
//! `POST /transfer` with an `idempotency-key` header and a body
//! `"<from> <to> <amount>"` moves money between two accounts. A client
//! whose request times out sends it again under the same key; the key
//! makes the retry harmless: the server applies each key once and answers
//! a repeated key with the first answer.
//!
//! [`Variant::Buggy`] looks the key up, applies the transfer, then records
//! the key. Two attempts with one key that arrive together both find it
//! unrecorded and both apply: the payer is debited twice. On a test
//! machine's loopback nothing is ever lost, no request is retried, and the
//! bug never shows. Under the simulator a lost segment delays a request
//! by the retransmission timeout, the client's retry races the original,
//! and a few seeds find the double debit. [`Variant::Fixed`] records the
//! key as pending before applying it, under the same lock, so a second
//! attempt waits for the first's answer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use weft::sync::{Condvar, Mutex};
use weft_http::{Client, ClientConfig, Request, Response, Router};

/// Which duplicate check the server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Look up, apply, then record: two attempts can both apply.
    Buggy,
    /// Record as pending first; a second attempt waits for the answer.
    Fixed,
}

enum Key {
    Pending,
    Done(u16),
}

/// The accounts, the keys seen, and the ledger of applied transfers.
pub struct Bank {
    variant: Variant,
    accounts: Mutex<HashMap<String, i64>>,
    keys: Mutex<HashMap<String, Key>>,
    answered: Condvar,
    ledger: Mutex<Vec<String>>,
}

impl Bank {
    pub fn new(variant: Variant, accounts: &[(&str, i64)]) -> Arc<Bank> {
        Arc::new(Bank {
            variant,
            accounts: Mutex::new(accounts.iter().map(|&(n, b)| (n.to_string(), b)).collect()),
            keys: Mutex::new(HashMap::new()),
            answered: Condvar::new(),
            ledger: Mutex::new(Vec::new()),
        })
    }

    /// The HTTP routes.
    pub fn router(self: &Arc<Bank>) -> Router {
        let bank = self.clone();
        Router::new().post("/transfer", move |req: &mut Request<'_>| bank.handle(req))
    }

    fn handle(&self, req: &mut Request<'_>) -> Response {
        let Some(key) = req.header("idempotency-key").map(str::to_string) else {
            return Response::text("missing idempotency-key").with_status(400);
        };
        let body = req.read_body().unwrap_or_default();
        let body = String::from_utf8_lossy(&body);
        let parts: Vec<&str> = body.split_whitespace().collect();
        let [from, to, amount] = parts[..] else {
            return Response::text("body: <from> <to> <amount>").with_status(400);
        };
        let Ok(amount) = amount.parse::<i64>() else {
            return Response::text("amount: an integer").with_status(400);
        };
        let status = match self.variant {
            Variant::Buggy => self.once_buggy(&key, from, to, amount),
            Variant::Fixed => self.once_fixed(&key, from, to, amount),
        };
        Response::new(status)
    }

    fn once_buggy(&self, key: &str, from: &str, to: &str, amount: i64) -> u16 {
        if let Some(Key::Done(status)) = self.keys.lock().unwrap().get(key) {
            return *status;
        }
        let status = self.apply(key, from, to, amount);
        self.keys
            .lock()
            .unwrap()
            .insert(key.to_string(), Key::Done(status));
        status
    }

    fn once_fixed(&self, key: &str, from: &str, to: &str, amount: i64) -> u16 {
        let mut keys = self.keys.lock().unwrap();
        loop {
            match keys.get(key) {
                Some(Key::Done(status)) => return *status,
                Some(Key::Pending) => keys = self.answered.wait(keys).unwrap(),
                None => break,
            }
        }
        keys.insert(key.to_string(), Key::Pending);
        drop(keys);
        let status = self.apply(key, from, to, amount);
        self.keys
            .lock()
            .unwrap()
            .insert(key.to_string(), Key::Done(status));
        self.answered.notify_all();
        status
    }

    /// Moves the money and writes the ledger (a storage write of 1–8 ms).
    fn apply(&self, key: &str, from: &str, to: &str, amount: i64) -> u16 {
        let mut accounts = self.accounts.lock().unwrap();
        match accounts.get(from) {
            Some(&b) if b >= amount && amount > 0 && accounts.contains_key(to) => {}
            Some(_) if accounts.contains_key(to) => return 409,
            _ => return 404,
        }
        weft::sleep(Duration::from_millis(1 + weft::sim::random() % 8)).unwrap();
        *accounts.get_mut(from).unwrap() -= amount;
        *accounts.get_mut(to).unwrap() += amount;
        self.ledger.lock().unwrap().push(key.to_string());
        200
    }

    /// The sum of all balances.
    pub fn total(&self) -> i64 {
        self.accounts.lock().unwrap().values().sum()
    }

    /// A balance.
    #[allow(dead_code)] // used by tests/transfer_sim.rs, not by the example
    pub fn balance(&self, name: &str) -> i64 {
        self.accounts.lock().unwrap()[name]
    }

    /// The keys applied, in order (each should appear once).
    pub fn ledger(&self) -> Vec<String> {
        self.ledger.lock().unwrap().clone()
    }
}

/// A client that sends `n` transfers of `amount` from `from` to `to`,
/// each under its own key, retrying an attempt that times out (up to 10
/// attempts). Returns the keys that got an answer, with the status.
pub fn pay(
    base: &str,
    name: &str,
    from: &str,
    to: &str,
    amount: i64,
    n: usize,
) -> Vec<(String, u16)> {
    let client = Client::with_config(ClientConfig {
        read_timeout: Some(Duration::from_millis(200)),
        connect_timeout: Duration::from_millis(200),
        ..ClientConfig::default()
    });
    let mut answered = Vec::new();
    for i in 0..n {
        let key = format!("{name}-{i}");
        for _attempt in 0..10 {
            let sent = client
                .post(&format!("{base}/transfer"))
                .header("idempotency-key", &key)
                .body(format!("{from} {to} {amount}"))
                .send();
            if let Ok(resp) = sent {
                answered.push((key.clone(), resp.status()));
                break;
            }
        }
    }
    answered
}

/// What must hold after every run: money is neither made nor lost, and
/// no key was applied twice.
pub fn check_invariants(bank: &Bank, total: i64) {
    assert_eq!(bank.total(), total, "money was made or lost");
    let ledger = bank.ledger();
    let mut seen = std::collections::HashSet::new();
    for key in &ledger {
        assert!(seen.insert(key), "transfer {key} applied twice: {ledger:?}");
    }
}
