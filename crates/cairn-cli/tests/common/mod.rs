//! What the job tests share: running `cairn`, sample input, the example
//! transform, the exactly-once check. (Each test file uses a part of it.)
#![allow(dead_code)]

pub mod place;

use std::process::Command;

use cairn_conformance::{S3Settings, tools_python};

/// `cairn OPTIONS ARGS`, quiet logs.
pub fn cairn(options: &[String], args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command.args(options).args(args).env("CAIRN_LOG", "error");
    command
}

/// `cairn` with `s3`'s credentials in the AWS variables and `endpoint` (the
/// server, or a proxy in front of it), quiet logs.
pub fn cairn_on(s3: &S3Settings, endpoint: &str) -> Command {
    let mut command = cairn(&[], &[]);
    command
        .env("AWS_ACCESS_KEY_ID", &s3.key)
        .env("AWS_SECRET_ACCESS_KEY", &s3.secret)
        .env("AWS_REGION", &s3.region)
        .env("AWS_ENDPOINT_URL", endpoint);
    command
}

/// Runs `command`; fails the test unless it succeeds. Returns its stdout
/// followed by its stderr.
pub fn run_ok(command: &mut Command) -> String {
    let out = command.output().expect("start process");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{command:?} failed:\n{text}");
    text
}

/// `cairn job sample`: `rows` rows of `uid`, `text` in `files` Parquet files.
pub fn sample(options: &[String], dir: &str, rows: usize, files: usize, row_group_rows: usize) {
    let (rows, files, groups) = (
        rows.to_string(),
        files.to_string(),
        row_group_rows.to_string(),
    );
    run_ok(&mut cairn(
        options,
        &[
            "job",
            "sample",
            dir,
            "--rows",
            &rows,
            "--files",
            &files,
            "--row-group-rows",
            &groups,
        ],
    ));
}

/// The `--map-cmd` of examples/embed_transform.py run by `python`.
pub fn embed_transform(python: &str) -> String {
    format!(
        "{python} {}/../../examples/embed_transform.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `cairn job verify` on the `uid` column: every input row once in the output.
pub fn verify_exactly_once(options: &[String], input: &str, output: &str) {
    let report = run_ok(&mut cairn(
        options,
        &[
            "job",
            "verify",
            "--input",
            input,
            "--output",
            output,
            "--id-column",
            "uid",
        ],
    ));
    assert!(report.contains("exactly once:"), "{report}");
}

/// Per-ID counts of an input and an output, from an oracle that does not
/// use cairn.
#[derive(Debug, serde::Deserialize)]
pub struct Oracle {
    pub input_rows: u64,
    pub output_rows: u64,
    pub missing: u64,
    pub duplicated: u64,
    pub unknown: u64,
}

impl Oracle {
    /// Every input row once in the output, nothing else.
    pub fn assert_exactly_once(&self, what: &str) {
        assert!(
            self.input_rows > 0
                && self.output_rows == self.input_rows
                && self.missing == 0
                && self.duplicated == 0
                && self.unknown == 0,
            "{what}: not exactly once: {self:?}"
        );
    }
}

/// The oracle on S3: pyarrow and s3fs read the `uid` column of every
/// Parquet file under `input` and `output` (scripts/oracle_ids.py).
pub fn s3_oracle(s3: &S3Settings, input: &str, output: &str) -> Oracle {
    let python = tools_python("exactly-once oracle").expect("the tools' Python (scripts/tools.sh)");
    let script = format!("{}/../../scripts/oracle_ids.py", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python)
        .args([script.as_str(), input, output, "uid"])
        .env("ORACLE_S3_ENDPOINT", &s3.endpoint)
        .env("ORACLE_S3_KEY", &s3.key)
        .env("ORACLE_S3_SECRET", &s3.secret)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
