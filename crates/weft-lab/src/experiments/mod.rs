//! The lab's experiments (E1–E8), one module each, the [`Experiment`]
//! list, and what the experiments share ([`common`]).

pub mod common;
pub mod e1;
pub mod e2;
pub mod e3;
pub mod e4;
pub mod e5;
pub mod e6;
pub mod e7;
pub mod e8;

use clap::ValueEnum;
use serde::Serialize;

use crate::progress::Progress;
use crate::report::Row;

pub use common::Options;

/// An experiment the lab can run (E1–E8, as in the report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
pub enum Experiment {
    /// 100 tasks × `sleep(1 s)`: fixed pool of 10 vs a virtual thread per task.
    #[value(name = "E1")]
    E1,
    /// One worker thread vs one carrier, 100 users, 1 s handler.
    #[value(name = "E2")]
    E2,
    /// 296 users, 200 platform threads vs virtual, 1 s and instant handler.
    #[value(name = "E3")]
    E3,
    /// A 1 s blocking endpoint, 800 users, 100 platform threads vs virtual.
    #[value(name = "E4")]
    E4,
    /// A long database query through a pool of 100 connections.
    #[value(name = "E5")]
    E5,
    /// Two downstream calls of 100 ms and a database write per request.
    #[value(name = "E6")]
    E6,
    /// Pinning: a driver holding a `std::sync::Mutex` across a blocking call.
    #[value(name = "E7")]
    E7,
    /// E6's shape built from unchanged blocking crates (`ureq`, `redis`)
    /// with the `transparent` feature: one switch.
    #[value(name = "E8")]
    E8,
}

impl Experiment {
    /// Every experiment, in the order `weft-lab` runs them.
    pub const ALL: &'static [Experiment] = &[
        Experiment::E1,
        Experiment::E2,
        Experiment::E3,
        Experiment::E4,
        Experiment::E5,
        Experiment::E6,
        Experiment::E7,
        Experiment::E8,
    ];

    /// The short id used on the command line and in the report (`"E1"`).
    pub fn id(self) -> &'static str {
        match self {
            Experiment::E1 => "E1",
            Experiment::E2 => "E2",
            Experiment::E3 => "E3",
            Experiment::E4 => "E4",
            Experiment::E5 => "E5",
            Experiment::E6 => "E6",
            Experiment::E7 => "E7",
            Experiment::E8 => "E8",
        }
    }

    /// A one-line description.
    pub fn title(self) -> &'static str {
        match self {
            Experiment::E1 => {
                "100 tasks x sleep(1 s): fixed pool of 10 vs a virtual thread per task"
            }
            Experiment::E2 => "HTTP, 1 worker thread vs 1 carrier, 100 users, handler sleeps 1 s",
            Experiment::E3 => {
                "HTTP, 296 users, 200 platform threads vs virtual: sleep 1 s / instant"
            }
            Experiment::E4 => "HTTP, a 1 s blocking endpoint, 800 users, 100 platform threads",
            Experiment::E5 => "HTTP + PostgreSQL, SELECT pg_sleep(0.5) through a pool of 100",
            Experiment::E6 => "HTTP, 2 downstream calls of 100 ms + a database write per request",
            Experiment::E7 => {
                "pinning: a driver lock (std vs weft Mutex; std with transparent) held across a 20 ms block"
            }
            Experiment::E8 => {
                "one switch, unchanged crates: E6 with ureq + redis over std::net, transparent on"
            }
        }
    }

    /// Runs the experiment; `progress` gets one step per configuration.
    pub fn run(self, options: &Options, progress: &Progress) -> Result<Vec<Row>, String> {
        match self {
            Experiment::E1 => Ok(e1::run(options, progress)),
            Experiment::E2 => Ok(e2::run(options, progress)),
            Experiment::E3 => Ok(e3::run(options, progress)),
            Experiment::E4 => Ok(e4::run(options, progress)),
            Experiment::E5 => e5::run(options, progress),
            Experiment::E6 => Ok(e6::run(options, progress)),
            Experiment::E7 => Ok(e7::run(options, progress)),
            Experiment::E8 => e8::run(options, progress),
        }
    }

    /// How many configurations (progress steps) the experiment measures.
    pub fn steps(self, options: &Options) -> u64 {
        match self {
            Experiment::E1 => 3 + u64::from(options.big),
            Experiment::E2 | Experiment::E4 | Experiment::E5 | Experiment::E6 | Experiment::E8 => 2,
            Experiment::E3 => 4,
            Experiment::E7 => 4,
        }
    }
}
