//! Exactly-once against crashes, misuse and concurrency, on the real
//! `cairn job run` (issue: fenced leases, checkpoints bound to their job):
//!
//! - crashes injected by failpoints inside the executor's own unit commit
//!   path and inside clean-up (the process aborts on the spot), then a
//!   resume; the test checks which units were rolled back;
//! - 8 runs started at once on one checkpoint, 20 rounds;
//! - a checkpoint bound to its output and (with row_hash IDs) its inputs;
//! - a checkpoint overlapping the output or an input, in every mode;
//! - the same input named twice.
//!
//! Every outcome is checked by an oracle that does not use cairn: the
//! parquet crate on local disk, pyarrow with s3fs on S3
//! (scripts/oracle_ids.py). The S3 variants are `#[ignore]`d so a run without
//! servers shows them as ignored; scripts/test.sh runs them with the servers.

mod common;

use std::process::{Command, Output};

use common::place::{Place, job_args, text};

// ---------------------------------------------------------------- crashes

/// What a crash at a failpoint leaves, and what the resume must do.
struct CrashCase {
    point: &'static str,
    /// Occurrences passed before it fires.
    skip: usize,
    /// Committed units, and pending units without a committed twin, after the crash.
    committed: u64,
    uncommitted_pending: u64,
    /// The resume's report: units rolled back and data files deleted.
    rolled_back: Option<(u64, u64)>,
}

const UNITS: u64 = 10;

fn crash_cases() -> Vec<CrashCase> {
    let case = |point, skip, committed, uncommitted_pending, rolled_back| CrashCase {
        point,
        skip,
        committed,
        uncommitted_pending,
        rolled_back,
    };
    vec![
        case("unit-after-pending", 0, 0, 1, Some((1, 0))),
        case("unit-after-pending", 4, 4, 1, Some((1, 0))),
        case("unit-after-data", 0, 0, 1, Some((1, 1))),
        case("unit-after-data", 6, 6, 1, Some((1, 1))),
        case("unit-after-commit", 0, 1, 0, None),
        case("unit-after-commit", 8, 9, 0, None),
        case("run-before-clean-up", 0, UNITS, 0, None),
        case("clean-up-after-marker", 0, UNITS, 0, None),
        case("clean-up-before-marker-delete", 0, 0, 0, None),
    ]
}

fn crash_and_resume(place: &Place) {
    place.sample("in", 20_000, 4);
    for (n, case) in crash_cases().iter().enumerate() {
        let paths = [
            place.url("in"),
            place.url(&format!("out{n}")),
            place.url(&format!("ckpt{n}")),
        ];
        let args = job_args(place, &paths, &[]);
        let crashed = place
            .cairn(&args)
            .env(
                "FAILPOINTS",
                format!("{}={}*off->return", case.point, case.skip),
            )
            .output()
            .unwrap();
        let label = format!("{} after {} passes", case.point, case.skip);
        assert!(
            !crashed.status.success() && crashed.status.code().is_none(),
            "{label}: the run must die at the failpoint: {}",
            text(&crashed)
        );
        assert!(
            text(&crashed).contains(case.point),
            "{label}: {}",
            text(&crashed)
        );
        let status = place.status(&format!("ckpt{n}"));
        assert_eq!(
            (
                status["committed_units"].as_u64().unwrap(),
                status["uncommitted_pending_units"].as_u64().unwrap()
            ),
            (case.committed, case.uncommitted_pending),
            "{label}: what the crash left: {status}"
        );

        let resumed = place.ok(&args);
        match case.rolled_back {
            Some((units, files)) => assert!(
                resumed.contains(&format!(
                    "rolled back {units} unfinished units of an earlier run ({files} data files deleted)"
                )),
                "{label}: {resumed}"
            ),
            None => assert!(!resumed.contains("rolled back"), "{label}: {resumed}"),
        }
        if case.point.starts_with("clean-up") || case.point == "run-before-clean-up" {
            assert!(
                resumed.contains("nothing was written"),
                "{label}: a finished job writes nothing: {resumed}"
            );
        }
        assert!(
            !place.exists(&format!("ckpt{n}")),
            "{label}: the checkpoint is removed at the end"
        );
        place.assert_exactly_once("in", &format!("out{n}"));
    }
}

