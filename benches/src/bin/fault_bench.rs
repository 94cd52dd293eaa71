//! Wall-clock cost of injected faults for `cairn job run` on S3: the same
//! job (sample Parquet in, Parquet out, checkpoint on S3) through the fault
//! proxy at 0%, 5% and 20% faults of every kind a store gives (503
//! SlowDown, 500, dropped connections, cut and truncated bodies, stalls past
//! a 1 s read timeout), for each `cairn` binary given (e.g. the current one
//! and an older build, to compare retry policies in one run).
//!
//! Usage: fault_bench CAIRN_BINARY... (server from BENCH_ENDPOINT,
//! BENCH_KEY, BENCH_SECRET, BENCH_BUCKET; BENCH_ROWS, default 300000;
//! BENCH_SEED). Prints one JSON object per run.

use std::process::Command;
use std::time::{Duration, Instant};

use cairn_conformance::fault_proxy::{Fault, FaultPlan, FaultProxy};

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn cairn(binary: &str, endpoint: &str) -> Command {
    let mut command = Command::new(binary);
    command
        .env("AWS_ACCESS_KEY_ID", env("BENCH_KEY", ""))
        .env("AWS_SECRET_ACCESS_KEY", env("BENCH_SECRET", ""))
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("CAIRN_LOG", "error");
    command
}

fn main() {
    let binaries: Vec<String> = std::env::args().skip(1).collect();
    assert!(!binaries.is_empty(), "usage: fault_bench CAIRN_BINARY...");
    let endpoint = env("BENCH_ENDPOINT", "http://127.0.0.1:3900");
    let bucket = env("BENCH_BUCKET", "cairn-test");
    let rows = env("BENCH_ROWS", "300000");
    let seed: u64 = env("BENCH_SEED", "42").parse().expect("BENCH_SEED");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let root = format!("s3://{bucket}/fault-bench-{nanos}");
    let input = format!("{root}/in");
    let sampled = cairn(&binaries[0], &endpoint)
        .args(["job", "sample", &input, "--rows", &rows, "--files", "8"])
        .args(["--row-group-rows", "10000"])
        .output()
        .expect("run cairn job sample");
    assert!(sampled.status.success(), "{sampled:?}");

    for (b, binary) in binaries.iter().enumerate() {
        for rate in [0.0, 0.05, 0.2] {
            let mut plan = FaultPlan::new(seed, rate, Fault::JOB);
            plan.stall = Duration::from_millis(1500);
            let proxy = FaultProxy::start(&endpoint, plan);
            let run = format!("{root}/run-{b}-{}", (rate * 100.0) as u32);
            let started = Instant::now();
            let out = cairn(binary, &proxy.endpoint())
                .args(["-o", "s3.config_kwargs.read_timeout=1"])
                .args(["job", "run", "--input", &input])
                .args(["--output", &format!("{run}/out")])
                .args(["--checkpoint", &format!("{run}/ckpt"), "--id-column", "uid"])
                .args(["--commit-every-rows", "10000", "--quiet"])
                .output()
                .expect("run cairn job run");
            let seconds = started.elapsed().as_secs_f64();
            let counts = proxy.counts();
            println!(
                "{}",
                serde_json::json!({
                    "binary": binary,
                    "fault_rate": rate,
                    "rows": rows,
                    "seconds": (seconds * 100.0).round() / 100.0,
                    "ok": out.status.success(),
                    "requests": counts.get("requests"),
                    "faults": proxy.faults(),
                    "by_kind": counts,
                    "error": (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).trim().to_string()),
                })
            );
        }
    }
    let _ = cairn(&binaries[0], &endpoint)
        .args(["rm", "-r", &root])
        .output();
}
