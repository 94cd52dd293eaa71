//! What the fence before a commit sends to an object store, counted by
//! cairn-fs's own request counts. The counts are process-wide: this test
//! binary holds one test, so no other test's requests are counted.

use std::time::Duration;

use cairn_checkpoint::Error;
use cairn_checkpoint::internals::{CheckpointDir, LeaseKeeper, LeaseRecord, RunId, lease_file};
use cairn_fs::{WriteMode, build_checkpoint_filesystem, request_counts};

async fn fence_and_commit_cost(server: &str) {
    let Some((options, s3)) = cairn_conformance::s3_server(server, "the fence's requests") else {
        return;
    };
    let root = format!("s3://{}/fence-{}", s3.bucket, RunId::new().as_str());
    let (fs, _) = build_checkpoint_filesystem(&root, &options).unwrap();
    let dir = CheckpointDir::new(fs.clone(), &root, "id");
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    let race_free = lease.race_free();
    let generation = lease.record().generation;
    let keeper = LeaseKeeper::start(dir.clone(), lease);
    let ids: arrow_array::ArrayRef = std::sync::Arc::new(arrow_array::Int64Array::from(vec![1, 2]));
    let unit = cairn_checkpoint::UnitName::new(&RunId::new(), 0);
    dir.write_pending(&unit, ids.clone()).await.unwrap();

    let before = request_counts();
    dir.commit_fenced(&keeper, &unit, ids.clone(), 1)
        .await
        .unwrap();
    let sent = request_counts().since(&before);
    // The listing of the lease files (a GET), then the committed record
    // (a PUT, after a HEAD where the store ignores create-if-absent). The
    // lease file is not read: the listing shows the tag of this run's write.
    let head = u64::from(!race_free);
    assert_eq!(
        (sent.get, sent.put, sent.head, sent.total()),
        (1, 1, head, 2 + head),
        "{server}: {sent:?}"
    );

    // Another holder's file under this generation's name: its tag is not
    // one of this run's, so the file is read, and the commit refused.
    let other = LeaseRecord {
        holder: "other-token".into(),
        generation,
        host: "elsewhere".into(),
        pid: 9,
        boot_id: String::new(),
        pid_namespace: String::new(),
        process_start: 0,
        run: "other".into(),
        expires_at: u64::MAX / 2,
        expires_at_ms: 0,
        ttl_secs: 0,
        ttl_ms: 0,
        released: false,
    };
    fs.pipe(
        &format!("{root}/{}", lease_file(generation)),
        serde_json::to_vec(&other).unwrap().into(),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    let next = cairn_checkpoint::UnitName::new(&RunId::new(), 1);
    dir.write_pending(&next, ids.clone()).await.unwrap();
    let before = request_counts();
    let err = dir.commit_fenced(&keeper, &next, ids, 1).await.unwrap_err();
    let sent = request_counts().since(&before);
    assert!(
        matches!(err, Error::LeaseLost { holder: Some(ref h), .. } if h.contains("other")),
        "{server}: {err}"
    );
    assert_eq!((sent.get, sent.put), (2, 0), "{server}: {sent:?}");
    let state = dir.load(Default::default()).await.unwrap();
    assert_eq!(state.committed, vec![unit], "{server}");
    let _ = keeper.stop().await;

    // A release (the end of a run, or a driver handing the checkpoint to
    // Ray's writers) checks the lease in one listing, which shows the tag
    // of this holder's write, and rewrites its file released.
    let released_root = format!("{root}-released");
    let released_dir = CheckpointDir::new(fs.clone(), &released_root, "id");
    let lease = released_dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .unwrap();
    let generation = lease.record().generation;
    let before = request_counts();
    released_dir.release_lease(lease).await.unwrap();
    let sent = request_counts().since(&before);
    assert_eq!(
        (sent.get, sent.put, sent.total()),
        (1, 1, 2),
        "{server}: {sent:?}"
    );
    let body = fs
        .cat(&format!("{released_root}/{}", lease_file(generation)))
        .await
        .unwrap();
    let record: LeaseRecord = serde_json::from_slice(&body).unwrap();
    assert!(record.released, "{server}");
}

#[tokio::test]
async fn a_fenced_commit_lists_the_lease_and_writes_its_record() {
    fence_and_commit_cost("GARAGE").await;
    fence_and_commit_cost("MOTO").await;
}
