//! The blocking driver against a real server: authentication, transports,
//! both query protocols, types, transactions, errors, interrupts.

mod common;

use std::time::{Duration, Instant};

use weft_pg::types::Type;
use weft_pg::{Connection, Error, SimpleQueryMessage, SqlState};

fn on_virtual<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    weft::spawn(f).join().expect("virtual thread panicked")
}

#[test]
fn scram_over_tcp() {
    let pg = require_pg!();
    let url = pg.url.clone();
    on_virtual(move || {
        let mut c = Connection::connect_url(&url).unwrap();
        let row = c
            .query_one(
                "SELECT current_user::text, inet_server_addr() IS NOT NULL",
                &[],
            )
            .unwrap();
        assert_eq!(row.get::<_, String>(0), "weft");
        assert!(row.get::<_, bool>(1), "expected a TCP session");
        // The role really has a SCRAM verifier (not trust, not md5).
        let m: String = c
            .query_one(
                "SELECT setting FROM pg_settings WHERE name = 'password_encryption'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(m, "scram-sha-256");
        c.close();
    });
}

#[test]
fn md5_over_tcp() {
    let pg = require_pg!();
    let Some(url) = pg.md5_url.clone() else {
        eprintln!("md5_over_tcp: WEFT_PG_MD5_URL not set; skipped");
        return;
    };
    on_virtual(move || {
        let mut c = Connection::connect_url(&url).unwrap();
        let who: String = c
            .query_one("SELECT current_user::text", &[])
            .unwrap()
            .get(0);
        assert_eq!(who, "weft_md5");
    });
}

#[test]
fn unix_socket_with_both_auth_methods() {
    let pg = require_pg!();
    let Some((dir, port)) = pg.socket.clone() else {
        eprintln!("unix_socket: WEFT_PG_SOCKET_DIR not set; skipped");
        return;
    };
    on_virtual(move || {
        for (user, pw) in [("weft", "weft"), ("weft_md5", "weft_md5")] {
            let mut cfg = weft_pg::PgConfig::new();
            cfg.host_path(&dir)
                .port(port)
                .user(user)
                .password(pw)
                .dbname("weft");
            let mut c = Connection::connect(&cfg).unwrap();
            let row = c
                .query_one("SELECT current_user::text, inet_server_addr() IS NULL", &[])
                .unwrap();
            assert_eq!(row.get::<_, String>(0), user);
            assert!(row.get::<_, bool>(1), "expected a Unix-socket session");
        }
    });
}

#[test]
fn wrong_password_is_28p01() {
    let pg = require_pg!();
    let mut cfg: weft_pg::PgConfig = pg.url.parse().unwrap();
    cfg.password("not-the-password");
    let err = on_virtual(move || Connection::connect(&cfg).unwrap_err());
    assert_eq!(err.code(), Some(&SqlState::INVALID_PASSWORD), "{err}");
}

#[test]
fn nothing_listening_is_a_connect_error() {
    // A port nobody listens on: bind one and close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://x:y@127.0.0.1:{port}/z");
    let err = on_virtual(move || Connection::connect_url(&url).unwrap_err());
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(err.is_connection_error());
}

#[test]
fn simple_and_extended_queries_and_prepared_statements() {
    let pg = require_pg!();
    let url = pg.url.clone();
    on_virtual(move || {
        let mut c = Connection::connect_url(&url).unwrap();
        c.batch_execute(
            "CREATE TEMP TABLE t (id int4 PRIMARY KEY, name text NOT NULL, score float8)",
        )
        .unwrap();
        let insert = c.prepare("INSERT INTO t VALUES ($1, $2, $3)").unwrap();
        assert_eq!(insert.params(), &[Type::INT4, Type::TEXT, Type::FLOAT8]);
        for i in 0..10i32 {
            let score = if i % 2 == 0 {
                Some(f64::from(i) / 2.0)
            } else {
                None
            };
            assert_eq!(
                c.execute(&insert, &[&i, &format!("n{i}"), &score]).unwrap(),
                1
            );
        }
        let rows = c
            .query(
                "SELECT id, name, score FROM t WHERE id >= $1 ORDER BY id",
                &[&7i32],
            )
            .unwrap();
        let got: Vec<(i32, String, Option<f64>)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        assert_eq!(
            got,
            vec![
                (7, "n7".into(), None),
                (8, "n8".into(), Some(4.0)),
                (9, "n9".into(), None)
            ]
        );
        assert!(
            c.query_opt("SELECT 1 FROM t WHERE id = 99", &[])
                .unwrap()
                .is_none()
        );
        assert!(
            c.query_one("SELECT id FROM t", &[]).is_err(),
            "query_one with 10 rows"
        );
        // Simple protocol: text rows.
        let msgs = c
            .simple_query("SELECT name FROM t WHERE id = 3; SELECT 'x'")
            .unwrap();
        let texts: Vec<&str> = msgs
            .iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(r) => r.get(0),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["n3", "x"]);
        // Explicit types, no prepare round trip.
        let rows = c
            .query_typed("SELECT $1 || '!'", &[(&"hi", Type::TEXT)])
            .unwrap();
        assert_eq!(rows[0].get::<_, String>(0), "hi!");
        // The same prepared statement, many times.
        let sum = c.prepare("SELECT $1::int8 + $2::int8").unwrap();
        for i in 0..100i64 {
            assert_eq!(
                c.query_one(&sum, &[&i, &1i64]).unwrap().get::<_, i64>(0),
                i + 1
            );
        }
    });
}

