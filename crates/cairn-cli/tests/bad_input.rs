//! The bad-input matrix: one table of mistakes a user makes (URLs, schemes,
//! options, credentials, endpoints, input files, IDs, checkpoints, output,
//! transforms, flags), each run through the `cairn` binary. Every case must
//! exit non-zero with one message that names what is wrong and says the fix
//! (the fragments checked per case), leave no secret in any output, and
//! leave the input and every committed output exactly as they were (a
//! digest of every fixture file before and after; only a checkpoint's lease
//! file may change, as a run takes and gives back the lease).
//!
//! The table, as this test prints it, is docs/reliability.md's "Bad input"
//! section; the test fails when they differ (`CAIRN_BLESS=1` rewrites the
//! section). Needs Garage and the tools' Python: `#[ignore]`d, run by
//! scripts/test.sh.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use cairn_conformance::fault_proxy::{Fault, FaultPlan, FaultProxy};
use cairn_conformance::{s3_server, tools_python};

/// A secret no output may show (the key of the test Garage is fine).
const WRONG_SECRET: &str = "wrong-secret-0123456789-do-not-print-me-abcdef";

struct Case {
    name: &'static str,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    /// Fragments the message must hold (what is wrong, and the fix).
    expect: Vec<String>,
}

fn case(name: &'static str, args: &[&str], expect: &[&str]) -> Case {
    Case {
        name,
        args: args.iter().map(|s| s.to_string()).collect(),
        env: Vec::new(),
        expect: expect.iter().map(|s| s.to_string()).collect(),
    }
}

impl Case {
    fn env(mut self, key: &'static str, value: &str) -> Self {
        self.env.push((key, value.to_string()));
        self
    }
}

fn write_parquet(path: &Path, columns: Vec<(&str, ArrayRef)>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// (path, size, hash of the bytes) of every file under `dir`.
fn digest(dir: &Path) -> BTreeMap<PathBuf, (u64, u64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap().path();
            let name = entry.file_name().unwrap_or_default().to_string_lossy();
            if entry.is_dir() {
                stack.push(entry);
            } else if !name.starts_with(".cairn-lease") {
                // A refused run may take and give back its checkpoint's
                // lease; everything else must stay as it was.
                let bytes = std::fs::read(&entry).unwrap();
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                std::hash::Hash::hash(&bytes, &mut hasher);
                out.insert(
                    entry,
                    (bytes.len() as u64, std::hash::Hasher::finish(&hasher)),
                );
            }
        }
    }
    out
}

/// Mounts a tmpfs of `size` at `dir` (`ro` for read-only); false where this
/// process may not mount.
fn mount_tmpfs(dir: &Path, options: &str) -> bool {
    std::fs::create_dir_all(dir).unwrap();
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", options, "tmpfs"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success())
}

struct Mounts(Vec<PathBuf>);

impl Drop for Mounts {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = Command::new("umount").arg(dir).status();
        }
    }
}

