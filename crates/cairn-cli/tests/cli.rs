//! The `cairn` binary, run as a user would: real files, real process, exit codes.

mod common;

use std::process::{Command, Output};

fn cairn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .expect("run cairn")
}

fn ok(args: &[&str]) -> String {
    let out = cairn(args);
    assert!(
        out.status.success(),
        "cairn {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn file_commands_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    std::fs::create_dir_all(format!("{d}/src/sub")).unwrap();
    std::fs::write(format!("{d}/src/a.txt"), "alpha").unwrap();
    std::fs::write(format!("{d}/src/sub/b.txt"), "bravo!").unwrap();

    ok(&[
        "cp",
        "-r",
        &format!("{d}/src/"),
        &format!("file://{d}/copy"),
    ]);
    assert_eq!(ok(&["cat", &format!("{d}/copy/sub/b.txt")]), "bravo!");
    let ls = ok(&["ls", &format!("{d}/copy")]);
    assert_eq!(ls, format!("{d}/copy/a.txt\n{d}/copy/sub/\n"));
    let found: serde_json::Value =
        serde_json::from_str(&ok(&["find", "--json", &format!("{d}/copy")])).unwrap();
    assert_eq!(found.as_array().unwrap().len(), 2);
    let du: serde_json::Value =
        serde_json::from_str(&ok(&["du", "--json", &format!("{d}/copy")])).unwrap();
    assert_eq!(du["bytes"], 11);
    assert_eq!(du["files"], 2);
    let stat: serde_json::Value =
        serde_json::from_str(&ok(&["stat", "--json", &format!("{d}/copy/a.txt")])).unwrap();
    assert_eq!(stat["type"], "file");
    assert_eq!(stat["size"], 5);
    ok(&[
        "mv",
        &format!("{d}/copy/a.txt"),
        &format!("{d}/copy/renamed.txt"),
    ]);
    assert!(std::path::Path::new(&format!("{d}/copy/renamed.txt")).exists());
    ok(&["mkdir", &format!("{d}/copy/new/deeper")]);
    assert!(std::path::Path::new(&format!("{d}/copy/new/deeper")).is_dir());
    ok(&["rm", "-r", &format!("{d}/copy")]);
    assert!(!std::path::Path::new(&format!("{d}/copy")).exists());
    assert!(
        std::path::Path::new(&format!("{d}/src/a.txt")).exists(),
        "sources untouched"
    );
}

#[test]
fn errors_exit_non_zero_and_name_the_problem() {
    let out = cairn(&["cat", "/definitely/not/here.txt"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not found") && err.contains("/definitely/not/here.txt"),
        "{err}"
    );

    let out = cairn(&["ls", "-o", "s3.endpont_url=http://x", "s3://b/"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("s3.endpont_url") && err.contains("endpoint_url"),
        "{err}"
    );

    let out = cairn(&["ls", "ftp://host/x"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("known schemes"));

    let out = cairn(&["rm", "/tmp"]);
    assert!(
        !out.status.success(),
        "rm of a directory without -r must fail"
    );
}

#[test]
fn wrong_secret_on_a_real_server_is_reported_without_the_secret() {
    let Some((_, s3)) = cairn_conformance::s3_server("GARAGE", "wrong secret through the CLI")
    else {
        return;
    };
    let (endpoint, key, bucket) = (s3.endpoint, s3.key, s3.bucket);
    let secret = "NotTheRealSecretNotTheRealSecret1234567";
    let out = cairn(&[
        "ls",
        "-o",
        &format!("s3.endpoint_url={endpoint}"),
        "-o",
        &format!("s3.key={key}"),
        "-o",
        &format!("s3.secret={secret}"),
        &format!("s3://{bucket}/"),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("permission denied") && err.contains(&bucket),
        "{err}"
    );
    assert!(!err.contains(secret), "secret leaked: {err}");
    // The right secret signed for the wrong region: the region to use.
    let out = cairn(&[
        "ls",
        "-o",
        &format!("s3.endpoint_url={endpoint}"),
        "-o",
        &format!("s3.key={key}"),
        "-o",
        &format!("s3.secret={}", s3.secret),
        "-o",
        "s3.region=eu-west-1",
        &format!("s3://{bucket}/"),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("set -o s3.region={}", s3.region)),
        "{err}"
    );
}

#[test]
fn config_reports_values_and_origins_without_secrets() {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "config",
            "--json",
            "-o",
            "s3.secret=shhh-very-secret",
            "-o",
            "s3.key=AKID",
            "s3://bucket/x",
        ])
        .env("FSSPEC_S3_REGION", "eu-central-1")
        .env("FSSPEC_S3_REQUESTER_PAYS", "null")
        .env("FSSPEC_S3_DEFAULT_BLOCK_SIZE", "5242880")
        .env("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
        .env_remove("AWS_ACCESS_KEY_ID")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("shhh-very-secret"), "{text}");
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let find = |name: &str| {
        report["options"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["option"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(find("region")["value"], "eu-central-1");
    assert_eq!(find("region")["source"], "env FSSPEC_S3_REGION");
    assert_eq!(find("endpoint_url")["source"], "env AWS_ENDPOINT_URL_S3");
    assert_eq!(find("secret")["value"], "***");
    assert_eq!(find("secret")["source"], "option s3.secret");
    assert_eq!(find("use_listings_cache")["value"], "true");
    // fsspec hands s3fs None for a null: reported unset, not false.
    assert_eq!(find("requester_pays")["value"], serde_json::Value::Null);
    assert_eq!(
        find("requester_pays")["source"],
        "env FSSPEC_S3_REQUESTER_PAYS"
    );
    // A value is the value; a remark is a field of its own.
    assert_eq!(find("default_block_size")["value"], "5242880");
    assert!(
        find("default_block_size")["note"]
            .as_str()
            .unwrap()
            .contains("no effect"),
        "{text}"
    );

    let out = cairn(&["config", "cos://bucket/x"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cos.region"));
}

#[test]
fn ckpt_commands_on_a_checkpoint_written_like_ray() {
    let Some(python) = cairn_conformance::tools_python("cairn ckpt on a Ray-style checkpoint")
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = format!("{}/ckpt", tmp.path().display());
    let out = format!("{}/out", tmp.path().display());
    std::fs::create_dir_all(&ckpt).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/ray_style_idfiles.py"
    );
    let made = Command::new(&python)
        .args([script, "write", &ckpt, "row_id"])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let bases: Vec<String> = serde_json::from_slice(&made.stdout).unwrap();
    for base in &bases {
        std::fs::write(format!("{out}/{base}_0.parquet"), "data").unwrap();
    }
    std::fs::write(format!("{out}/stray.parquet"), "someone else's").unwrap();

    let status: serde_json::Value =
        serde_json::from_str(&ok(&["ckpt", "status", "--json", &ckpt])).unwrap();
    assert_eq!(status["id_column"], "row_id");
    assert_eq!(status["committed_units"], 2);
    assert_eq!(status["committed_ids"], 1500);
    assert_eq!(status["uncommitted_pending_units"], 1);

    let verify: serde_json::Value =
        serde_json::from_str(&ok(&["ckpt", "verify", "--json", &ckpt, "--output", &out])).unwrap();
    assert_eq!(verify["units_without_data"].as_array().unwrap().len(), 0);
    let orphans: Vec<&str> = verify["orphan_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        orphans.contains(&"stray.parquet")
            && orphans.contains(&format!("{}_0.parquet", bases[2]).as_str())
    );

    let ids = ok(&["ckpt", "ids", &ckpt]);
    assert_eq!(ids.lines().count(), 1500);
    assert!(ids.lines().any(|l| l == "1499"));

    let gc = ok(&["ckpt", "gc", &ckpt, "--output", &out]);
    assert!(
        gc.contains("rolled back 1 units (1 data files deleted)"),
        "{gc}"
    );
    assert!(!std::path::Path::new(&format!("{out}/{}_0.parquet", bases[2])).exists());
    assert!(
        std::path::Path::new(&format!("{out}/stray.parquet")).exists(),
        "gc never touches other files"
    );

    std::fs::remove_file(format!("{out}/{}_0.parquet", bases[1])).unwrap();
    let failed = cairn(&["ckpt", "verify", &ckpt, "--output", &out]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&failed.stdout).contains(&format!("MISSING DATA  {}", bases[1]))
    );
}

#[test]
fn gc_and_verify_refuse_a_table_jobs_checkpoint_and_change_nothing() {
    let Some(python) = cairn_conformance::tools_python("cairn ckpt gc on a table's checkpoint")
    else {
        return;
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/ray_style_idfiles.py"
    );
    // Each table format by the directory its log is in; a table no marker
    // shows, by the job record cairn's Ray manager writes for a table.
    for (format, marker) in [
        ("Delta", "_delta_log/00000000000000000000.json"),
        ("Lance", "_versions/1.manifest"),
        ("Iceberg", "metadata/00000-a.metadata.json"),
        ("a table", ""),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let ckpt = format!("{}/ckpt", tmp.path().display());
        let table = format!("{}/table", tmp.path().display());
        std::fs::create_dir_all(&ckpt).unwrap();
        std::fs::create_dir_all(&table).unwrap();
        let made = Command::new(&python)
            .args([script, "write", &ckpt, "row_id"])
            .output()
            .unwrap();
        assert!(made.status.success(), "{}", stderr(&made));
        if marker.is_empty() {
            let record = serde_json::json!({"output": format!("file://{table}"), "id_column": "row_id", "table_output": true});
            std::fs::write(format!("{ckpt}/.cairn-job.json"), record.to_string()).unwrap();
        } else {
            let path = format!("{table}/{marker}");
            std::fs::create_dir_all(std::path::Path::new(&path).parent().unwrap()).unwrap();
            std::fs::write(&path, "{}").unwrap();
        }
        let before = listing(&[&ckpt, &table]);
        for command in ["gc", "verify"] {
            let out = cairn(&["ckpt", command, &ckpt, "--output", &table]);
            assert!(!out.status.success(), "{format}: {command} was not refused");
            let said = stderr(&out);
            assert!(
                said.contains(&format!("cairn ckpt {command} refuses"))
                    && said.contains(format)
                    && said.contains("Nothing was changed")
                    && said.contains("cairn.ray.checkpoint_config"),
                "{format}: {said}"
            );
        }
        assert_eq!(
            listing(&[&ckpt, &table]),
            before,
            "{format}: something changed"
        );
        // What holds for any checkpoint still answers.
        let status: serde_json::Value =
            serde_json::from_str(&ok(&["ckpt", "status", "--json", &ckpt])).unwrap();
        assert_eq!(status["uncommitted_pending_units"], 1, "{format}");
        assert_eq!(
            ok(&["ckpt", "ids", &ckpt]).lines().count(),
            1500,
            "{format}"
        );
    }
}

#[test]
fn gc_ends_a_finished_jobs_cut_short_clean_up_by_the_id_column_it_recorded() {
    // A marker alone (the ID files deleted, the driver killed before the
    // marker was): gc reads the ID column from the marker's job, ends the
    // clean-up and leaves no record naming another ID column behind.
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = format!("{}/ckpt", tmp.path().display());
    let out = format!("{}/out", tmp.path().display());
    std::fs::create_dir_all(&ckpt).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(format!("{out}/kept.parquet"), "the finished job's rows").unwrap();
    let marker =
        serde_json::json!({"job": {"output": format!("file://{out}"), "id_column": "uid"}});
    std::fs::write(format!("{ckpt}/.cairn-complete"), marker.to_string()).unwrap();
    let gc = ok(&["ckpt", "gc", &ckpt, "--output", &out]);
    assert!(gc.contains("clean-up was interrupted; finished it"), "{gc}");
    let left: Vec<_> = std::fs::read_dir(&ckpt)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    assert!(std::path::Path::new(&format!("{out}/kept.parquet")).exists());

    // An empty checkpoint directory (checkpoint_config makes one): nothing
    // to recover, and no job record written into it.
    std::fs::create_dir_all(&ckpt).unwrap();
    let gc = ok(&["ckpt", "gc", &ckpt, "--output", &out]);
    assert!(gc.contains("nothing to recover"), "{gc}");
    assert_eq!(std::fs::read_dir(&ckpt).unwrap().count(), 0);
}

/// Every file under `roots` with its bytes, sorted.
fn listing(roots: &[&str]) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    let mut todo: Vec<std::path::PathBuf> = roots.iter().map(std::path::PathBuf::from).collect();
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                found.push((path.display().to_string(), bytes));
            }
        }
    }
    found.sort();
    found
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn errors_say_the_fix() {
    // `-o key value`: the fix, not "unrecognized subcommand".
    let out = cairn(&["-o", "s3.region", "us-east-1", "ls", "s3://bucket"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("write -o s3.region=us-east-1"),
        "{}",
        stderr(&out)
    );
    // put/get with their arguments swapped.
    let out = cairn(&["put", "s3://bucket/key", "/tmp/local-file"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cairn get s3://bucket/key /tmp/local-file"),
        "{}",
        stderr(&out)
    );
    let out = cairn(&["get", "/tmp/local-file", "s3://bucket/key"]);
    assert!(
        stderr(&out).contains("cairn put /tmp/local-file s3://bucket/key"),
        "{}",
        stderr(&out)
    );
    // JSON lines given to a Parquet job.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    std::fs::create_dir_all(format!("{d}/in")).unwrap();
    std::fs::write(format!("{d}/in/a.jsonl"), "{\"uid\": 1}\n").unwrap();
    let out = cairn(&[
        "job",
        "run",
        "--input",
        &format!("{d}/in"),
        "--output",
        &format!("{d}/out"),
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("JSON-lines files (a.jsonl)")
            && stderr(&out).contains("--format json"),
        "{}",
        stderr(&out)
    );
    // An endpoint nothing listens on: at once, naming it.
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["ls", "s3://bucket/"])
        .env("AWS_ACCESS_KEY_ID", "key-for-the-test")
        .env("AWS_SECRET_ACCESS_KEY", "secret-for-the-test")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("connection refused by http://127.0.0.1:9"),
        "{}",
        stderr(&out)
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "no silent retries"
    );
    // No credentials at all: where to put them.
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["ls", "s3://bucket/"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_PROFILE")
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no credentials were found")
            && stderr(&out).contains("AWS_ACCESS_KEY_ID"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn job_verify_reads_a_json_lines_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    common::sample(&[], &format!("{d}/in"), 3_000, 2, 10_000);
    ok(&[
        "job",
        "run",
        "--input",
        &format!("{d}/in"),
        "--output",
        &format!("{d}/out"),
        "--output-format",
        "json",
    ]);
    // Without --output-format: read as JSON lines, with a note, and correct.
    let out = cairn(&[
        "job",
        "verify",
        "--input",
        &format!("{d}/in"),
        "--output",
        &format!("{d}/out"),
        "--id-column",
        "uid",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("missing: 0, duplicated: 0"));
    assert!(
        stderr(&out).contains("read it as JSON-lines"),
        "{}",
        stderr(&out)
    );
    // A damaged JSON output is still caught: one line removed.
    let file = std::fs::read_dir(format!("{d}/out"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.split_once('\n').unwrap().1).unwrap();
    let out = cairn(&[
        "job",
        "verify",
        "--input",
        &format!("{d}/in"),
        "--output",
        &format!("{d}/out"),
        "--id-column",
        "uid",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("missing: 1"));
}

#[test]
fn logs_and_pipes_behave() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    std::fs::create_dir_all(format!("{d}/sub")).unwrap();
    std::fs::write(format!("{d}/sub/f"), "x").unwrap();
    // No colour codes when stderr is not a terminal.
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["ls", &d])
        .env("CAIRN_LOG", "debug")
        .output()
        .unwrap();
    assert!(!stderr(&out).is_empty(), "debug logs expected");
    assert!(!stderr(&out).contains('\u{1b}'), "{}", stderr(&out));
    // `cat` of a directory says so.
    let out = cairn(&["cat", &d]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
    // A reader that goes away early is not an error.
    common::sample(&[], &format!("{d}/in"), 200_000, 1, 10_000);
    ok(&[
        "job",
        "run",
        "--input",
        &format!("{d}/in"),
        "--output",
        &format!("{d}/out"),
        "--checkpoint",
        &format!("{d}/ckpt"),
        "--id-column",
        "uid",
        "--keep-checkpoint",
    ]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["ckpt", "ids", &format!("{d}/ckpt")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Broken pipe"), "{}", stderr(&out));
}

#[test]
fn the_summary_counts_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    // Row groups of 1,500 rows against units of 1,000: a resume skips some
    // committed rows unread and reads and drops others.
    common::sample(&[], &format!("{d}/in"), 30_000, 2, 1_500);
    let job = [
        "job",
        "run",
        "--input",
        &format!("{d}/in"),
        "--output",
        &format!("{d}/out"),
        "--checkpoint",
        &format!("{d}/ckpt"),
        "--id-column",
        "uid",
        "--workers",
        "1",
        "--commit-every-rows",
        "1000",
        "--batch-size",
        "1000",
    ];
    let crashed = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(job)
        .env("FAILPOINTS", "unit-after-commit=10*off->return")
        .output()
        .unwrap();
    assert!(!crashed.status.success());
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["ckpt", "status", &format!("{d}/ckpt"), "--json"])).unwrap();
    let committed_before = status["committed_ids"].as_u64().unwrap();
    let out = cairn(&job);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("rows: "))
        .expect("a summary line");
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    // input, committed, unread, dropped, processed, written, ...
    let (input, committed, unread, dropped, processed) =
        (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4]);
    assert_eq!(input, 30_000, "{line}");
    assert_eq!(committed, committed_before, "{line}");
    assert_eq!(committed, unread + dropped, "{line}");
    assert_eq!(input, committed + processed, "{line}");
    assert!(
        unread > 0 && dropped > 0,
        "both kinds of skip happen here: {line}"
    );
}

#[test]
fn ckpt_status_shows_the_lease_as_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    common::sample(&[], &format!("{d}/in"), 20_000, 1, 10_000);
    let ckpt = format!("{d}/ckpt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "job",
            "run",
            "--input",
            &format!("{d}/in"),
            "--output",
            &format!("{d}/out"),
            "--checkpoint",
            &ckpt,
            "--id-column",
            "uid",
            "--commit-every-rows",
            "2000",
            "--workers",
            "1",
            "--keep-checkpoint",
        ])
        .env("FAILPOINTS", "unit-after-data=sleep(300)")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut held = None;
    for _ in 0..100 {
        let out = cairn(&["ckpt", "status", &ckpt]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.contains("held by") {
            held = Some(text);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait().unwrap();
    let held = held.expect("the lease was seen held");
    let line = held.lines().find(|l| l.starts_with("lease")).unwrap();
    assert!(
        line.contains("until 20") && line.contains("renewed while that run lives"),
        "{line}"
    );
    let after = ok(&["ckpt", "status", &ckpt]);
    assert!(after.contains("released by"), "{after}");
}

#[test]
fn json_lines_columns_keep_the_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    std::fs::create_dir_all(format!("{d}/in")).unwrap();
    std::fs::write(
        format!("{d}/in/a.jsonl"),
        "{\"uid\": 1, \"zeta\": \"a\", \"alpha\": 2}\n{\"uid\": 2, \"zeta\": \"b\", \"alpha\": 3, \"mid\": true}\n",
    )
    .unwrap();
    ok(&[
        "job",
        "run",
        "--input",
        &format!("{d}/in"),
        "--format",
        "json",
        "--output",
        &format!("{d}/out"),
        "--output-format",
        "json",
    ]);
    let file = std::fs::read_dir(format!("{d}/out"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let first = std::fs::read_to_string(file).unwrap();
    let first = first.lines().next().unwrap().to_string();
    let at = |k: &str| first.find(&format!("\"{k}\"")).unwrap_or(usize::MAX);
    assert!(
        at("uid") < at("zeta") && at("zeta") < at("alpha"),
        "{first}"
    );
}

/// `cairn cp`/`mv` between two stores (s3 on Garage, gcs on
/// fake-gcs-server, local disk): the files arrive whole, a move removes
/// its sources only after everything is copied.
#[test]
fn cp_and_mv_between_stores() {
    let Some((_, s3)) = cairn_conformance::s3_server("GARAGE", "cp between stores") else {
        return;
    };
    let (Ok(gcs_endpoint), Ok(gcs_bucket)) = (
        std::env::var("CAIRN_TEST_GCS_ENDPOINT"),
        std::env::var("CAIRN_TEST_GCS_BUCKET"),
    ) else {
        panic!("CAIRN_TEST_GCS_ENDPOINT/BUCKET are not set: run scripts/test.sh");
    };
    let options = [
        "-o".to_string(),
        format!("s3.endpoint_url={}", s3.endpoint),
        "-o".into(),
        format!("s3.key={}", s3.key),
        "-o".into(),
        format!("s3.secret={}", s3.secret),
        "-o".into(),
        format!("s3.region={}", s3.region),
        "-o".into(),
        format!("gcs.endpoint={gcs_endpoint}"),
        "-o".into(),
        "gcs.token=anon".into(),
        "-o".into(),
        "gcs.batch_delete=false".into(),
    ];
    let run = |args: &[&str]| {
        let mut all: Vec<&str> = options.iter().map(String::as_str).collect();
        all.extend(args);
        ok(&all)
    };
    let local = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(local.path().join("src/d")).unwrap();
    std::fs::write(local.path().join("src/a.txt"), "alpha").unwrap();
    // Under one 8 MiB part: fake-gcs-server lacks the multipart API.
    let big: Vec<u8> = (0..6_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(local.path().join("src/d/big.bin"), &big).unwrap();
    let unique = format!("xstore-{}", std::process::id());
    let on_s3 = format!("s3://{}/{unique}", s3.bucket);
    let on_gcs = format!("gcs://{gcs_bucket}/{unique}");
    let src = format!("{}/src", local.path().display());

    run(&["cp", "-r", &src, &format!("{on_s3}/src")]);
    run(&[
        "cp",
        "-r",
        &format!("{on_s3}/src"),
        &format!("{on_gcs}/copy"),
    ]);
    assert_eq!(run(&["cat", &format!("{on_gcs}/copy/a.txt")]), "alpha");
    let back = local.path().join("back.bin");
    run(&[
        "cp",
        &format!("{on_gcs}/copy/d/big.bin"),
        &back.display().to_string(),
    ]);
    assert_eq!(
        std::fs::read(&back).unwrap(),
        big,
        "6 MB through gcs, byte for byte"
    );

    run(&[
        "mv",
        "-r",
        &format!("{on_gcs}/copy"),
        &format!("{on_s3}/moved"),
    ]);
    let moved = run(&["find", &format!("{on_s3}/moved")]);
    assert!(
        moved.contains("moved/a.txt") && moved.contains("moved/d/big.bin"),
        "{moved}"
    );
    let left = cairn(
        &options
            .iter()
            .map(String::as_str)
            .chain(["ls", &format!("{on_gcs}/copy")])
            .collect::<Vec<_>>(),
    );
    assert!(
        !left.status.success(),
        "the moved sources are gone from gcs"
    );
    run(&["rm", "-r", &on_s3]);
}