#[test]
fn typed_parameters_and_rows() {
    let pg = require_pg!();
    let url = pg.url.clone();
    on_virtual(move || {
        let mut c = Connection::connect_url(&url).unwrap();
        let row = c
            .query_one(
                "SELECT $1::bool, $2::int2, $3::int4, $4::int8, $5::float4, $6::float8, $7::text, $8::bytea, \
                 $9::int4[], $10::text, ($11::text)::jsonb::text",
                &[
                    &true,
                    &-7i16,
                    &i32::MAX,
                    &i64::MIN,
                    &1.5f32,
                    &-2.25f64,
                    &"héllo",
                    &vec![0u8, 255, 10],
                    &vec![1i32, 2, 3],
                    &None::<String>,
                    &r#"{"a":1}"#,
                ],
            )
            .unwrap();
        assert!(row.get::<_, bool>(0));
        assert_eq!(row.get::<_, i16>(1), -7);
        assert_eq!(row.get::<_, i32>(2), i32::MAX);
        assert_eq!(row.get::<_, i64>(3), i64::MIN);
        assert_eq!(row.get::<_, f32>(4), 1.5);
        assert_eq!(row.get::<_, f64>(5), -2.25);
        assert_eq!(row.get::<_, &str>(6), "héllo");
        assert_eq!(row.get::<_, Vec<u8>>(7), vec![0, 255, 10]);
        assert_eq!(row.get::<_, Vec<i32>>(8), vec![1, 2, 3]);
        assert_eq!(row.get::<_, Option<String>>(9), None);
        assert_eq!(row.get::<_, String>(10), r#"{"a": 1}"#);
        assert_eq!(row.columns()[2].type_(), &Type::INT4);
        // A wrong Rust type is an error, not a panic, with try_get.
        assert!(row.try_get::<_, String>(2).is_err());
        // A parameter of the wrong type is rejected before it is sent.
        let err = c.query_one("SELECT $1::int4", &[&"text"]).unwrap_err();
        assert!(!err.is_connection_error(), "{err}");
        assert_eq!(
            c.query_one("SELECT 1::int4", &[]).unwrap().get::<_, i32>(0),
            1
        );
    });
}

#[test]
fn transactions_commit_rollback_drop_and_savepoints() {
    let pg = require_pg!();
    let url = pg.url.clone();
    on_virtual(move || {
        let mut c = Connection::connect_url(&url).unwrap();
        c.batch_execute("CREATE TEMP TABLE acct (id int4 PRIMARY KEY, bal int8 NOT NULL)")
            .unwrap();
        c.execute("INSERT INTO acct VALUES (1, 100), (2, 0)", &[])
            .unwrap();
        let total = |c: &mut Connection, id: i32| -> i64 {
            c.query_one("SELECT bal FROM acct WHERE id = $1", &[&id])
                .unwrap()
                .get(0)
        };

        // Commit.
        let mut tx = c.transaction().unwrap();
        tx.execute("UPDATE acct SET bal = bal - 10 WHERE id = 1", &[])
            .unwrap();
        tx.execute("UPDATE acct SET bal = bal + 10 WHERE id = 2", &[])
            .unwrap();
        tx.commit().unwrap();
        assert_eq!((total(&mut c, 1), total(&mut c, 2)), (90, 10));

        // Explicit rollback.
        let mut tx = c.transaction().unwrap();
        tx.execute("UPDATE acct SET bal = 0", &[]).unwrap();
        tx.rollback().unwrap();
        assert_eq!(total(&mut c, 1), 90);

        // Dropped without commit: rolled back.
        {
            let mut tx = c.transaction().unwrap();
            tx.execute("UPDATE acct SET bal = 0", &[]).unwrap();
        }
        assert_eq!(total(&mut c, 1), 90);

        // A savepoint rolled back inside a committed transaction.
        let mut tx = c.transaction().unwrap();
        tx.execute("UPDATE acct SET bal = 1 WHERE id = 1", &[])
            .unwrap();
        {
            let mut sp = tx.transaction().unwrap();
            sp.execute("UPDATE acct SET bal = 2 WHERE id = 1", &[])
                .unwrap();
            let err = sp
                .execute("INSERT INTO acct VALUES (1, 0)", &[])
                .unwrap_err();
            assert_eq!(err.code(), Some(&SqlState::UNIQUE_VIOLATION));
            // dropped: ROLLBACK TO SAVEPOINT, the outer transaction lives on
        }
        tx.execute("UPDATE acct SET bal = bal + 1 WHERE id = 1", &[])
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(total(&mut c, 1), 2);

        // A panic inside a transaction rolls it back on unwind.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut tx = c.transaction().unwrap();
            tx.execute("UPDATE acct SET bal = 0", &[]).unwrap();
            panic!("boom");
        }));
        assert!(r.is_err());
        assert_eq!(total(&mut c, 1), 2);
        assert!(!c.is_broken());
    });
}

