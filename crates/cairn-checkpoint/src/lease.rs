//! Step 5 of the protocol, the lease: one writer per checkpoint, fenced.
//!
//! A lease is a numbered file, `.cairn-lease.<generation>.json`, in the
//! checkpoint directory; the current lease is the one with the highest
//! generation. A run takes generation `g + 1` by creating its file with
//! create-if-absent, so of several runs that find generation `g` free (absent,
//! expired, released, or held by a process of this host that is gone)
//! exactly one wins, on every store whose create-if-absent works (local
//! disks: link; S3 `If-None-Match`; COS/OSS forbid-overwrite; GCS generation
//! match). A second run finds a live lease and is refused, naming the holder.
//!
//! Only the holder ever writes its own generation's file (to renew it or to
//! mark it released), so renewal needs no compare-and-swap: a renewal that
//! lands after another run took a newer generation changes nothing, and the
//! holder learns from the listing that it lost.
//!
//! Fencing: the holder stops writing once three quarters of the lifetime
//! have passed since its last successful renewal began, whether or not a
//! renewal is still hanging ([`LeaseKeeper::check`]); a taker waits for the
//! whole lifetime. Before each commit the holder lists the lease files and
//! checks that its generation is still the newest and still its own
//! ([`CheckpointDir::commit_fenced`]): a run that lost its lease, and whose
//! pending unit the new holder's recovery rolled back, cannot commit. (The
//! file is read only when the listing does not show the entity tag of one
//! of the holder's own writes of it; weak and empty tags never count, as
//! they may stand for other bytes.) What remains is a commit request that
//! leaves before the deadline and lands more than a quarter of the lifetime later (or clocks
//! of the two hosts apart by as much): the protocol bounds it, the store
//! cannot fence it, and docs/checkpoint-protocol.md says so.
//!
//! Holders are told apart by a random token, never by host name alone (every
//! container may be called `localhost`); host, boot and PID namespace are
//! kept only so a run can free at once the lease of a killed process of its
//! own machine.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cairn_fs::backend::ConditionalWrites;
use cairn_fs::{ErrorKind, WriteMode};
use serde::{Deserialize, Serialize};

use crate::commit::CheckpointDir;
use crate::error::{Error, Result};
use crate::layout::{LEASE_FILE, LEASE_PREFIX, RunId, UnitName, lease_file};
use crate::store_clock::{STORE_CLOCK_GRAIN_MS, epoch_millis};
use crate::token::random_token;

/// The lease file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// The holder's random token (32 hex digits): who holds the lease.
    #[serde(default)]
    pub holder: String,
    /// The lease's generation (the fencing token): each taker adds one.
    #[serde(default)]
    pub generation: u64,
    /// The holder's host name (for messages and the local check).
    pub host: String,
    /// The holder's process ID.
    pub pid: u32,
    /// The holder's kernel boot ID (the local check: same machine, same boot).
    #[serde(default)]
    pub boot_id: String,
    /// The holder's PID namespace (the local check: PIDs are comparable).
    #[serde(default)]
    pub pid_namespace: String,
    /// The holder process's start time in clock ticks since boot (a reused
    /// PID is another process).
    #[serde(default)]
    pub process_start: u64,
    /// The holder's run.
    pub run: String,
    /// When the lease ends unless renewed, seconds since the Unix epoch by
    /// the holder's clock, rounded up (for readers that know only this
    /// field; cairn reads `expires_at_ms`).
    pub expires_at: u64,
    /// When the lease ends unless renewed, milliseconds since the Unix
    /// epoch by the holder's clock (0 in records of older cairn, which kept
    /// whole seconds only).
    #[serde(default)]
    pub expires_at_ms: u64,
    /// The lease's lifetime in seconds, rounded up (0 in records of older
    /// cairn): with the time the store gives the lease file, expiry is
    /// judged on the store's clock too.
    #[serde(default)]
    pub ttl_secs: u64,
    /// The lease's lifetime in milliseconds (0 in records of older cairn).
    #[serde(default)]
    pub ttl_ms: u64,
    /// The holder gave the lease up.
    #[serde(default)]
    pub released: bool,
}

