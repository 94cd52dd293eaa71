//! The lease (step 5): one run per checkpoint path.

use std::time::Duration;

use cairn_checkpoint::Error;
use cairn_checkpoint::internals::{CheckpointDir, LeaseRecord, RunId, lease_file};
use cairn_fs::{StorageOptions, WriteMode, build_checkpoint_filesystem};

mod common;
use common::dir_on;

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

#[tokio::test]
async fn a_second_run_is_refused_until_the_first_releases() {
    let root = format!("memory:///lease-{}", RunId::new().as_str());
    let dir = dir_on(&root);
    let first = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    assert!(first.race_free());
    let err = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap_err();
    let Error::LeaseHeld {
        holder,
        expires_in_secs,
        ..
    } = &err
    else {
        panic!("{err}")
    };
    assert!(
        holder.contains(&std::process::id().to_string()) && *expires_in_secs > 50,
        "{err}"
    );
    assert!(err.to_string().contains(&root), "{err}");
    dir.release_lease(first).await.unwrap();
    let again = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    dir.release_lease(again).await.unwrap();
}

/// Writes `record` as lease generation `record.generation`, as another run would.
async fn write_record(dir_url: &str, record: &LeaseRecord) {
    let (fs, _) = build_checkpoint_filesystem(dir_url, &StorageOptions::new()).unwrap();
    let body = serde_json::to_vec(record).unwrap();
    fs.pipe(
        &format!("{dir_url}/{}", lease_file(record.generation)),
        body.into(),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
}

fn this_machine(path: &str) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

/// A lease record of another run.
fn record(generation: u64, host: &str, pid: u32, run: &str, expires_at: u64) -> LeaseRecord {
    LeaseRecord {
        holder: format!("{run}-token"),
        generation,
        host: host.into(),
        pid,
        boot_id: String::new(),
        pid_namespace: String::new(),
        process_start: 0,
        run: run.into(),
        expires_at,
        expires_at_ms: 0,
        ttl_secs: 0,
        ttl_ms: 0,
        released: false,
    }
}

#[tokio::test]
async fn expired_or_abandoned_leases_are_taken_over() {
    let root = format!("memory:///lease-exp-{}", RunId::new().as_str());
    let dir = dir_on(&root);
    write_record(&root, &record(1, "elsewhere", 1, "old", 1)).await;
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        lease.record().generation,
        2,
        "a taker adds one to the generation"
    );
    dir.release_lease(lease).await.unwrap();

    // A live lease of a process of this machine (same boot, same PID
    // namespace) that is gone (killed) is freed at once.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let mut abandoned = record(3, &host(), dead_pid, "killed", u64::MAX / 2);
    abandoned.boot_id = this_machine("/proc/sys/kernel/random/boot_id");
    abandoned.pid_namespace = std::fs::read_link("/proc/self/ns/pid")
        .unwrap()
        .display()
        .to_string();
    write_record(&root, &abandoned).await;
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(lease.record().generation, 4);
    dir.release_lease(lease).await.unwrap();

    // The same host name and a dead PID, but another PID namespace (another
    // container called the same): not known to be gone, so respected.
    let mut container = abandoned.clone();
    container.generation = 5;
    container.pid_namespace = "pid:[1]".into();
    write_record(&root, &container).await;
    let err = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::LeaseHeld { ref holder, .. } if holder.contains("killed")),
        "{err}"
    );

    // A live lease of another host is respected.
    write_record(&root, &record(6, "elsewhere", 1, "live", u64::MAX / 2)).await;
    let err = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::LeaseHeld { ref holder, .. } if holder.contains("elsewhere") && holder.contains("live")),
        "{err}"
    );
}

/// A lease of another host whose `expires_at` has passed by this machine's
/// clock, but whose file the store wrote less than its lifetime ago: the
/// clocks differ (the taker's runs ahead, or the holder's behind), and the
/// lease is respected. A file written longer ago than the lifetime by the
/// store's clock is expired; a record of older cairn (no lifetime) is
/// judged by `expires_at` alone.
async fn clock_skew_never_takes_a_live_lease(root: &str, dir: &CheckpointDir, local: bool) {
    let put = |record: LeaseRecord| async move {
        let body = serde_json::to_vec(&record).unwrap();
        let path = format!("{root}/{}", lease_file(record.generation));
        dir.fs()
            .pipe(&path, body.into(), WriteMode::Overwrite)
            .await
            .unwrap();
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut skewed = record(1, "elsewhere", 1, "skewed", now - 30);
    skewed.ttl_secs = 120;
    put(skewed).await;
    let err = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::LeaseHeld { ref holder, .. } if holder.contains("skewed") && holder.contains("clocks differ")),
        "{err}"
    );
    let listed = dir.fs().find(dir.path()).await.unwrap();
    assert_eq!(listed.len(), 1, "the clock object is gone: {listed:?}");
    if local {
        // Written 200 s ago by the store's (this disk's) clock: expired.
        let path = format!("{root}/{}", lease_file(1));
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(std::time::SystemTime::now() - Duration::from_secs(200))
            .unwrap();
        let lease = dir
            .acquire_lease(&RunId::new(), Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(lease.record().generation, 2);
        dir.release_lease(lease).await.unwrap();
    }
    put(record(3, "elsewhere", 1, "older", now - 30)).await;
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(lease.record().generation, 4, "a record of older cairn");
    dir.release_lease(lease).await.unwrap();
}

