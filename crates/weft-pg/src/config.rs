//! [`Config`]: the pool's settings, named after HikariCP's.

use std::time::Duration;

use tokio_postgres::Config as PgConfig;

use crate::error::{Error, Result};

/// Settings of a [`Pool`](crate::Pool): where the server is, and
/// HikariCP's knobs under their HikariCP names (snake_case), with
/// HikariCP's defaults.
///
/// ```
/// use std::time::Duration;
///
/// let config = weft_pg::Config::from_url("postgres://app:secret@127.0.0.1:5432/app")?
///     .max_size(16)
///     .min_idle(2)
///     .connection_timeout(Duration::from_secs(5))
///     .leak_detection_threshold(Duration::from_secs(10));
/// assert_eq!(config.get_max_size(), 16);
/// # Ok::<(), weft_pg::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) pg: PgConfig,
    pub(crate) tls: crate::TlsOptions,
    pub(crate) pool_name: String,
    pub(crate) max_size: usize,
    pub(crate) min_idle: Option<usize>,
    pub(crate) connection_timeout: Duration,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) max_lifetime: Option<Duration>,
    pub(crate) validation_timeout: Duration,
    pub(crate) alive_bypass_window: Duration,
    pub(crate) leak_detection_threshold: Option<Duration>,
    pub(crate) housekeeping_period: Duration,
    pub(crate) connection_test_query: Option<String>,
    pub(crate) connection_init_sql: Option<String>,
    pub(crate) fail_fast: bool,
    pub(crate) fail_fast_when_down: bool,
}

impl Config {
    /// Settings for the server described by `pg` (host or Unix socket
    /// directory, port, user, password, dbname, application_name, …), with
    /// every pool knob at its default.
    pub fn new(pg: PgConfig) -> Config {
        let tls = crate::TlsOptions {
            mode: match pg.get_ssl_mode() {
                tokio_postgres::config::SslMode::Disable => crate::SslMode::Disable,
                tokio_postgres::config::SslMode::Require => crate::SslMode::Require,
                _ => crate::SslMode::Prefer,
            },
            root_cert: None,
        };
        Config {
            pg,
            tls,
            pool_name: "weft-pg".into(),
            max_size: 10,
            min_idle: None,
            connection_timeout: Duration::from_secs(30),
            idle_timeout: Some(Duration::from_secs(600)),
            max_lifetime: Some(Duration::from_secs(1800)),
            validation_timeout: Duration::from_secs(5),
            alive_bypass_window: Duration::from_millis(500),
            leak_detection_threshold: None,
            housekeeping_period: Duration::from_secs(30),
            connection_test_query: None,
            connection_init_sql: None,
            fail_fast: true,
            fail_fast_when_down: true,
        }
    }

    /// Settings from a URL (`postgres://user:pass@host:port/db?options`)
    /// or a libpq key=value string (`host=/run/pg port=5432 user=app`),
    /// including `sslmode` (`disable` … `verify-full`) and `sslrootcert`
    /// (see [`tls`](crate::tls)).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if it does not parse.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = weft_pg::Config::from_url("postgres://app:secret@db.internal:5433/orders")?;
    /// assert_eq!(config.get_max_size(), 10); // HikariCP's default pool size
    ///
    /// let err = weft_pg::Config::from_url("postgres://app@db:notaport/orders").unwrap_err();
    /// assert!(matches!(err, weft_pg::Error::Config(_)), "{err}");
    /// # Ok::<(), weft_pg::Error>(())
    /// ```
    pub fn from_url(url: &str) -> Result<Config> {
        let (rest, tls) = crate::tls::split_options(url)?;
        let pg: PgConfig = rest.parse().map_err(|e| Error::Config(format!("{e}")))?;
        let mut c = Config::new(pg);
        c.tls = tls;
        Ok(c)
    }

    /// Sets `sslmode` (see [`tls`](crate::tls)).
    pub fn ssl_mode(mut self, mode: crate::SslMode) -> Config {
        self.tls.mode = mode;
        self
    }

    /// Sets `sslrootcert`: a PEM file of trusted roots, or `system`.
    pub fn ssl_root_cert(mut self, path: impl Into<std::path::PathBuf>) -> Config {
        self.tls.root_cert = Some(path.into());
        self
    }

    /// The TLS settings.
    pub fn get_tls(&self) -> &crate::TlsOptions {
        &self.tls
    }

    /// The server settings, to adjust them (e.g. `application_name`).
    pub fn pg_mut(&mut self) -> &mut PgConfig {
        &mut self.pg
    }

    /// The server settings.
    pub fn pg(&self) -> &PgConfig {
        &self.pg
    }

    /// `poolName`: names the pool in logs, errors and thread names.
    /// Default `"weft-pg"`.
    #[must_use]
    pub fn pool_name(mut self, name: impl Into<String>) -> Config {
        self.pool_name = name.into();
        self
    }

    /// `maximumPoolSize`: the most connections, idle and in use together.
    /// Default 10.
    #[must_use]
    pub fn max_size(mut self, n: usize) -> Config {
        self.max_size = n;
        self
    }

    /// The configured `max_size`.
    pub fn get_max_size(&self) -> usize {
        self.max_size
    }

    /// `minimumIdle`: the pool keeps at least this many idle connections
    /// (while under `max_size`), opening them in the background. Default:
    /// equal to `max_size` (a fixed-size pool, HikariCP's recommendation).
    #[must_use]
    pub fn min_idle(mut self, n: usize) -> Config {
        self.min_idle = Some(n);
        self
    }

