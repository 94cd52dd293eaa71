//! Interop with Ray Data 2.60 itself (installed by scripts/tools.sh in its
//! own virtualenv): row_hash values agree with Ray's; a Ray job interrupted
//! mid-run is resumed by `cairn job run`; a cairn job killed mid-run is
//! resumed by Ray. Both directions include a unit caught between writing its
//! data and committing (a pending record with data files), which the
//! resuming system must roll back. Exactly-once is checked with `cairn job verify`.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use cairn_conformance::{ray_python, s3_server};
use cairn_dataset::Source;

mod common;
use common::{cairn, run_ok, sample, verify_exactly_once};

fn script() -> String {
    format!(
        "{}/../../scripts/ray_interop.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn ray(python: &str, args: &[&str]) -> String {
    let out = run_ok(Command::new(python).arg(script()).args(args));
    out.lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_default()
        .to_string()
}

/// uid → row_hash from a Parquet file or directory.
async fn hashes(url: &str, options: &cairn_fs::StorageOptions) -> HashMap<i64, u64> {
    let mut out = HashMap::new();
    for batch in Source::parquet([url]).collect(options).await.unwrap() {
        let uid = batch
            .column_by_name("uid")
            .unwrap()
            .as_primitive::<Int64Type>();
        let hash = batch
            .column_by_name("row_hash")
            .unwrap()
            .as_primitive::<UInt64Type>();
        out.extend(
            uid.values()
                .iter()
                .copied()
                .zip(hash.values().iter().copied()),
        );
    }
    out
}

/// A temporary directory with 200,000 sample rows in `in/` (10 files, row
/// groups of 5,000), and the job's `out` and `ckpt` paths beside it.
fn sampled_job() -> (tempfile::TempDir, String, String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    let (input, output, checkpoint) = (
        format!("{root}/in"),
        format!("{root}/out"),
        format!("{root}/ckpt"),
    );
    sample(&[], &input, 200_000, 10, 5000);
    (tmp, input, output, checkpoint)
}

/// Turns one committed unit back into a pending one: the state a crash
/// between writing a unit's data and committing it leaves.
fn uncommit_one_unit(checkpoint: &str) -> String {
    let committed = std::fs::read_dir(checkpoint)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".parquet") && !n.ends_with(".pending.parquet"))
        .max()
        .expect("a committed unit");
    let unit = committed.trim_end_matches(".parquet").to_string();
    std::fs::rename(
        format!("{checkpoint}/{committed}"),
        format!("{checkpoint}/{unit}.pending.parquet"),
    )
    .unwrap();
    unit
}

fn files_starting_with(dir: &str, prefix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(prefix)
        })
        .count()
}

#[tokio::test]
async fn row_hash_matches_ray_on_local_files_and_s3() {
    let Some(python) = ray_python("row_hash_matches_ray_on_local_files_and_s3") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    let input = format!("{root}/in");
    sample(&[], &input, 30000, 3, 4000);
    ray(
        &python,
        &["row-hash", &input, &format!("{root}/ray.parquet")],
    );
    let theirs = hashes(&format!("{root}/ray.parquet"), &Default::default()).await;
    run_ok(&mut cairn(
        &[],
        &[
            "job",
            "run",
            "--input",
            &input,
            "--include-row-hash",
            "--output",
            &format!("{root}/ours"),
            "--quiet",
        ],
    ));
    let ours = hashes(&format!("{root}/ours"), &Default::default()).await;
    assert_eq!(theirs.len(), 30000);
    assert_eq!(ours, theirs, "row_hash differs from Ray's on local files");

    // On an object store Ray hashes `bucket/key`.
    let Some((options, settings)) = s3_server("MOTO", "row_hash_matches_ray_on_local_files_and_s3")
    else {
        return;
    };
    let prefix = format!(
        "s3://{}/ray-row-hash-{}",
        settings.bucket,
        std::process::id()
    );
    let env = [
        ("AWS_ACCESS_KEY_ID", settings.key.as_str()),
        ("AWS_SECRET_ACCESS_KEY", settings.secret.as_str()),
        ("AWS_ENDPOINT_URL", settings.endpoint.as_str()),
        ("AWS_REGION", settings.region.as_str()),
    ];
    run_ok(
        cairn(
            &[],
            &[
                "job",
                "sample",
                &format!("{prefix}/in"),
                "--rows",
                "5000",
                "--files",
                "2",
            ],
        )
        .envs(env),
    );
    run_ok(
        Command::new(&python)
            .arg(script())
            .args([
                "row-hash",
                &format!("{prefix}/in"),
                &format!("{root}/ray-s3.parquet"),
            ])
            .envs(env),
    );
    run_ok(
        cairn(
            &[],
            &[
                "job",
                "run",
                "--input",
                &format!("{prefix}/in"),
                "--include-row-hash",
                "--output",
                &format!("{prefix}/ours"),
                "--quiet",
            ],
        )
        .envs(env),
    );
    let theirs = hashes(&format!("{root}/ray-s3.parquet"), &Default::default()).await;
    let ours = hashes(&format!("{prefix}/ours"), &options).await;
    assert_eq!(theirs.len(), 5000);
    assert_eq!(ours, theirs, "row_hash differs from Ray's on s3");
}

