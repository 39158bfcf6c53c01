//! TLS against the test cluster (ssl=on with a self-signed certificate for
//! localhost and 127.0.0.1, made by `scripts/pg-test-cluster.sh`):
//! `sslmode` with libpq's meaning, and clear errors when verification
//! fails.

mod common;

use weft_pg::{Connection, Error, Pool, SslMode};

fn on_virtual<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    weft::spawn(f).join().expect("virtual thread panicked")
}

/// The cluster's TCP port, from its URL.
fn port(url: &str) -> u16 {
    let after_at = url.rsplit('@').next().unwrap();
    let hostport = after_at.split('/').next().unwrap();
    hostport.rsplit(':').next().unwrap().parse().unwrap()
}

/// The root certificate, or `None` (skip) when the cluster has no TLS;
/// in CI the cluster must have it.
fn root(pg: &common::Server) -> Option<String> {
    match &pg.ssl_root_cert {
        Some(r) => Some(r.clone()),
        None => {
            assert!(
                std::env::var("CI").is_err(),
                "CI: the test cluster has no TLS certificate (WEFT_PG_SSLROOTCERT)"
            );
            eprintln!("weft-pg tls: the cluster has no WEFT_PG_SSLROOTCERT; skipped");
            None
        }
    }
}

fn conninfo(pg: &common::Server, host: &str, extra: &str) -> String {
    format!(
        "host={host} port={} user=weft password=weft dbname=weft {extra}",
        port(&pg.url)
    )
}

const SSL_IN_USE: &str = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";

fn ssl_in_use(c: &mut Connection) -> bool {
    c.query_one(SSL_IN_USE, &[]).unwrap().get(0)
}

#[test]
fn verify_full_runs_queries_over_tls() {
    let pg = require_pg!();
    let Some(root) = root(pg) else { return };
    let info = conninfo(
        pg,
        "localhost",
        &format!("sslmode=verify-full sslrootcert={root}"),
    );
    let url = format!(
        "postgres://weft:weft@localhost:{}/weft?sslmode=verify-full&sslrootcert={root}",
        port(&pg.url)
    );
    on_virtual(move || {
        let mut c = Connection::connect_url(&info).unwrap();
        assert!(ssl_in_use(&mut c));
        let n: i32 = c.query_one("SELECT $1::int + 1", &[&41]).unwrap().get(0);
        assert_eq!(n, 42);
        // Through a pool, from a URL.
        let pool = Pool::new(weft_pg::Config::from_url(&url).unwrap().min_idle(0)).unwrap();
        assert_eq!(pool.config().get_tls().mode, SslMode::VerifyFull);
        for _ in 0..3 {
            let mut c = pool.get().unwrap();
            assert!(c.query_one(SSL_IN_USE, &[]).unwrap().get::<_, bool>(0));
        }
    });
}

#[test]
fn modes_have_libpq_meaning() {
    let pg = require_pg!();
    let Some(root) = root(pg) else { return };
    let (a, b, c, d) = (
        conninfo(pg, "127.0.0.1", "sslmode=disable"),
        conninfo(pg, "127.0.0.1", "sslmode=prefer"),
        conninfo(pg, "127.0.0.1", "sslmode=require"),
        // The certificate names localhost and 127.0.0.1, not this host:
        // verify-ca checks the chain only and accepts it.
        conninfo(
            pg,
            "db.invalid hostaddr=127.0.0.1",
            &format!("sslmode=verify-ca sslrootcert={root}"),
        ),
    );
    on_virtual(move || {
        assert!(!ssl_in_use(&mut Connection::connect_url(&a).unwrap()));
        assert!(ssl_in_use(&mut Connection::connect_url(&b).unwrap()));
        assert!(ssl_in_use(&mut Connection::connect_url(&c).unwrap()));
        assert!(ssl_in_use(&mut Connection::connect_url(&d).unwrap()));
    });
}

#[test]
fn wrong_host_name_fails_verify_full() {
    let pg = require_pg!();
    let Some(root) = root(pg) else { return };
    let info = conninfo(
        pg,
        "db.invalid hostaddr=127.0.0.1",
        &format!("sslmode=verify-full sslrootcert={root}"),
    );
    on_virtual(move || {
        let e = Connection::connect_url(&info).unwrap_err();
        assert!(matches!(e, Error::Tls { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("verification failed"), "{msg}");
    });
}

#[test]
fn mismatched_root_is_a_clear_verification_error() {
    let pg = require_pg!();
    if root(pg).is_none() {
        return;
    }
    // A root that did not sign the server's certificate.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let dir = std::env::temp_dir().join(format!("weft-pg-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("other-root.pem");
    std::fs::write(&file, other.cert.pem()).unwrap();
    let info = conninfo(
        pg,
        "localhost",
        &format!("sslmode=verify-full sslrootcert={}", file.display()),
    );
    let r = on_virtual(move || Connection::connect_url(&info).map(|_| ()));
    let _ = std::fs::remove_dir_all(&dir);
    let e = r.unwrap_err();
    assert!(matches!(e, Error::Tls { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("TLS certificate verification failed"), "{msg}");
    assert!(msg.contains("UnknownIssuer"), "{msg}");
}

#[test]
fn verify_full_without_roots_is_a_config_error() {
    let e = Connection::connect_url(
        "host=127.0.0.1 port=1 user=u sslmode=verify-full sslrootcert=/nonexistent/root.crt",
    )
    .unwrap_err();
    assert!(matches!(e, Error::Config(_)), "{e:?}");
    assert!(e.to_string().contains("/nonexistent/root.crt"), "{e}");
}
