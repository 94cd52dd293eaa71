//! A fault-injecting HTTP proxy for tests, in front of an S3 server (Garage,
//! moto), listening on 127.0.0.1 only.
//!
//! Each request is forwarded unchanged (the `Host` header too, so SigV4
//! signatures made for the proxy's address still verify), unless the seeded
//! dice pick a fault for it: a 503 `SlowDown` or 500 `InternalError` S3 error
//! answer; a connection dropped after the server handled the request (the
//! write happened, the client never hears); a response cut in the middle of
//! its body, or truncated after half its bytes under the full
//! `Content-Length`; a stall longer than the client's timeout; a request
//! body with one byte flipped on its way to the server. Every request can be
//! delayed by a fixed latency, and [`FaultProxy::refuse_for`] closes the
//! port so connections are refused for a while (the store is down).
//! [`FaultProxy::counts`] tells how many of each fault were injected.
//!
//! ```no_run
//! use cairn_conformance::fault_proxy::{Fault, FaultPlan, FaultProxy};
//! let proxy = FaultProxy::start("http://127.0.0.1:3900", FaultPlan::new(7, 0.05, Fault::JOB));
//! let endpoint = proxy.endpoint(); // give this to the client instead of the server's
//! # let _ = endpoint;
//! ```

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::Notify;

/// One kind of injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// `503 SlowDown` with S3's XML error body; the request never reaches the server.
    SlowDown,
    /// `500 InternalError` with S3's XML error body; not forwarded either.
    InternalError,
    /// The server handles the request, then the connection closes without an answer.
    ResetAfterForward,
    /// The answer's headers and first byte arrive, then the connection drops.
    ResetMidBody,
    /// Half the body arrives under the full `Content-Length`, then the
    /// connection closes.
    TruncatedBody,
    /// The request waits [`FaultPlan::stall`] before it is forwarded.
    Stall,
    /// One byte of an upload's body is flipped on its way to the server.
    CorruptUpload,
    /// `400 ExpiredToken`, as AWS answers a request signed with a session
    /// token past its expiry (Garage and moto accept any token).
    ExpiredToken,
    /// `507 XMinioStorageFull`, as MinIO answers when its disks are full.
    StorageFull,
    /// `404 NoSuchKey`: a NotFound where the request should not get one (a
    /// listing page that fails part-way, aimed with [`FaultPlan::only`]).
    NotFound,
}

impl Fault {
    /// Every fault a store gives on its own, for job runs.
    pub const JOB: &'static [Fault] = &[
        Fault::SlowDown,
        Fault::InternalError,
        Fault::ResetAfterForward,
        Fault::ResetMidBody,
        Fault::TruncatedBody,
        Fault::Stall,
    ];

    /// The name [`FaultProxy::counts`] uses.
    pub fn name(self) -> &'static str {
        match self {
            Fault::SlowDown => "503 SlowDown",
            Fault::InternalError => "500 InternalError",
            Fault::ResetAfterForward => "reset after forward",
            Fault::ResetMidBody => "reset mid-body",
            Fault::TruncatedBody => "truncated body",
            Fault::Stall => "stall",
            Fault::CorruptUpload => "corrupt upload",
            Fault::ExpiredToken => "expired token",
            Fault::StorageFull => "storage full",
            Fault::NotFound => "404 NoSuchKey",
        }
    }
}

/// The seed of a test's dice: `CAIRN_FAULT_SEED` when set, else `default`;
/// printed, so a failing run can be replayed.
pub fn seed_from_env(default: u64) -> u64 {
    let seed = std::env::var("CAIRN_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("fault seed: {seed} (CAIRN_FAULT_SEED replays it)");
    seed
}

/// What the proxy injects.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    /// Seed of the dice (printed at start, so a run can be replayed).
    pub seed: u64,
    /// Fraction of requests that get a fault, 0.0 to 1.0.
    pub rate: f64,
    /// The faults to inject, taken in turn (so every kind shows up once
    /// `kinds.len()` faults are drawn, however few requests a run makes;
    /// which requests get one is the dice's).
    pub kinds: Vec<Fault>,
    /// Added to every request.
    pub latency: Duration,
    /// How long a [`Fault::Stall`] waits.
    pub stall: Duration,
    /// Only requests with this method whose path and query contain this
    /// text get faults (`None`: every request), e.g. `POST` and
    /// `uploadId=` for CompleteMultipartUpload.
    pub only: Option<(http::Method, String)>,
    /// At most this many faults in all (`None`: no limit).
    pub max_faults: Option<u64>,
}

impl FaultPlan {
    /// `rate` of requests faulted with `kinds`, no latency, 3 s stalls.
    pub fn new(seed: u64, rate: f64, kinds: &[Fault]) -> Self {
        Self {
            seed,
            rate,
            kinds: kinds.to_vec(),
            latency: Duration::ZERO,
            stall: Duration::from_secs(3),
            only: None,
            max_faults: None,
        }
    }
}

