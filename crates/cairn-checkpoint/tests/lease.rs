//! The lease (step 5): one run per checkpoint path.

use std::time::Duration;

use cairn_checkpoint::{CheckpointDir, Error, LEASE_FILE, LeaseRecord, RunId};
use cairn_fs::{StorageOptions, WriteMode, build_checkpoint_filesystem};

fn dir_on(root: &str) -> CheckpointDir {
    let (fs, _) = build_checkpoint_filesystem(root, &StorageOptions::new()).unwrap();
    CheckpointDir::new(fs, root, "id")
}

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

async fn write_record(dir_url: &str, record: &LeaseRecord) {
    let (fs, _) = build_checkpoint_filesystem(dir_url, &StorageOptions::new()).unwrap();
    let body = serde_json::to_vec(record).unwrap();
    fs.pipe(
        &format!("{dir_url}/{LEASE_FILE}"),
        body.into(),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn expired_or_abandoned_leases_are_taken_over() {
    let root = format!("memory:///lease-exp-{}", RunId::new().as_str());
    let dir = dir_on(&root);
    let expired = LeaseRecord {
        host: "elsewhere".into(),
        pid: 1,
        run: "old".into(),
        expires_at: 1,
    };
    write_record(&root, &expired).await;
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    dir.release_lease(lease).await.unwrap();

    // A live lease of a process of this host that is gone (killed) is freed at once.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let abandoned = LeaseRecord {
        host: host(),
        pid: dead_pid,
        run: "killed".into(),
        expires_at: u64::MAX / 2,
    };
    write_record(&root, &abandoned).await;
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    dir.release_lease(lease).await.unwrap();

    // A live lease of another host is respected.
    let live = LeaseRecord {
        host: "elsewhere".into(),
        pid: 1,
        run: "live".into(),
        expires_at: u64::MAX / 2,
    };
    write_record(&root, &live).await;
    assert!(matches!(
        dir.acquire_lease(&RunId::new(), Duration::from_secs(60))
            .await,
        Err(Error::LeaseHeld { .. })
    ));
}

#[tokio::test]
async fn a_run_that_lost_its_lease_is_told_so() {
    let root = format!("memory:///lease-lost-{}", RunId::new().as_str());
    let dir = dir_on(&root);
    let mut lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    dir.renew_lease(&mut lease).await.unwrap();
    let thief = LeaseRecord {
        host: "elsewhere".into(),
        pid: 9,
        run: "thief".into(),
        expires_at: u64::MAX / 2,
    };
    write_record(&root, &thief).await;
    let err = dir.renew_lease(&mut lease).await.unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
    dir.release_lease(lease).await.unwrap();
    assert!(
        matches!(
            dir.acquire_lease(&RunId::new(), Duration::from_secs(60))
                .await,
            Err(Error::LeaseHeld { .. })
        ),
        "release must not delete another run's lease"
    );
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
    let keeper = cairn_checkpoint::LeaseKeeper::start(dir.clone(), lease);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    keeper.check().unwrap();
    let lease = keeper.stop().await.unwrap();
    assert!(
        lease.record().expires_at > first_expiry,
        "renewed while running"
    );

    let keeper = cairn_checkpoint::LeaseKeeper::start(dir.clone(), lease);
    let thief = LeaseRecord {
        host: "elsewhere".into(),
        pid: 9,
        run: "thief".into(),
        expires_at: u64::MAX / 2,
    };
    write_record(&root, &thief).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let err = keeper.check().unwrap_err();
    assert!(
        matches!(err, Error::LeaseLost { holder: Some(ref h), .. } if h.contains("thief")),
        "{err}"
    );
    assert!(keeper.stop().await.is_err());
}
