//! Single-request writes on local disk: exclusive creates race correctly and
//! no temporary file is left behind.

use cairn_fs::{ErrorKind, FileSystem, StorageOptions, WriteMode};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_one_of_many_concurrent_creates_wins() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FileSystem::new("file", &StorageOptions::new()).unwrap();
    let target = format!("{}/commit.parquet", dir.path().display());
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let (fs, target) = (fs.clone(), target.clone());
            tokio::spawn(async move {
                fs.pipe(&target, format!("writer {i}").into(), WriteMode::Create)
                    .await
            })
        })
        .collect();
    let mut wins = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => wins += 1,
            Err(e) => assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}"),
        }
    }
    assert_eq!(wins, 1);
    let content = String::from_utf8(fs.cat(&target).await.unwrap().to_vec()).unwrap();
    assert!(
        content.starts_with("writer "),
        "whole content from one writer: {content}"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "temporary files left behind: {names:?}");
    fs.pipe(&target, "replaced".into(), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(fs.cat(&target).await.unwrap(), "replaced");
}
