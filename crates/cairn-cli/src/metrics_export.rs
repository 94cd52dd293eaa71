//! Getting a job's metrics out: `--metrics-addr` serves cairn's OpenMetrics
//! text on `/metrics` while the job runs (for Prometheus to scrape);
//! `--metrics-file` writes the same text once the job ends (for batch
//! schedulers and node exporters' textfile collectors).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// A `/metrics` endpoint served in the background until dropped.
pub struct MetricsServer {
    /// The address it listens on (the port chosen when 0 was asked).
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds `addr` (`HOST:PORT`; port 0 picks a free one) and serves
/// `/metrics` on it.
pub async fn serve(addr: &str) -> CliResult<MetricsServer> {
    cairn_dataset::register_metrics();
    let listener = TcpListener::bind(addr).await.map_err(|e| {
        format!("--metrics-addr {addr}: cannot listen there ({e}); give a free HOST:PORT, or port 0 to pick one")
    })?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let service =
                    service_fn(|request| async move { Ok::<_, Infallible>(answer(&request)) });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(MetricsServer { addr, task })
}

fn answer<B>(request: &Request<B>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
        (&hyper::Method::GET, "/metrics") => (
            StatusCode::OK,
            cairn_fs::metrics::CONTENT_TYPE,
            cairn_fs::metrics::encode(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "cairn serves its metrics on GET /metrics\n".to_string(),
        ),
    };
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("a valid answer")
}

/// Writes the metrics' OpenMetrics text to `path`, whole or not at all (a
/// temporary file beside it, then renamed).
pub fn write_file(path: &Path) -> CliResult<()> {
    let text = cairn_fs::metrics::encode();
    let name = path
        .file_name()
        .ok_or_else(|| format!("--metrics-file {}: not a file name", path.display()))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(".cairn-tmp");
    let temp = path.with_file_name(temp_name);
    std::fs::write(&temp, text)
        .and_then(|()| std::fs::rename(&temp, path))
        .map_err(|e| {
            format!(
                "--metrics-file {}: cannot write it ({e}); give a path in a directory that exists and is writable",
                path.display()
            )
            .into()
        })
}