/// A held lease.
#[derive(Debug, Clone)]
pub struct Lease {
    record: LeaseRecord,
    ttl: Duration,
    race_free: bool,
    /// When the last successful renewal (or the taking) began.
    renewed_at: Instant,
    /// The entity tags the store gave this holder's writes of its
    /// generation's file, newest last (at most [`OWN_TAGS_KEPT`]): a
    /// listing that shows one of them shows this holder's file, unread.
    own_tags: Vec<String>,
}

/// How many of a holder's own lease file tags are remembered: the renewal
/// in flight and a few before it.
const OWN_TAGS_KEPT: usize = 4;

/// One lease file found by a listing.
struct LeaseFile {
    generation: u64,
    /// The stripped path.
    path: String,
    /// The store's entity tag, when the listing gives one.
    etag: Option<String>,
}

fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// `ms` in whole seconds, rounded up.
fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn host_name() -> String {
    Some(read_trimmed("/proc/sys/kernel/hostname"))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_string())
}

fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// What `/proc` says of a process of this machine.
#[derive(Debug, PartialEq, Eq)]
enum ProcessState {
    /// It runs (not a zombie), started at this many clock ticks after boot.
    Running(u64),
    /// It was killed and not yet reaped, or is being reaped.
    Zombie,
    /// No such process: `/proc/<pid>` is not there.
    Missing,
    /// `/proc` would not say (hidden by `hidepid`, unreadable, malformed).
    Unknown,
}

/// Field 3 (state) and 22 (start time) of `/proc/<pid>/stat`.
fn process_state(pid: u32) -> ProcessState {
    let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ProcessState::Missing,
        Err(_) => return ProcessState::Unknown,
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return ProcessState::Unknown;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if matches!(fields.first(), Some(&("Z" | "X" | "x"))) {
        return ProcessState::Zombie;
    }
    // `rest` starts at field 3 (state), so field 22 is index 19.
    match fields.get(19).and_then(|f| f.parse().ok()) {
        Some(start) => ProcessState::Running(start),
        None => ProcessState::Unknown,
    }
}

/// Whether `/proc` is mounted with `hidepid` (other users' processes
/// hidden: a missing `/proc/<pid>` then proves nothing).
fn proc_hides_processes() -> bool {
    let mounts = read_trimmed("/proc/self/mounts");
    mounts
        .lines()
        .filter(|line| line.split_whitespace().nth(1) == Some("/proc"))
        .filter_map(|line| line.split_whitespace().nth(3))
        .flat_map(|options| options.split(','))
        .filter_map(|option| option.strip_prefix("hidepid="))
        .any(|level| !matches!(level, "0" | "off"))
}

/// Leases of this process whose [`LeaseKeeper`] was dropped without being
/// stopped (a run dropped on an error path), by holder token, with the
/// instant each is free. The run's futures went with the keeper they
/// borrowed, so it sends nothing more; what it had sent (a blocking local
/// write, an upload whose body left) gets a quarter of the lifetime to
/// land, the margin the protocol gives any late write of a holder (it
/// stops at three quarters, a taker waits the whole). A run of this
/// process takes such a lease then, instead of after the whole lifetime.
static ABANDONED: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());

/// When the lease of `holder`, dropped by a run of this process, is free.
fn abandoned_until(holder: &str) -> Option<Instant> {
    if holder.is_empty() {
        return None;
    }
    let gone = ABANDONED.lock().ok()?;
    gone.iter()
        .find(|(h, _)| h == holder)
        .map(|(_, free)| *free)
}

/// Records (or moves) the instant the lease of `holder` is free.
fn mark_abandoned(holder: String, free: Instant) {
    if let Ok(mut gone) = ABANDONED.lock() {
        if let Some(entry) = gone.iter_mut().find(|(h, _)| *h == holder) {
            entry.1 = free;
            return;
        }
        // A bounded memory of the last few: an older one has expired or
        // been released by the release spawned at its drop.
        if gone.len() >= 1024 {
            gone.remove(0);
        }
        gone.push((holder, free));
    }
}

impl LeaseRecord {
    /// A record for this process holding `generation` for `run`.
    fn ours(run: &RunId, generation: u64, ttl: Duration) -> Self {
        let pid = std::process::id();
        Self {
            holder: random_token(),
            generation,
            host: host_name(),
            pid,
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
            pid_namespace: pid_namespace(),
            process_start: match process_state(pid) {
                ProcessState::Running(start) => start,
                _ => 0,
            },
            run: run.as_str().to_string(),
            expires_at: 0,
            expires_at_ms: 0,
            ttl_secs: 0,
            ttl_ms: 0,
            released: false,
        }
        .valid_for(ttl)
    }

