//! The command examples of the documentation run as written: every `$` line
//! in a `console` block of README.md, docs/user-guide.md and docs/jobs.md is
//! run by `trycmd` with the `cairn` binary of this build, and its output
//! (stdout and stderr together) is compared with the lines under it (`[..]`
//! matches any text on a line, `...` any lines). Other blocks (`sh`,
//! `text`, `rust`) are not run; a block without a language is run, so an
//! example cannot be left out by forgetting to label it.
//!
//! The examples name the test servers' resources as a reader would name
//! theirs: the Garage bucket `cairn-test`, the local TCLake catalog's
//! volumes, `/tmp/cairn-jobs` and `/tmp/cairn-guide`. The environment a
//! reader sets by hand (`AWS_*`, `TENCENTCLOUD_*`, `cairn` and pyarrow's
//! `python3` on `PATH`) is set here from the servers' settings.

use std::path::{Path, PathBuf};
use std::process::Command;

use cairn_conformance::{TCLAKE_SID, TCLAKE_SK, s3_server, tclake_catalog, tools_python};

/// The documents whose examples run, relative to the repository's top.
const DOCS: [&str; 3] = ["README.md", "docs/user-guide.md", "docs/jobs.md"];
/// Local scratch directories the examples write under.
const SCRATCH: [&str; 2] = ["/tmp/cairn-jobs", "/tmp/cairn-guide"];
/// The prefix of the test bucket the examples write under.
const BUCKET_SCRATCH: &str = "s3://cairn-test/docs";

#[test]
#[ignore = "needs the test servers (Garage, the local TCLake catalog) and the tools' Python: scripts/test.sh runs it"]
fn documented_commands_run_as_written() {
    let test = "documented_commands_run_as_written";
    let (Some((_, s3)), Some(catalog), Some(python)) = (
        s3_server("GARAGE", test),
        tclake_catalog(test),
        tools_python(test),
    ) else {
        return;
    };
    assert_eq!(
        s3.bucket, "cairn-test",
        "the docs name the test Garage's bucket `cairn-test`"
    );
    let top = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository's top directory");
    // The examples run from the top directory (`python3 examples/...`,
    // `README.md`, `scripts/demo.sh`), as the docs say.
    std::env::set_current_dir(&top).expect("cd to the repository's top");
    let cairn = env!("CARGO_BIN_EXE_cairn");
    let timeout = on_path("timeout").expect("coreutils' `timeout` (docs/jobs.md uses it)");
    let grep = on_path("grep").expect("`grep` (docs/jobs.md reads a metrics file with it)");
    let bins = [
        ("cairn", PathBuf::from(cairn)),
        ("scripts/demo.sh", top.join("scripts/demo.sh")),
        ("timeout", timeout),
        ("grep", grep),
    ];
    for doc in DOCS {
        let commands = documented_programs(&top.join(doc));
        assert!(!commands.is_empty(), "{doc} lost its examples");
        for program in commands {
            assert!(
                bins.iter().any(|(name, _)| *name == program),
                "{doc} runs `{program}`, which this test does not provide (trycmd would skip it)"
            );
        }
    }

    // `cairn` on PATH too, for the programs that start it (`timeout`).
    let python_bin = Path::new(&python)
        .parent()
        .expect("the venv's bin directory");
    let cairn_bin = Path::new(cairn).parent().expect("the binary's directory");
    let path = format!(
        "{}:{}:{}",
        cairn_bin.display(),
        python_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [
        ("PATH", path.as_str()),
        ("AWS_ACCESS_KEY_ID", s3.key.as_str()),
        ("AWS_SECRET_ACCESS_KEY", s3.secret.as_str()),
        ("AWS_ENDPOINT_URL", s3.endpoint.as_str()),
        ("AWS_REGION", s3.region.as_str()),
        ("TENCENTCLOUD_SECRET_ID", TCLAKE_SID),
        ("TENCENTCLOUD_SECRET_KEY", TCLAKE_SK),
        ("TENCENTCLOUD_REGION", s3.region.as_str()),
        ("FSSPEC_TCLAKE_ENDPOINT", catalog.endpoint.as_str()),
        ("FSSPEC_TCLAKE_COS_ENDPOINT", s3.endpoint.as_str()),
        ("FSSPEC_TCLAKE_ADDRESSING_STYLE", "path"),
        // The demo with this build's binary, and enough rows that its kill
        // lands while the debug binary runs.
        ("CAIRN_BIN", cairn),
        ("CAIRN_DEMO_ROWS", "2000000"),
    ];

    // Start from empty scratch space, as the docs do.
    for dir in SCRATCH {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("remove {dir}: {e}"),
        }
    }
    // A missing prefix is the normal case; anything else shows in the examples.
    let _ = Command::new(cairn)
        .args(["rm", "-r", BUCKET_SCRATCH])
        .envs(env)
        .output();

    let cases = trycmd::TestCases::new();
    for (name, path) in &bins {
        cases.register_bin(*name, path.as_path());
    }
    for (key, value) in env {
        cases.env(key, value);
    }
    for doc in DOCS {
        cases.case(top.join(doc));
    }
    cases.run();
}

/// The programs the `$` lines of `doc`'s command blocks start (after any
/// `NAME=value` assignments), as trycmd reads them.
fn documented_programs(doc: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(doc).expect("read the document");
    let mut programs = Vec::new();
    let mut runnable = None::<bool>;
    for line in text.lines() {
        if let Some(info) = line.strip_prefix("```") {
            runnable = match runnable {
                Some(_) => None,
                None => Some(matches!(info.trim(), "" | "console" | "trycmd")),
            };
        } else if runnable == Some(true)
            && let Some(command) = line.strip_prefix("$ ")
        {
            let program = command
                .split_whitespace()
                .find(|word| !word.contains('='))
                .unwrap_or_default();
            programs.push(program.to_string());
        }
    }
    programs
}

/// `name` found on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
