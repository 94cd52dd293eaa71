//! Partitioned outputs, exactly once: `cairn job run --partition-by`
//! killed with SIGKILL at random instants and resumed, a unit killed
//! after writing some of its partitions (the failpoint
//! `unit-after-partition-file`, inside the executor's own write path),
//! JSON-lines output, and the refusals. The input is written and the
//! output read back by pyarrow alone (scripts/partition_oracle.py: its
//! hive-partitioned dataset reader), so the layout, the escaping of
//! partition values ('/', '=', '%', spaces, non-ASCII, empty, null) and
//! exactly-once are judged by a reader that is not cairn's. The S3
//! variants are `#[ignore]`d so a run without servers shows them as
//! ignored; scripts/test.sh runs them with the servers.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_conformance::tools_python;
use common::place::{Place, text};

/// The partition columns of every job here: text with awkward values,
/// then an integer.
const PARTITION_BY: &str = "source,bucket";

/// The oracle's answer.
#[derive(Debug, serde::Deserialize)]
struct Report {
    input_rows: u64,
    output_rows: u64,
    missing: u64,
    duplicated: u64,
    misplaced: u64,
    unknown: u64,
}

/// scripts/partition_oracle.py with `args`, the S3 server's settings in
/// its environment when `place` is on S3.
fn oracle(place: &Place, python: &str, args: &[&str]) -> String {
    let script = format!(
        "{}/../../scripts/partition_oracle.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut command = Command::new(python);
    command.arg(script).args(args);
    if let Some(s3) = &place.s3 {
        command
            .env("ORACLE_S3_ENDPOINT", &s3.endpoint)
            .env("ORACLE_S3_KEY", &s3.key)
            .env("ORACLE_S3_SECRET", &s3.secret);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "oracle {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Every input row once in `output`, under its own partition values, read
/// by pyarrow's hive-partitioned reader.
fn assert_exactly_once(place: &Place, python: &str, output: &str, format: &str) {
    let (input, output) = (place.url("in"), place.url(output));
    let answer = oracle(place, python, &["check", &input, &output, format]);
    let report: Report = serde_json::from_str(answer.trim()).unwrap();
    assert!(
        report.input_rows > 0
            && report.output_rows == report.input_rows
            && (
                report.missing,
                report.duplicated,
                report.misplaced,
                report.unknown
            ) == (0, 0, 0, 0),
        "{output} is not exactly once by pyarrow's partitioned reader: {report:?}"
    );
}

/// `cairn job run` of the input into `output` partitioned by
/// [`PARTITION_BY`]: 2 workers, a unit every `unit_rows` rows, plus `extra`.
fn run_args(
    place: &Place,
    output: &str,
    ckpt: &str,
    unit_rows: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = [
        "job",
        "run",
        "--input",
        &place.url("in"),
        "--output",
        &place.url(output),
        "--checkpoint",
        &place.url(ckpt),
        "--id-column",
        "uid",
        "--partition-by",
        PARTITION_BY,
        "--workers",
        "2",
        "--batch-size",
        "250",
        "--commit-every-rows",
        unit_rows,
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Whether a run that ended on its own was refused only because an earlier
/// run had finished the job (and removed its checkpoint): this one is then
/// a fresh run into a full output.
fn refused_as_finished(out: &std::process::Output) -> bool {
    let said = text(out);
    said.contains("already holds files") && said.contains("no checkpoint to resume")
}

/// Starts the job `kills` times and SIGKILLs it at a random instant each
/// time; returns how many kills landed mid-run, and whether a run was seen
/// to have finished the job.
fn kill_repeatedly(
    place: &Place,
    args: &[String],
    kills: usize,
    max_delay_ms: u64,
) -> (usize, bool) {
    let mut seed = std::env::var("CAIRN_JOB_KILL9_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9A27_1710u64);
    eprintln!("partitioned kill -9 seed: {seed} (replay with CAIRN_JOB_KILL9_SEED={seed})");
    let mut landed = 0;
    for _ in 0..kills {
        let mut child = place
            .cairn(&strs(args))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let delay =
            Duration::from_millis(50 + cairn_conformance::splitmix64(&mut seed) % max_delay_ms);
        let started = Instant::now();
        while started.elapsed() < delay && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(2));
        }
        if let Some(status) = child.try_wait().unwrap() {
            if !status.success() {
                // The only expected refusal: a killed run had finished.
                let again = place.cairn(&strs(args)).output().unwrap();
                assert!(
                    refused_as_finished(&again),
                    "a run ended on its own and failed: {status}: {}",
                    text(&again)
                );
            }
            return (landed, true);
        }
        // SIGKILL: no clean-up of any kind in the child.
        child.kill().unwrap();
        child.wait().unwrap();
        landed += 1;
    }
    (landed, false)
}

fn kill9_and_resume(place: &Place, rows: usize, kills: usize, max_delay_ms: u64) {
    let Some(python) = tools_python("partitioned kill -9") else {
        return;
    };
    oracle(
        place,
        &python,
        &["make", &place.url("in"), &rows.to_string(), "4"],
    );
    let args = run_args(place, "out", "ckpt", "500", &["--max-open-files", "8"]);
    let (landed, finished) = kill_repeatedly(place, &args, kills, max_delay_ms);
    if !finished {
        let last = place.cairn(&strs(&args)).output().unwrap();
        // A killed run may have finished the job just before its kill.
        assert!(
            last.status.success() || refused_as_finished(&last),
            "the final run failed: {}",
            text(&last)
        );
        eprintln!("final run: {}", text(&last));
    }
    eprintln!("kills landed mid-run: {landed}/{kills}");
    assert!(
        landed * 3 >= kills * 2,
        "the job ended before most kills ({landed}/{kills}): make it slower"
    );
    assert!(
        !place.exists("ckpt"),
        "the checkpoint is removed at the end"
    );
    assert_exactly_once(place, &python, "out", "parquet");
    // cairn's own check reads the partitioned output too.
    let verified = place.ok(&[
        "job",
        "verify",
        "--input",
        &place.url("in"),
        "--output",
        &place.url("out"),
        "--id-column",
        "uid",
    ]);
    assert!(verified.contains("exactly once:"), "{verified}");
}

#[test]
fn a_partitioned_job_killed_at_random_ends_exactly_once_on_local_disk() {
    kill9_and_resume(&Place::local(), 40_000, 10, 300);
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn a_partitioned_job_killed_at_random_ends_exactly_once_on_garage() {
    kill9_and_resume(&Place::s3("GARAGE", "partitioned-kill9"), 60_000, 8, 900);
}

/// Every file under `output` (recursively) whose name starts with `unit`.
fn files_of(place: &Place, output: &str, unit: &str) -> Vec<String> {
    let listed = place.ok(&["find", &place.url(output)]);
    listed
        .lines()
        .filter(|line| {
            let base = line.rsplit('/').next().unwrap_or(line);
            base.starts_with(unit)
        })
        .map(str::to_string)
        .collect()
}

/// A unit killed after writing some of its partition files leaves nothing
/// behind once recovered; the resume is exactly once.
fn half_written_unit_is_rolled_back(place: &Place, format: &str) {
    let Some(python) = tools_python("half-written partitioned unit") else {
        return;
    };
    oracle(place, &python, &["make", &place.url("in"), "6000", "2"]);
    let extra = ["--output-format", format, "--max-open-files", "1"];
    let mut args = run_args(place, "out", "ckpt", "1500", &extra);
    // One worker, so the crash finds the other units committed or unborn.
    let workers = args.iter().position(|a| a == "--workers").unwrap();
    args[workers + 1] = "1".into();
    // Passes 40 partition files (the first unit's, and some of the
    // second's), then aborts inside the second unit.
    place.crash(&strs(&args), "unit-after-partition-file=40*off->return");
    let status = place.status("ckpt");
    assert_eq!(status["committed_units"], 1, "{status}");
    assert_eq!(status["uncommitted_pending_units"], 1, "{status}");
    let pending = status["pending_units"][0].as_str().unwrap().to_string();
    let left = files_of(place, "out", &pending);
    assert!(
        left.len() >= 2,
        "the killed unit wrote some partitions first: {left:?}"
    );
    // Recovery alone (the lease, then the roll-back), as a resume runs it.
    let gc = place.ok(&[
        "ckpt",
        "gc",
        &place.url("ckpt"),
        "--output",
        &place.url("out"),
    ]);
    assert!(
        gc.contains(&format!(
            "rolled back 1 units ({} data files deleted)",
            left.len()
        )),
        "{gc}"
    );
    assert_eq!(files_of(place, "out", &pending), Vec::<String>::new());
    let resumed = place.ok(&strs(&args));
    assert!(
        resumed.contains("6000 rows") || resumed.contains("written"),
        "{resumed}"
    );
    assert_exactly_once(place, &python, "out", format);
}

#[test]
fn a_unit_killed_between_its_partitions_leaves_nothing_on_local_disk() {
    half_written_unit_is_rolled_back(&Place::local(), "parquet");
}

#[test]
fn json_lines_output_partitions_the_same_way_on_local_disk() {
    half_written_unit_is_rolled_back(&Place::local(), "json");
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn a_unit_killed_between_its_partitions_leaves_nothing_on_garage() {
    half_written_unit_is_rolled_back(&Place::s3("GARAGE", "partitioned-half"), "parquet");
}

/// What cannot be partitioned is refused before anything is written, and
/// a resume must partition as the job it resumes did.
#[test]
fn partitioning_misuse_is_refused_and_loses_nothing() {
    let place = Place::local();
    let Some(python) = tools_python("partitioning misuse") else {
        return;
    };
    oracle(&place, &python, &["make", &place.url("in"), "3000", "1"]);
    let refused = |extra: &[&str], partition_by: &str, expected: &str| {
        let mut args = run_args(&place, "bad-out", "bad-ckpt", "1000", extra);
        let at = args.iter().position(|a| a == PARTITION_BY).unwrap();
        args[at] = partition_by.to_string();
        let out = place.cairn(&strs(&args)).output().unwrap();
        assert!(!out.status.success(), "{partition_by}: {}", text(&out));
        assert!(
            text(&out).contains(expected),
            "{partition_by}: {}",
            text(&out)
        );
        assert!(!place.exists("bad-out"), "{partition_by}: nothing written");
    };
    refused(&[], "uid", "cannot be partitioned by the ID column");
    refused(&[], "nope", "no partition column \"nope\"");
    refused(&[], "_hidden", "hidden");
    refused(&[], "source,source", "named twice");

    // A job partitioned by source,bucket, crashed, then resumed flat (or
    // otherwise partitioned): refused, nothing lost; then resumed right.
    let args = run_args(&place, "out", "ckpt", "1000", &[]);
    place.crash(&strs(&args), "unit-after-commit=1*off->return");
    for other in ["bucket", ""] {
        let mut wrong = args.clone();
        let at = wrong.iter().position(|a| a == "--partition-by").unwrap();
        if other.is_empty() {
            wrong.drain(at..at + 2);
        } else {
            wrong[at + 1] = other.into();
        }
        let out = place.cairn(&strs(&wrong)).output().unwrap();
        assert!(!out.status.success(), "{other:?}: {}", text(&out));
        assert!(
            text(&out).contains("partition columns"),
            "{other:?}: {}",
            text(&out)
        );
    }
    place.ok(&strs(&args));
    assert_exactly_once(&place, &python, "out", "parquet");
}

/// A first run killed inside its first unit, after some partition files:
/// the partition directories it made stay on local disk (empty once
/// rolled back), and the next run resumes instead of taking them for
/// another job's output.
#[test]
fn a_run_killed_before_its_first_commit_resumes_on_local_disk() {
    let place = Place::local();
    let Some(python) = tools_python("partitioned, killed before the first commit") else {
        return;
    };
    oracle(&place, &python, &["make", &place.url("in"), "3000", "1"]);
    let args = run_args(&place, "out", "ckpt", "1000", &["--max-open-files", "1"]);
    place.crash(&strs(&args), "unit-after-partition-file=3*off->return");
    let status = place.status("ckpt");
    assert_eq!(status["committed_units"], 0, "{status}");
    assert!(
        status["uncommitted_pending_units"].as_u64().unwrap() >= 1,
        "{status}"
    );
    let resumed = place.ok(&strs(&args));
    assert!(resumed.contains("rolled back"), "{resumed}");
    assert_exactly_once(&place, &python, "out", "parquet");
}