#[test]
fn crashes_inside_the_executor_resume_exactly_once_on_local_disk() {
    crash_and_resume(&Place::local());
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn crashes_inside_the_executor_resume_exactly_once_on_garage() {
    crash_and_resume(&Place::s3("GARAGE", "crash-garage"));
}

#[test]
#[ignore = "needs the moto server: scripts/test.sh runs it"]
fn crashes_inside_the_executor_resume_exactly_once_on_moto() {
    crash_and_resume(&Place::s3("MOTO", "crash-moto"));
}

// ------------------------------------------------------------ concurrency

/// `starts` runs of one job started at once, `rounds` times: exactly one
/// writes; every other is refused (naming the holder, or finding the output
/// finished) or finishes the writer's clean-up writing nothing; the output
/// is exactly once every round.
fn simultaneous_starts(place: &Place, starts: usize, rounds: usize) {
    place.sample("in", 6_000, 2);
    for round in 0..rounds {
        let paths = [
            place.url("in"),
            place.url(&format!("out{round}")),
            place.url(&format!("ckpt{round}")),
        ];
        let args = job_args(place, &paths, &[]);
        let children: Vec<_> = (0..starts)
            .map(|_| {
                place
                    .cairn(&args)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outputs: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        // A run that starts while the writer is deleting its checkpoint
        // finds the completion marker and finishes that clean-up, writing
        // nothing: a success, not a second writer.
        let writers = outputs
            .iter()
            .filter(|o| o.status.success() && !text(o).contains("nothing was written"))
            .count();
        // A run that starts as the writer's clean-up deletes the lease
        // files can take generation 1 anew and then lose it to another such
        // run (the clean-up deleted its file too): it stops, naming the
        // holder, before it changes anything.
        for loser in outputs.iter().filter(|o| !o.status.success()) {
            let message = text(loser);
            assert!(
                message.contains("is in use by")
                    || message.contains("already holds files")
                    || message.contains("lost its lease (now held by"),
                "round {round}: a refused run must say why: {message}"
            );
        }
        // Each run's exit and the end of what it said, for a failure.
        let runs: Vec<String> = outputs
            .iter()
            .map(|o| {
                let said = text(o);
                let tail = &said[said.floor_char_boundary(said.len().saturating_sub(600))..];
                format!("{:?}: ...{tail}", o.status.code())
            })
            .collect();
        assert_eq!(
            writers,
            1,
            "round {round}: exactly one run writes; the runs:\n{}",
            runs.join("\n---\n")
        );
        place.assert_exactly_once("in", &format!("out{round}"));
    }
}

#[test]
fn eight_simultaneous_starts_on_local_disk_write_once() {
    simultaneous_starts(&Place::local(), 8, 20);
}

#[test]
#[ignore = "needs the moto server: scripts/test.sh runs it"]
fn eight_simultaneous_starts_on_moto_write_once() {
    simultaneous_starts(&Place::s3("MOTO", "starts-moto"), 8, 20);
}

// ------------------------------------------------------------- binding

/// A checkpoint names its output: a run, `ckpt gc` or `ckpt verify` with
/// another output is refused, naming both; the right one resumes.
fn bound_to_output(place: &Place) {
    place.sample("in", 20_000, 4);
    let paths = [place.url("in"), place.url("out"), place.url("ckpt")];
    place.crash(
        &job_args(place, &paths, &[]),
        "unit-after-data=3*off->return",
    );
    let typo = place.url("outt");
    let wrong = [place.url("in"), typo.clone(), place.url("ckpt")];
    for args in [
        job_args(place, &wrong, &[]),
        vec!["ckpt", "gc", &paths[2], "--output", &typo],
        vec!["ckpt", "verify", &paths[2], "--output", &typo],
    ] {
        let out = place.cairn(&args).output().unwrap();
        let message = text(&out);
        assert!(!out.status.success(), "{args:?}: {message}");
        assert!(
            message.contains("belongs to the output")
                && message.contains(&format!("{}, not", paths[1]))
                && message.contains(&typo),
            "{args:?}: {message}"
        );
    }
    assert!(!place.exists("outt"), "nothing written to the wrong output");
    let status = place.status("ckpt");
    assert_eq!(
        status["uncommitted_pending_units"], 1,
        "gc rolled nothing back"
    );
    place.ok(&job_args(place, &paths, &[]));
    place.assert_exactly_once("in", "out");
}

#[test]
fn a_checkpoint_is_bound_to_its_output_on_local_disk() {
    bound_to_output(&Place::local());
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn a_checkpoint_is_bound_to_its_output_on_garage() {
    bound_to_output(&Place::s3("GARAGE", "bound-garage"));
}

/// Replaces input file `name` with other content (another sample's file:
/// its `uid`s repeat others', which only the row_hash part of the test reads).
fn rewrite_input(place: &Place, name: &str) {
    place.sample("other", 3_000, 1);
    let from = place.url("other/part-00000.parquet");
    place.ok(&["cp", &from, &place.url(&format!("in/{name}"))]);
    place.ok(&["rm", "-r", &place.url("other")]);
}

/// With row_hash IDs, a resume after an input file changed is refused,
/// naming the file; a file added beside the others is fine. With a real ID
/// column any change is allowed.
fn row_hash_inputs_are_fingerprinted(place: &Place) {
    place.sample("in", 20_000, 4);
    let paths = [place.url("in"), place.url("out"), place.url("ckpt")];
    let row_hash = |paths: &[String; 3]| {
        let mut args = job_args(place, paths, &["--include-row-hash"]);
        let at = args.iter().position(|a| *a == "uid").unwrap();
        args[at] = "row_hash";
        args.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let args = row_hash(&paths);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let crash = |args: &[&str]| place.crash(args, "unit-after-commit=2*off->return");
    crash(&args);
    // A new file beside the old ones: resumed, exactly once.
    place.ok(&[
        "cp",
        &place.url("in/part-00000.parquet"),
        &place.url("in/part-00009.parquet"),
    ]);
    place.ok(&args);
    place.assert_exactly_once("in", "out");

    // A file the earlier run read is rewritten: refused, naming it.
    place.ok(&["rm", "-r", &place.url("out")]);
    crash(&args);
    rewrite_input(place, "part-00001.parquet");
    let out = place.cairn(&args).output().unwrap();
    let message = text(&out);
    assert!(!out.status.success(), "{message}");
    assert!(
        message.contains("part-00001.parquet")
            && message.contains("changed since it was read")
            && message.contains("fresh checkpoint"),
        "{message}"
    );
    // ... and gone: refused too.
    place.ok(&["rm", &place.url("in/part-00001.parquet")]);
    let message = text(&place.cairn(&args).output().unwrap());
    assert!(message.contains("it is gone"), "{message}");

    // A real ID column: any input change is allowed (here a file written
    // again with the same rows, which a row_hash checkpoint refuses).
    place.sample("in2", 20_000, 4);
    let uid = [
        place.url("in2"),
        place.url("out-uid"),
        place.url("ckpt-uid"),
    ];
    let uid_args = job_args(place, &uid, &[]);
    crash(&uid_args);
    let file = place.url("in2/part-00002.parquet");
    place.ok(&["cp", &file, &place.url("copy.parquet")]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    place.ok(&["cp", &place.url("copy.parquet"), &file]);
    place.ok(&uid_args);
    place.assert_exactly_once("in2", "out-uid");
}

#[test]
fn row_hash_checkpoints_refuse_changed_inputs_on_local_disk() {
    row_hash_inputs_are_fingerprinted(&Place::local());
}

#[test]
#[ignore = "needs the moto server: scripts/test.sh runs it"]
fn row_hash_checkpoints_refuse_changed_inputs_on_moto() {
    row_hash_inputs_are_fingerprinted(&Place::s3("MOTO", "rowhash-moto"));
}

// ------------------------------------------------------------- overlap

/// A checkpoint equal to, inside or containing the output or an input is
/// refused in every mode, before anything is written.
fn overlaps_are_refused(place: &Place) {
    place.sample("in", 2_000, 1);
    let cases = [
        ("out", "out"),
        ("out", "out/ckpt"),
        ("data/out", "data"),
        ("out", "in/ckpt"),
        ("out", "in"),
    ];
    for (output, ckpt) in cases {
        for mode in ["error", "append", "overwrite"] {
            let paths = [place.url("in"), place.url(output), place.url(ckpt)];
            let out = place
                .cairn(&job_args(place, &paths, &["--mode", mode]))
                .output()
                .unwrap();
            let message = text(&out);
            assert!(
                !out.status.success() && message.contains("overlap"),
                "{output} / {ckpt} / {mode}: {message}"
            );
            assert!(
                !place.exists(output),
                "{output} / {ckpt} / {mode}: output written"
            );
            if ckpt != "in" {
                assert!(
                    !place.exists(ckpt),
                    "{output} / {ckpt} / {mode}: checkpoint written"
                );
            }
        }
    }
}

#[test]
fn checkpoint_and_output_never_overlap_on_local_disk() {
    overlaps_are_refused(&Place::local());
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn checkpoint_and_output_never_overlap_on_garage() {
    overlaps_are_refused(&Place::s3("GARAGE", "overlap-garage"));
}

// --------------------------------------------------------- inputs once

/// A directory, a file inside it, a glob and the same URL twice: each file
/// is read once.
fn overlapping_inputs_are_read_once(place: &Place) {
    place.sample("in", 8_000, 4);
    let paths = [place.url("in"), place.url("out"), place.url("ckpt")];
    let file = place.url("in/part-00001.parquet");
    let glob = place.url("in/*.parquet");
    let dir = place.url("in/");
    let mut args = job_args(place, &paths, &["--include-row-hash"]);
    args.extend(["--input", &file, "--input", &glob, "--input", &dir]);
    let at = args.iter().position(|a| *a == "uid").unwrap();
    args[at] = "row_hash";
    let report = place.ok(&args);
    assert!(report.contains("8000 written"), "{report}");
    place.assert_exactly_once("in", "out");
}

#[test]
fn overlapping_inputs_are_read_once_on_local_disk() {
    overlapping_inputs_are_read_once(&Place::local());
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn overlapping_inputs_are_read_once_on_garage() {
    overlapping_inputs_are_read_once(&Place::s3("GARAGE", "inputs-garage"));
}

// ------------------------------------------------------ a live lease

/// A run started while another run's lease is live (a run on another
/// machine, killed or still running) is refused before its first write,
/// naming the holder; once that lease is gone the job resumes exactly once.
fn a_live_lease_refuses_a_second_run(place: &Place) {
    place.sample("in", 20_000, 4);
    let paths = [place.url("in"), place.url("out"), place.url("ckpt")];
    let args = job_args(place, &paths, &[]);
    place.crash(&args, "unit-after-commit=2*off->return");
    // The killed run's lease, as a run on another machine would leave it:
    // its holder cannot be checked from here, so only expiry frees it.
    let record = serde_json::json!({
        "holder": "0123456789abcdef0123456789abcdef", "generation": 7,
        "host": "worker-17", "pid": 4242, "boot_id": "another-machine",
        "pid_namespace": "pid:[4026531836]", "process_start": 1, "run": "killed-elsewhere",
        "expires_at": 4_000_000_000u64, "released": false,
    });
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("lease.json");
    std::fs::write(&local, record.to_string()).unwrap();
    let lease = place.url(&format!(
        "ckpt/{}",
        cairn_checkpoint::internals::lease_file(7)
    ));
    place.ok(&["put", local.to_str().unwrap(), &lease]);
    let before = place.status("ckpt");
    let refused = place.cairn(&args).output().unwrap();
    let message = text(&refused);
    assert!(!refused.status.success(), "{message}");
    assert!(
        message.contains("is in use by worker-17 pid 4242 (run killed-elsewhere"),
        "{message}"
    );
    assert_eq!(
        place.status("ckpt")["committed_units"],
        before["committed_units"]
    );
    assert_eq!(
        place.status("ckpt")["pending_units"],
        before["pending_units"],
        "the refused run rolled nothing back"
    );
    place.ok(&["rm", &lease]);
    place.ok(&args);
    place.assert_exactly_once("in", "out");
}

#[test]
fn a_live_lease_refuses_a_second_run_on_local_disk() {
    a_live_lease_refuses_a_second_run(&Place::local());
}

#[test]
#[ignore = "needs the moto server: scripts/test.sh runs it"]
fn a_live_lease_refuses_a_second_run_on_moto() {
    a_live_lease_refuses_a_second_run(&Place::s3("MOTO", "live-lease-moto"));
}

// ------------------------------------------------------- ckpt commands

/// `cairn ckpt ids` on a checkpoint it cannot read is an error naming the
/// problem, never an empty list.
fn ckpt_ids_errors_are_errors(place: &Place) {
    // Every ckpt command on a path that holds no checkpoint (a typo) says
    // so and creates nothing.
    let typo = place.url("nothing-here");
    let out_dir = place.url("out");
    for args in [
        vec!["ckpt", "ids", typo.as_str()],
        vec!["ckpt", "status", typo.as_str()],
        vec![
            "ckpt",
            "verify",
            typo.as_str(),
            "--output",
            out_dir.as_str(),
        ],
        vec!["ckpt", "gc", typo.as_str(), "--output", out_dir.as_str()],
    ] {
        let missing = place.cairn(&args).output().unwrap();
        assert!(!missing.status.success(), "{args:?}");
        assert!(
            text(&missing).contains("no checkpoint at"),
            "{args:?}: {}",
            text(&missing)
        );
        assert!(
            !place.exists("nothing-here"),
            "{args:?} created the checkpoint"
        );
    }

    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("bad.parquet");
    std::fs::write(&local, b"PAR1 this is not a parquet file PAR1").unwrap();
    let bad = place.url("ckpt/0123456789abcdef0123456789abcdef_0000000000.parquet");
    place.ok(&["put", local.to_str().unwrap(), &bad]);
    let out = place
        .cairn(&["ckpt", "ids", &place.url("ckpt")])
        .output()
        .unwrap();
    let message = text(&out);
    assert!(!out.status.success() && out.stdout.is_empty(), "{message}");
    assert!(
        message.contains("_0000000000.parquet") && message.contains("damaged"),
        "{message}"
    );
}

#[test]
fn ckpt_ids_on_an_unreadable_checkpoint_is_an_error_on_local_disk() {
    ckpt_ids_errors_are_errors(&Place::local());
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn ckpt_ids_on_an_unreadable_checkpoint_is_an_error_on_garage() {
    ckpt_ids_errors_are_errors(&Place::s3("GARAGE", "ids-garage"));
}

// ----------------------------------------------------- a damaged output

/// Output files of committed units deleted behind the checkpoint's back: a
/// resume (of a crashed run, or of a finished run whose checkpoint was kept)
/// refuses, naming the units, and keeps the checkpoint, their only record.
fn a_damaged_output_is_never_forgotten(place: &Place) {
    place.sample("in", 20_000, 4);
    for (n, failpoint) in [(0, Some("unit-after-commit=3*off->return")), (1, None)] {
        let paths = [
            place.url("in"),
            place.url(&format!("out{n}")),
            place.url(&format!("ckpt{n}")),
        ];
        let args = job_args(place, &paths, &["--keep-checkpoint"]);
        let first = match failpoint {
            Some(fp) => place.cairn(&args).env("FAILPOINTS", fp).output().unwrap(),
            None => place.cairn(&args).output().unwrap(),
        };
        assert_eq!(
            first.status.success(),
            failpoint.is_none(),
            "{}",
            text(&first)
        );
        let status = place.status(&format!("ckpt{n}"));
        let files = place.ok(&["find", &paths[1]]);
        let victim = files
            .lines()
            .find(|l| l.ends_with("_0000000001_0.parquet"))
            .unwrap_or_else(|| panic!("unit 1's data file in {files}"))
            .trim()
            .to_string();
        let victim = if place.s3.is_some() && !victim.starts_with("s3://") {
            format!("s3://{victim}")
        } else {
            victim
        };
        place.ok(&["rm", &victim]);
        let out = place.cairn(&args).output().unwrap();
        let message = text(&out);
        assert!(!out.status.success(), "{message}");
        assert!(
            message.contains("1 committed units have no data files")
                && message.contains("_0000000001"),
            "{message}"
        );
        assert_eq!(
            place.status(&format!("ckpt{n}"))["committed_units"],
            status["committed_units"],
            "the checkpoint is kept whole"
        );
        let verify = place
            .cairn(&["ckpt", "verify", &paths[2], "--output", &paths[1]])
            .output()
            .unwrap();
        assert!(!verify.status.success() && text(&verify).contains("MISSING DATA"));
    }
}

#[test]
fn a_damaged_output_is_never_forgotten_on_local_disk() {
    a_damaged_output_is_never_forgotten(&Place::local());
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn a_damaged_output_is_never_forgotten_on_garage() {
    a_damaged_output_is_never_forgotten(&Place::s3("GARAGE", "damaged-garage"));
}

// ------------------------------------------- a unit filtered to nothing

/// A unit whose rows a filter dropped commits its IDs and no data file;
/// `cairn ckpt verify` counts it as a unit without output, not as missing
/// data.
#[test]
fn ckpt_verify_does_not_call_a_filtered_out_unit_missing() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    let place = Place::local();
    place.sample("in", 4_000, 1);
    let (output, ckpt) = (place.url("out"), place.url("ckpt"));
    let mut config = cairn_dataset::CheckpointConfig::new("uid", &ckpt);
    config.commit_rows = 1_000;
    config.delete_checkpoint_on_success = false;
    let ctx = cairn_dataset::JobContext::new()
        .checkpoint(config)
        .workers(1)
        .batch_size(500);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let summary = runtime
        .block_on(
            cairn_dataset::Dataset::read_parquet([place.url("in")])
                .filter("uid >= 2000", |batch| {
                    let uids = batch
                        .column_by_name("uid")
                        .unwrap()
                        .as_primitive::<Int64Type>();
                    Ok(uids.iter().map(|u| u.map(|u| u >= 2000)).collect())
                })
                .write_parquet(&ctx, &output),
        )
        .unwrap();
    assert_eq!(summary.rows_written, 2_000);
    let report = place.ok(&["ckpt", "verify", &ckpt, "--output", &output]);
    assert!(
        report.contains("committed units with data  2 of 4")
            && report.contains("units without output       2")
            && !report.contains("MISSING"),
        "{report}"
    );
}

// ------------------------------------------- a foreign file in a checkpoint

/// Clean-up deletes only what the protocol wrote: a file of the user's in
/// the checkpoint directory stays, and the run names it.
fn a_foreign_file_in_the_checkpoint_is_kept_and_named(place: &Place) {
    place.sample("in", 6_000, 1);
    let paths = [place.url("in"), place.url("out"), place.url("ckpt")];
    let args = job_args(place, &paths, &[]);
    place.crash(&args, "unit-after-commit=1*off->return");
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("notes.txt");
    std::fs::write(&local, b"mine").unwrap();
    place.ok(&["put", local.to_str().unwrap(), &place.url("ckpt/notes.txt")]);
    let report = place.ok(&args);
    assert!(report.contains("were left there: notes.txt"), "{report}");
    assert!(place.exists("ckpt/notes.txt"));
    assert!(!place.exists("ckpt/.cairn-job.json"));
    place.assert_exactly_once("in", "out");
}

#[test]
fn a_foreign_file_in_the_checkpoint_is_kept_and_named_on_local_disk() {
    a_foreign_file_in_the_checkpoint_is_kept_and_named(&Place::local());
}

#[test]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
fn a_foreign_file_in_the_checkpoint_is_kept_and_named_on_garage() {
    a_foreign_file_in_the_checkpoint_is_kept_and_named(&Place::s3("GARAGE", "foreign-garage"));
}

// ---------------------------------------------------------- bad values

#[test]
fn zero_batch_size_or_workers_and_a_sample_over_old_files_are_refused() {
    let place = Place::local();
    place.sample("in", 100, 1);
    let paths = [place.url("in"), place.url("out"), place.url("ckpt")];
    for extra in [["--batch-size", "0"], ["--workers", "0"]] {
        let mut args = job_args(&place, &paths, &[]);
        let at = args.iter().position(|a| *a == "--workers").unwrap();
        args.drain(at..at + 2);
        args.extend(extra);
        let out = place.cairn(&args).output().unwrap();
        assert!(!out.status.success(), "{extra:?}");
        assert!(text(&out).contains(extra[0]), "{extra:?}: {}", text(&out));
    }
    assert!(!place.exists("out") && !place.exists("ckpt"));
    let again = place
        .cairn(&["job", "sample", &place.url("in"), "--rows", "10"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(
        text(&again).contains("already holds files"),
        "{}",
        text(&again)
    );
}

// ----------------------------------------------------------- interruption

/// SIGINT or SIGTERM at seeded random instants of a job slowed down by a
/// failpoint that sleeps at each unit's commit: the run stops cleanly (exit
/// 130/143, "run the same command to resume"), keeps its checkpoint, gives
/// the lease back (released, not merely expired); a run that finished
/// before the signal exits 0. The runs, resumed in turn, end exactly once.
fn interrupt_and_resume(place: &Place) {
    place.sample("in", 40_000, 4);
    let paths = [place.url("in"), place.url("out"), place.url("ckpt")];
    let args = job_args(place, &paths, &["--keep-checkpoint"]);
    let mut random = 0x5eed_u64;
    let mut interrupted = 0;
    for round in 0..6 {
        random = random
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let delay_ms = 200 + (random >> 33) % 800;
        let (signal, code) = if round % 2 == 0 {
            ("-INT", 130)
        } else {
            ("-TERM", 143)
        };
        let child = place
            .cairn(&args)
            .env("FAILPOINTS", "unit-after-data=sleep(400)")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let sent = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = child.wait_with_output().unwrap();
        let label = format!("round {round}: {signal} after {delay_ms} ms");
        match out.status.code() {
            Some(0) => {}
            Some(c) if c == code => {
                interrupted += 1;
                assert!(
                    text(&out).contains("run the same command to resume"),
                    "{label}: {}",
                    text(&out)
                );
                let status = place.status("ckpt");
                assert_eq!(
                    status["lease"]["released"], true,
                    "{label}: the lease is given back: {status}"
                );
                assert_eq!(
                    status["uncommitted_pending_units"], 0,
                    "{label}: units in flight were committed: {status}"
                );
            }
            other => panic!("{label}: exit {other:?}: {}", text(&out)),
        }
    }
    assert!(
        interrupted >= 3,
        "the signals must land mid-job ({interrupted} of 6 did)"
    );
    let done = place.ok(&args);
    assert!(!done.contains("rolled back"), "{done}");
    place.assert_exactly_once("in", "out");
}

#[test]
fn sigint_and_sigterm_stop_cleanly_and_resume_exactly_once_on_local_disk() {
    interrupt_and_resume(&Place::local());
}

/// A second signal exits at once, without waiting for the units in flight;
/// the checkpoint still resumes exactly once.
#[test]
fn a_second_signal_exits_at_once_and_the_resume_is_exactly_once() {
    let place = Place::local();
    place.sample("in", 20_000, 2);
    let paths = [place.url("in"), place.url("out"), place.url("ckpt")];
    let args = job_args(&place, &paths, &[]);
    let child = place
        .cairn(&args)
        // Each unit's commit waits 3 s: the first signal's clean stop would
        // take that long; the second must not.
        .env("FAILPOINTS", "unit-after-data=sleep(3000)")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let pid = child.id().to_string();
    let signal = |name: &str| {
        assert!(
            Command::new("kill")
                .args([name, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    signal("-INT");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let second = std::time::Instant::now();
    signal("-INT");
    let out = child.wait_with_output().unwrap();
    assert!(
        second.elapsed() < std::time::Duration::from_secs(2),
        "the second signal must not wait for the unit in flight"
    );
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(text(&out).contains("stopped at once"), "{}", text(&out));
    place.ok(&args);
    place.assert_exactly_once("in", "out");
}