#[tokio::test]
async fn clock_skew_never_takes_a_live_lease_on_local_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    clock_skew_never_takes_a_live_lease(&root, &dir_on(&root), true).await;
}

#[tokio::test]
async fn clock_skew_never_takes_a_live_lease_on_s3() {
    for name in ["GARAGE", "MOTO"] {
        let Some((options, s3)) = cairn_conformance::s3_server(name, "lease clock on S3") else {
            continue;
        };
        let root = format!("s3://{}/lease-clock-{}", s3.bucket, RunId::new().as_str());
        let (fs, _) = build_checkpoint_filesystem(&root, &options).unwrap();
        let dir = CheckpointDir::new(fs, &root, "id");
        clock_skew_never_takes_a_live_lease(&root, &dir, false).await;
    }
}

/// A lease taken just before a whole second (where times cut to whole
/// seconds lose most) is still live, by the taker's clock and by the
/// store's, until the holder's deadline: no other run may take it while
/// the holder may still write.
async fn a_lease_is_live_while_its_holder_may_write(dir: &CheckpointDir) {
    let ttl = Duration::from_secs(3);
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_millis();
    tokio::time::sleep(Duration::from_millis(
        ((1900 - u64::from(millis)) % 1000).max(1),
    ))
    .await;
    let lease = dir.acquire_lease(&RunId::new(), ttl).await.unwrap();
    tokio::time::sleep_until((lease.deadline() - Duration::from_millis(60)).into()).await;
    let err = dir.acquire_lease(&RunId::new(), ttl).await.unwrap_err();
    assert!(matches!(err, Error::LeaseHeld { .. }), "{err}");
    assert!(
        std::time::Instant::now() < lease.deadline() + Duration::from_millis(500),
        "the taker asked after the holder's deadline: the test says nothing"
    );
    let record = dir.read_lease().await.unwrap().unwrap();
    assert!(
        record.expires_at_ms > 0 && record.ttl_ms == 3000,
        "{record:?}"
    );
    assert!(
        record.expires_at * 1000 >= record.expires_at_ms,
        "whole seconds are rounded up for older readers: {record:?}"
    );
    dir.release_lease(lease).await.unwrap();
}

#[tokio::test]
async fn a_lease_is_live_while_its_holder_may_write_on_local_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    a_lease_is_live_while_its_holder_may_write(&dir_on(&root)).await;
}

#[tokio::test]
async fn a_lease_is_live_while_its_holder_may_write_on_s3() {
    let Some((options, s3)) = cairn_conformance::s3_server("GARAGE", "lease lifetime on S3") else {
        return;
    };
    let root = format!("s3://{}/lease-ms-{}", s3.bucket, RunId::new().as_str());
    let (fs, _) = build_checkpoint_filesystem(&root, &options).unwrap();
    a_lease_is_live_while_its_holder_may_write(&CheckpointDir::new(fs, &root, "id")).await;
}

#[tokio::test]
async fn a_run_that_lost_its_lease_is_told_so_and_cannot_commit() {
    let root = format!("memory:///lease-lost-{}", RunId::new().as_str());
    let dir = dir_on(&root);
    let mut lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    dir.renew_lease(&mut lease).await.unwrap();
    let keeper = cairn_checkpoint::internals::LeaseKeeper::start(dir.clone(), lease.clone());
    let unit = cairn_checkpoint::UnitName::new(&RunId::new(), 0);
    let ids: arrow_array::ArrayRef = std::sync::Arc::new(arrow_array::Int64Array::from(vec![1, 2]));
    dir.write_pending(&unit, ids.clone()).await.unwrap();

    write_record(&root, &record(2, "elsewhere", 9, "thief", u64::MAX / 2)).await;
    let err = dir.renew_lease(&mut lease).await.unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
    // The fence: the commit is refused, and nothing is committed.
    let err = dir
        .commit_fenced(&keeper, &unit, ids.clone(), 1)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::LeaseLost { holder: Some(ref h), .. } if h.contains("thief")),
        "{err}"
    );
    let state = dir.load(Default::default()).await.unwrap();
    assert!(state.committed.is_empty());
    dir.release_lease(lease).await.unwrap();
    assert!(
        matches!(
            dir.acquire_lease(&RunId::new(), Duration::from_secs(60))
                .await,
            Err(Error::LeaseHeld { .. })
        ),
        "release must not touch another run's lease"
    );
    let _ = keeper.stop().await;
}

