//! Faults inside the lease code, through its failpoints: a renewal that
//! hangs, one that lands after the deadline, a write running past it, and a
//! create whose first attempt landed but whose answer was lost.
//! One test function: failpoints are global to the process.

use std::sync::Arc;
use std::time::Duration;

use cairn_checkpoint::internals::{LeaseKeeper, RunId};
use cairn_checkpoint::{Error, UnitName};

mod common;
use common::dir_on;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_faults() {
    let scenario = fail::FailScenario::setup();

    // A retried create-if-absent whose first attempt landed finds the file:
    // the lease is still this run's (its token is in it), not another's.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    let dir = dir_on(&root);
    fail::cfg("lease-create-retried", "1*return").unwrap();
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(60))
        .await
        .expect("a retried create of our own lease holds it");
    fail::remove("lease-create-retried");
    assert_eq!(lease.record().generation, 1);
    assert!(matches!(
        dir.acquire_lease(&RunId::new(), Duration::from_secs(60))
            .await,
        Err(Error::LeaseHeld { .. })
    ));
    dir.release_lease(lease).await.unwrap();

    // A renewal that hangs does not keep the run writing: past three
    // quarters of the lifetime without a successful renewal, the keeper
    // says stop and a commit is refused.
    let root = format!("memory:///lease-hang-{}", RunId::new().as_str());
    let dir = dir_on(&root);
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(3))
        .await
        .unwrap();
    fail::cfg("lease-renew-hangs", "return").unwrap();
    let keeper = LeaseKeeper::start(dir.clone(), lease);
    let unit = UnitName::new(&RunId::new(), 0);
    let ids: arrow_array::ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![1]));
    dir.write_pending(&unit, ids.clone()).await.unwrap();
    keeper.check().unwrap();
    tokio::time::sleep(Duration::from_millis(2400)).await;
    let err = keeper.check().unwrap_err();
    assert!(matches!(err, Error::LeaseExpired { .. }), "{err}");
    let err = dir.commit_fenced(&keeper, &unit, ids, 1).await.unwrap_err();
    assert!(matches!(err, Error::LeaseExpired { .. }), "{err}");
    assert!(
        dir.load(Default::default())
            .await
            .unwrap()
            .committed
            .is_empty()
    );
    fail::remove("lease-renew-hangs");
    assert!(keeper.stop().await.is_err());

    // A renewal slow enough to end after the deadline does not revive the
    // lease: another run may have taken it in between. And the fenced
    // write still running at the deadline is abandoned.
    let root = format!("memory:///lease-late-{}", RunId::new().as_str());
    let dir = dir_on(&root);
    let lease = dir
        .acquire_lease(&RunId::new(), Duration::from_secs(3))
        .await
        .unwrap();
    fail::cfg("lease-renew-hangs", "sleep(2000)").unwrap();
    let keeper = LeaseKeeper::start(dir.clone(), lease);
    let started = std::time::Instant::now();
    let slow = keeper
        .fenced(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<(), Error>(())
        })
        .await;
    assert!(
        matches!(slow, Err(Error::LeaseExpired { .. })),
        "a write running at the deadline is abandoned: {slow:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    // The renewal (begun at 1 s, held 2 s) lands at about 3 s, after the
    // deadline (2.25 s).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    fail::remove("lease-renew-hangs");
    let err = keeper.check().unwrap_err();
    assert!(
        matches!(err, Error::LeaseExpired { .. }),
        "stays expired: {err}"
    );
    assert!(keeper.stop().await.is_err());
    scenario.teardown();
}
