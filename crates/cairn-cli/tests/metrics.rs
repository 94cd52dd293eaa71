//! `cairn job run --metrics-addr` scraped by a real Prometheus server every
//! second, on Garage: the counters move while the job runs, and once it is
//! done they add up with the job's own summary; `--metrics-file` holds the
//! same counts.

mod common;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cairn_conformance::prometheus_binary;
use common::place::Place;

/// A Prometheus server scraping `target` every second, stopped on drop.
struct Prometheus {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(binary: &str, target: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: cairn\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = cairn_conformance::free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let prometheus = Prometheus {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while get(&format!("{}/-/ready", prometheus.base)).is_none() {
            assert!(
                Instant::now() < deadline,
                "prometheus did not become ready in 60 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        prometheus
    }

    /// The sum of `selector`'s instant vector now (`None`: no series yet).
    fn sum(&self, selector: &str) -> Option<f64> {
        self.query(&format!("sum({selector})"))
    }

    /// The sum of the last values `selector`'s series had in the past
    /// 5 minutes: what a job that has ended last reported (once its target
    /// is down, Prometheus marks the series stale and an instant query
    /// finds nothing).
    fn last_sum(&self, selector: &str) -> Option<f64> {
        self.query(&format!("sum(last_over_time({selector}[5m]))"))
    }

    fn query(&self, promql: &str) -> Option<f64> {
        let url = format!(
            "{}/api/v1/query?query={}",
            self.base,
            percent_encode(promql)
        );
        let answer: serde_json::Value = serde_json::from_str(&get(&url)?).unwrap();
        assert_eq!(answer["status"], "success", "{url}: {answer}");
        let result = answer["data"]["result"].as_array()?.first()?.clone();
        result["value"][1].as_str()?.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get(url: &str) -> Option<String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let answer = reqwest::get(url).await.ok()?;
            if !answer.status().is_success() {
                return None;
            }
            answer.text().await.ok()
        })
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
#[ignore = "needs the Garage server and Prometheus: scripts/test.sh runs it"]
fn a_job_scraped_by_prometheus_reports_counts_that_add_up_with_its_summary() {
    let test = "a_job_scraped_by_prometheus_reports_counts_that_add_up_with_its_summary";
    let Some(prometheus_bin) = prometheus_binary(test) else {
        return;
    };
    let place = Place::s3("GARAGE", test);
    let (input, output, checkpoint) = (place.url("in"), place.url("out"), place.url("ckpt"));
    place.sample("in", 40_000, 4);

    let job_port = cairn_conformance::free_port();
    let prometheus = Prometheus::start(&prometheus_bin, &format!("127.0.0.1:{job_port}"));
    let files = tempfile::tempdir().unwrap();
    let metrics_file = files.path().join("job.prom");
    // 20 units of 2,000 rows, each held 400 ms after its commit: the job
    // runs about 8 s, scraped every second.
    let mut job = place
        .cairn(&[
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
            "--commit-every-rows",
            "2000",
            "--workers",
            "1",
            "--json",
            "--metrics-addr",
            &format!("127.0.0.1:{job_port}"),
            "--metrics-linger",
            "3",
            "--metrics-file",
            metrics_file.to_str().unwrap(),
        ])
        .env("FAILPOINTS", "unit-after-commit=sleep(400)")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cairn");

    // Mid-job: Prometheus has scraped some committed units and written
    // rows, and the job is still running.
    let mid = loop {
        let committed = prometheus.sum("cairn_checkpoint_units_total{outcome=\"committed\"}");
        let written = prometheus.sum("cairn_job_rows_total{state=\"written\"}");
        if let (Some(committed), Some(written)) = (committed, written)
            && committed >= 2.0
        {
            break (committed, written);
        }
        assert!(
            job.try_wait().unwrap().is_none(),
            "the job ended before Prometheus saw 2 commits"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        job.try_wait().unwrap().is_none(),
        "the job should still run"
    );
    let mid_requests = prometheus.sum("cairn_store_requests_total").unwrap();
    assert!(mid_requests > 0.0);

    let mut stdout = String::new();
    job.stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let mut stderr = String::new();
    job.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        job.wait().unwrap().success(),
        "the job failed:\n{stdout}{stderr}"
    );
    assert!(
        stderr.contains(&format!("metrics on http://127.0.0.1:{job_port}/metrics")),
        "{stderr}"
    );
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let written = summary["rows_written"].as_f64().unwrap();
    let committed = summary["units_committed"].as_f64().unwrap();
    let requests: f64 = summary["requests"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert_eq!(written, 40_000.0);
    assert!(
        mid.1 < written && mid.0 < committed,
        "the counts moved: mid {mid:?}"
    );

    // After it: the last scrape (the job served 3 s more) has the final
    // counts, equal to the summary's. Read 2 s after the job exited, when a
    // failed scrape has marked its series stale, as a dashboard reads a
    // finished job.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        prometheus.sum("cairn_job_rows_total"),
        None,
        "the ended job's series are stale"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while prometheus.last_sum("cairn_job_rows_total{state=\"written\"}") != Some(written) {
        assert!(
            Instant::now() < deadline,
            "Prometheus never saw the final rows"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let scraped = |q: &str| {
        prometheus
            .last_sum(q)
            .unwrap_or_else(|| panic!("Prometheus has no {q}"))
    };
    assert_eq!(
        scraped("cairn_job_rows_total{state=\"read\"}"),
        summary["rows_read"].as_f64().unwrap()
    );
    assert_eq!(
        scraped("cairn_checkpoint_units_total{outcome=\"committed\"}"),
        committed
    );
    assert_eq!(scraped("cairn_job_input_rows"), 40_000.0);
    assert_eq!(scraped("cairn_store_requests_total"), requests);
    assert!(scraped("cairn_store_requests_total") > mid_requests);
    // Every request was answered (timed), each unit's file was PUT, the
    // input was read with GETs and the checkpoint listed.
    assert_eq!(
        scraped("cairn_store_request_duration_seconds_count"),
        requests
    );
    assert!(scraped("cairn_store_requests_total{op=\"put\"}") >= 2.0 * committed);
    assert!(scraped("cairn_store_requests_total{op=\"get\"}") >= 4.0);
    assert!(scraped("cairn_store_requests_total{op=\"list\"}") >= 1.0);
    assert!(scraped("cairn_store_received_bytes_total{op=\"get\"}") > 0.0);
    assert!(
        scraped("cairn_store_sent_bytes_total{op=\"put\"}")
            >= summary["bytes_written"].as_f64().unwrap()
    );
    let endpoint = prometheus
        .last_sum(&format!(
            "cairn_store_requests_total{{endpoint=\"{}\"}}",
            place.s3.as_ref().expect("an S3 place").endpoint
        ))
        .unwrap();
    assert_eq!(
        endpoint, requests,
        "every request is labelled with the store's endpoint"
    );

    // --metrics-file: the same final counts.
    let text = std::fs::read_to_string(&metrics_file).unwrap();
    assert!(text.ends_with("# EOF\n"));
    let line = text
        .lines()
        .find(|l| l.starts_with("cairn_job_rows_total{state=\"written\"}"))
        .unwrap();
    assert_eq!(
        line.rsplit(' ').next().unwrap().parse::<f64>().unwrap(),
        written
    );
}