struct Shared {
    upstream: String,
    plan: Mutex<FaultPlan>,
    dice: Mutex<fastrand::Rng>,
    counts: Mutex<BTreeMap<&'static str, u64>>,
    requests: AtomicU64,
    /// Faults drawn so far (checked against `max_faults` under the dice
    /// lock; also whose turn the next fault kind is).
    drawn: AtomicU64,
    /// Body faults drawn for answers without a body (two at most), applied
    /// later to answers that have one, each at even odds (so each kind
    /// still shows up whatever the mix of requests).
    owed: Mutex<Vec<Fault>>,
    refuse_until: Mutex<Option<Instant>>,
    refuse_now: Notify,
    client: reqwest::Client,
}

/// A running proxy; it stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (an `http://host:port` URL) on a free
    /// port of 127.0.0.1, on a runtime of its own (so sync and async tests
    /// can both use it).
    pub fn start(upstream: &str, plan: FaultPlan) -> Self {
        eprintln!(
            "fault proxy -> {upstream}: seed {} rate {} kinds {:?}",
            plan.seed, plan.rate, plan.kinds
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("the proxy's runtime");
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            dice: Mutex::new(fastrand::Rng::with_seed(plan.seed)),
            plan: Mutex::new(plan),
            counts: Mutex::new(BTreeMap::new()),
            requests: AtomicU64::new(0),
            drawn: AtomicU64::new(0),
            owed: Mutex::new(Vec::new()),
            refuse_until: Mutex::new(None),
            refuse_now: Notify::new(),
            client: reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("the proxy's client"),
        });
        // Bound here, so the port is known before the first client connects.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fault proxy");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let addr = listener.local_addr().expect("the proxy's address");
        let accepting = shared.clone();
        runtime.spawn(async move {
            let listener = TcpListener::from_std(listener).expect("the proxy's listener");
            accept_loop(listener, addr, accepting).await
        });
        Self {
            addr,
            shared,
            runtime: Some(runtime),
        }
    }

    /// The proxy's URL, to use as the S3 endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Faults injected so far, by [`Fault::name`], and `requests` (all
    /// requests seen, faulted or not).
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        let mut counts = self.shared.counts.lock().expect("counts").clone();
        counts.insert("requests", self.shared.requests.load(Ordering::Relaxed));
        counts
    }

    /// The number of faults injected so far.
    pub fn faults(&self) -> u64 {
        self.shared.counts.lock().expect("counts").values().sum()
    }

    /// Changes the fraction of faulted requests (0.0 turns faults off).
    pub fn set_rate(&self, rate: f64) {
        self.shared.plan.lock().expect("plan").rate = rate;
    }

    /// Caps the faults injected in all (`None`: no cap).
    pub fn set_max_faults(&self, max: Option<u64>) {
        self.shared.plan.lock().expect("plan").max_faults = max;
    }

    /// Refuses every connection for `duration` from now: the port is
    /// closed, and open connections are dropped at their next request.
    pub fn refuse_for(&self, duration: Duration) {
        *self.shared.refuse_until.lock().expect("refuse") = Some(Instant::now() + duration);
        self.shared.refuse_now.notify_one();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A listener on `addr` that can be re-bound at once after a close.
async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

fn refusing(shared: &Shared) -> Option<Duration> {
    let until = (*shared.refuse_until.lock().expect("refuse"))?;
    until.checked_duration_since(Instant::now())
}

async fn accept_loop(listener: TcpListener, addr: SocketAddr, shared: Arc<Shared>) {
    let mut listener = Some(listener);
    loop {
        if let Some(left) = refusing(&shared) {
            // Closed port: connections are refused until the outage ends.
            listener = None;
            tokio::time::sleep(left).await;
            continue;
        }
        let current = match &listener {
            Some(l) => l,
            None => match bind(addr).await {
                Ok(l) => listener.insert(l),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let accepted = tokio::select! {
            accepted = current.accept() => accepted,
            _ = shared.refuse_now.notified() => continue,
        };
        let Ok((stream, _)) = accepted else { continue };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(request, shared.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

fn full(bytes: Bytes) -> Body {
    http_body_util::Full::new(bytes)
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// A body that sends `bytes` and then fails, which makes hyper drop the
/// connection (the announced `Content-Length` is never reached).
fn cut(bytes: Bytes) -> Body {
    let frames = futures::stream::iter([
        Ok(Frame::data(bytes)),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "injected: connection dropped mid-body",
        )),
    ]);
    StreamBody::new(frames).boxed()
}

fn count(shared: &Shared, fault: Fault) {
    *shared
        .counts
        .lock()
        .expect("counts")
        .entry(fault.name())
        .or_default() += 1;
}

fn s3_error(status: u16, code: &str, message: &str) -> Response<Body> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message><RequestId>fault-proxy</RequestId></Error>"
    );
    Response::builder()
        .status(status)
        .header("content-type", "application/xml")
        .body(full(Bytes::from(body)))
        .expect("an error response")
}

async fn handle(
    request: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Body>, std::io::Error> {
    let dropped = || std::io::Error::new(std::io::ErrorKind::ConnectionReset, "injected");
    if refusing(&shared).is_some() {
        return Err(dropped());
    }
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let (fault, latency, stall) = {
        let plan = shared.plan.lock().expect("plan").clone();
        let targeted = plan.only.as_ref().is_none_or(|(method, text)| {
            request.method() == method
                && request
                    .uri()
                    .path_and_query()
                    .is_some_and(|p| p.as_str().contains(text.as_str()))
        });
        let mut dice = shared.dice.lock().expect("dice");
        let spent = plan
            .max_faults
            .is_some_and(|max| shared.drawn.load(Ordering::Relaxed) >= max);
        let fault =
            (targeted && !spent && !plan.kinds.is_empty() && dice.f64() < plan.rate).then(|| {
                let turn = shared.drawn.fetch_add(1, Ordering::Relaxed) as usize;
                plan.kinds[turn % plan.kinds.len()]
            });
        (fault, plan.latency, plan.stall)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }

    let (parts, body) = request.into_parts();
    let mut body = body
        .collect()
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?
        .to_bytes();
    match fault {
        Some(f @ Fault::SlowDown) => {
            count(&shared, f);
            return Ok(s3_error(
                503,
                "SlowDown",
                "Please reduce your request rate.",
            ));
        }
        Some(f @ Fault::InternalError) => {
            count(&shared, f);
            return Ok(s3_error(
                500,
                "InternalError",
                "We encountered an internal error. Please try again.",
            ));
        }
        Some(f @ Fault::ExpiredToken) => {
            count(&shared, f);
            return Ok(s3_error(
                400,
                "ExpiredToken",
                "The provided token has expired.",
            ));
        }
        Some(f @ Fault::StorageFull) if parts.method == http::Method::PUT => {
            count(&shared, f);
            return Ok(s3_error(
                507,
                "XMinioStorageFull",
                "Storage backend has reached its minimum free drive threshold. Please delete a few objects to proceed.",
            ));
        }
        Some(f @ Fault::NotFound) => {
            count(&shared, f);
            return Ok(s3_error(
                404,
                "NoSuchKey",
                "The specified key does not exist.",
            ));
        }
        Some(f @ Fault::Stall) => {
            count(&shared, f);
            tokio::time::sleep(stall).await;
        }
        Some(f @ Fault::CorruptUpload) if parts.method == http::Method::PUT && !body.is_empty() => {
            count(&shared, f);
            let mut bytes = body.to_vec();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x01;
            body = Bytes::from(bytes);
        }
        _ => {}
    }

    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let mut forward = shared
        .client
        .request(parts.method.clone(), format!("{}{path}", shared.upstream))
        .body(body);
    // Content-Length too: the body keeps its length, and signed requests
    // list it (an empty PUT without it is refused).
    for (name, value) in &parts.headers {
        if name != http::header::CONNECTION {
            forward = forward.header(name, value);
        }
    }
    let answer = match forward.send().await {
        Ok(answer) => answer,
        Err(_) => return Err(dropped()),
    };
    let status = answer.status();
    let headers = answer.headers().clone();
    let bytes = answer.bytes().await.map_err(|_| dropped())?;

    let cuttable = bytes.len() >= 2;
    let fault = match fault {
        Some(f @ (Fault::ResetMidBody | Fault::TruncatedBody)) if !cuttable => {
            let mut owed = shared.owed.lock().expect("owed");
            if owed.len() < 2 {
                owed.push(f);
            }
            None
        }
        // Paid on a cuttable answer at even odds (at least): not every
        // time, so owed faults do not cut a run of answers (and a request's
        // every retry) in a row; not at the fault rate, which left a kind
        // owed and never injected when a job's last cuttable answers were
        // few (a test that checks every kind shows up then failed).
        None if cuttable => {
            let rate = shared.plan.lock().expect("plan").rate.max(0.5);
            let draw = shared.dice.lock().expect("dice").f64();
            if draw < rate {
                shared.owed.lock().expect("owed").pop()
            } else {
                None
            }
        }
        other => other,
    };
    let body = match fault {
        Some(f @ Fault::ResetAfterForward) => {
            count(&shared, f);
            return Err(dropped());
        }
        Some(f @ (Fault::ResetMidBody | Fault::TruncatedBody)) => {
            count(&shared, f);
            let end = match f {
                Fault::TruncatedBody => bytes.len() / 2,
                _ => 1,
            };
            cut(bytes.slice(..end))
        }
        _ => full(bytes),
    };
    let mut response = Response::builder().status(status);
    for (name, value) in &headers {
        if name != http::header::TRANSFER_ENCODING && name != http::header::CONNECTION {
            response = response.header(name, value);
        }
    }
    Ok(response.body(body).expect("a forwarded response"))
}
