//! cairn-fs on Garage behind the fault proxy (`cairn_conformance::fault_proxy`):
//! throttling, 5xx, dropped connections, cut and truncated bodies and stalls
//! are ridden out by retries, with every byte checked; a body damaged on its
//! way to the server is refused by the server thanks to the upload checksum
//! (and stored damaged without it: the check this test relies on is real); a
//! cut read is never returned as complete; a multipart upload whose
//! completion was carried out but not heard is not reported failed; an
//! outage shorter than the retry
//! budget is ridden out and a longer one fails naming the endpoint.

use std::time::{Duration, Instant};

use cairn_conformance::fault_proxy::{self, Fault, FaultPlan, FaultProxy};
use cairn_conformance::{S3Settings, s3_server};
use cairn_fs::{Environment, FileSystem, FileSystemBuilder, StorageOptions, WriteMode};
use serde_json::{Value, json};

/// A fresh seed per run unless `CAIRN_FAULT_SEED` names one.
fn seed() -> u64 {
    fault_proxy::seed_from_env(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    )
}

/// A filesystem on Garage through `proxy`, with `extra` s3 options, and a
/// fresh root URL.
fn through(proxy: &FaultProxy, s3: &S3Settings, extra: Value, name: &str) -> (FileSystem, String) {
    let mut options = s3.options_with_secret(&s3.secret);
    options.set("s3", "endpoint_url", proxy.endpoint().into());
    options.set("s3", "conditional_writes", "emulate".into());
    for (key, value) in extra.as_object().expect("an object") {
        options.set("s3", key, value.clone());
    }
    let fs = FileSystemBuilder::new("s3")
        .options(options)
        .env(Environment::default())
        .build()
        .expect("build the filesystem");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    (fs, format!("s3://{}/faults-{name}-{nanos}", s3.bucket))
}

/// Direct to Garage (no proxy), for checking what the server holds.
fn direct(s3: &S3Settings) -> FileSystem {
    let mut options: StorageOptions = s3.options_with_secret(&s3.secret);
    options.set("s3", "conditional_writes", "emulate".into());
    FileSystemBuilder::new("s3")
        .options(options)
        .env(Environment::default())
        .build()
        .expect("build the filesystem")
}