    /// `connectionTimeout`: the longest `get()` waits for a connection
    /// before failing with [`Error::Timeout`]. Default 30 s.
    #[must_use]
    pub fn connection_timeout(mut self, d: Duration) -> Config {
        self.connection_timeout = d;
        self
    }

    /// `idleTimeout`: an idle connection is closed after this long unused,
    /// while more than `min_idle` connections are open. `None`: never.
    /// Default 10 min. Only matters when `min_idle < max_size`.
    #[must_use]
    pub fn idle_timeout(mut self, d: Option<Duration>) -> Config {
        self.idle_timeout = d;
        self
    }

    /// `maxLifetime`: a connection is retired this long after it was
    /// opened (minus up to 2.5% random variation, so they do not all go at
    /// once): closed when idle, or when returned if in use. `None`: never.
    /// Default 30 min.
    #[must_use]
    pub fn max_lifetime(mut self, d: Option<Duration>) -> Config {
        self.max_lifetime = d;
        self
    }

    /// `validationTimeout`: the longest a validation round trip may take.
    /// Default 5 s.
    #[must_use]
    pub fn validation_timeout(mut self, d: Duration) -> Config {
        self.validation_timeout = d;
        self
    }

    /// HikariCP's `aliveBypassWindowMs`: a connection idle for longer than
    /// this is validated before it is handed out. Default 500 ms;
    /// `Duration::ZERO` validates every checkout.
    #[must_use]
    pub fn alive_bypass_window(mut self, d: Duration) -> Config {
        self.alive_bypass_window = d;
        self
    }

    /// `leakDetectionThreshold`: a connection held out of the pool longer
    /// than this logs one warning (`tracing`, target `weft_pg::leak`)
    /// naming the holder's thread and where it took the connection (file
    /// and line of the `get()` call, and a backtrace). Off by default.
    #[must_use]
    pub fn leak_detection_threshold(mut self, d: Duration) -> Config {
        self.leak_detection_threshold = Some(d);
        self
    }

    /// How often the housekeeper retires idle and expired connections and
    /// tops the pool up to `min_idle` (HikariCP's
    /// `com.zaxxer.hikari.housekeeping.periodMs`). Default 30 s.
    #[must_use]
    pub fn housekeeping_period(mut self, d: Duration) -> Config {
        self.housekeeping_period = d;
        self
    }

    /// `connectionTestQuery`: SQL for validation instead of a protocol
    /// `Sync` round trip (the default, the cheapest check there is).
    #[must_use]
    pub fn connection_test_query(mut self, sql: impl Into<String>) -> Config {
        self.connection_test_query = Some(sql.into());
        self
    }

    /// `connectionInitSql`: run on every new connection before it is used
    /// (e.g. `SET statement_timeout = '5s'`).
    #[must_use]
    pub fn connection_init_sql(mut self, sql: impl Into<String>) -> Config {
        self.connection_init_sql = Some(sql.into());
        self
    }

    /// HikariCP's `initializationFailTimeout` as a switch: when `true`
    /// (default), [`Pool::new`](crate::Pool::new) opens one connection and
    /// fails if it cannot; when `false` the pool starts empty and fills in
    /// the background.
    #[must_use]
    pub fn fail_fast(mut self, on: bool) -> Config {
        self.fail_fast = on;
        self
    }

    /// What a checkout does while the server cannot be reached. When
    /// `true` (default), a pool whose last attempt to open a connection
    /// failed (the server refused, was unreachable or is starting up:
    /// errors worth retrying) answers a checkout that needs a new
    /// connection at once with [`Error::ServerDown`] (the last connection
    /// error, how many attempts failed and for how long), instead of
    /// retrying for the whole `connection_timeout`; idle connections are
    /// still handed out. The pool keeps trying in the background, with
    /// backoff (from 20 ms, doubling, up to `housekeeping_period` or
    /// 500 ms, whichever is shorter), and the first connection that opens
    /// ends the outage. When `false`, each checkout retries itself until
    /// its `connection_timeout`, as HikariCP does.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// // Nothing listens on port 1; the pool starts empty.
    /// let config = weft_pg::Config::from_url("postgres://app@127.0.0.1:1/app")?
    ///     .fail_fast(false)
    ///     .connection_timeout(Duration::from_secs(3600));
    /// let pool = weft_pg::Pool::new(config)?;
    /// // Fails after one refused attempt, not after an hour.
    /// let err = pool.get().unwrap_err();
    /// assert!(matches!(err, weft_pg::Error::ServerDown(_)), "{err}");
    /// # Ok::<(), weft_pg::Error>(())
    /// ```
    #[must_use]
    pub fn fail_fast_when_down(mut self, on: bool) -> Config {
        self.fail_fast_when_down = on;
        self
    }

    pub(crate) fn effective_min_idle(&self) -> usize {
        self.min_idle.unwrap_or(self.max_size).min(self.max_size)
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.max_size == 0 {
            return Err(Error::Config("max_size must be at least 1".into()));
        }
        if self.connection_timeout.is_zero() {
            return Err(Error::Config("connection_timeout must be positive".into()));
        }
        if self.validation_timeout.is_zero() {
            return Err(Error::Config("validation_timeout must be positive".into()));
        }
        if self.housekeeping_period.is_zero() {
            return Err(Error::Config("housekeeping_period must be positive".into()));
        }
        if self.pg.get_hosts().is_empty() {
            return Err(Error::Config("no host given".into()));
        }
        Ok(())
    }
}
