//! `weft-load`: an HTTP load generator on weft virtual threads.
//!
//! ```text
//! weft-load -c 50 -d 10s http://127.0.0.1:8080/hello          # closed model
//! weft-load -c 100 -R 2000 -d 30s --warmup 5s http://…/        # open model (wrk2-style)
//! weft-load -n 10000 -m POST -H 'Content-Type: application/json' -b '{"a":1}' http://…/
//! weft-load --json -c 10 -d 5s http://…/ > report.json
//! weft-load --json a.json --html a.html -c 10 -d 5s http://…/    # table, JSON and HTML
//! weft-load --insecure -c 100 -d 10s https://127.0.0.1:8443/   # self-signed test server
//! weft-load merge a.json b.json --json merged.json --html report.html
//! ```

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use weft_load::{Align, Config, MergeOptions, Report, parse_duration};

/// The help of `--json`, one text for both commands so that they read
/// alike; a run adds what its `--json` alone does.
macro_rules! json_help {
    ($alone:literal) => {
        concat!(
            "Write the report as JSON to FILE (`--json FILE` or `--json=FILE`; `-`: standard ",
            "output, instead of the table",
            $alone,
            "). The JSON carries the latency histogram and the per-interval series: ",
            "`weft-load merge` reads it"
        )
    };
}

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
    #[arg(long, value_name = "FILE", help = json_help!(""))]
    json: Option<PathBuf>,
    #[arg(long, value_name = "FILE", help = HTML_HELP)]
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
    /// Largest report file accepted, bytes (a report holds about 1 KB per
    /// interval).
    #[arg(long, default_value_t = DEFAULT_MAX_REPORT_BYTES)]
    max_report_bytes: u64,
    /// Merge even when a run is in two of the reports (one file given
    /// twice, a copy, a merged report beside one of its runs): its
    /// requests then count twice.
    #[arg(long)]
    allow_duplicates: bool,
    /// With `--align wall`, merge even when a run overlaps no other in
    /// time (the merged throughput then counts the time between them).
    #[arg(long)]
    allow_disjoint: bool,
}

/// `--html` of both commands.
const HTML_HELP: &str = "Write an HTML report (self-contained) to FILE";

/// Largest report `merge` reads by default: 1 GiB, a million intervals.
const DEFAULT_MAX_REPORT_BYTES: u64 = 1 << 30;

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
    #[arg(long, value_name = "FILE", help = json_help!("; so is `--json` alone, before an option or the URL"))]
    #[arg(num_args = 0..=1, require_equals = true, default_missing_value = "-")]
    json: Option<PathBuf>,
    #[arg(long, value_name = "FILE", help = HTML_HELP)]
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
    let cli = Cli::parse_from(json_value_joined(std::env::args_os().collect()));
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

/// `--json FILE` of a run, given to clap as `--json=FILE`. A run's
/// `--json` may stand alone (the report on standard output), so clap takes
/// its value only after `=`, and the next word would be the URL; it is
/// FILE here unless it is an option or the URL (has `://`). `merge`'s
/// `--json` always takes a value, so its arguments are left as they are.
fn json_value_joined(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.get(1).is_some_and(|a| a == "merge") {
        return args;
    }
    let mut i = 1;
    while i + 1 < args.len() {
        if args[i] == "--" {
            break;
        }
        let next = args[i + 1].to_string_lossy();
        let is_file = next == "-" || !(next.starts_with('-') || next.contains("://"));
        if args[i] == "--json" && is_file {
            let mut joined = OsString::from("--json=");
            joined.push(args.remove(i + 1));
            args[i] = joined;
        }
        i += 1;
    }
    args
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
    for (flag, out) in [("--json", &args.json), ("--html", &args.html)] {
        if let Some(out) = out
            && let Some(input) = args.files.iter().find(|f| same_file(f, out))
        {
            return Err(format!(
                "{flag} {} is {}, one of the reports to merge: it would be overwritten",
                out.display(),
                input.display()
            )
            .into());
        }
    }
    let mut reports = Vec::with_capacity(args.files.len());
    for path in &args.files {
        let text = read_report(path, args.max_report_bytes)?;
        let report = Report::from_json_with_limit(&text, args.max_histogram_bytes)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        reports.push(report);
    }
    let options = MergeOptions {
        align: args.align,
        max_intervals: args.max_intervals,
        names: args.files.iter().map(|f| f.display().to_string()).collect(),
        allow_duplicates: args.allow_duplicates,
        allow_disjoint: args.allow_disjoint,
    };
    let merged = weft_load::merge(&reports, &options)?;
    write_outputs(&merged, args.json.as_deref(), args.html.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

/// Whether `a` and `b` name one file (one that exists: `out` may not yet).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The text of a report file, refusing one over `max` bytes (or endless,
/// like `/dev/zero`) before it fills the memory.
fn read_report(path: &Path, max: u64) -> Result<String, String> {
    let reading = |e: std::io::Error| format!("reading {}: {e}", path.display());
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(reading)?
        .take(max.saturating_add(1))
        .read_to_string(&mut text)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => {
                format!(
                    "{}: not a weft-load report (not UTF-8 text)",
                    path.display()
                )
            }
            _ => reading(e),
        })?;
    if text.len() as u64 > max {
        return Err(format!(
            "{}: larger than {max} bytes (--max-report-bytes)",
            path.display()
        ));
    }
    Ok(text)
}

/// The table (unless the JSON goes to standard output), the JSON and the
/// HTML report.
fn write_outputs(
    report: &Report,
    json: Option<&Path>,
    html: Option<&Path>,
) -> Result<(), Box<dyn std::error::Error>> {
    match json {
        Some(p) if p == Path::new("-") => stdout(&(report.to_json() + "\n"))?,
        Some(p) => {
            stdout(&report.table())?;
            write(p, &(report.to_json() + "\n"))?;
        }
        None => stdout(&report.table())?,
    }
    if let Some(p) = html {
        write(p, &report.to_html())?;
    }
    Ok(())
}

/// Prints `text`: an error (not `print!`'s panic) when standard output is
/// closed, say by `| head`.
fn stdout(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| format!("writing to standard output: {e}"))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}
