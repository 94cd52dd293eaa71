//! Step 5 of the protocol, the lease: one run per checkpoint path.
//!
//! The lease is the file `.cairn-lease.json` in the checkpoint directory,
//! created with create-if-absent. A second run finds it and is refused, with
//! the holder and the expiry in the error, unless the lease has expired or its
//! holder is a process of this host that is gone. The holder renews it (a
//! heartbeat) well before it expires and deletes it when the run ends.
//!
//! Race-free only where the store has a working create-if-absent (local
//! disks, S3 with If-None-Match, COS, OSS, GCS); on a store without one
//! (Garage) two runs starting at the same instant could both believe they
//! hold it, and [`Lease::race_free`] says so.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_fs::backend::ConditionalWrites;
use cairn_fs::{ErrorKind, WriteMode};
use serde::{Deserialize, Serialize};

use crate::commit::CheckpointDir;
use crate::error::{Error, Result};
use crate::layout::{LEASE_FILE, RunId};

/// The lease file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// The holder's host name.
    pub host: String,
    /// The holder's process ID.
    pub pid: u32,
    /// The holder's run.
    pub run: String,
    /// When the lease ends unless renewed, seconds since the Unix epoch.
    pub expires_at: u64,
}

/// A held lease.
#[derive(Debug, Clone)]
pub struct Lease {
    record: LeaseRecord,
    ttl: Duration,
    race_free: bool,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".to_string())
}

impl LeaseRecord {
    /// Whether the holder is known to be gone: a process of this host that no
    /// longer exists or is a zombie (killed, not yet reaped by its parent).
    /// Linux only; elsewhere only expiry frees a lease.
    fn holder_is_gone(&self) -> bool {
        self.host == host_name()
            && self.pid != std::process::id()
            && std::path::Path::new("/proc/self").exists()
            && !process_is_running(self.pid)
    }
}

/// Whether `pid` is a live process: `/proc/<pid>/stat` exists and its state
/// (the field after the parenthesised command name) is not zombie or dead.
fn process_is_running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X' | 'x'))
}

impl Lease {
    /// Whether taking the lease was race-free on this store.
    pub fn race_free(&self) -> bool {
        self.race_free
    }

    /// The record as written.
    pub fn record(&self) -> &LeaseRecord {
        &self.record
    }