fn payload(i: usize, len: usize) -> bytes::Bytes {
    (0..len)
        .map(|j| (i * 31 + j * 7 % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
async fn every_fault_kind_is_ridden_out_with_every_byte_checked() {
    let Some((_, s3)) = s3_server("GARAGE", "faults") else {
        return;
    };
    let mut plan = FaultPlan::new(seed(), 0.2, Fault::JOB);
    plan.stall = Duration::from_millis(2500);
    let proxy = FaultProxy::start(&s3.endpoint, plan);
    // A read timeout under the stall, so stalls are timeouts to retry.
    let (fs, root) = through(
        &proxy,
        &s3,
        json!({"config_kwargs": {"read_timeout": 1, "retries": {"total_max_attempts": 12}}}),
        "ride",
    );
    let started = Instant::now();
    for i in 0..60 {
        let url = format!("{root}/small/{i:03}");
        fs.pipe(&url, payload(i, 1000 + i), WriteMode::Overwrite)
            .await
            .unwrap_or_else(|e| panic!("pipe {url}: {e}"));
    }
    // A multipart upload (8 MiB parts) and its ranged reads.
    let big = payload(99, 20 << 20);
    let mut writer = fs.open_write(&format!("{root}/big")).await.unwrap();
    writer.write(big.clone()).await.unwrap();
    writer.close().await.unwrap();
    for i in 0..60 {
        let url = format!("{root}/small/{i:03}");
        let got = fs
            .cat(&url)
            .await
            .unwrap_or_else(|e| panic!("cat {url}: {e}"));
        assert_eq!(got, payload(i, 1000 + i), "{url} read back wrong");
    }
    let got = fs.cat(&format!("{root}/big")).await.unwrap();
    assert!(
        got == big,
        "the multipart object read back wrong ({} bytes)",
        got.len()
    );
    let range = fs
        .cat_range(&format!("{root}/big"), 5 << 20, Some(6 << 20))
        .await
        .unwrap();
    assert!(range == big.slice(5 << 20..6 << 20));
    assert_eq!(fs.ls(&format!("{root}/small")).await.unwrap().len(), 60);
    fs.rm_with(&root, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();

    let counts = proxy.counts();
    eprintln!(
        "faults {counts:?}; retries {}; {:.1} s",
        fs.retried_requests(),
        started.elapsed().as_secs_f64()
    );
    for kind in Fault::JOB {
        assert!(
            counts.get(kind.name()).copied().unwrap_or(0) > 0,
            "no {} injected: {counts:?}",
            kind.name()
        );
    }
    assert!(fs.retried_requests() >= proxy.faults() / 2);
    assert!(
        direct(&s3)
            .ls(&root)
            .await
            .map(|l| l.is_empty())
            .unwrap_or(true),
        "rm left objects behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
async fn a_body_damaged_on_the_way_is_refused_by_the_checksum() {
    let Some((_, s3)) = s3_server("GARAGE", "faults") else {
        return;
    };
    let proxy = FaultProxy::start(
        &s3.endpoint,
        FaultPlan::new(seed(), 1.0, &[Fault::CorruptUpload]),
    );
    let data = payload(5, 64 << 10);
    let check = direct(&s3);
    for (label, extra) in [
        (
            "default",
            json!({"config_kwargs": {"retries": {"total_max_attempts": 2}}}),
        ),
        (
            "multipart",
            json!({"config_kwargs": {"retries": {"total_max_attempts": 2}}}),
        ),
    ] {
        let (fs, root) = through(&proxy, &s3, extra, label);
        let url = format!("{root}/object");
        let outcome = if label == "multipart" {
            let mut writer = fs.open_write(&url).await.unwrap();
            let written = writer.write(payload(6, 10 << 20)).await;
            match written {
                Ok(()) => writer.close().await,
                Err(e) => Err(e),
            }
        } else {
            fs.pipe(&url, data.clone(), WriteMode::Overwrite).await
        };
        let err = outcome.expect_err("a damaged upload must fail");
        eprintln!("{label}: {err}");
        assert!(
            !check.exists(&url).await.unwrap(),
            "{label}: a damaged upload was stored"
        );
    }

    // The same damage without a checksum is stored: the check above is the
    // checksum's doing, not the proxy's.
    let (fs, root) = through(
        &proxy,
        &s3,
        json!({"config_kwargs": {"request_checksum_calculation": "when_required"}}),
        "unchecked",
    );
    let url = format!("{root}/object");
    fs.pipe(&url, data.clone(), WriteMode::Overwrite)
        .await
        .unwrap();
    let stored = check.cat(&url).await.unwrap();
    assert_eq!(stored.len(), data.len());
    assert!(stored != data, "without a checksum the damage goes through");
    check
        .rm_with(&root, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
    assert!(proxy.faults() >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
async fn a_multipart_upload_completed_unheard_is_not_reported_failed() {
    let Some((_, s3)) = s3_server("GARAGE", "faults") else {
        return;
    };
    // The CompleteMultipartUpload is carried out, then its answer lost: the
    // retry finds the upload ID gone (NoSuchUpload).
    let mut plan = FaultPlan::new(seed(), 1.0, &[Fault::ResetAfterForward]);
    plan.only = Some((http::Method::POST, "uploadId=".into()));
    plan.max_faults = Some(1);
    let proxy = FaultProxy::start(&s3.endpoint, plan);
    let (fs, root) = through(&proxy, &s3, json!({}), "complete");
    let url = format!("{root}/big");
    let data = payload(8, 20 << 20);
    let mut writer = fs.open_write(&url).await.unwrap();
    writer.write(data.clone()).await.unwrap();
    writer
        .close()
        .await
        .expect("the object was completed: the lost answer is not a failure");
    assert_eq!(proxy.faults(), 1, "{:?}", proxy.counts());
    assert!(direct(&s3).cat(&url).await.unwrap() == data);
    direct(&s3)
        .rm_with(&root, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
}

/// The upload is gone without this writer having completed it (aborted
/// by someone else, or by a lifecycle rule) while another object of the
/// same size and part count sits at the key: the writer must report the
/// failure, not take that object for its own (its data was never stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Garage server and the tools' Python (boto3): scripts/test.sh runs it"]
async fn an_upload_gone_uncompleted_is_a_failure_even_beside_a_lookalike() {
    let Some((_, s3)) = s3_server("GARAGE", "faults") else {
        return;
    };
    let fs = direct(&s3);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let key = format!("faults-lookalike-{nanos}/big");
    let url = format!("s3://{}/{key}", s3.bucket);
    // Someone else's object, same size, also three parts, just written.
    let theirs = payload(4, 20 << 20);
    let mut other = fs.open_write(&url).await.unwrap();
    other.write(theirs.clone()).await.unwrap();
    other.close().await.unwrap();
    let mine = payload(3, 20 << 20);
    let mut writer = fs.open_write(&url).await.unwrap();
    writer.write(mine.clone()).await.unwrap();
    // This writer's upload is aborted behind its back.
    let python = cairn_conformance::tools_python("lookalike upload").expect("the tools' Python");
    let script = r#"
import sys, boto3
endpoint, key_id, secret, region, bucket, key = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key_id,
                  aws_secret_access_key=secret, region_name=region)
uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", [])
for upload in uploads:
    s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload["UploadId"])
print(len(uploads))
"#;
    let out = std::process::Command::new(python)
        .args([
            "-c",
            script,
            &s3.endpoint,
            &s3.key,
            &s3.secret,
            &s3.region,
            &s3.bucket,
            &key,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "1",
        "aborting the upload: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let closed = writer.close().await;
    assert!(
        closed.is_err(),
        "the writer took another object of its size for its own upload"
    );
    assert!(
        fs.cat(&url).await.unwrap() == theirs,
        "the other object is untouched"
    );
    fs.rm_file(&url).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
async fn a_failed_part_is_sent_again_not_the_whole_file() {
    let Some((_, s3)) = s3_server("GARAGE", "faults") else {
        return;
    };
    // One UploadPart answered 503: only that part goes again.
    let mut plan = FaultPlan::new(seed(), 1.0, &[Fault::SlowDown]);
    plan.only = Some((http::Method::PUT, "partNumber=".into()));
    plan.max_faults = Some(1);
    let proxy = FaultProxy::start(&s3.endpoint, plan);
    let (fs, root) = through(&proxy, &s3, json!({}), "part");
    let url = format!("{root}/big");
    let data = payload(9, 20 << 20);
    let mut writer = fs.open_write(&url).await.unwrap();
    writer.write(data.clone()).await.unwrap();
    writer.close().await.unwrap();
    // Create, 3 parts of 8 MiB (the last 4 MiB), the part again, Complete.
    let counts = proxy.counts();
    assert_eq!(proxy.faults(), 1, "{counts:?}");
    assert_eq!(counts["requests"], 6, "{counts:?}");
    assert!(direct(&s3).cat(&url).await.unwrap() == data);
    direct(&s3)
        .rm_with(&root, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
async fn a_cut_read_is_never_returned_as_complete() {
    let Some((_, s3)) = s3_server("GARAGE", "faults") else {
        return;
    };
    let proxy = FaultProxy::start(
        &s3.endpoint,
        FaultPlan::new(seed(), 0.0, &[Fault::TruncatedBody, Fault::ResetMidBody]),
    );
    let (fs, root) = through(
        &proxy,
        &s3,
        // A cut body may also stay open: the read timeout ends the wait.
        json!({"config_kwargs": {"read_timeout": 1, "retries": {"total_max_attempts": 2}}}),
        "cut",
    );
    let url = format!("{root}/object");
    let data = payload(3, 3 << 20);
    fs.pipe(&url, data.clone(), WriteMode::Overwrite)
        .await
        .unwrap();
    // Every answer cut: every read fails, none returns a short body.
    proxy.set_rate(1.0);
    for _ in 0..5 {
        match fs.cat(&url).await {
            Ok(got) => panic!("a cut read returned {} of {} bytes", got.len(), data.len()),
            Err(e) => eprintln!("cut read: {e}"),
        }
        if let Ok(got) = fs.cat_range(&url, 1000, Some(2 << 20)).await {
            panic!("a cut ranged read returned {} bytes", got.len());
        }
    }
    // Half of them cut, four more cuts at most (so the back-off stays
    // short): retries bring the whole object back.
    proxy.set_rate(0.5);
    proxy.set_max_faults(Some(proxy.faults() + 4));
    let (fs, _) = through(
        &proxy,
        &s3,
        json!({"config_kwargs": {"read_timeout": 1, "retries": {"total_max_attempts": 20}}}),
        "cut",
    );
    for _ in 0..3 {
        assert!(fs.cat(&url).await.unwrap() == data);
    }
    proxy.set_rate(0.0);
    fs.rm_with(&root, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
async fn an_outage_inside_the_retry_budget_is_ridden_out_and_a_longer_one_names_the_endpoint() {
    let Some((_, s3)) = s3_server("GARAGE", "faults") else {
        return;
    };
    let proxy = FaultProxy::start(&s3.endpoint, FaultPlan::new(seed(), 0.0, &[]));
    let (fs, root) = through(&proxy, &s3, json!({}), "outage");
    let url = format!("{root}/object");
    fs.pipe(&url, "before".into(), WriteMode::Overwrite)
        .await
        .unwrap();

    proxy.refuse_for(Duration::from_secs(2));
    let started = Instant::now();
    fs.pipe(&url, "during".into(), WriteMode::Overwrite)
        .await
        .expect("a 2 s outage is inside the default retry budget");
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert_eq!(fs.cat(&url).await.unwrap(), "during");
    assert!(fs.retried_requests() > 0);

    // A deadline of 1 s against a 5 s outage: the call fails, naming the
    // endpoint, after about the deadline.
    let (short, _) = through(&proxy, &s3, json!({"retry_deadline": 1}), "outage");
    // Answered once: from then on a refused connection is an outage to
    // retry, not a wrong endpoint (which the first contact fails fast on).
    assert_eq!(short.cat(&url).await.unwrap(), "during");
    proxy.refuse_for(Duration::from_secs(5));
    let started = Instant::now();
    let err = short
        .cat(&url)
        .await
        .expect_err("the outage outlasts the deadline");
    let waited = started.elapsed();
    let text = err.to_string();
    eprintln!("after {:.1} s: {text}", waited.as_secs_f64());
    assert!(waited < Duration::from_secs(4), "the deadline was not kept");
    assert!(text.contains(&proxy.endpoint()), "{text}");
    assert!(text.contains("run the same command"), "{text}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    fs.rm_with(&root, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
}

/// The sum of cairn's metric samples named `name` whose labels include
/// `labels`.
fn metric(name: &str, labels: &[(&str, &str)]) -> f64 {
    cairn_fs::metrics::samples()
        .into_iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
        .map(|s| s.value)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
async fn retries_and_failed_requests_are_counted_by_cause_in_the_metrics() {
    let Some((_, s3)) = s3_server("GARAGE", "faults") else {
        return;
    };
    // Each fault kind behind its own proxy: its endpoint is its series.
    let cases = [
        (Fault::SlowDown, "throttled", "503"),
        (Fault::InternalError, "server_error", "500"),
        (Fault::ResetAfterForward, "connection", "connection"),
        (Fault::Stall, "timeout", "abandoned"),
    ];
    for (fault, cause, error) in cases {
        let mut plan = FaultPlan::new(seed(), 1.0, &[fault]);
        plan.max_faults = Some(2);
        plan.stall = Duration::from_millis(2500);
        let proxy = FaultProxy::start(&s3.endpoint, plan);
        let (fs, root) = through(
            &proxy,
            &s3,
            json!({"config_kwargs": {"read_timeout": 1, "retries": {"total_max_attempts": 6}}}),
            "metrics",
        );
        let endpoint = proxy.endpoint();
        let endpoint = endpoint.trim_end_matches('/');
        fs.pipe(&format!("{root}/a"), payload(1, 100), WriteMode::Overwrite)
            .await
            .unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        let at = [("endpoint", endpoint)];
        let retries = metric("cairn_store_retries_total", &at);
        let by_cause = metric(
            "cairn_store_retries_total",
            &[("endpoint", endpoint), ("cause", cause)],
        );
        let errors = metric(
            "cairn_store_errors_total",
            &[("endpoint", endpoint), ("kind", error)],
        );
        let puts = metric(
            "cairn_store_requests_total",
            &[("endpoint", endpoint), ("op", "put")],
        );
        eprintln!(
            "{fault:?}: {retries} retries ({by_cause} {cause}), {errors} errors {error}, {puts} PUTs"
        );
        assert_eq!(retries, 2.0, "{fault:?}: two faults, two retries");
        assert_eq!(by_cause, 2.0, "{fault:?}: retried as {cause}");
        assert_eq!(errors, 2.0, "{fault:?}: failed requests counted as {error}");
        assert_eq!(puts, 3.0, "{fault:?}: the PUT was sent three times");
        assert_eq!(fs.retried_requests(), 2);
        fs.rm_with(&root, cairn_fs::TreeOptions::new().recursive(true))
            .await
            .unwrap();
    }
}

/// A listing that fails after its first page with a NotFound (a `404` for
/// the continuation) is an error, never a short listing: recovery and `--mode overwrite` decide what to delete
/// from these listings. A listing whose first answer is a NotFound is
/// still an empty one (a missing directory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Garage server: scripts/test.sh runs it"]
async fn a_listing_cut_part_way_is_an_error_never_a_short_listing() {
    use futures::{StreamExt, TryStreamExt};

    let Some((_, s3)) = s3_server("GARAGE", "faults") else {
        return;
    };
    let mut plan = FaultPlan::new(seed(), 1.0, &[Fault::NotFound]);
    plan.only = Some((http::Method::GET, "continuation-token=".into()));
    let proxy = FaultProxy::start(&s3.endpoint, plan);
    let (fs, root) = through(&proxy, &s3, json!({}), "listing-cut");
    // More keys than one listing page (1,000 on S3).
    let server = direct(&s3);
    futures::stream::iter(0..1005)
        .map(|i| {
            let (server, path) = (server.clone(), format!("{root}/k=1/f-{i:04}"));
            async move { server.pipe(&path, "x".into(), WriteMode::Overwrite).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
    let listed = fs
        .find_stream(&root, cairn_fs::FindOptions::new())
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await;
    let err = match listed {
        Ok(found) => panic!(
            "the second page failed, yet the listing ended with {} entries",
            found.len()
        ),
        Err(err) => err,
    };
    assert!(err.to_string().contains("part-way"), "{err}");
    let err = match fs.find_prefix(&format!("{root}/k=1/f-")).await {
        Ok(found) => panic!("a prefix listing cut short gave {} entries", found.len()),
        Err(err) => err,
    };
    assert!(err.to_string().contains("part-way"), "{err}");
    assert_eq!(proxy.counts()["404 NoSuchKey"], 2);
    // Nothing injected: all of it, and a missing directory is empty.
    proxy.set_rate(0.0);
    assert_eq!(fs.find(&root).await.unwrap().len(), 1005);
    assert!(fs.find(&format!("{root}/none")).await.unwrap().is_empty());
}
