//! A checkpointed `cairn job run` whose output and checkpoint are on a
//! tclake:// volume (the local catalog, Garage behind it), killed midway and
//! resumed while the volume's credentials are replaced (they last 20 s and
//! are renewed 15 s before expiry); and `cairn config` on a tclake URL.

use std::process::Stdio;
use std::time::{Duration, Instant};

use cairn_conformance::{tclake_catalog, tools_python};

mod common;
use common::{cairn, embed_transform, run_ok, sample, verify_exactly_once};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpointed_job_on_a_volume_resumes_across_credential_renewals() {
    let test = "checkpointed_job_on_a_volume_resumes_across_credential_renewals";
    let (Some(catalog), Some(python)) = (tclake_catalog(test), tools_python(test)) else {
        return;
    };
    let options = catalog.cli_options();
    let tmp = tempfile::tempdir().unwrap();
    let input = format!("{}/in", tmp.path().display());
    let root = format!(
        "tclake://volume/lake/raw/short/job-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    );
    let (output, checkpoint) = (format!("{root}/out"), format!("{root}/ckpt"));
    sample(&[], &input, 6000, 3, 500);
    let transform = embed_transform(&python);
    let job = [
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
        "--batch-size",
        "100",
        "--commit-every-rows",
        "300",
        "--workers",
        "2",
        "--map-cmd",
        &transform,
        "--quiet",
    ];
    let started = Instant::now();
    // First run: killed once a few units are committed.
    let mut first = cairn(&options, &job)
        .env("EMBED_SLEEP_MS", "60")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    loop {
        let status = cairn(&options, &["ckpt", "status", &checkpoint, "--json"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&status.stdout).to_string();
        let committed = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["committed_units"].as_u64())
            .unwrap_or(0);
        if committed >= 3
            || first.try_wait().unwrap().is_some()
            || started.elapsed() > Duration::from_secs(60)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        first.try_wait().unwrap().is_none(),
        "the first run ended before it could be killed"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    // Second run: resumes and finishes, slowly enough (about 8 s) that its
    // two filesystems (output, checkpoint) each replace their credentials.
    let issued_before = catalog.stats().await["credentials"].as_u64().unwrap();
    let resumed = Instant::now();
    let out = cairn(&options, &job)
        .env("EMBED_SLEEP_MS", "300")
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{summary}");
    assert!(
        summary.contains("already committed") && !summary.contains(" 0 already committed"),
        "{summary}"
    );
    let elapsed = resumed.elapsed();
    let issued = catalog.stats().await["credentials"].as_u64().unwrap() - issued_before;
    eprintln!("{summary}resumed job on tclake: {elapsed:?}, {issued} credential sets issued");
    assert!(
        elapsed > Duration::from_secs(6),
        "the resumed run was too short ({elapsed:?}) to see a renewal"
    );
    assert!(
        issued >= 3,
        "credentials issued {issued} times over {elapsed:?}"
    );
    verify_exactly_once(&options, &input, &output);
    let left = cairn(&options, &["ls", &checkpoint]).output().unwrap();
    assert!(
        left.stdout.is_empty(),
        "checkpoint left: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

#[test]
fn config_shows_tclake_options_with_secrets_hidden() {
    let Some(catalog) = tclake_catalog("config_shows_tclake_options_with_secrets_hidden") else {
        return;
    };
    let shown = run_ok(&mut cairn(
        &catalog.cli_options(),
        &["config", "tclake://volume/lake/raw/files/x", "--json"],
    ));
    assert!(
        shown.contains("\"sid\"") && shown.contains("\"endpoint\""),
        "{shown}"
    );
    assert!(
        !shown.contains(cairn_conformance::TCLAKE_SK),
        "secret shown: {shown}"
    );
}