#[test]
#[ignore = "needs the Garage server, the tools' Python and root (it mounts tmpfs): scripts/test.sh runs it"]
fn every_bad_input_is_refused_with_its_fix_and_loses_nothing() {
    let test = "every_bad_input_is_refused_with_its_fix_and_loses_nothing";
    let (Some((_, s3)), Some(python)) = (s3_server("GARAGE", test), tools_python(test)) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let fixtures = root.join("fixtures");
    let scratch = root.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let f = |p: &str| fixtures.join(p).display().to_string();
    let out = |p: &str| scratch.join(p).display().to_string();

    // Fixtures: good input, broken inputs, a finished job's output, a kept
    // checkpoint and its output.
    common::sample(&[], &f("in"), 20_000, 2, 5_000);
    common::sample(&[], &f("big"), 100_000, 2, 50_000);
    std::fs::create_dir_all(fixtures.join("notparquet")).unwrap();
    std::fs::write(
        fixtures.join("notparquet/part-0.parquet"),
        "uid,text\n1,a\n",
    )
    .unwrap();
    let good = std::fs::read(fixtures.join("in/part-00000.parquet")).unwrap();
    std::fs::create_dir_all(fixtures.join("truncated")).unwrap();
    std::fs::write(
        fixtures.join("truncated/part-0.parquet"),
        &good[..good.len() / 2],
    )
    .unwrap();
    std::fs::create_dir_all(fixtures.join("empty")).unwrap();
    let ids = |n: i64| Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef;
    let texts = |n: i64| {
        Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("t{i}")),
        )) as ArrayRef
    };
    write_parquet(
        &fixtures.join("schema/a.parquet"),
        vec![("uid", ids(10)), ("text", texts(10))],
    );
    write_parquet(
        &fixtures.join("schema/b.parquet"),
        vec![("uid", texts(10)), ("text", texts(10))],
    );
    write_parquet(
        &fixtures.join("nullid/a.parquet"),
        vec![
            (
                "uid",
                Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])) as ArrayRef,
            ),
            ("text", texts(3)),
        ],
    );
    write_parquet(
        &fixtures.join("dupid/a.parquet"),
        vec![("uid", ids(10)), ("text", texts(10))],
    );
    write_parquet(
        &fixtures.join("dupid/b.parquet"),
        vec![
            (
                "uid",
                Arc::new(Int64Array::from(vec![100, 101, 101])) as ArrayRef,
            ),
            ("text", texts(3)),
        ],
    );
    write_parquet(
        &fixtures.join("floatid/a.parquet"),
        vec![
            (
                "uid",
                Arc::new(Float64Array::from(vec![1.5, 2.5])) as ArrayRef,
            ),
            ("text", texts(2)),
        ],
    );
    std::fs::create_dir_all(fixtures.join("json")).unwrap();
    std::fs::write(
        fixtures.join("json/data.jsonl"),
        "{\"uid\": 1, \"text\": \"a\"}\n",
    )
    .unwrap();
    std::fs::write(fixtures.join("json/data.parquet"), "{\"uid\": 1}\n").unwrap();
    // A kept checkpoint with its output, then a copy with an ID file damaged.
    let run = |args: &[&str]| common::run_ok(&mut common::cairn(&[], args));
    run(&[
        "job",
        "run",
        "--input",
        &f("in"),
        "--output",
        &f("kept-out"),
        "--checkpoint",
        &f("kept-ckpt"),
        "--id-column",
        "uid",
        "--commit-every-rows",
        "5000",
        "--keep-checkpoint",
        "--quiet",
    ]);
    run(&[
        "job",
        "run",
        "--input",
        &f("in"),
        "--output",
        &f("corrupt-out"),
        "--checkpoint",
        &f("corrupt-ckpt"),
        "--id-column",
        "uid",
        "--commit-every-rows",
        "5000",
        "--keep-checkpoint",
        "--quiet",
    ]);
    let id_file = std::fs::read_dir(fixtures.join("corrupt-ckpt"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .expect("an ID file");
    std::fs::write(&id_file, "not an ID file").unwrap();
    std::fs::create_dir_all(fixtures.join("foreign-ckpt")).unwrap();
    std::fs::write(fixtures.join("foreign-ckpt/notes.parquet"), "my notes").unwrap();

    // A read-only and a full filesystem: real mounts (the test needs root;
    // without it, it fails here rather than leave these cases out), and the
    // store-full answer of an S3 server.
    let mut mounts = Mounts(Vec::new());
    let readonly = root.join("readonly");
    let full = root.join("full");
    for (dir, options) in [(&readonly, "ro,size=1m"), (&full, "size=64k")] {
        assert!(
            mount_tmpfs(dir, options),
            "cannot mount a tmpfs at {} (run as root): the read-only and full-disk cases and the docs/reliability.md table need it",
            dir.display()
        );
        mounts.0.push(dir.clone());
    }
    let full_proxy = FaultProxy::start(&s3.endpoint, FaultPlan::new(1, 1.0, &[Fault::StorageFull]));
    let token_proxy =
        FaultProxy::start(&s3.endpoint, FaultPlan::new(1, 1.0, &[Fault::ExpiredToken]));
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = format!("http://127.0.0.1:{dead_port}");
    let tls_to_http = s3.endpoint.replace("http://", "https://");
    let bucket = format!("s3://{}", s3.bucket);
    let failing = format!("{python} -c 'import sys; sys.exit(3)'");
    let hanging = format!("{python} -c 'import time; time.sleep(600)'");
    let script = |name: &str, body: &str| {
        let path = root.join(name);
        std::fs::write(&path, body).unwrap();
        format!("{python} {}", path.display())
    };
    let garbage = script(
        "garbage.py",
        "import sys, threading, time\n\
         threading.Thread(target=sys.stdin.buffer.read, daemon=True).start()\n\
         sys.stdout.write('hello, not Arrow\\n')\n\
         sys.stdout.flush()\n\
         time.sleep(30)\n",
    );
    let no_id = script(
        "no_id.py",
        "import sys, pyarrow as pa, pyarrow.ipc as ipc\n\
         writer = None\n\
         for batch in ipc.open_stream(sys.stdin.buffer):\n\
         \x20   table = pa.table({'x': pa.array([1] * batch.num_rows)})\n\
         \x20   writer = writer or ipc.new_stream(sys.stdout.buffer, table.schema)\n\
         \x20   writer.write_table(table)\n\
         \x20   sys.stdout.flush()\n",
    );
    std::fs::create_dir_all(scratch.join("o20-ckpt")).unwrap();
    std::fs::write(scratch.join("o20-ckpt/notes.parquet"), "my notes").unwrap();
    let job = |input: &str, output: &str| -> Vec<String> {
        [
            "job",
            "run",
            "--input",
            input,
            "--output",
            output,
            "--checkpoint",
            &format!("{output}-ckpt"),
            "--id-column",
            "uid",
            "--quiet",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let job_case = |name: &'static str, input: &str, output: &str, expect: &[&str]| Case {
        name,
        args: job(input, output),
        env: Vec::new(),
        expect: expect.iter().map(|s| s.to_string()).collect(),
    };
    // Sets flags: replaces the value of one the case has, adds the others.
    let with = |mut c: Case, extra: &[&str]| {
        let mut i = 0;
        while i < extra.len() {
            let flag = extra[i].to_string();
            let value = extra.get(i + 1).map(|v| v.to_string());
            match (c.args.iter().position(|a| *a == flag), &value) {
                (Some(at), Some(v)) if !v.starts_with("--") => {
                    c.args[at + 1] = v.clone();
                    i += 2;
                }
                (_, Some(v)) if !v.starts_with("--") => {
                    c.args.push(flag);
                    c.args.push(v.clone());
                    i += 2;
                }
                _ => {
                    c.args.push(flag);
                    i += 1;
                }
            }
        }
        c
    };
    let on = |endpoint: &str| format!("s3.endpoint_url={endpoint}");

    let mut cases = vec![
        // URLs and schemes.
        case(
            "URL without a bucket",
            &["ls", "s3://"],
            &["s3://", "bucket"],
        ),
        case(
            "file:// URL with a relative path",
            &["ls", "file://relative/dir"],
            &["file://relative/dir", "absolute"],
        ),
        case(
            "unknown scheme",
            &["ls", "foo://bucket/key"],
            &["foo", "s3"],
        ),
        case(
            "unknown scheme in an option",
            &["-o", "s4.key=x", "ls", "/tmp"],
            &["s4", "s3"],
        ),
        // Options.
        case(
            "mistyped option",
            &["-o", "s3.endpoint_ur=http://x", "ls", &bucket],
            &["endpoint_ur", "endpoint_url"],
        ),
        case(
            "option without a value",
            &["-o", "s3.anon", "ls", &bucket],
            &["s3.anon", "="],
        ),
        case(
            "option written with a space",
            &["-o", "s3.anon", "true", "ls", &bucket],
            &["s3.anon=true"],
        ),
        case(
            "boolean option that is not one",
            &["-o", "s3.anon=maybe", "ls", &bucket],
            &["anon", "maybe"],
        ),
        case(
            "endpoint without a scheme",
            &["-o", "s3.endpoint_url=127.0.0.1:3900", "ls", &bucket],
            &["127.0.0.1:3900", "http://"],
        ),
        case(
            "one option under two names",
            &["-o", "s3.key=a", "-o", "s3.username=b", "ls", &bucket],
            &["key", "username", "one"],
        ),
        case(
            "retry mode botocore does not have",
            &["-o", "s3.config_kwargs.retries.mode=eager", "ls", &bucket],
            &["retries.mode", "standard"],
        ),
        case(
            "FSSPEC_S3 that is not a JSON object",
            &["ls", &bucket],
            &["FSSPEC_S3"],
        )
        .env("FSSPEC_S3", "[1, 2]"),
        // Credentials and endpoints.
        case(
            "key without a secret",
            &["ls", &bucket],
            &["secret", "AWS_SECRET_ACCESS_KEY"],
        )
        .env("AWS_SECRET_ACCESS_KEY", ""),
        case(
            "no credentials at all",
            &["ls", &bucket],
            &["credentials", "AWS_ACCESS_KEY_ID"],
        )
        .env("AWS_ACCESS_KEY_ID", "")
        .env("AWS_SECRET_ACCESS_KEY", ""),
        case(
            "wrong secret",
            &["ls", &bucket],
            &["refused", "credentials"],
        )
        .env("AWS_SECRET_ACCESS_KEY", WRONG_SECRET),
        case(
            "expired session token",
            &["-o", &on(&token_proxy.endpoint()), "ls", &bucket],
            &["session token has expired", "new temporary credentials"],
        )
        .env(
            "AWS_SESSION_TOKEN",
            "expired-session-token-0123456789-do-not-print",
        ),
        case(
            "missing bucket",
            &["ls", "s3://no-such-bucket-cairn"],
            &["no-such-bucket-cairn", "does not exist"],
        ),
        case(
            "unreachable endpoint",
            &["-o", &on(&dead), "ls", &bucket],
            &[&dead, "nothing listens"],
        ),
        case(
            "https to a plain-HTTP port",
            &["-o", &on(&tls_to_http), "ls", &bucket],
            &[&tls_to_http, "http://"],
        ),
        case(
            "wrong region",
            &["-o", "s3.region=eu-west-9", "ls", &bucket],
            &["us-east-1", "region"],
        ),
        // Commands.
        case(
            "put with the arguments swapped",
            &["put", &format!("{bucket}/x"), &f("in")],
            &["LOCAL_PATH URL", "cairn get"],
        ),
        case("cat of a directory", &["cat", &f("in")], &["directory"]),
        case(
            "ckpt status of a path without a checkpoint",
            &["ckpt", "status", &out("typo-ckpt")],
            &["no checkpoint at", "typo-ckpt"],
        ),
        case(
            "job sample into a non-empty directory",
            &["job", "sample", &f("in"), "--rows", "10"],
            &["already holds files", "empty directory"],
        ),
        // Input files.
        job_case(
            "input that is not Parquet",
            &f("notparquet"),
            &out("o1"),
            &["part-0.parquet", "Parquet"],
        ),
        job_case(
            "truncated Parquet input",
            &f("truncated"),
            &out("o2"),
            &["part-0.parquet"],
        ),
        job_case(
            "empty input directory",
            &f("empty"),
            &out("o3"),
            &["empty", "no input files"],
        ),
        job_case(
            "input that does not exist",
            &f("missing"),
            &out("o4"),
            &["missing"],
        ),
        job_case(
            "schema change between files",
            &f("schema"),
            &out("o5"),
            &["b.parquet", "uid"],
        ),
        job_case(
            "JSON lines without --format json",
            &f("json"),
            &out("o6"),
            &["--format json"],
        ),
        // IDs.
        job_case("null IDs", &f("nullid"), &out("o7"), &["null", "uid"]),
        job_case(
            "duplicate IDs",
            &f("dupid"),
            &out("o8"),
            &["duplicate ID", "unique"],
        ),
        with(
            job_case(
                "ID column missing",
                &f("in"),
                &out("o9"),
                &["nosuch", "uid"],
            ),
            &["--id-column", "nosuch"],
        ),
        job_case(
            "ID column of an unsupported type",
            &f("floatid"),
            &out("o10"),
            &["uid", "Float64"],
        ),
        // Checkpoints and output.
        with(
            job_case(
                "corrupt ID file in the checkpoint",
                &f("in"),
                &f("corrupt-out"),
                &["corrupt-ckpt", "nothing was deleted"],
            ),
            &["--checkpoint", &f("corrupt-ckpt")],
        ),
        job_case(
            "foreign file in the checkpoint directory",
            &f("in"),
            &out("o20"),
            &["notes.parquet", "nothing was deleted"],
        ),
        job_case(
            "output inside the input",
            &f("in"),
            &f("in/out"),
            &["inside", "input"],
        ),
        with(
            job_case(
                "checkpoint inside the output",
                &f("in"),
                &out("o11"),
                &["checkpoint", "output"],
            ),
            &["--checkpoint", &out("o11/ckpt")],
        ),
        job_case(
            "finished output written again",
            &f("in"),
            &f("kept-out"),
            &["already"],
        ),
        with(
            job_case(
                "another output for a kept checkpoint",
                &f("in"),
                &out("o12"),
                &["kept-out", "o12"],
            ),
            &["--checkpoint", &f("kept-ckpt")],
        ),
        // Flags.
        with(
            job_case(
                "batch size 0",
                &f("in"),
                &out("o13"),
                &["--batch-size", "0"],
            ),
            &["--batch-size", "0"],
        ),
        with(
            job_case("workers 0", &f("in"), &out("o14"), &["--workers", "0"]),
            &["--workers", "0"],
        ),
        with(
            job_case(
                "unknown output format",
                &f("in"),
                &out("o15"),
                &["xml", "parquet"],
            ),
            &["--output-format", "xml"],
        ),
        // Transforms.
        with(
            job_case(
                "transform that exits",
                &f("in"),
                &out("o16"),
                &["exit status: 3", "run the same command again"],
            ),
            &["--map-cmd", &failing],
        ),
        with(
            job_case(
                "transform that hangs",
                &f("in"),
                &out("o17"),
                &["no answer within 2 s", "--map-timeout"],
            ),
            &["--map-cmd", &hanging, "--map-timeout", "2"],
        ),
        with(
            job_case(
                "transform that answers garbage",
                &f("in"),
                &out("o18"),
                &["Arrow IPC"],
            ),
            &["--map-cmd", &garbage],
        ),
        with(
            job_case(
                "transform that drops the ID column",
                &f("in"),
                &out("o19"),
                &["uid", "no_id.py"],
            ),
            &["--map-cmd", &no_id],
        ),
        // Where the metrics go.
        with(
            job_case(
                "metrics address that cannot be listened on",
                &f("in"),
                &out("o40"),
                &["--metrics-addr 198.51.100.7:9", "free HOST:PORT"],
            ),
            &["--metrics-addr", "198.51.100.7:9"],
        ),
        with(
            job_case(
                "metrics file in a missing directory",
                &f("in"),
                &out("o41"),
                &["--metrics-file", "a directory that exists"],
            ),
            &["--metrics-file", &out("missing/job.prom")],
        ),
        // Where the output goes.
        job_case(
            "output to an S3 store that is full",
            &f("big"),
            &format!("{bucket}/bad-input-full"),
            &["no space"],
        ),
    ];
    let full_case = cases.len() - 1;
    cases[full_case]
        .args
        .splice(0..0, ["-o".to_string(), on(&full_proxy.endpoint())]);
    cases.push(job_case(
        "read-only output directory",
        &f("in"),
        &readonly.join("out").display().to_string(),
        &["read-only"],
    ));
    cases.push(with(
        job_case(
            "output to a full disk",
            &f("big"),
            &full.join("out").display().to_string(),
            &["no space", "resumes"],
        ),
        &["--workers", "1"],
    ));
    assert!(cases.len() >= 40, "the matrix has {} cases", cases.len());

    let secrets = [
        s3.secret.as_str(),
        WRONG_SECRET,
        "expired-session-token-0123456789-do-not-print",
    ];
    let mut table = String::from("| case | message |\n|---|---|\n");
    let mut failures = Vec::new();
    for case in &cases {
        let before = digest(&fixtures);
        let mut command = common::cairn_on(&s3, &s3.endpoint);
        command.args(&case.args).env("NO_COLOR", "1");
        for (key, value) in &case.env {
            if value.is_empty() {
                command.env_remove(key);
            } else {
                command.env(key, value);
            }
        }
        let output = command.output().expect("run cairn");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let message = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .split(" (cause: ")
            .next()
            .unwrap_or_default()
            .to_string();
        let mut wrong = Vec::new();
        if output.status.success() {
            wrong.push("exit 0".to_string());
        }
        for fragment in &case.expect {
            if !text.contains(fragment.as_str()) {
                wrong.push(format!("no {fragment:?}"));
            }
        }
        for secret in secrets {
            if text.contains(secret) {
                wrong.push("a secret in the output".into());
            }
        }
        if digest(&fixtures) != before {
            wrong.push("a fixture (input or committed output) changed".into());
        }
        if !wrong.is_empty() {
            failures.push(format!("{}: {}\n  {text}", case.name, wrong.join(", ")));
        }
        let shown = message
            .replace(&root.display().to_string(), "$TMP")
            .replace(&full_proxy.endpoint(), "$PROXY")
            .replace(&token_proxy.endpoint(), "$PROXY")
            .replace(&dead, "http://127.0.0.1:$DEAD")
            .replace(&s3.endpoint, "$GARAGE")
            .replace(&tls_to_http, "https://$GARAGE_HOST_PORT")
            .replace(&python, "python3");
        let shown = without_run_ids(&shown).replace('|', "\\|");
        table.push_str(&format!("| {} | {} |\n", case.name, shown));
    }
    println!("{table}");
    for refused_up_front in ["o40", "o41"] {
        assert!(
            !scratch.join(refused_up_front).exists(),
            "{refused_up_front}: a metrics flag refused after the job had written"
        );
    }
    assert_eq!(
        std::fs::read(scratch.join("o20-ckpt/notes.parquet")).unwrap(),
        b"my notes",
        "the foreign file in the checkpoint directory was touched"
    );
    assert!(
        failures.is_empty(),
        "{} cases went wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
    check_docs_table(&table);
}

const START: &str = "<!-- bad-input table: written by crates/cairn-cli/tests/bad_input.rs -->\n";
const END: &str = "<!-- end of the bad-input table -->\n";

/// The table in docs/reliability.md must be the one this run printed.
fn check_docs_table(table: &str) {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reliability.md");
    let text = std::fs::read_to_string(&doc).expect("docs/reliability.md");
    let (Some(a), Some(b)) = (text.find(START), text.find(END)) else {
        panic!("docs/reliability.md lost its table markers");
    };
    let current = &text[a + START.len()..b];
    if current != table {
        if std::env::var_os("CAIRN_BLESS").is_some() {
            let updated = format!("{}{START}{table}{}", &text[..a], &text[b..]);
            std::fs::write(&doc, updated).unwrap();
            return;
        }
        panic!(
            "docs/reliability.md's bad-input table differs from what the binary says; \
             run with CAIRN_BLESS=1 to rewrite it, then review the diff:\n{table}"
        );
    }
}

/// `text` with run IDs (32 hex digits) and unit numbers (`_` and 10
/// digits) written as `<run>` and `<unit>`: they differ from run to run.
fn without_run_ids(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let run = chars[i..]
            .iter()
            .take_while(|c| c.is_ascii_hexdigit())
            .count();
        let starts_word = i == 0 || !chars[i - 1].is_ascii_alphanumeric();
        if run == 32 && starts_word {
            out.push_str("<run>");
            i += 32;
            continue;
        }
        let digits = chars[i + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if chars[i] == '_' && digits == 10 {
            out.push_str("_<unit>");
            i += 11;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}
