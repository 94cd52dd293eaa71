//! `cairn job run` killed with SIGKILL at random instants (seeded; the seed
//! is printed, `CAIRN_JOB_KILL9_SEED` replays it), re-run each time, then run
//! to the end: the output must hold every input row exactly once, and the
//! checkpoint must be gone. On local disk (with and without a Python
//! `--map-cmd` transform, and with a composite key) and on Garage (with
//! the transform).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cairn_conformance::{s3_server, tools_python};

mod common;
use common::{cairn, embed_transform, run_ok};

fn seed() -> u64 {
    let seed = std::env::var("CAIRN_JOB_KILL9_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_CA1D);
    eprintln!("job kill -9 seed: {seed} (replay with CAIRN_JOB_KILL9_SEED={seed})");
    seed
}

struct Scenario {
    env: Vec<(String, String)>,
    /// `--id-column`: `uid`, or a composite key (`source,uid`).
    id_column: &'static str,
    input: String,
    output: String,
    checkpoint: String,
    extra: Vec<String>,
}

impl Scenario {
    /// A job on local disk under `root` (`in`, `out`, `ckpt`), keyed by
    /// `id_column`, with no transform.
    fn local(root: &str, id_column: &'static str) -> Self {
        Self {
            env: vec![],
            id_column,
            input: format!("{root}/in"),
            output: format!("{root}/out"),
            checkpoint: format!("{root}/ckpt"),
            extra: vec![],
        }
    }

    /// Writes the job's input: `cairn job sample` of 40,000 rows in
    /// `files` files of 1,000-row row groups, with `extra` arguments.
    fn sample(&self, files: &str, extra: &[&str]) {
        let mut args = vec![
            "job",
            "sample",
            &self.input,
            "--rows",
            "40000",
            "--files",
            files,
            "--row-group-rows",
            "1000",
        ];
        args.extend(extra);
        self.ok(&args);
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = cairn(&[], args);
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    fn run_args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "job",
            "run",
            "--input",
            &self.input,
            "--output",
            &self.output,
            "--checkpoint",
            &self.checkpoint,
            "--id-column",
            self.id_column,
            "--workers",
            "2",
            "--batch-size",
            "100",
            "--commit-every-rows",
            "100",
            "--quiet",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(self.extra.iter().cloned());
        args
    }

    fn start(&self) -> Child {
        let args = self.run_args();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.command(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start cairn job run")
    }

    fn ok(&self, args: &[&str]) -> String {
        run_ok(&mut self.command(args))
    }

    /// Kills the job `kills` times at random instants; returns how many
    /// kills landed while it was still running, and whether a run finished
    /// the job before its kill (then there is nothing left to kill).
    fn kill_repeatedly(&self, kills: usize, max_delay_ms: u64, seed: &mut u64) -> (usize, bool) {
        let mut landed = 0;
        for _ in 0..kills {
            let mut child = self.start();
            let delay =
                Duration::from_millis(30 + cairn_conformance::splitmix64(seed) % max_delay_ms);
            let started = Instant::now();
            while started.elapsed() < delay {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            if let Some(status) = child.try_wait().unwrap() {
                if !status.success() {
                    // The only expected refusal: the previous (killed) run had
                    // already finished and removed its checkpoint, so this
                    // one is a fresh run into a full output.
                    let args = self.run_args();
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let out = self.command(&args).output().unwrap();
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    assert!(
                        stderr.contains("already holds files")
                            && stderr.contains("no checkpoint to resume"),
                        "a run ended on its own and failed: {status}: {stderr}"
                    );
                }
                return (landed, true);
            }
            landed += 1;
            // SIGKILL: no clean-up of any kind in the child.
            let _ = child.kill();
            child.wait().unwrap();
        }
        (landed, false)
    }

    /// Runs to the end (unless a run already finished the job) and checks
    /// exactly-once with `cairn job verify`.
    fn finish_and_verify(&self, finished: bool) {
        if !finished {
            let args = self.run_args();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            eprintln!("final run: {}", self.ok(&args));
        }
        let verified = self.ok(&[
            "job",
            "verify",
            "--input",
            &self.input,
            "--output",
            &self.output,
            "--id-column",
            "uid",
        ]);
        assert!(verified.contains("exactly once:"), "{verified}");
        let left = self.command(&["ls", &self.checkpoint]).output().unwrap();
        assert!(
            !left.status.success() || left.stdout.is_empty(),
            "checkpoint not cleaned up: {}",
            String::from_utf8_lossy(&left.stdout)
        );
    }
}

#[test]
fn local_job_survives_kill9() {
    let mut seed = seed();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    let plain = Scenario::local(&root, "uid");
    plain.sample("8", &[]);
    let (landed_plain, finished) = plain.kill_repeatedly(12, 250, &mut seed);
    plain.finish_and_verify(finished);

    let Some(python) = tools_python("local_job_survives_kill9") else {
        return;
    };
    let transformed = Scenario {
        env: vec![("EMBED_SLEEP_MS".into(), "15".into())],
        id_column: "uid",
        output: format!("{root}/out-embed"),
        checkpoint: format!("{root}/ckpt-embed"),
        extra: vec!["--map-cmd".into(), embed_transform(&python)],
        input: plain.input.clone(),
    };
    let (landed_embed, finished) = transformed.kill_repeatedly(10, 700, &mut seed);
    transformed.finish_and_verify(finished);
    eprintln!(
        "local kills landed mid-run: plain {landed_plain}/12, with --map-cmd {landed_embed}/10"
    );
    assert!(
        landed_plain >= 10 && landed_embed >= 8,
        "the job ended before most kills: make it slower"
    );
}

#[test]
fn garage_job_with_transform_survives_kill9() {
    let Some((_, settings)) = s3_server("GARAGE", "garage_job_with_transform_survives_kill9")
    else {
        return;
    };
    let Some(python) = tools_python("garage_job_with_transform_survives_kill9") else {
        return;
    };
    let mut seed = seed() ^ 0x6A2A6E;
    let prefix = format!(
        "s3://{}/job-kill9-{}",
        settings.bucket,
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let scenario = Scenario {
        env: vec![
            ("AWS_ACCESS_KEY_ID".into(), settings.key.clone()),
            ("AWS_SECRET_ACCESS_KEY".into(), settings.secret.clone()),
            ("AWS_ENDPOINT_URL".into(), settings.endpoint.clone()),
            ("AWS_REGION".into(), settings.region.clone()),
            ("EMBED_SLEEP_MS".into(), "5".into()),
        ],
        id_column: "uid",
        input: format!("{prefix}/in"),
        output: format!("{prefix}/out"),
        checkpoint: format!("{prefix}/ckpt"),
        extra: vec!["--map-cmd".into(), embed_transform(&python)],
    };
    scenario.sample("4", &[]);
    let (landed, finished) = scenario.kill_repeatedly(10, 900, &mut seed);
    scenario.finish_and_verify(finished);
    eprintln!("garage kills landed mid-run: {landed}/10");
    assert!(
        landed >= 7,
        "the job ended before most kills: make it slower"
    );
}

#[test]
fn local_job_with_a_composite_key_survives_kill9() {
    // `--id-column source,uid`: the committed set holds the encoded
    // (source, uid) keys. A wrong encoding skips rows that were never
    // written (verify finds them missing) or none (duplicates).
    let mut seed = seed() ^ 0xC0_4D05;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    let scenario = Scenario::local(&root, "source,uid");
    scenario.sample("8", &["--sources", "7"]);
    let (landed, finished) = scenario.kill_repeatedly(10, 250, &mut seed);
    scenario.finish_and_verify(finished);
    eprintln!("composite-key kills landed mid-run: {landed}/10");
    assert!(
        landed >= 8,
        "the job ended before most kills: make it slower"
    );
    // A kept checkpoint is bound to its key: the columns in another
    // order are another key, refused; a key naming a column twice too.
    let run = |key: &str, extra: &[&str]| {
        let mut args = vec!["job", "run", "--input", &scenario.input, "--output"];
        let out2 = format!("{root}/out2");
        let ckpt2 = format!("{root}/ckpt2");
        args.extend([
            out2.as_str(),
            "--checkpoint",
            ckpt2.as_str(),
            "--id-column",
            key,
        ]);
        args.extend(extra);
        scenario.command(&args).output().unwrap()
    };
    let kept = run("source,uid", &["--keep-checkpoint", "--quiet"]);
    assert!(
        kept.status.success(),
        "{}",
        String::from_utf8_lossy(&kept.stderr)
    );
    let refused = run("uid,source", &["--quiet"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && stderr.contains("belongs to this job")
            && stderr.contains(r#"[\"source\",\"uid\"]"#),
        "{stderr}"
    );
    let twice = run("uid,uid", &["--quiet"]);
    let stderr = String::from_utf8_lossy(&twice.stderr);
    assert!(
        !twice.status.success() && stderr.contains("each once"),
        "{stderr}"
    );
}
