//! `cairn job run` (Parquet in, a Python `--map-cmd`, Parquet out,
//! checkpoint on S3) against a misbehaving store:
//! - through the fault proxy at 5% injected faults of every kind (503
//!   SlowDown, 500, dropped connections after the server acted, cut and
//!   truncated bodies, stalls past the read timeout): one run, exactly once;
//! - with the store down longer than the retry deadline: the run fails
//!   naming the endpoint, and the re-run after the store is back ends exactly
//!   once;
//! - Garage killed with SIGKILL and restarted on the same data mid-job: the
//!   run rides the outage out; and with a deadline shorter than the outage,
//!   fails clearly and the re-run ends exactly once.
//!
//! Exactly-once is judged by pyarrow + s3fs reading the store directly
//! (scripts/oracle_ids.py), never by cairn. `#[ignore]`d: they need Garage
//! and the tools' Python; scripts/test.sh runs them.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cairn_conformance::fault_proxy::{self, Fault, FaultPlan, FaultProxy};
use cairn_conformance::own_garage::OwnGarage;
use cairn_conformance::{S3Settings, s3_server, tools_python};
use common::place::text;
use common::{cairn_on, embed_transform, s3_oracle};

/// Rows of the input: enough units (of 5,000 rows) that each fault kind
/// meets several requests.
const ROWS: usize = 200_000;

/// One test at a time: their timings (deadlines, outages) are the point,
/// and two jobs with Python transforms would share two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A job's URLs under a fresh prefix, and the settings it runs with.
struct Job {
    input: String,
    output: String,
    checkpoint: String,
    transform: String,
}

impl Job {
    fn new(s3: &S3Settings, name: &str, python: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let root = format!("s3://{}/job-faults-{name}-{nanos}", s3.bucket);
        Self {
            input: format!("{root}/in"),
            output: format!("{root}/out"),
            checkpoint: format!("{root}/ckpt"),
            transform: embed_transform(python),
        }
    }

    /// `cairn job run` against `endpoint` (the server, or a proxy in front
    /// of it), with extra `-o` options.
    fn command(&self, s3: &S3Settings, endpoint: &str, options: &[&str]) -> Command {
        let mut command = cairn_on(s3, endpoint);
        for option in options {
            command.args(["-o", option]);
        }
        command.args([
            "job",
            "run",
            "--input",
            &self.input,
            "--output",
            &self.output,
            "--checkpoint",
            &self.checkpoint,
            "--id-column",
            "uid",
            "--commit-every-rows",
            "5000",
            "--workers",
            "2",
            "--map-cmd",
            &self.transform,
            "--quiet",
        ]);
        command
    }

    fn committed_units(&self, s3: &S3Settings) -> u64 {
        let out = cairn_on(s3, &s3.endpoint)
            .args(["ckpt", "status", "--json", &self.checkpoint])
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|v| v["committed_units"].as_u64())
            .unwrap_or(0)
    }

    fn assert_exactly_once(&self, s3: &S3Settings, what: &str) {
        let oracle = s3_oracle(s3, &self.input, &self.output);
        assert_eq!(oracle.input_rows, ROWS as u64, "{what}: {oracle:?}");
        oracle.assert_exactly_once(what);
    }
}

fn sample(s3: &S3Settings, job: &Job) {
    common::run_ok(cairn_on(s3, &s3.endpoint).args([
        "job",
        "sample",
        &job.input,
        "--rows",
        &ROWS.to_string(),
        "--files",
        "8",
        "--row-group-rows",
        "5000",
    ]));
}

fn spawn(mut command: Command) -> Child {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cairn")
}

