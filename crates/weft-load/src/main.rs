//! `weft-load`: an HTTP load generator on weft virtual threads.
//!
//! ```text
//! weft-load -c 50 -d 10s http://127.0.0.1:8080/hello          # closed model
//! weft-load -c 100 -R 2000 -d 30s --warmup 5s http://…/        # open model (wrk2-style)
//! weft-load -n 10000 -m POST -H 'Content-Type: application/json' -b '{"a":1}' http://…/
//! weft-load --json -c 10 -d 5s http://…/ > report.json
//! weft-load --json=a.json --html=a.html -c 10 -d 5s http://…/    # table, JSON and HTML
//! weft-load --insecure -c 100 -d 10s https://127.0.0.1:8443/   # self-signed test server
//! weft-load merge a.json b.json --json merged.json --html report.html
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use weft_load::{Align, Config, MergeOptions, Report, parse_duration};

/// HTTP load generator: one weft virtual thread per simulated user, HDR
/// latency histograms, closed (-c) or open (-R) model. `weft-load merge`
/// merges the JSON reports of several runs (agents).
#[derive(Parser, Debug)]
#[command(
    name = "weft-load",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Merge the JSON reports of runs (one per agent): latency histograms
    /// added (exact percentiles of all requests), counts summed, time
    /// series aligned. Prints the table; writes JSON and HTML on request.
    Merge(MergeArgs),
}

#[derive(Args, Debug)]
struct MergeArgs {
    /// JSON reports written by `weft-load --json`.
    #[arg(required = true, value_name = "REPORT.json")]
    files: Vec<PathBuf>,
    /// Write the merged report as JSON to FILE (`-`: standard output,
    /// instead of the table).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write an HTML report (self-contained) to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Line up the series by wall clock (`wall`: agents that ran at the
    /// same time) or by offset from each run's start (`offset`).
    #[arg(long, default_value = "wall")]
    align: Align,
    /// Largest decompressed histogram accepted in a report, bytes.
    #[arg(long, default_value_t = weft_load::DEFAULT_MAX_HISTOGRAM_BYTES)]
    max_histogram_bytes: usize,
    /// Most intervals the merged series may have.
    #[arg(long, default_value_t = MergeOptions::default().max_intervals)]
    max_intervals: usize,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Target URL (http://host:port/path or https://…).
    #[arg(required = true)]
    url: Option<String>,
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
    /// Print the report as JSON instead of a table; `--json=FILE` writes
    /// it to FILE and prints the table. The JSON carries the latency
    /// histogram and the per-interval series: `weft-load merge` reads it.
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "-")]
    json: Option<PathBuf>,
    /// Write an HTML report (self-contained) to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Length of an interval of the time series (each with its own
    /// latency histogram).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    interval: Duration,
    /// No progress line.
    #[arg(short = 'q', long)]
    quiet: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Merge(args)) => merge(args),
        None => run(cli.run),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("weft-load: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: RunArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
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
    let to_stdout = cli.json.as_deref() == Some(Path::new("-"));
    let config = Config {
        url: cli.url.unwrap_or_default(),
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
        progress: !cli.quiet && !to_stdout,
        interval: cli.interval,
    };
    let report = weft_load::run(&config)?;
    write_outputs(&report, cli.json.as_deref(), cli.html.as_deref())?;
    Ok(
        if report.requests > 0 && report.failures == report.requests {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}

fn merge(args: MergeArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut reports = Vec::with_capacity(args.files.len());
    for path in &args.files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let report = Report::from_json_with_limit(&text, args.max_histogram_bytes)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        reports.push(report);
    }
    let options = MergeOptions {
        align: args.align,
        max_intervals: args.max_intervals,
    };
    let merged = weft_load::merge(&reports, &options)?;
    write_outputs(&merged, args.json.as_deref(), args.html.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

/// The table (unless the JSON goes to standard output), the JSON and the
/// HTML report.
fn write_outputs(
    report: &Report,
    json: Option<&Path>,
    html: Option<&Path>,
) -> Result<(), Box<dyn std::error::Error>> {
    match json {
        Some(p) if p == Path::new("-") => println!("{}", report.to_json()),
        Some(p) => {
            print!("{}", report.table());
            write(p, &(report.to_json() + "\n"))?;
        }
        None => print!("{}", report.table()),
    }
    if let Some(p) = html {
        write(p, &report.to_html())?;
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}