#[tokio::test]
async fn a_commit_after_another_run_took_over_and_finished_is_refused() {
    // Another run took the lease (a newer generation), rolled this run's
    // unit back, ended and deleted its lease files; a third run then made
    // this run's generation number again. Neither the empty listing nor the
    // same number with another holder's file lets the commit through.
    let root = format!("memory:///lease-fence-{}", RunId::new().as_str());
    let dir = dir_on(&root);
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    let generation = lease.record().generation;
    let keeper = cairn_checkpoint::internals::LeaseKeeper::start(dir.clone(), lease);
    let unit = cairn_checkpoint::UnitName::new(&RunId::new(), 0);
    let ids: arrow_array::ArrayRef = std::sync::Arc::new(arrow_array::Int64Array::from(vec![7]));
    dir.write_pending(&unit, ids.clone()).await.unwrap();
    dir.commit_fenced(&keeper, &unit, ids.clone(), 1)
        .await
        .unwrap();

    let (fs, _) = build_checkpoint_filesystem(&root, &StorageOptions::new()).unwrap();
    let own = format!("{root}/{}", lease_file(generation));
    let next = cairn_checkpoint::UnitName::new(&RunId::new(), 1);
    dir.write_pending(&next, ids.clone()).await.unwrap();
    fs.rm_file(&own).await.unwrap();
    let err = dir
        .commit_fenced(&keeper, &next, ids.clone(), 1)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err}");

    write_record(
        &root,
        &record(generation, "elsewhere", 9, "third", u64::MAX / 2),
    )
    .await;
    let err = dir.commit_fenced(&keeper, &next, ids, 1).await.unwrap_err();
    assert!(
        matches!(err, Error::LeaseLost { holder: Some(ref h), .. } if h.contains("third")),
        "{err}"
    );
    let state = dir.load(Default::default()).await.unwrap();
    assert_eq!(state.committed, vec![unit]);
    let _ = keeper.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_one_of_many_simultaneous_runs_gets_the_lease_on_local_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let dir = dir_on(&root);
            tokio::spawn(async move {
                dir.acquire_lease(&RunId::new(), Duration::from_secs(60))
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut winners = 0;
    for t in tasks {
        winners += t.await.unwrap() as usize;
    }
    assert_eq!(winners, 1);
}

#[tokio::test]
async fn the_lease_says_when_it_is_only_best_effort() {
    for (name, race_free) in [("GARAGE", false), ("MOTO", true)] {
        let Some((options, s3)) = cairn_conformance::s3_server(name, "lease on S3") else {
            continue;
        };
        let bucket = s3.bucket;
        let root = format!("s3://{bucket}/lease-{}", RunId::new().as_str());
        let (fs, _) = build_checkpoint_filesystem(&root, &options).unwrap();
        let dir = CheckpointDir::new(fs, &root, "id");
        let lease = dir
            .acquire_lease(&RunId::new(), Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(lease.race_free(), race_free, "{name}");
        assert!(
            matches!(
                dir.acquire_lease(&RunId::new(), Duration::from_secs(60))
                    .await,
                Err(Error::LeaseHeld { .. })
            ),
            "{name}"
        );
        dir.release_lease(lease).await.unwrap();
    }
}

#[tokio::test]
async fn the_keeper_renews_and_notices_a_lost_lease() {
    let root = format!("memory:///keeper-{}", RunId::new().as_str());
    let dir = dir_on(&root);
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(3))
        .await
        .unwrap();
    let first_expiry = lease.record().expires_at;
    let keeper = cairn_checkpoint::internals::LeaseKeeper::start(dir.clone(), lease);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    keeper.check().unwrap();
    let lease = keeper.stop().await.unwrap();
    assert!(
        lease.record().expires_at > first_expiry,
        "renewed while running"
    );

    let keeper = cairn_checkpoint::internals::LeaseKeeper::start(dir.clone(), lease);
    let generation = keeper.record().generation;
    write_record(
        &root,
        &record(generation + 1, "elsewhere", 9, "thief", u64::MAX / 2),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let err = keeper.check().unwrap_err();
    assert!(
        matches!(err, Error::LeaseLost { holder: Some(ref h), .. } if h.contains("thief")),
        "{err}"
    );
    assert!(keeper.stop().await.is_err());
}

#[tokio::test]
async fn a_generation_made_again_by_another_holder_is_not_ours() {
    let root = format!("memory:///lease-reuse-{}", RunId::new().as_str());
    let dir = dir_on(&root);
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    let generation = lease.record().generation;
    dir.check_lease(lease.record()).await.unwrap();
    // Our generation's file deleted (a clean-up) and made again by a run
    // that read an older listing: same number, another holder.
    write_record(
        &root,
        &record(generation, "elsewhere", 9, "reused", u64::MAX / 2),
    )
    .await;
    let err = dir.check_lease(lease.record()).await.unwrap_err();
    assert!(
        matches!(err, Error::LeaseLost { holder: Some(ref h), .. } if h.contains("reused")),
        "{err}"
    );
}
