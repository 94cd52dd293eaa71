//! Differential test: cairn's reading of `FSSPEC_*` variables against fsspec's
//! own `config.set_conf_env`, on generated environments (seeded; the seed is
//! printed). Needs Python with fsspec: `CAIRN_PYTHON`, or the virtualenv that
//! `scripts/tools.sh` makes.

use std::io::Write;
use std::process::{Command, Stdio};

use cairn_fs::{Environment, FsspecEnv};

/// splitmix64: a small deterministic generator, so failures replay from the seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const NAMES: &[&str] = &[
    "FSSPEC_S3",
    "FSSPEC_s3",
    "FSSPEC_GCS",
    "FSSPEC_S3_KEY",
    "FSSPEC_S3_SECRET",
    "FSSPEC_S3_CLIENT_KWARGS",
    "FSSPEC_s3_Secret",
    "FSSPEC_S3_",
    "FSSPEC__S3",
    "FSSPEC",
    "FSSPECX",
    "fsspec_s3_key",
    "FSSPEC_MEMORY_A_B",
    "FSSPEC_S3A_ENDPOINT_URL",
    "FSSPEC_S3A",
    "FSSPEC_COS_REGION",
    "FSSPEC_Cos",
    "FSSPEC_S3_USE_LISTINGS_CACHE",
    "AWS_ACCESS_KEY_ID",
    "FSSPEC_GCS_TOKEN",
    "FSSPEC_S3__X",
    // Keywords of s3fs, gcsfs and ossfs as their users set them.
    "FSSPEC_S3_DEFAULT_BLOCK_SIZE",
    "FSSPEC_S3_REQUESTER_PAYS",
    "FSSPEC_S3_MAX_CONCURRENCY",
    "FSSPEC_S3_SKIP_INSTANCE_CACHE",
    "FSSPEC_S3_S3_ADDITIONAL_KWARGS",
    "FSSPEC_GCS_BLOCK_SIZE",
    "FSSPEC_GCS_CONSISTENCY",
    "FSSPEC_GCS_ACCESS",
    "FSSPEC_OSS_DEFAULT_CACHE_TYPE",
    "FSSPEC_OSS_PSIZE",
];

/// The keyword arguments of s3fs 2026.9, gcsfs 2026.10 and ossfs 2025.5 (and
/// fsspec's own) that the generated environments set: cairn must never call
/// them unknown, whatever their values.
const LIBRARY_KEYWORDS: &[(&str, &[&str])] = &[
    (
        "s3",
        &[
            "key",
            "secret",
            "client_kwargs",
            "anon",
            "endpoint_url",
            "use_listings_cache",
            "default_block_size",
            "requester_pays",
            "max_concurrency",
            "skip_instance_cache",
            "s3_additional_kwargs",
        ],
    ),
    ("gcs", &["token", "block_size", "consistency", "access"]),
    ("oss", &["default_cache_type", "psize"]),
];

const VALUES: &[&str] = &[
    "true",
    "false",
    "null",
    "123",
    "-7",
    "1.5",
    "1e5",
    " 5 ",
    "\"q\"",
    "True",
    "0123",
    "",
    "abc",
    "{bad",
    "[1, 2]",
    "{}",
    "{\"Key\": 1, \"a\": {\"b\": null}}",
    "{\"client_kwargs\": {\"endpoint_url\": \"http://127.0.0.1:9000\"}, \"anon\": true}",
    "{\"key\": \"a\", \"key\": \"b\"}",
    "12345",
    "\"12345\"",
    " {\"x\": [true, 2.5]} ",
    "http://host:9000",
    "{\"s3\": {\"addressing_style\": \"virtual\"}}",
    "-0.0",
    "1E-3",
];

fn python() -> Option<String> {
    if let Ok(p) = std::env::var("CAIRN_PYTHON") {
        return Some(p);
    }
    let home = std::env::var("HOME").ok()?;
    let tools = std::env::var("CAIRN_TOOLS").unwrap_or(format!("{home}/.cache/cairn-tools"));
    let venv = format!("{tools}/venv/bin/python");
    std::path::Path::new(&venv).exists().then_some(venv)
}

#[test]
fn cairn_reads_fsspec_variables_exactly_as_fsspec_does() {
    let Some(python) = python() else {
        if std::env::var_os("CAIRN_TEST_SKIP_SERVERS").is_some() {
            eprintln!("SKIPPED: no Python with fsspec (CAIRN_PYTHON unset)");
            return;
        }
        panic!("no Python with fsspec: run scripts/tools.sh or set CAIRN_PYTHON");
    };
    let seed: u64 = std::env::var("CAIRN_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_F55E);
    eprintln!("differential seed: {seed} (replay with CAIRN_DIFF_SEED={seed})");
    let mut rng = Rng(seed);
    let mut envs: Vec<Vec<(String, String)>> = Vec::new();
    for _ in 0..300 {
        let count = 1 + rng.next() % 8;
        let mut env: Vec<(String, String)> = Vec::new();
        for _ in 0..count {
            let name = rng.pick(NAMES).to_string();
            if env.iter().any(|(n, _)| *n == name) {
                continue;
            }
            env.push((name, rng.pick(VALUES).to_string()));
        }
        envs.push(env);
    }

    let mut child = Command::new(&python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/fsspec_env_oracle.py"
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the fsspec oracle");
    let mut input = String::new();
    for env in &envs {
        input.push_str(&serde_json::to_string(env).unwrap());
        input.push('\n');
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "the oracle failed");
    let answers: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), envs.len());

    let mut compared = 0;
    let mut built = 0;
    for (env, expected) in envs.iter().zip(&answers) {
        let ours = FsspecEnv::parse(&Environment::from_pairs(env.clone()), |_, _| false).to_json();
        assert_eq!(&ours, expected, "environment {env:?}");
        compared += 1;
        // The keys fsspec hands a library's filesystem: cairn knows each.
        for (protocol, keywords) in LIBRARY_KEYWORDS {
            let Some(conf) = expected.get(protocol).and_then(|c| c.as_object()) else {
                continue;
            };
            if !conf.keys().all(|k| keywords.contains(&k.as_str())) {
                continue;
            }
            let result = cairn_fs::FileSystemBuilder::new(protocol)
                .env(Environment::from_pairs(env.clone()))
                .build();
            if let Err(e) = result {
                // Values may be wrong (a nested client_kwargs key botocore
                // would refuse too); a top-level keyword is never unknown.
                let text = e.to_string();
                let unknown = conf.keys().any(|k| {
                    text.contains(&format!("unknown option {protocol}.{k} "))
                        || text.contains(&format!("unknown option {protocol}.{k};"))
                });
                assert!(
                    !unknown,
                    "{protocol}: fsspec passes {conf:?} to the library; cairn calls a key unknown: {e} (environment {env:?})"
                );
            }
            built += 1;
        }
    }
    eprintln!("{compared} environments agree with fsspec; {built} built with library keywords");
    assert!(
        compared >= 100 && built >= 20,
        "{compared} compared, {built} built"
    );
}