#[test]
fn errors_carry_sqlstate_and_the_connection_stays_usable() {
    let pg = require_pg!();
    let url = pg.url.clone();
    on_virtual(move || {
        let mut c = Connection::connect_url(&url).unwrap();
        let cases: [(&str, SqlState); 4] = [
            ("SELEC 1", SqlState::SYNTAX_ERROR),
            ("SELECT 1/0", SqlState::DIVISION_BY_ZERO),
            ("SELECT * FROM no_such_table", SqlState::UNDEFINED_TABLE),
            (
                "SELECT no_such_column FROM pg_class",
                SqlState::UNDEFINED_COLUMN,
            ),
        ];
        for (sql, code) in cases {
            let err = c.query(sql, &[]).unwrap_err();
            assert_eq!(err.code(), Some(&code), "{sql}: {err}");
            assert!(!err.is_connection_error());
            let db = err.as_db_error().unwrap();
            assert_eq!(db.severity(), "ERROR");
            assert!(err.to_string().contains(code.code()), "{err}");
            // Same error on the simple protocol.
            assert_eq!(c.batch_execute(sql).unwrap_err().code(), Some(&code));
            // And the connection works afterwards.
            assert_eq!(
                c.query_one("SELECT 7::int4", &[]).unwrap().get::<_, i32>(0),
                7
            );
        }
        // An error inside a transaction aborts it (25P02) until rollback.
        let mut tx = c.transaction().unwrap();
        assert!(tx.execute("SELECT 1/0", &[]).is_err());
        let err = tx.execute("SELECT 1", &[]).unwrap_err();
        assert_eq!(err.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
        drop(tx);
        assert_eq!(
            c.query_one("SELECT 8::int4", &[]).unwrap().get::<_, i32>(0),
            8
        );
        assert!(!c.is_broken());
    });
}

#[test]
fn works_on_a_plain_os_thread() {
    let pg = require_pg!();
    let url = pg.url.clone();
    std::thread::spawn(move || {
        assert!(!weft::is_virtual());
        let mut c = Connection::connect_url(&url).unwrap();
        let mut tx = c.transaction().unwrap();
        let v: i32 = tx
            .query_one("SELECT 40 + $1::int4", &[&2i32])
            .unwrap()
            .get(0);
        tx.commit().unwrap();
        assert_eq!(v, 42);
    })
    .join()
    .unwrap();
}

#[test]
fn interrupt_cancels_a_running_query_and_the_connection_survives() {
    let pg = require_pg!();
    let url = pg.url.clone();
    let h = weft::Builder::new()
        .name("long-query")
        .spawn(move || {
            let mut c = Connection::connect_url(&url).unwrap();
            let start = Instant::now();
            let err = c.query("SELECT pg_sleep(30)", &[]).unwrap_err();
            let took = start.elapsed();
            assert!(err.is_interrupted(), "{err:?}");
            assert!(!weft::current().is_interrupted(), "the flag is cleared");
            // The session is fine: the cancel hit only that statement.
            assert!(!c.is_broken());
            assert_eq!(
                c.query_one("SELECT 5::int4", &[]).unwrap().get::<_, i32>(0),
                5
            );
            took
        })
        .unwrap();
    // Interrupt once the query is really waiting on the server.
    let t = h.thread().clone();
    common::wait_until(Duration::from_secs(10), "the query to start", || {
        let mut c = pg.connect();
        let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'",
                    &[],
                )
                .unwrap()
                .get(0);
        n == 1
    });
    t.interrupt();
    let took = h.join().unwrap();
    assert!(took < Duration::from_secs(20), "cancel took {took:?}");
}

