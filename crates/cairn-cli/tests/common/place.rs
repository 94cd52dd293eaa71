//! Where a job scenario runs (a temporary local directory or a fresh S3
//! prefix), the job every scenario runs, and the exactly-once check on
//! either, by an oracle that does not use cairn: the parquet crate on local
//! disk, pyarrow with s3fs on S3.

use std::collections::HashMap;
use std::process::{Command, Output};

use cairn_conformance::{S3Settings, s3_server};

use super::{Oracle, s3_oracle};

/// Where a scenario runs: a temporary local directory or a fresh S3 prefix.
pub struct Place {
    pub root: String,
    pub env: Vec<(String, String)>,
    pub s3: Option<S3Settings>,
    _tmp: Option<tempfile::TempDir>,
}

impl Place {
    pub fn local() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        Place {
            root: tmp.path().display().to_string(),
            env: Vec::new(),
            s3: None,
            _tmp: Some(tmp),
        }
    }

    pub fn s3(server: &str, test: &str) -> Self {
        let (_, settings) = s3_server(server, test)
            .unwrap_or_else(|| panic!("{test} needs the {server} server (scripts/test.sh)"));
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        Place {
            root: format!("s3://{}/{test}-{nanos}", settings.bucket),
            env: vec![
                ("AWS_ACCESS_KEY_ID".into(), settings.key.clone()),
                ("AWS_SECRET_ACCESS_KEY".into(), settings.secret.clone()),
                ("AWS_ENDPOINT_URL".into(), settings.endpoint.clone()),
                ("AWS_REGION".into(), settings.region.clone()),
            ],
            s3: Some(settings),
            _tmp: None,
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("{}/{name}", self.root)
    }

    pub fn cairn(&self, args: &[&str]) -> Command {
        let mut command = super::cairn(&[], args);
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    pub fn ok(&self, args: &[&str]) -> String {
        super::run_ok(&mut self.cairn(args))
    }

    /// Runs `cairn ARGS` with the failpoint setting `failpoint`
    /// (`FAILPOINTS` syntax); the run must die there.
    pub fn crash(&self, args: &[&str], failpoint: &str) {
        let out = self
            .cairn(args)
            .env("FAILPOINTS", failpoint)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{failpoint}: {}", text(&out));
    }

    pub fn sample(&self, dir: &str, rows: usize, files: usize) {
        self.ok(&[
            "job",
            "sample",
            &self.url(dir),
            "--rows",
            &rows.to_string(),
            "--files",
            &files.to_string(),
            "--row-group-rows",
            "1000",
        ]);
    }

    /// Whether anything is at `name` (a file or a directory with files).
    pub fn exists(&self, name: &str) -> bool {
        match &self.s3 {
            None => std::path::Path::new(&self.url(name)).exists(),
            Some(_) => {
                let out = self.cairn(&["find", &self.url(name)]).output().unwrap();
                out.status.success() && !out.stdout.is_empty()
            }
        }
    }

    /// `cairn ckpt status --json` of `ckpt`.
    pub fn status(&self, ckpt: &str) -> serde_json::Value {
        let text = self.ok(&["ckpt", "status", &self.url(ckpt), "--json"]);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// The oracle: each input `uid` appears in the output as often as in the
    /// input (rows are never merged, so this is exactly once).
    pub fn assert_exactly_once(&self, input: &str, output: &str) {
        let report = match &self.s3 {
            None => local_oracle(&self.url(input), &self.url(output)),
            Some(s3) => s3_oracle(s3, &self.url(input), &self.url(output)),
        };
        assert_eq!(
            (report.missing, report.duplicated, report.unknown),
            (0, 0, 0),
            "not exactly once: {report:?}"
        );
        assert_eq!(report.input_rows, report.output_rows, "{report:?}");
    }
}

/// Counts every `uid` of the Parquet files under `dir`, read with the
/// parquet crate alone.
pub fn local_uids(dir: &str) -> HashMap<i64, u64> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    let mut counts = HashMap::new();
    let mut stack = vec![std::path::PathBuf::from(dir)];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap().path();
            let name = entry.file_name().unwrap().to_string_lossy().to_string();
            if entry.is_dir() {
                stack.push(entry);
                continue;
            }
            if !name.ends_with(".parquet") || name.starts_with(['.', '_']) {
                continue;
            }
            let file = std::fs::File::open(&entry).unwrap();
            let builder =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                    .unwrap();
            let mask = parquet::arrow::ProjectionMask::columns(builder.parquet_schema(), ["uid"]);
            for batch in builder.with_projection(mask).build().unwrap() {
                let batch = batch.unwrap();
                for uid in batch.column(0).as_primitive::<Int64Type>().values() {
                    *counts.entry(*uid).or_insert(0) += 1;
                }
            }
        }
    }
    counts
}

pub fn local_oracle(input: &str, output: &str) -> Oracle {
    let (want, got) = (local_uids(input), local_uids(output));
    let count = |map: &HashMap<i64, u64>, k: &i64| map.get(k).copied().unwrap_or(0);
    Oracle {
        input_rows: want.values().sum(),
        output_rows: got.values().sum(),
        missing: want.iter().filter(|(k, n)| count(&got, k) < **n).count() as u64,
        duplicated: want.iter().filter(|(k, n)| count(&got, k) > **n).count() as u64,
        unknown: got.keys().filter(|k| !want.contains_key(k)).count() as u64,
    }
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The job every scenario runs: 1 worker, a unit every 2,000 rows.
pub fn job_args<'a>(place: &'a Place, paths: &'a [String; 3], extra: &[&'a str]) -> Vec<&'a str> {
    let _ = place;
    let mut args = vec![
        "job",
        "run",
        "--input",
        &paths[0],
        "--output",
        &paths[1],
        "--checkpoint",
        &paths[2],
        "--id-column",
        "uid",
        "--workers",
        "1",
        "--commit-every-rows",
        "2000",
    ];
    args.extend_from_slice(extra);
    args
}
