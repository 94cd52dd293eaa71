//! What a plausible mistake or a stale run must never cost, on the real
//! `cairn job run`, on local disk and on Garage:
//!
//! - an input that is, contains or lies inside the output is refused in
//!   every `--mode` before anything is written (overwrite deleted it);
//! - a pending record and its data written late by a run that lost its
//!   lease (planted while the live run is stopped with SIGSTOP) are rolled
//!   back at clean-up, never left as duplicate rows;
//! - the completion marker of one job does not make another job on the same
//!   checkpoint path "done" with nothing written;
//! - numeric flags out of range are refused, not a panic.
//!
//! Every outcome is checked by an oracle that does not use cairn (the
//! parquet crate on local disk, pyarrow on S3). The Garage variants are
//! `#[ignore]`d so a run without servers shows them as ignored;
//! scripts/test.sh runs them with the servers.

mod common;

use std::time::{Duration, Instant};

use common::place::{Place, job_args, text};

/// The base names of the files under `name` (`cairn find`), sorted.
fn names(place: &Place, name: &str) -> Vec<String> {
    let out = place
        .cairn(&["find", &place.url(name), "--json"])
        .output()
        .unwrap();
    if !out.status.success() {
        return Vec::new();
    }
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut names: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let name = f["name"].as_str().unwrap();
            name.rsplit('/').next().unwrap().to_string()
        })
        .collect();
    names.sort();
    names
}

// ------------------------------------------------------- inputs untouched

/// Inputs overlapping the output are refused in every mode; the input's
/// files are all still there, unchanged, afterwards.
fn inputs_are_never_touched(place: &Place) {
    place.sample("d/in", 4_000, 2);
    let before = names(place, "d/in");
    assert_eq!(before.len(), 2, "{before:?}");
    let glob = place.url("d/in/*.parquet");
    let cases: [(String, &str); 5] = [
        (place.url("d/in"), "d"),
        (place.url("d/in"), "d/in"),
        (place.url("d/in"), "d/in/out"),
        (glob.clone(), "d"),
        (glob, "d/in/sub"),
    ];
    for (input, output) in &cases {
        for mode in ["error", "append", "overwrite"] {
            let label = format!("input {input} / output {output} / {mode}");
            let paths = [input.clone(), place.url(output), place.url("ckpt")];
            let out = place
                .cairn(&job_args(place, &paths, &["--mode", mode]))
                .output()
                .unwrap();
            let message = text(&out);
            assert!(
                !out.status.success() && message.contains("overlap"),
                "{label}: {message}"
            );
            assert!(
                message.contains(input.as_str()),
                "{label}: names the input: {message}"
            );
            assert_eq!(names(place, "d/in"), before, "{label}: the input changed");
            assert!(!place.exists("ckpt"), "{label}: a checkpoint was written");
        }
    }
    // The input is intact, row for row.
    let copy = [place.url("d/in"), place.url("copy"), place.url("ckpt")];
    place.ok(&job_args(place, &copy, &[]));
    place.assert_exactly_once("d/in", "copy");
}

