//! What the job tests share: running `cairn`, sample input, the example
//! transform, the exactly-once check. (Each test file uses a part of it.)
#![allow(dead_code)]

use std::process::Command;

/// `cairn OPTIONS ARGS`, quiet logs.
pub fn cairn(options: &[String], args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command.args(options).args(args).env("CAIRN_LOG", "error");
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
