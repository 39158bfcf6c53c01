//! `weft-load`: an HTTP load generator on weft virtual threads.
//!
//! ```text
//! weft-load -c 50 -d 10s http://127.0.0.1:8080/hello          # closed model
//! weft-load -c 100 -R 2000 -d 30s --warmup 5s http://…/        # open model (wrk2-style)
//! weft-load -n 10000 -m POST -H 'Content-Type: application/json' -b '{"a":1}' http://…/
//! weft-load --json -c 10 -d 5s http://…/ > report.json
//! weft-load --insecure -c 100 -d 10s https://127.0.0.1:8443/   # self-signed test server
//! ```

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use weft_load::{Config, parse_duration};

/// HTTP load generator: one weft virtual thread per simulated user, HDR
/// latency histograms, closed (-c) or open (-R) model.
#[derive(Parser, Debug)]
#[command(name = "weft-load", version)]
struct Cli {
    /// Target URL (http://host:port/path or https://…).
    url: String,
    /// https: accept any certificate (self-signed test servers).
    #[arg(short = 'k', long)]
    insecure: bool,
    /// Concurrent users (connections), one virtual thread each.
    #[arg(short = 'c', long = "connections", default_value_t = 10)]
    concurrency: usize,
    /// Total measured requests.
    #[arg(short = 'n', long)]
    requests: Option<u64>,
    /// Measured duration (10s, 500ms, 2m). Default 10s unless -n is given.
    #[arg(short = 'd', long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Open model: target rate in requests per second (latency from the
    /// intended start time, coordinated-omission corrected).
    #[arg(short = 'R', long)]
    rate: Option<f64>,
    /// Request method.
    #[arg(short = 'm', long, default_value = "GET")]
    method: String,
    /// Request header "Name: value" (repeatable).
    #[arg(short = 'H', long = "header")]
    headers: Vec<String>,
    /// Request body; @path reads it from a file.
    #[arg(short = 'b', long)]
    body: Option<String>,
    /// Connect and per-read/write timeout.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    timeout: Duration,
    /// Send requests for this long before measuring.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    warmup: Duration,
    /// Closed model: start the users spread evenly over this time.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    ramp_up: Duration,
    /// Open a new connection for every request.
    #[arg(long)]
    no_keepalive: bool,
    /// Carrier threads for the users (default: one per CPU).
    #[arg(long)]
    threads: Option<usize>,
    /// Row name in the table.
    #[arg(long)]
    name: Option<String>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// No progress line.
    #[arg(short = 'q', long)]
    quiet: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("weft-load: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut headers = Vec::new();
    for h in &cli.headers {
        let (n, v) = h
            .split_once(':')
            .ok_or_else(|| format!("header {h:?} is not 'Name: value'"))?;
        headers.push((n.trim().to_owned(), v.trim().to_owned()));
    }
    let body = match &cli.body {
        None => Vec::new(),
        Some(b) => match b.strip_prefix('@') {
            Some(path) => std::fs::read(path).map_err(|e| format!("reading body {path}: {e}"))?,
            None => b.clone().into_bytes(),
        },
    };
    let runtime = match cli.threads {
        Some(n) => Some(weft::Runtime::builder().parallelism(n).build()?),
        None => None,
    };
    let config = Config {
        url: cli.url,
        insecure: cli.insecure,
        method: cli.method,
        headers,
        body,
        concurrency: cli.concurrency,
        requests: cli.requests,
        duration: cli.duration,
        rate: cli.rate,
        timeout: cli.timeout,
        warmup: cli.warmup,
        ramp_up: cli.ramp_up,
        keep_alive: !cli.no_keepalive,
        name: cli.name,
        runtime,
        progress: !cli.quiet && !cli.json,
    };
    let report = weft_load::run(&config)?;
    if cli.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.table());
    }
    Ok(
        if report.requests > 0 && report.failures == report.requests {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}