#[test]
fn inputs_are_never_touched_on_local_disk() {
    inputs_are_never_touched(&Place::local());
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn inputs_are_never_touched_on_garage() {
    inputs_are_never_touched(&Place::s3("GARAGE", "inputs-untouched"));
}

// ------------------------------------------------------------ late writes

/// A unit name no live run uses (run `f…f`).
const STRAY: &str = "ffffffffffffffffffffffffffffffff_0000000000";

/// While a run is stopped (SIGSTOP), a pending record and its data file
/// appear for a unit no live run will commit: what an earlier run's delayed
/// requests leave. The run goes on, and its clean-up must roll that data
/// back: the output holds every input row once.
fn late_writes_are_rolled_back(place: &Place) {
    place.sample("in", 20_000, 4);
    let paths = [place.url("in"), place.url("out"), place.url("ckpt")];
    let mut child = place
        .cairn(&job_args(place, &paths, &[]))
        // Each unit pauses after its commit, so the run can be caught midway.
        .env("FAILPOINTS", "unit-after-commit=sleep(400)")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let committed = loop {
        let committed: Vec<String> = names(place, "ckpt")
            .into_iter()
            .filter(|n| n.ends_with(".parquet") && !n.ends_with(".pending.parquet"))
            .collect();
        if committed.len() >= 2 {
            break committed;
        }
        assert!(
            Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "the run ended or stalled before two units were committed"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let pid = child.id().to_string();
    let signal = |name: &str| {
        let status = std::process::Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap();
        assert!(status.success(), "kill {name}");
    };
    signal("-STOP");
    let unit = committed[0].trim_end_matches(".parquet");
    let data = names(place, "out")
        .into_iter()
        .find(|n| n.starts_with(&format!("{unit}_")))
        .expect("the committed unit's data file");
    place.ok(&[
        "cp",
        &place.url(&format!("ckpt/{unit}.parquet")),
        &place.url(&format!("ckpt/{STRAY}.pending.parquet")),
    ]);
    place.ok(&[
        "cp",
        &place.url(&format!("out/{data}")),
        &place.url(&format!("out/{STRAY}_0.parquet")),
    ]);
    signal("-CONT");
    let out = child.wait_with_output().unwrap();
    let report = text(&out);
    assert!(out.status.success(), "the run failed: {report}");
    assert!(
        report.contains("rolled back 1 unfinished units"),
        "the late unit is reported: {report}"
    );
    assert!(!place.exists("ckpt"), "the checkpoint is removed: {report}");
    assert!(
        !names(place, "out").iter().any(|n| n.starts_with(STRAY)),
        "the late unit's data is gone"
    );
    place.assert_exactly_once("in", "out");
}

#[test]
fn late_writes_of_a_stale_run_are_rolled_back_on_local_disk() {
    late_writes_are_rolled_back(&Place::local());
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn late_writes_of_a_stale_run_are_rolled_back_on_garage() {
    late_writes_are_rolled_back(&Place::s3("GARAGE", "late-writes"));
}

// ------------------------------------------------------ completion marker

/// A clean-up killed just before it deletes the marker leaves the marker
/// alone in the checkpoint directory. Another job on that path (other
/// input, other output) must write its rows; the same job must not.
fn completion_is_bound_to_its_job(place: &Place) {
    place.sample("in", 6_000, 2);
    place.sample("in2", 8_000, 2);
    let first = [place.url("in"), place.url("out"), place.url("ckpt")];
    place.crash(
        &job_args(place, &first, &[]),
        "clean-up-before-marker-delete=return",
    );
    assert_eq!(names(place, "ckpt"), [".cairn-complete"], "only the marker");
    place.assert_exactly_once("in", "out");

    let other = [place.url("in2"), place.url("out2"), place.url("ckpt")];
    let report = place.ok(&job_args(place, &other, &[]));
    assert!(!report.contains("nothing was written"), "{report}");
    place.assert_exactly_once("in2", "out2");
    assert!(!place.exists("ckpt"), "{report}");

    // The marker of older cairn names no job: a new job starts afresh too.
    let empty = tempfile::NamedTempFile::new().unwrap();
    let empty = empty.path().to_str().unwrap();
    place.ok(&["put", empty, &place.url("ckpt3/.cairn-complete")]);
    let third = [place.url("in2"), place.url("out3"), place.url("ckpt3")];
    place.ok(&job_args(place, &third, &[]));
    place.assert_exactly_once("in2", "out3");

    // The same job after the same crash: finished, nothing written again.
    let again = [place.url("in"), place.url("out4"), place.url("ckpt4")];
    place.crash(
        &job_args(place, &again, &[]),
        "clean-up-before-marker-delete=return",
    );
    let report = place.ok(&job_args(place, &again, &[]));
    assert!(report.contains("nothing was written"), "{report}");
    place.assert_exactly_once("in", "out4");
}

#[test]
fn completion_is_bound_to_its_job_on_local_disk() {
    completion_is_bound_to_its_job(&Place::local());
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn completion_is_bound_to_its_job_on_garage() {
    completion_is_bound_to_its_job(&Place::s3("GARAGE", "completion-bound"));
}

// ------------------------------------------------------------- flag bounds

#[test]
fn numeric_flags_out_of_range_are_refused_not_a_panic() {
    let place = Place::local();
    place.sample("in", 1_000, 1);
    let paths = [place.url("in"), place.url("out"), place.url("ckpt")];
    for (flag, value, needle) in [
        ("--map-timeout", "1e30", "--map-timeout"),
        ("--map-timeout", "0", "above 0"),
        ("--map-timeout", "nan", "not a number"),
        ("--lease-ttl", "1", "between 3 and 86400"),
        ("--lease-ttl", "inf", "between 3 and 86400"),
    ] {
        let mut args = job_args(&place, &paths, &[flag, value]);
        if flag == "--map-timeout" {
            args.extend(["--map-cmd", "cat"]);
        }
        let out = place.cairn(&args).output().unwrap();
        let message = text(&out);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {message}");
        assert!(message.contains(needle), "{flag} {value}: {message}");
        assert!(
            !place.exists("out") && !place.exists("ckpt"),
            "{flag} {value}"
        );
    }
    let args = job_args(&place, &paths, &["--lease-ttl", "600"]);
    place.ok(&args);
    place.assert_exactly_once("in", "out");
}