/// A cancel request must never reach the statement *after* the one it was
/// sent for. The server acts on a cancel request asynchronously (a process
/// it starts for the request signals the session's backend; PostgreSQL 15
/// signals it twice, the backend and then its process group), so a call
/// that returns before the server has acted on the request lets a late
/// signal cancel whatever the session runs next.
///
/// Interrupts land at many points of short statements: before the backend
/// starts them, while they run, as they finish, after they finished; over
/// TLS, plain TCP and a Unix socket (the cancel request goes the same
/// way). Each interrupted call must end with its own result or
/// `Interrupted`, and the statement after it must succeed. No verdict
/// depends on timing: the delays only spread the interrupts.
#[test]
fn an_interrupt_never_cancels_the_next_statement() {
    // Every (statement, delay) pair comes up twice per session.
    const ROUNDS: usize = 120;
    // Interrupt delays in microseconds (0: as soon as the call starts).
    const DELAYS_US: [u64; 10] = [0, 50, 150, 300, 500, 800, 1000, 1200, 2000, 4000];
    // From statements that end before any cancel can arrive to ones that
    // a cancel usually catches.
    const QUERIES: [&str; 6] = [
        "SELECT pg_sleep(0.001)",
        "SELECT pg_sleep(0.02)",
        "SELECT pg_sleep(0.002)",
        "SELECT 1",
        "SELECT pg_sleep(0.005)",
        "SELECT pg_sleep(0.0005)",
    ];
    let pg = require_pg!();
    let plain = if pg.url.contains('?') {
        format!("{}&sslmode=disable", pg.url)
    } else {
        format!("{}?sslmode=disable", pg.url)
    };
    let mut sessions = vec![
        ("tcp, sslmode=prefer", pg.url.clone()),
        ("tcp, plain", plain),
    ];
    match &pg.socket {
        Some((dir, port)) => sessions.push((
            "unix socket",
            format!(
                "host={} port={port} user=weft password=weft dbname=weft",
                dir.display()
            ),
        )),
        None => eprintln!("an_interrupt_never_cancels_the_next_statement: no Unix socket"),
    }
    let workers: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(s, (how, url))| {
            let (go_tx, go_rx) = weft::channel::unbounded::<Duration>();
            let (fired_tx, fired_rx) = weft::channel::unbounded::<()>();
            let h = weft::Builder::new()
                .name(format!("interrupted-{s}"))
                .spawn(move || {
                    let mut c = Connection::connect_url(&url).unwrap();
                    let (mut cancelled, mut completed) = (0u32, 0u32);
                    for i in 0..ROUNDS {
                        let sql = QUERIES[i % QUERIES.len()];
                        let delay = DELAYS_US[(i / QUERIES.len() + 3 * s) % DELAYS_US.len()];
                        let what = format!("{how}, round {i}: {sql} interrupted after {delay}us");
                        go_tx.send(Duration::from_micros(delay)).unwrap();
                        match c.query(sql, &[]) {
                            Ok(_) => completed += 1,
                            Err(e) if e.is_interrupted() => cancelled += 1,
                            Err(e) => panic!("{what}: {e:?} (code {:?})", e.code()),
                        }
                        // Wait until the interrupt has surely been made,
                        // then drop it if the call left it pending.
                        loop {
                            match fired_rx.recv() {
                                Ok(()) => break,
                                Err(weft::channel::RecvError::Interrupted) => {}
                                Err(e) => panic!("{e:?}"),
                            }
                        }
                        weft::interrupted();
                        assert!(!c.is_broken(), "{what}: the connection is broken");
                        match c.query_one("SELECT 5::int4", &[]) {
                            Ok(row) => assert_eq!(row.get::<_, i32>(0), 5),
                            Err(e) => panic!(
                                "{what}: the next statement failed: {e:?} (code {:?})",
                                e.code()
                            ),
                        }
                    }
                    drop(go_tx);
                    c.close();
                    (cancelled, completed)
                })
                .unwrap();
            let t = h.thread().clone();
            // The interrupter: an OS thread, so that its sleeps are real
            // sleeps and its interrupts come from outside the carrier.
            let interrupter = std::thread::spawn(move || {
                while let Ok(delay) = go_rx.recv() {
                    if !delay.is_zero() {
                        std::thread::sleep(delay);
                    }
                    t.interrupt();
                    fired_tx.send(()).unwrap();
                }
            });
            (h, interrupter)
        })
        .collect();
    let (mut rounds, mut cancelled, mut completed) = (0, 0, 0);
    for (h, interrupter) in workers {
        let (c, d) = h.join().unwrap();
        interrupter.join().unwrap();
        rounds += ROUNDS;
        cancelled += c;
        completed += d;
    }
    eprintln!(
        "an_interrupt_never_cancels_the_next_statement: {rounds} rounds, {cancelled} \
         cancelled, {completed} completed before the cancel"
    );
}

#[test]
fn no_tokio_runtime_is_needed() {
    // Nothing in this test binary starts a Tokio runtime; a call that
    // needed one would panic ("there is no reactor running").
    let pg = require_pg!();
    let url = pg.url.clone();
    on_virtual(move || {
        let mut c = Connection::connect_url(&url).unwrap();
        for i in 0..50i32 {
            assert_eq!(
                c.query_one("SELECT $1::int4", &[&i])
                    .unwrap()
                    .get::<_, i32>(0),
                i
            );
        }
    });
}