    /// The record, valid for `ttl` from now (by this machine's clock).
    fn valid_for(mut self, ttl: Duration) -> Self {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.expires_at_ms = now_millis().saturating_add(ttl_ms);
        self.expires_at = ceil_secs(self.expires_at_ms);
        self.ttl_ms = ttl_ms;
        self.ttl_secs = ceil_secs(ttl_ms);
        self
    }

    /// When the lease ends unless renewed, in milliseconds since the Unix
    /// epoch: a record of older cairn kept whole seconds cut down, so it
    /// may end up to a second after its `expires_at`.
    fn expiry_millis(&self) -> u64 {
        if self.expires_at_ms != 0 {
            self.expires_at_ms
        } else {
            self.expires_at.saturating_add(1).saturating_mul(1000)
        }
    }

    /// The lifetime in milliseconds (0: unknown, a record of older cairn).
    fn lifetime_millis(&self) -> u64 {
        if self.ttl_ms != 0 {
            self.ttl_ms
        } else {
            self.ttl_secs.saturating_mul(1000)
        }
    }

    /// Seconds until the lease ends, rounded up.
    fn expires_in_secs(&self) -> u64 {
        ceil_secs(self.expiry_millis().saturating_sub(now_millis()))
    }

    /// Whether the holder is known to be gone: a process of this machine
    /// (same boot, same PID namespace) that no longer runs, is a zombie, or
    /// whose PID now belongs to a younger process. Without the boot ID and
    /// namespace (another machine, a container, an older record) only expiry
    /// frees a lease.
    fn holder_is_gone(&self) -> bool {
        let boot = read_trimmed("/proc/sys/kernel/random/boot_id");
        if self.boot_id.is_empty()
            || self.boot_id != boot
            || self.pid_namespace.is_empty()
            || self.pid_namespace != pid_namespace()
        {
            return false;
        }
        if self.pid == std::process::id() {
            // This process: gone only once its run dropped its keeper
            // without ending and the writes it had sent had their margin
            // to land (see `abandoned_until`).
            return abandoned_until(&self.holder).is_some_and(|free| Instant::now() >= free);
        }
        match process_state(self.pid) {
            // Only a process known not to exist is gone: under `hidepid` a
            // live process of another user looks missing too.
            ProcessState::Missing => !proc_hides_processes(),
            ProcessState::Zombie => true,
            ProcessState::Running(start) => self.process_start != 0 && start != self.process_start,
            ProcessState::Unknown => false,
        }
    }

    /// When the lease is free, if a run of this process dropped it and it
    /// is not yet (see `abandoned_until`).
    fn dropped_here_until(&self) -> Option<Instant> {
        if self.released || self.pid != std::process::id() {
            return None;
        }
        abandoned_until(&self.holder).filter(|free| Instant::now() < *free)
    }

    /// Whether a run holds the lease now: not released, not expired, and
    /// (on this host) its process still runs.
    pub fn is_live(&self) -> bool {
        !self.released && self.expiry_millis() > now_millis() && !self.holder_is_gone()
    }

    fn describe(&self) -> String {
        format!(
            "{} pid {} (run {}, lease generation {})",
            self.host, self.pid, self.run, self.generation
        )
    }
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

    /// The instant after which this holder must not write: three quarters of
    /// the lifetime after its last renewal began (the last quarter absorbs
    /// clock skew and request latency; a taker waits the whole lifetime).
    pub fn deadline(&self) -> Instant {
        self.renewed_at + self.ttl * 3 / 4
    }

    /// Remembers the tag the store gave a write of this holder's file, when
    /// it tells that write's bytes apart (see [`distinguishing_tag`]).
    fn wrote(&mut self, etag: Option<String>) {
        if let Some(etag) = etag.and_then(distinguishing_tag) {
            self.own_tags.push(etag);
            if self.own_tags.len() > OWN_TAGS_KEPT {
                self.own_tags.remove(0);
            }
        }
    }
}