    /// How long the lease lasts without renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

impl CheckpointDir {
    /// The current lease record, if any (who holds the checkpoint).
    pub async fn read_lease(&self) -> Result<Option<LeaseRecord>> {
        match self.fs.cat(&self.file(LEASE_FILE)).await {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::CorruptIdFile {
                file: self.file(LEASE_FILE),
                reason: format!("the lease is not valid JSON ({e}); delete it if no run uses this checkpoint"),
            }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Step 5: takes the lease for `run`, valid for `ttl` unless renewed.
    pub async fn acquire_lease(&self, run: &RunId, ttl: Duration) -> Result<Lease> {
        let record = LeaseRecord {
            host: host_name(),
            pid: std::process::id(),
            run: run.as_str().to_string(),
            expires_at: now_secs() + ttl.as_secs().max(1),
        };
        let body = serde_json::to_vec(&record).expect("the record serializes");
        let url = self.file(LEASE_FILE);
        let race_free = self.fs.conditional_writes(&url).await? == ConditionalWrites::Native;
        if !race_free {
            tracing::warn!(
                checkpoint = %self.dir,
                "this store ignores create-if-absent writes: the checkpoint lease is best-effort, \
                 two runs started at the same instant on this path are not reliably told apart"
            );
        }
        match self
            .fs
            .pipe(&url, body.clone().into(), WriteMode::Create)
            .await
        {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let current = self.read_lease().await?;
                if let Some(held) =
                    current.filter(|h| h.expires_at > now_secs() && !h.holder_is_gone())
                {
                    return Err(Error::LeaseHeld {
                        path: self.dir.clone(),
                        holder: format!("{} pid {} (run {})", held.host, held.pid, held.run),
                        expires_in_secs: held.expires_at.saturating_sub(now_secs()),
                    });
                }
                // Expired or abandoned: take it over, then check we hold it.
                self.fs
                    .pipe(&url, body.into(), WriteMode::Overwrite)
                    .await?;
                if self.read_lease().await?.as_ref() != Some(&record) {
                    return Err(Error::LeaseHeld {
                        path: self.dir.clone(),
                        holder: "another run that took the expired lease at the same time".into(),
                        expires_in_secs: ttl.as_secs(),
                    });
                }
            }
            Err(e) => return Err(e.into()),
        }
        Ok(Lease {
            record,
            ttl,
            race_free,
        })
    }

    /// The heartbeat: pushes the lease's expiry forward. Fails if another run
    /// took the lease meanwhile (this run must stop).
    pub async fn renew_lease(&self, lease: &mut Lease) -> Result<()> {
        match self.read_lease().await? {
            Some(current) if current.run == lease.record.run => {}
            other => {
                return Err(Error::LeaseLost {
                    path: self.dir.clone(),
                    holder: other.map(|h| format!("{} pid {} (run {})", h.host, h.pid, h.run)),
                });
            }
        }
        lease.record.expires_at = now_secs() + lease.ttl.as_secs().max(1);
        let body = serde_json::to_vec(&lease.record).expect("the record serializes");
        self.fs
            .pipe(&self.file(LEASE_FILE), body.into(), WriteMode::Overwrite)
            .await?;
        Ok(())
    }

    /// Gives the lease up at the end of a run (only if still ours).
    pub async fn release_lease(&self, lease: Lease) -> Result<()> {
        if self
            .read_lease()
            .await?
            .is_some_and(|current| current.run == lease.record.run)
        {
            crate::commit::remove_if_present(&self.fs, &self.file(LEASE_FILE)).await?;
        }
        Ok(())
    }
}

/// Keeps a lease alive in the background: renews it every third of its
/// lifetime until stopped. If the lease is lost (another run took it) or a
/// renewal fails, [`LeaseKeeper::check`] reports it so the run stops before
/// committing anything more.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// let (fs, _) = cairn_fs::build_checkpoint_filesystem("memory:///keeper-doc", &Default::default()).unwrap();
/// let dir = cairn_checkpoint::CheckpointDir::new(fs, "memory:///keeper-doc", "id");
/// let lease = dir.acquire_lease(&cairn_checkpoint::RunId::new(), Duration::from_secs(30)).await.unwrap();
/// let keeper = cairn_checkpoint::LeaseKeeper::start(dir.clone(), lease);
/// keeper.check().unwrap();
/// let lease = keeper.stop().await.unwrap();
/// dir.release_lease(lease).await.unwrap();
/// # })
/// ```
pub struct LeaseKeeper {
    task: tokio::task::JoinHandle<Result<Lease>>,
    stop: tokio::sync::watch::Sender<bool>,
    failed: std::sync::Arc<std::sync::Mutex<Option<LostLease>>>,
}

/// Why a kept lease ended: the checkpoint path and the new holder, if known.
type LostLease = (String, Option<String>);

impl LeaseKeeper {
    /// Starts renewing `lease` of `dir`.
    pub fn start(dir: CheckpointDir, mut lease: Lease) -> Self {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let failed = std::sync::Arc::new(std::sync::Mutex::new(None));
        let report = failed.clone();
        let period = (lease.ttl / 3).max(Duration::from_millis(100));
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(period) => {}
                    _ = stopped.changed() => return Ok(lease),
                }
                if let Err(e) = dir.renew_lease(&mut lease).await {
                    let lost = match &e {
                        Error::LeaseLost { path, holder } => (path.clone(), holder.clone()),
                        other => {
                            tracing::error!(checkpoint = %dir.dir, "cannot renew the lease: {other}");
                            (dir.dir.clone(), None)
                        }
                    };
                    *report.lock().expect("keeper state") = Some(lost);
                    return Err(e);
                }
            }
        });
        Self { task, stop, failed }
    }

    /// Whether the lease is still held; an error once a renewal failed.
    pub fn check(&self) -> Result<()> {
        match self.failed.lock().expect("keeper state").clone() {
            None => Ok(()),
            Some((path, holder)) => Err(Error::LeaseLost { path, holder }),
        }
    }

    /// Stops renewing and gives the lease back (to release it).
    pub async fn stop(self) -> Result<Lease> {
        let _ = self.stop.send(true);
        self.task.await.expect("the keeper task does not panic")
    }
}