/// Waits until `job` has at least `units` committed units, or `child` ends.
fn wait_for_units(job: &Job, s3: &S3Settings, child: &mut Child, units: u64) {
    let started = Instant::now();
    while job.committed_units(s3) < units {
        assert!(child.try_wait().unwrap().is_none(), "the job ended early");
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no progress in 2 minutes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs the Garage server and the tools' Python: scripts/test.sh runs it"]
fn job_through_five_percent_faults_of_every_kind_ends_exactly_once() {
    let _serial = serial();
    let test = "job_through_five_percent_faults_of_every_kind_ends_exactly_once";
    let (Some((_, s3)), Some(python)) = (s3_server("GARAGE", test), tools_python(test)) else {
        return;
    };
    let job = Job::new(&s3, "five", &python);
    sample(&s3, &job);
    let mut plan = FaultPlan::new(fault_proxy::seed_from_env(20261201), 0.05, Fault::JOB);
    plan.stall = Duration::from_millis(2500);
    let proxy = FaultProxy::start(&s3.endpoint, plan);

    let started = Instant::now();
    // A read timeout under the stall: stalls are timeouts to retry.
    let out = job
        .command(&s3, &proxy.endpoint(), &["s3.config_kwargs.read_timeout=1"])
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let counts = proxy.counts();
    eprintln!(
        "job through the proxy: {:.1} s, {counts:?}\n{}",
        elapsed.as_secs_f64(),
        text(&out)
    );
    assert!(out.status.success(), "the job failed:\n{}", text(&out));
    for kind in Fault::JOB {
        assert!(
            counts.get(kind.name()).copied().unwrap_or(0) > 0,
            "no {} injected: {counts:?}",
            kind.name()
        );
    }
    job.assert_exactly_once(&s3, "5% faults");
}

#[test]
#[ignore = "needs the Garage server and the tools' Python: scripts/test.sh runs it"]
fn store_down_past_the_deadline_fails_naming_it_and_the_rerun_ends_exactly_once() {
    let _serial = serial();
    let test = "store_down_past_the_deadline_fails_naming_it_and_the_rerun_ends_exactly_once";
    let (Some((_, s3)), Some(python)) = (s3_server("GARAGE", test), tools_python(test)) else {
        return;
    };
    let job = Job::new(&s3, "down", &python);
    sample(&s3, &job);
    let proxy = FaultProxy::start(
        &s3.endpoint,
        FaultPlan::new(fault_proxy::seed_from_env(20261201), 0.0, &[]),
    );
    let options = ["s3.retry_deadline=2"];

    let mut child = spawn(job.command(&s3, &proxy.endpoint(), &options));
    wait_for_units(&job, &s3, &mut child, 3);
    proxy.refuse_for(Duration::from_secs(25));
    let down = Instant::now();
    let out = child.wait_with_output().unwrap();
    let failed_after = down.elapsed();
    let message = text(&out);
    eprintln!(
        "failed after {:.1} s:\n{message}",
        failed_after.as_secs_f64()
    );
    assert!(!out.status.success(), "the job went through a 10 s outage");
    // Without the deadline the retries would wait about 50 s.
    assert!(
        failed_after < Duration::from_secs(20),
        "the 2 s deadline was not kept"
    );
    assert!(message.contains(&proxy.endpoint()), "{message}");
    assert!(message.contains("run the same command"), "{message}");

    std::thread::sleep(Duration::from_secs(25).saturating_sub(failed_after));
    let out = job
        .command(&s3, &proxy.endpoint(), &options)
        .output()
        .unwrap();
    assert!(out.status.success(), "the re-run failed:\n{}", text(&out));
    job.assert_exactly_once(&s3, "re-run after an outage");
}

#[test]
#[ignore = "needs Garage (installed by scripts/tools.sh) and the tools' Python: scripts/test.sh runs it"]
fn garage_killed_and_restarted_mid_job() {
    let _serial = serial();
    let test = "garage_killed_and_restarted_mid_job";
    let (Some(mut garage), Some(python)) = (OwnGarage::start(test), tools_python(test)) else {
        return;
    };
    let s3 = garage.s3.clone();

    // Killed for 3 s: the run rides it out on its retries.
    let job = Job::new(&s3, "restart", &python);
    sample(&s3, &job);
    let mut child = spawn(job.command(&s3, &s3.endpoint, &[]));
    wait_for_units(&job, &s3, &mut child, 5);
    garage.kill9();
    std::thread::sleep(Duration::from_secs(3));
    garage.restart();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the job did not ride out a Garage restart:\n{}",
        text(&out)
    );
    job.assert_exactly_once(&s3, "Garage SIGKILL + restart");

    // Killed for longer than a 2 s deadline: the run fails naming the
    // endpoint; once Garage is back the same command ends exactly once.
    let job = Job::new(&s3, "restart-late", &python);
    sample(&s3, &job);
    let options = ["s3.retry_deadline=2"];
    let mut child = spawn(job.command(&s3, &s3.endpoint, &options));
    wait_for_units(&job, &s3, &mut child, 5);
    garage.kill9();
    let out = child.wait_with_output().unwrap();
    let message = text(&out);
    eprintln!("with Garage down:\n{message}");
    assert!(!out.status.success(), "the job finished with Garage down");
    assert!(message.contains(&s3.endpoint), "{message}");
    garage.restart();
    let out = job.command(&s3, &s3.endpoint, &options).output().unwrap();
    assert!(out.status.success(), "the re-run failed:\n{}", text(&out));
    job.assert_exactly_once(&s3, "re-run after Garage came back");
}