/// `etag` when it can stand for the bytes of one write: a strong tag with
/// a value. A weak tag (`W/"..."`) may be shared by different bodies, and an
/// empty one (`""`, or nothing), which a proxy or a store without tags may
/// answer to every request, would make every holder's file look like this
/// holder's own; with neither kept, the fence reads the file.
fn distinguishing_tag(etag: String) -> Option<String> {
    let value = etag.trim();
    let unquoted = value.trim_matches('"');
    if value.starts_with("W/") || unquoted.is_empty() {
        return None;
    }
    Some(etag)
}

impl CheckpointDir {
    /// The lease files present, newest generation last. A lease file of
    /// cairn before generations counts as generation 0.
    async fn lease_files(&self) -> Result<Vec<LeaseFile>> {
        let prefix = self.file(LEASE_PREFIX);
        let found = match self.fs.find_prefix(&prefix).await {
            Ok(found) => found,
            Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let mut files: Vec<LeaseFile> = found
            .into_iter()
            .filter_map(|f| {
                let base = f.name.rsplit('/').next().unwrap_or(&f.name);
                let generation = if base == LEASE_FILE {
                    0
                } else {
                    crate::layout::lease_generation(base)?
                };
                Some(LeaseFile {
                    generation,
                    path: f.name,
                    etag: f.etag,
                })
            })
            .collect();
        files.sort_by(|a, b| (a.generation, &a.path).cmp(&(b.generation, &b.path)));
        Ok(files)
    }

    async fn read_lease_file(&self, path: &str) -> Result<Option<LeaseRecord>> {
        match self.fs.cat(path).await {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Error::CorruptIdFile {
                    file: self.fs.url(path),
                    reason: format!(
                        "the lease is not valid JSON ({e}); delete it if no run uses this checkpoint"
                    ),
                }
            }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The current lease record (the newest generation), if any: who holds
    /// or last held the checkpoint.
    pub async fn read_lease(&self) -> Result<Option<LeaseRecord>> {
        match self.lease_files().await?.last() {
            Some(newest) => self.read_lease_file(&newest.path).await,
            None => Ok(None),
        }
    }

    /// Step 5: takes the lease for `run`, valid for `ttl` unless renewed.
    /// Refused with [`Error::LeaseHeld`] naming the holder while another run
    /// holds it.
    pub async fn acquire_lease(&self, run: &RunId, ttl: Duration) -> Result<Lease> {
        let race_free =
            self.fs.conditional_writes(&self.file(LEASE_FILE)).await? == ConditionalWrites::Native;
        if !race_free {
            tracing::warn!(
                checkpoint = %self.dir,
                "this store ignores create-if-absent writes: the checkpoint lease is best-effort, \
                 two runs started at the same instant on this path are not reliably told apart"
            );
        }
        // A few rounds: each lost race means another run took a newer
        // generation, which the next round finds live.
        for _ in 0..4 {
            let files = self.lease_files().await?;
            let mut generation = 1;
            if let Some(newest) = files.last() {
                let path = &newest.path;
                generation = newest.generation + 1;
                if let Some(current) = self.read_lease_file(path).await? {
                    // A run of this process dropped it: wait out the margin
                    // its writes get instead of refusing (a quarter of the
                    // lifetime once its last renewal is back; the instant
                    // moves closer then, so it is looked at again often).
                    while let Some(free) = current.dropped_here_until() {
                        let step = Instant::now() + Duration::from_millis(100);
                        tokio::time::sleep_until(tokio::time::Instant::from_std(free.min(step)))
                            .await;
                    }
                    if current.is_live() {
                        return Err(self.held_by(&current));
                    }
                    if !current.released
                        && !current.holder_is_gone()
                        && self.live_by_store_clock(path, &current).await?
                    {
                        return Err(Error::LeaseHeld {
                            path: self.dir.clone(),
                            holder: format!(
                                "{}, expired by this machine's clock but not by the store's: the clocks differ (check this machine's time)",
                                current.describe()
                            ),
                            expires_in_secs: current.ttl_secs,
                        });
                    }
                }
            }
            let record = LeaseRecord::ours(run, generation, ttl);
            let started = Instant::now();
            let path = self.file(&lease_file(generation));
            let body = serde_json::to_vec(&record).expect("the record serializes");
            let created = self
                .fs
                .pipe_tagged(&path, body.into(), WriteMode::Create)
                .await;
            let created = match created {
                // A test's stand-in for a lost answer: the first attempt
                // landed, the retry finds the file and must know it as its own.
                Ok(_) if crate::failpoint::triggered("lease-create-retried") => {
                    let body = serde_json::to_vec(&record).expect("the record serializes");
                    self.fs
                        .pipe_tagged(&path, body.into(), WriteMode::Create)
                        .await
                }
                other => other,
            };
            match created {
                Ok(etag) => {
                    let mut lease = Lease {
                        record,
                        ttl,
                        race_free,
                        renewed_at: started,
                        own_tags: Vec::new(),
                    };
                    lease.wrote(etag);
                    self.drop_old_generations(generation, &files).await;
                    return Ok(lease);
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    match self.claimed(&path, record, ttl, race_free, started).await {
                        Ok(lease) => return Ok(lease),
                        Err(Error::LeaseHeld { .. }) => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        match self.read_lease().await? {
            Some(current) => Err(self.held_by(&current)),
            None => Err(Error::LeaseHeld {
                path: self.dir.clone(),
                holder: "other runs starting at the same time".into(),
                expires_in_secs: ttl.as_secs(),
            }),
        }
    }

    /// After a create of `path` found it there: ours if it holds our token
    /// (a retried create whose first attempt landed), else another run's.
    async fn claimed(
        &self,
        path: &str,
        record: LeaseRecord,
        ttl: Duration,
        race_free: bool,
        started: Instant,
    ) -> Result<Lease> {
        match self.read_lease_file(path).await? {
            Some(found) if found.holder == record.holder => Ok(Lease {
                record,
                ttl,
                race_free,
                renewed_at: started,
                own_tags: Vec::new(),
            }),
            Some(found) => Err(self.held_by(&found)),
            None => Err(Error::LeaseHeld {
                path: self.dir.clone(),
                holder: "a run that took the lease and gave it up at once".into(),
                expires_in_secs: 0,
            }),
        }
    }

    /// Whether the lease `current` (at `path`) is still within its lifetime
    /// by the store's clock: its file was last written, by the store's
    /// time, less than its lifetime before the store's time now (read from
    /// a short-lived clock object written beside it). A taker whose clock
    /// runs ahead, or a holder whose clock runs behind, then cannot make a
    /// live lease look expired. Records of older cairn (no lifetime) and
    /// stores that give no times fall back to the holder's `expires_at`.
    async fn live_by_store_clock(&self, path: &str, current: &LeaseRecord) -> Result<bool> {
        let lifetime = i64::try_from(current.lifetime_millis()).unwrap_or(i64::MAX);
        if lifetime == 0 {
            return Ok(false);
        }
        let written = match self.fs.info(path).await {
            Ok(info) => info.last_modified.as_deref().and_then(epoch_millis),
            // Gone meanwhile: the next round lists again.
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let Some(written) = written else {
            return Ok(false);
        };
        let Some(now) = self.store_now_millis().await? else {
            return Ok(false);
        };
        // The store's times may be cut down to whole seconds: the lease file
        // may have been written up to a grain after the time it shows.
        Ok(now
            < written
                .saturating_add(lifetime)
                .saturating_add(STORE_CLOCK_GRAIN_MS))
    }

    fn held_by(&self, current: &LeaseRecord) -> Error {
        Error::LeaseHeld {
            path: self.dir.clone(),
            holder: current.describe(),
            expires_in_secs: current.expires_in_secs(),
        }
    }

    /// Older generations are history once a newer one is taken; deleting them
    /// keeps the directory small. Best-effort: a leftover is harmless.
    async fn drop_old_generations(&self, taken: u64, files: &[LeaseFile]) {
        for file in files {
            if file.generation < taken
                && let Err(e) = self.fs.rm_file(&file.path).await
            {
                tracing::debug!("could not delete an old lease file {}: {e}", file.path);
            }
        }
    }

    /// Fails with [`Error::LeaseLost`] unless `lease` is still the newest
    /// generation and its file holds this holder's token. The token matters:
    /// a generation's file deleted by a clean-up can be created again by a
    /// run that read an older listing, and then the number alone would
    /// match for two holders.
    pub async fn check_lease(&self, lease: &LeaseRecord) -> Result<()> {
        self.check_lease_tagged(lease, &[]).await
    }

    /// [`CheckpointDir::check_lease`] in one listing when the newest file
    /// shows an entity tag the store gave one of `own_tags` (this holder's
    /// writes of it): the file then holds this holder's token without being
    /// read. Any other tag, or none, reads the file.
    async fn check_lease_tagged(&self, lease: &LeaseRecord, own_tags: &[String]) -> Result<()> {
        let files = self.lease_files().await?;
        let Some(newest) = files.last() else {
            return Err(Error::LeaseLost {
                path: self.dir.clone(),
                holder: None,
            });
        };
        if newest.generation == lease.generation
            && newest
                .etag
                .as_ref()
                .is_some_and(|tag| own_tags.contains(tag))
        {
            return Ok(());
        }
        let current = self.read_lease_file(&newest.path).await?;
        match current {
            Some(current)
                if newest.generation == lease.generation && current.holder == lease.holder =>
            {
                Ok(())
            }
            other => Err(Error::LeaseLost {
                path: self.dir.clone(),
                holder: other.map(|r| r.describe()),
            }),
        }
    }

    /// The heartbeat: pushes the lease's expiry forward. Fails with
    /// [`Error::LeaseLost`] if another run took a newer generation (this run
    /// must stop).
    pub async fn renew_lease(&self, lease: &mut Lease) -> Result<()> {
        let renewed = self.renew(lease).await;
        crate::metrics::metrics().lease_renewed(renewed.is_ok());
        renewed
    }

    async fn renew(&self, lease: &mut Lease) -> Result<()> {
        let started = Instant::now();
        self.check_lease_tagged(&lease.record, &lease.own_tags)
            .await?;
        let record = lease.record.clone().valid_for(lease.ttl);
        if crate::failpoint::triggered("lease-renew-hangs") {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        let etag = self.rewrite_own_lease(&record).await?;
        lease.record = record;
        lease.renewed_at = started;
        lease.wrote(etag);
        Ok(())
    }

    /// Gives the lease up at the end of a run: marks this generation
    /// released, so the next run starts at once. A lease another run took
    /// meanwhile is left alone. The check is one listing when it shows the
    /// tag of one of this holder's own writes of its file (the fence's
    /// check), not a listing and a read.
    pub async fn release_lease(&self, lease: Lease) -> Result<()> {
        if self
            .check_lease_tagged(&lease.record, &lease.own_tags)
            .await
            .is_ok()
        {
            let mut record = lease.record;
            record.released = true;
            self.rewrite_own_lease(&record).await?;
        }
        Ok(())
    }

    /// Rewrites the holder's own generation file (only its holder writes
    /// it, so a plain overwrite is safe); the store's tag of the write.
    async fn rewrite_own_lease(&self, record: &LeaseRecord) -> Result<Option<String>> {
        let body = serde_json::to_vec(record).expect("the record serializes");
        Ok(self
            .fs
            .pipe_tagged(
                &self.file(&lease_file(record.generation)),
                body.into(),
                WriteMode::Overwrite,
            )
            .await?)
    }

    /// Step 3 behind the fence: commits `unit` only while `keeper`'s lease
    /// is valid by the local deadline and is still the newest generation,
    /// holding this run's token (one listing of the lease files; the newest
    /// is read only when the listing does not show the tag of one of this
    /// run's own writes of it). The unit's pending record is not checked:
    /// only a run holding a newer generation rolls a unit back, and the
    /// listing sees that generation.
    /// `data_files` is how many data files the unit wrote; it is recorded
    /// in the committed ID file.
    pub async fn commit_fenced(
        &self,
        keeper: &LeaseKeeper,
        unit: &UnitName,
        ids: arrow_array::ArrayRef,
        data_files: usize,
    ) -> Result<()> {
        let (record, own_tags) = keeper.held();
        keeper
            .fenced(self.check_lease_tagged(&record, &own_tags))
            .await?;
        keeper
            .fenced(self.commit_unit(unit, ids, Some(data_files)))
            .await
    }
}

/// Keeps a lease alive in the background: renews it every third of its
/// lifetime until stopped. [`LeaseKeeper::check`] fails once a renewal found
/// the lease taken, or once the local deadline passed without a successful
/// renewal (a renewal that hangs does not extend it), so the run stops
/// before committing anything more.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// let (fs, _) = cairn_fs::build_checkpoint_filesystem("memory:///keeper-doc", &Default::default()).unwrap();
/// let dir = cairn_checkpoint::internals::CheckpointDir::new(fs, "memory:///keeper-doc", "id");
/// let lease = dir.acquire_lease(&cairn_checkpoint::internals::RunId::new(), Duration::from_secs(30)).await.unwrap();
/// let keeper = cairn_checkpoint::internals::LeaseKeeper::start(dir.clone(), lease);
/// keeper.check().unwrap();
/// let lease = keeper.stop().await.unwrap();
/// dir.release_lease(lease).await.unwrap();
/// # })
/// ```
///
/// A keeper dropped without [`LeaseKeeper::stop`] (a run dropped on an
/// error path) stops renewing and marks the lease abandoned: a quarter of
/// its lifetime later (the margin for writes the run had already sent),
/// a run of this process takes it, and, on a Tokio runtime, a background
/// task releases it for other processes.
pub struct LeaseKeeper {
    task: Option<tokio::task::JoinHandle<()>>,
    stop: tokio::sync::watch::Sender<bool>,
    state: Arc<Mutex<KeeperState>>,
    dir: CheckpointDir,
}

impl std::fmt::Debug for LeaseKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseKeeper")
            .field("lease", &self.record())
            .finish_non_exhaustive()
    }
}

struct KeeperState {
    lease: Lease,
    /// Set when a renewal found the lease taken: the new holder, if known.
    lost: Option<Option<String>>,
    /// Set once the deadline passed without a renewal: a renewal that
    /// succeeds later does not revive the lease, since another run may have
    /// taken it over in between.
    expired: bool,
    path: String,
}

impl KeeperState {
    fn check(&mut self) -> Result<()> {
        if let Some(holder) = &self.lost {
            return Err(Error::LeaseLost {
                path: self.path.clone(),
                holder: holder.clone(),
            });
        }
        if self.expired || Instant::now() >= self.lease.deadline() {
            self.expired = true;
            return Err(Error::LeaseExpired {
                path: self.path.clone(),
                ttl_secs: self.lease.ttl.as_secs(),
            });
        }
        Ok(())
    }
}

impl LeaseKeeper {
    /// Starts renewing `lease` of `dir`.
    pub fn start(dir: CheckpointDir, lease: Lease) -> Self {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let period = (lease.ttl / 3).max(Duration::from_millis(100));
        let ttl = lease.ttl;
        let state = Arc::new(Mutex::new(KeeperState {
            lease,
            lost: None,
            expired: false,
            path: dir.dir.clone(),
        }));
        let shared = state.clone();
        let dir_for_drop = dir.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(period) => {}
                    _ = stopped.changed() => return,
                }
                let mut lease = {
                    let mut state = shared.lock().expect("keeper state");
                    if state.check().is_err() {
                        // Lost or expired for good: nothing to renew.
                        return;
                    }
                    state.lease.clone()
                };
                // A renewal in flight is finished, not dropped, when the
                // keeper stops: dropped, its write could still land after
                // the clean-up and leave a live-looking lease behind. It is
                // bounded by the lifetime (a hung request is abandoned then).
                let renewal = tokio::time::timeout(ttl, dir.renew_lease(&mut lease)).await;
                let mut state = shared.lock().expect("keeper state");
                match renewal {
                    // Judged against the deadline the renewal replaces.
                    Ok(Ok(())) if state.check().is_ok() => state.lease = lease,
                    Ok(Ok(())) => return,
                    Ok(Err(Error::LeaseLost { holder, .. })) => {
                        state.lost = Some(holder);
                        return;
                    }
                    // A failed renewal is retried next period; the deadline
                    // stops the run if none succeeds in time.
                    Ok(Err(e)) => {
                        tracing::warn!(checkpoint = %dir.dir, "cannot renew the lease: {e}")
                    }
                    Err(_) => tracing::warn!(
                        checkpoint = %dir.dir,
                        "a lease renewal got no answer within the lease's lifetime"
                    ),
                }
            }
        });
        Self {
            task: Some(task),
            stop,
            state,
            dir: dir_for_drop,
        }
    }

    /// Whether this run may still write: an error once the lease was found
    /// taken, or once its deadline passed without a successful renewal (and
    /// from then on).
    pub fn check(&self) -> Result<()> {
        self.state.lock().expect("keeper state").check()
    }

    /// The lease as last renewed.
    pub fn record(&self) -> LeaseRecord {
        self.state
            .lock()
            .expect("keeper state")
            .lease
            .record
            .clone()
    }

    /// The lease as last renewed, and the tags of this run's writes of it.
    fn held(&self) -> (LeaseRecord, Vec<String>) {
        let state = self.state.lock().expect("keeper state");
        (state.lease.record.clone(), state.lease.own_tags.clone())
    }

    /// The instant after which this run must not write, as of the last
    /// renewal.
    fn deadline(&self) -> Instant {
        self.state.lock().expect("keeper state").lease.deadline()
    }

    /// Runs `write` (a request of this run's unit: its pending record, a
    /// data file, its commit) behind the fence: refused once the lease is
    /// lost or expired, and abandoned, with [`Error::LeaseExpired`], if it
    /// is still running when the deadline passes without a renewal having
    /// moved it. So no request of this run (retries included) is sent after
    /// its deadline, however long the store's own retry budget is.
    pub async fn fenced<T, E>(&self, write: impl Future<Output = Result<T, E>>) -> Result<T>
    where
        Error: From<E>,
    {
        self.check()?;
        let mut write = std::pin::pin!(write);
        loop {
            let deadline = tokio::time::Instant::from_std(self.deadline());
            tokio::select! {
                done = &mut write => return Ok(done?),
                _ = tokio::time::sleep_until(deadline) => self.check()?,
            }
        }
    }

    /// Stops renewing (after the renewal in flight, if any, has finished)
    /// and gives the lease back (to release it); an error if the lease was
    /// lost or expired meanwhile.
    pub async fn stop(mut self) -> Result<Lease> {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let mut state = self.state.lock().expect("keeper state");
        state.check()?;
        Ok(state.lease.clone())
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else {
            // Stopped: the caller released the lease or cleaned up.
            return;
        };
        let _ = self.stop.send(true);
        let lease = match self.state.lock() {
            Ok(state) => state.lease.clone(),
            Err(_) => return,
        };
        let margin = lease.ttl / 4;
        let holder = lease.record.holder.clone();
        let dir = self.dir.clone();
        match tokio::runtime::Handle::try_current() {
            // The renewal in flight finishes first (see `start`: it is
            // bounded by the lifetime), so until it has, the lease is free
            // only when a renewal sent at the last moment has had its
            // margin too; then the run's writes get their margin from now,
            // and the lease is marked released unless another run took it
            // meanwhile.
            Ok(runtime) => {
                mark_abandoned(holder.clone(), Instant::now() + lease.ttl + margin);
                runtime.spawn(async move {
                    let _ = task.await;
                    mark_abandoned(holder, Instant::now() + margin);
                    tokio::time::sleep(margin).await;
                    if let Err(e) = dir.release_lease(lease).await {
                        tracing::warn!(checkpoint = %dir.dir, "could not release the lease of a dropped run: {e}");
                    }
                });
            }
            Err(_) => {
                task.abort();
                mark_abandoned(holder, Instant::now() + margin);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Duration, Instant, Lease, LeaseRecord, distinguishing_tag};

    #[test]
    fn only_strong_tags_with_a_value_stand_for_a_write() {
        let kept = |tag: &str| distinguishing_tag(tag.to_string());
        assert_eq!(
            kept("\"9b2cf535f27731c974343645a3985328\""),
            Some("\"9b2cf535f27731c974343645a3985328\"".into())
        );
        assert_eq!(
            kept("abc"),
            Some("abc".into()),
            "cairn-fs strips the quotes"
        );
        for shared in ["", "\"\"", " ", "W/\"abc\"", "W/\"abc", "W/\"\""] {
            assert_eq!(kept(shared), None, "{shared:?}");
        }
    }

    #[test]
    fn a_holder_remembers_only_its_writes_distinguishing_tags() {
        let record: LeaseRecord = serde_json::from_value(serde_json::json!({
            "host": "h", "pid": 1, "run": "r", "expires_at": 0
        }))
        .expect("a lease record");
        let mut lease = Lease {
            record,
            ttl: Duration::from_secs(60),
            race_free: true,
            renewed_at: Instant::now(),
            own_tags: Vec::new(),
        };
        for tag in [Some("\"\""), Some("W/\"x"), None, Some("9b2c"), Some("")] {
            lease.wrote(tag.map(str::to_string));
        }
        assert_eq!(lease.own_tags, vec!["9b2c".to_string()]);
    }
}