#[test]
fn a_ray_job_interrupted_midway_is_resumed_by_cairn() {
    let Some(python) = ray_python("a_ray_job_interrupted_midway_is_resumed_by_cairn") else {
        return;
    };
    let (_tmp, input, output, checkpoint) = sampled_job();
    let outcome = ray(
        &python,
        &[
            "job",
            &input,
            &output,
            &checkpoint,
            "--fail-at-uid",
            "190000",
        ],
    );
    assert!(
        outcome.contains("\"ok\": false") && outcome.contains("injected failure"),
        "{outcome}"
    );
    // The Ray run committed part of the work; make one unit pending, as a
    // crash between its data write and its commit would leave it.
    let unit = uncommit_one_unit(&checkpoint);
    assert_eq!(
        files_starting_with(&output, &format!("{unit}-")),
        1,
        "Ray names data files <unit>-<n>"
    );

    let summary = run_ok(&mut cairn(
        &[],
        &[
            "job",
            "run",
            "--input",
            &input,
            "--output",
            &output,
            "--checkpoint",
            &checkpoint,
            "--id-column",
            "uid",
        ],
    ));
    eprintln!("{summary}");
    // The unit made pending above, and possibly one the injected failure
    // cut short (whether it had written its pending record, or its data
    // file, depends on timing): each rolled back with its data files.
    let counts = summary
        .split_once("rolled back ")
        .and_then(|(_, rest)| rest.split_once(" unfinished units of an earlier run ("))
        .and_then(|(units, rest)| {
            Some((
                units.parse::<usize>().ok()?,
                rest.split_once(' ')?.0.parse::<usize>().ok()?,
            ))
        });
    assert!(
        matches!(counts, Some((units, files)) if (1..=2).contains(&units) && (1..=units).contains(&files)),
        "{summary}"
    );
    assert_eq!(
        files_starting_with(&output, &unit),
        0,
        "the pending unit's data stays deleted"
    );
    assert!(
        !std::path::Path::new(&checkpoint).exists(),
        "checkpoint removed on success"
    );
    verify_exactly_once(&[], &input, &output);
}

#[test]
fn a_cairn_job_killed_midway_is_resumed_by_ray() {
    let Some(python) = ray_python("a_cairn_job_killed_midway_is_resumed_by_ray") else {
        return;
    };
    let (_tmp, input, output, checkpoint) = sampled_job();
    let mut job = cairn(
        &[],
        &[
            "job",
            "run",
            "--input",
            &input,
            "--output",
            &output,
            "--checkpoint",
            &checkpoint,
            "--id-column",
            "uid",
            "--commit-every-rows",
            "500",
            "--batch-size",
            "500",
            "--workers",
            "1",
            "--quiet",
        ],
    )
    .spawn()
    .unwrap();
    // Kill once a few units are committed.
    let started = Instant::now();
    loop {
        let committed = std::fs::read_dir(&checkpoint)
            .map(|d| {
                d.filter(|e| {
                    !e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .contains("pending")
                })
                .count()
            })
            .unwrap_or(0);
        if committed >= 6 || started.elapsed() > Duration::from_secs(30) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    job.kill().unwrap();
    job.wait().unwrap();
    let unit = uncommit_one_unit(&checkpoint);
    assert_eq!(files_starting_with(&output, &format!("{unit}_")), 1);

    let outcome = ray(&python, &["job", &input, &output, &checkpoint]);
    assert!(outcome.contains("\"ok\": true"), "{outcome}");
    assert_eq!(
        files_starting_with(&output, &unit),
        0,
        "Ray rolled back the pending unit"
    );
    verify_exactly_once(&[], &input, &output);
}
