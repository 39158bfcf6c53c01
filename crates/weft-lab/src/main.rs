//! `weft-lab`: runs the lab's experiments (E1–E8) and writes a report.
//! See the library documentation (`weft_lab`) for what each one does.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use weft_lab::experiments::{Experiment, Options};

/// Command line of `weft-lab`.
#[derive(Debug, Parser)]
#[command(name = "weft-lab", version, about, long_about = None)]
struct Cli {
    /// Experiments to run, e.g. `E1 E2` (default: all of them).
    #[arg(value_enum, ignore_case = true, value_name = "EXPERIMENT")]
    experiments: Vec<Experiment>,
    /// Short variants: all experiments in under 2 minutes.
    #[arg(long)]
    quick: bool,
    /// Largest variants: E1 with 1,000,000 virtual threads, E6 with 1,000
    /// requests per client.
    #[arg(long)]
    big: bool,
    /// Measured window of each HTTP configuration, e.g. `10s`, `500ms`.
    #[arg(long, value_parser = weft_load::parse_duration)]
    duration: Option<Duration>,
    /// Directory for `report.html` and `results.json` (default:
    /// `<target dir>/weft-lab`).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print `results.json` to stdout instead of the tables.
    #[arg(long)]
    json: bool,
    /// Also rewrite the tracked `docs/lab.md` (the page the README links
    /// to) with this run's results. Without it the run writes `lab.md`
    /// only into the output directory and leaves the checkout clean.
    #[arg(long)]
    update_docs: bool,
}

/// `docs/lab.md` of the workspace this binary was built from, if that
/// directory is still there.
fn docs_page() -> Option<PathBuf> {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let docs = std::fs::canonicalize(&docs).ok()?;
    docs.is_dir().then(|| docs.join("lab.md"))
}

/// Whether this run rewrites the tracked `docs/lab.md`: only when asked,
/// so that `cargo run --release` leaves `git status` clean.
fn updates_docs(cli: &Cli) -> bool {
    cli.update_docs
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let experiments = if cli.experiments.is_empty() {
        Experiment::ALL.to_vec()
    } else {
        cli.experiments.clone()
    };
    let options = Options {
        quick: cli.quick,
        big: cli.big,
        duration: cli.duration,
        out: cli
            .out
            .clone()
            .unwrap_or_else(weft_lab::report::default_output_dir),
    };
    let report = match weft_lab::run(&experiments, &options, cli.json) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "weft-lab: cannot write the report to {}: {e}",
                options.out.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let docs = if updates_docs(&cli) {
        match docs_page() {
            Some(path) => match std::fs::write(&path, weft_lab::report::markdown(&report)) {
                Ok(()) => Some(path),
                Err(e) => {
                    eprintln!("weft-lab: cannot write {}: {e}", path.display());
                    None
                }
            },
            None => {
                eprintln!(
                    "weft-lab: no docs/ directory beside the sources; docs/lab.md not written"
                );
                None
            }
        }
    } else {
        None
    };
    if cli.json {
        // The tables are not printed: say on screen what was skipped.
        for e in report.experiments.iter().filter(|e| e.skipped.is_some()) {
            eprintln!("weft-lab: {}", weft_lab::report::summary_line(e));
        }
        println!("{}", report.to_json());
    } else {
        println!("\nsummary (virtual req/s as a multiple of platform req/s):");
        for e in &report.experiments {
            println!("  {}", weft_lab::report::summary_line(e));
        }
        println!(
            "\nideal = Little's law (concurrency / service time); % ideal = req/s / ideal req/s."
        );
        if let Some(path) = &docs {
            println!("docs: {}", path.display());
        }
        println!(
            "report: {}, {} and {}",
            options.out.join("report.html").display(),
            options.out.join("lab.md").display(),
            options.out.join("results.json").display()
        );
        println!("total: {:.1} s", report.total_seconds);
    }
    let failed = report
        .experiments
        .iter()
        .flat_map(|e| &e.rows)
        .any(|r| r.error.is_some());
    if failed {
        eprintln!("weft-lab: some measurements failed (see the tables)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A default run leaves the checkout as it was: only `--update-docs`
    /// rewrites the tracked page.
    #[test]
    fn only_update_docs_rewrites_the_tracked_page() {
        assert!(!updates_docs(&Cli::parse_from(["weft-lab"])));
        assert!(updates_docs(&Cli::parse_from([
            "weft-lab",
            "--update-docs"
        ])));
    }
}
