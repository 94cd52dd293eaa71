//! The conformance suite of cairn-fs: one body of behaviour tests, written
//! once as `pub async fn(&Target)`, run against every backend by the files in
//! `tests/` through [`conformance_suite!`].

pub mod fault_proxy;
mod kit;
pub mod loopback;
pub mod own_garage;
mod scenarios;
mod target;
mod tclake;

use bytes::Bytes;
use cairn_fs::{ErrorKind, FileInfo, FileSystem, FileType, WriteMode};
use futures::AsyncReadExt;

pub use kit::{free_port, splitmix64};
pub use scenarios::{COPY_SCENARIOS, CopyScenario, SOURCE_TREE, Src};
pub use target::{
    OPT_OUT, S3Settings, Target, prometheus_binary, ray_python, s3_server, tools_python,
};
pub use tclake::{Catalog, TCLAKE_SID, TCLAKE_SK, tclake_catalog};

/// Generates one `#[tokio::test]` per conformance body. `$make` maps a test
/// name to `Option<Target>`. Attributes say which groups run: `$buckets` goes
/// on tests that need buckets and credentials, `$signatures` on the test that
/// needs the server to check signatures, `$multipart` (optional) on the
/// multipart-upload test, the optional `$every` on all tests;
/// pass `cfg(all())` to run a group and `ignore = "why"` to skip it.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr, buckets: $buckets:meta, signatures: $signatures:meta) => {
        $crate::conformance_suite!($make, buckets: $buckets, signatures: $signatures,
            multipart: cfg(all()), every: cfg(all()));
    };
    ($make:expr, buckets: $buckets:meta, signatures: $signatures:meta, multipart: $multipart:meta) => {
        $crate::conformance_suite!($make, buckets: $buckets, signatures: $signatures,
            multipart: $multipart, every: cfg(all()));
    };
    ($make:expr, buckets: $buckets:meta, signatures: $signatures:meta, every: $every:meta) => {
        $crate::conformance_suite!($make, buckets: $buckets, signatures: $signatures,
            multipart: cfg(all()), every: $every);
    };
    ($make:expr, buckets: $buckets:meta, signatures: $signatures:meta, multipart: $multipart:meta,
     every: $every:meta) => {
        $crate::conformance_suite!(@each $make, #[$every];
            info_exists_and_types, ls_files_dirs_and_missing, pipe_and_cat, exclusive_create,
            conditional_write_mode, ranged_reads, special_character_keys, streaming_open,
            many_keys_list_and_batch_delete, find_maxdepth_withdirs, walk_tree,
            glob_patterns, disk_usage, mkdir_and_rm_rules, rm_file_deletes_one_file, copy_scenarios, put_scenarios,
            get_scenarios, list_to_list_copies, move_files_and_dirs, missing_key_errors,
            prefix_listing);
        $crate::conformance_suite!(@each $make, #[$buckets], #[$every];
            missing_bucket_error, cross_bucket_copy);
        $crate::conformance_suite!(@each $make, #[$signatures], #[$every]; wrong_secret_error);
        $crate::conformance_suite!(@each $make, #[$multipart], #[$every]; multipart_object_over_16_mib);
    };
    (@each $make:expr, $(#[$attr:meta]),+; ) => {};
    (@each $make:expr, $(#[$attr:meta]),+; $name:ident $(, $rest:ident)* $(,)?) => {
        $(#[$attr])+
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let Some(target) = ($make)(stringify!($name)) else { return };
            $crate::$name(&target).await;
        }
        $crate::conformance_suite!(@each $make, $(#[$attr]),+; $($rest),*);
    };
}

fn bytes(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

/// info, exists, isdir, isfile on a file, a directory, a missing path.
pub async fn info_exists_and_types(t: &Target) {
    t.write("dir/file.txt", "hello").await;
    let info = t.fs.info(&t.url("dir/file.txt")).await.unwrap();
    assert_eq!(info.kind, FileType::File);
    assert_eq!(info.size, 5);
    assert_eq!(info.name, t.fs.strip(&t.url("dir/file.txt")).unwrap());
    let dir = t.fs.info(&t.url("dir")).await.unwrap();
    assert_eq!(dir.kind, FileType::Directory);
    assert!(t.fs.info(&t.url("dir/")).await.unwrap().is_dir());
    assert!(t.fs.exists(&t.url("dir/file.txt")).await.unwrap());
    assert!(t.fs.exists(&t.url("dir")).await.unwrap());
    assert!(!t.fs.exists(&t.url("dir/missing")).await.unwrap());
    assert!(
        !t.fs.exists(&t.url("di")).await.unwrap(),
        "a key prefix is not a directory"
    );
    assert!(t.fs.isfile(&t.url("dir/file.txt")).await.unwrap());
    assert!(!t.fs.isdir(&t.url("dir/file.txt")).await.unwrap());
    assert!(t.fs.isdir(&t.url("dir")).await.unwrap());
    assert!(!t.fs.isfile(&t.url("dir")).await.unwrap());
    let err = t.fs.info(&t.url("nope")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.to_string().contains("nope"), "{err}");
}

/// ls of a directory (files and subdirectories), of a file, of a missing path.
pub async fn ls_files_dirs_and_missing(t: &Target) {
    t.write("d/a", "1").await;
    t.write("d/b", "22").await;
    t.write("d/sub/c", "333").await;
    let entries = t.fs.ls(&t.url("d")).await.unwrap();
    let base = t.fs.strip(&t.url("d")).unwrap();
    let got: Vec<(String, FileType, u64)> = entries
        .iter()
        .map(|e| (e.name[base.len() + 1..].to_string(), e.kind, e.size))
        .collect();
    assert_eq!(
        got,
        [
            ("a".to_string(), FileType::File, 1),
            ("b".to_string(), FileType::File, 2),
            ("sub".to_string(), FileType::Directory, 0)
        ]
    );
    let file = t.fs.ls(&t.url("d/b")).await.unwrap();
    assert_eq!(file.len(), 1);
    assert_eq!(file[0].size, 2);
    let err = t.fs.ls(&t.url("missing")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // The streaming form: the same entries in the store's order; a file
    // gives itself; a missing path ends with NotFound.
    use futures::TryStreamExt;
    for path in ["d", "d/b", "d/sub"] {
        let streamed = sorted(t.fs.ls_stream(&t.url(path)).await).await;
        assert_eq!(streamed, t.fs.ls(&t.url(path)).await.unwrap(), "{path}");
    }
    let missing = match t.fs.ls_stream(&t.url("missing")).await {
        Ok(stream) => stream.try_collect::<Vec<_>>().await.unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(missing.kind(), ErrorKind::NotFound);
}

/// A listing stream's entries, sorted by name.
async fn sorted(
    stream: cairn_fs::Result<futures::stream::BoxStream<'static, cairn_fs::Result<FileInfo>>>,
) -> Vec<FileInfo> {
    use futures::TryStreamExt;
    let mut entries: Vec<FileInfo> = stream.unwrap().try_collect().await.unwrap();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

/// walk, top down: each directory once with its sorted subdirectories and
/// files, depth first in name order; maxdepth; a file; a missing path.
pub async fn walk_tree(t: &Target) {
    use futures::TryStreamExt;
    for f in ["w/a", "w/d/b", "w/d/e/c", "w/z/y"] {
        t.write(f, "xy").await;
    }
    let base = t.fs.strip(&t.url("w")).unwrap();
    let rel = |name: &str| name[base.len()..].trim_start_matches('/').to_string();
    let walk = |options: cairn_fs::FindOptions, path: &'static str| async move {
        let steps: Vec<cairn_fs::WalkStep> =
            t.fs.walk(&t.url(path), options)
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
        steps
    };
    let steps = walk(cairn_fs::FindOptions::new(), "w").await;
    let summary: Vec<(String, Vec<String>, Vec<String>)> = steps
        .iter()
        .map(|s| {
            (
                rel(&s.path),
                s.dirs.iter().map(|d| rel(&d.name)).collect(),
                s.files.iter().map(|f| rel(&f.name)).collect(),
            )
        })
        .collect();
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        summary,
        [
            (String::new(), owned(&["d", "z"]), owned(&["a"])),
            ("d".into(), owned(&["d/e"]), owned(&["d/b"])),
            ("d/e".into(), vec![], owned(&["d/e/c"])),
            ("z".into(), vec![], owned(&["z/y"])),
        ]
    );
    assert_eq!(steps[0].files[0].size, 2);
    assert_eq!(
        walk(cairn_fs::FindOptions::new().max_depth(2), "w")
            .await
            .len(),
        3,
        "the top and its two subdirectories"
    );
    let file = walk(cairn_fs::FindOptions::new(), "w/a").await;
    assert_eq!(file.len(), 1);
    assert_eq!(rel(&file[0].files[0].name), "a");
    assert!(
        walk(cairn_fs::FindOptions::new(), "w-missing")
            .await
            .is_empty()
    );
}

/// pipe then cat; overwrite replaces; empty files.
pub async fn pipe_and_cat(t: &Target) {
    let url = t.url("p/x.bin");
    t.fs.pipe(&url, bytes("first"), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(t.fs.cat(&url).await.unwrap(), "first");
    t.fs.pipe(&url, bytes("second"), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(t.fs.cat(&url).await.unwrap(), "second");
    t.fs.pipe(&t.url("p/empty"), Bytes::new(), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(t.fs.info(&t.url("p/empty")).await.unwrap().size, 0);
    assert_eq!(t.fs.cat(&t.url("p/empty")).await.unwrap(), "");
}

/// Create mode refuses an existing file and leaves it untouched.
pub async fn exclusive_create(t: &Target) {
    let url = t.url("x/once");
    t.fs.pipe(&url, bytes("original"), WriteMode::Create)
        .await
        .unwrap();
    let err =
        t.fs.pipe(&url, bytes("again"), WriteMode::Create)
            .await
            .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists, "{err}");
    assert_eq!(t.fs.cat(&url).await.unwrap(), "original");
}

/// The store's create-if-absent support is what we expect of it (Garage
/// ignores the condition, moto and local stores honour it).
pub async fn conditional_write_mode(t: &Target) {
    let mode = t.fs.conditional_writes(&t.url("probe")).await.unwrap();
    assert_eq!(mode, t.conditional, "on {}", t.backend);
    assert!(
        t.fs.find(&t.root).await.unwrap().is_empty(),
        "the probe left an object behind"
    );
}

/// Ranged reads, including ranges past the end.
pub async fn ranged_reads(t: &Target) {
    let url = t.url("r/digits");
    t.fs.pipe(&url, bytes("0123456789"), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(t.fs.cat_range(&url, 0, Some(3)).await.unwrap(), "012");
    assert_eq!(t.fs.cat_range(&url, 3, Some(7)).await.unwrap(), "3456");
    assert_eq!(t.fs.cat_range(&url, 7, None).await.unwrap(), "789");
    assert_eq!(t.fs.cat_range(&url, 8, Some(100)).await.unwrap(), "89");
    assert_eq!(t.fs.cat_range(&url, 10, None).await.unwrap(), "");
    assert_eq!(t.fs.cat_range(&url, 50, Some(60)).await.unwrap(), "");
    assert_eq!(t.fs.cat_range(&url, 5, Some(5)).await.unwrap(), "");
    let err =
        t.fs.cat_range(&t.url("r/none"), 0, Some(1))
            .await
            .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

/// Keys with spaces, unicode and URL-special characters survive every operation.
pub async fn special_character_keys(t: &Target) {
    let names = [
        "with space.txt",
        "ünïcødé-文字-🦀.txt",
        "punct %&=+;@$#!~'()[]*.txt",
    ];
    for (i, name) in names.iter().enumerate() {
        let rel = format!("s/{name}");
        t.fs.pipe(&t.url(&rel), bytes(&format!("v{i}")), WriteMode::Overwrite)
            .await
            .unwrap_or_else(|e| panic!("pipe {name:?}: {e}"));
        assert_eq!(
            t.fs.cat(&t.url(&rel)).await.unwrap(),
            format!("v{i}"),
            "{name:?}"
        );
        assert_eq!(t.fs.info(&t.url(&rel)).await.unwrap().size, 2, "{name:?}");
    }
    let mut expected: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    expected.sort();
    assert_eq!(t.files("s").await, expected);
    let listed: Vec<String> =
        t.fs.ls(&t.url("s"))
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.name)
            .collect();
    assert_eq!(listed.len(), 3);
    // A literal name holding glob characters is copied and removed as itself.
    let special = t.url(&format!("s/{}", names[2]));
    t.fs.cp(&special, &t.url("copied/")).await.unwrap();
    assert_eq!(t.files("copied").await, [names[2]]);
    t.fs.rm(&special).await.unwrap();
    assert_eq!(t.files("s").await.len(), 2);
}

/// Streaming open for read (with seek) and write.
pub async fn streaming_open(t: &Target) {
    let url = t.url("o/stream");
    let mut w = t.fs.open_write(&url).await.unwrap();
    for i in 0..100 {
        w.write(bytes(&format!("{i:04}"))).await.unwrap();
    }
    w.close().await.unwrap();
    let mut r = t.fs.open_read(&url).await.unwrap();
    assert_eq!(r.size(), 400);
    let mut text = String::new();
    r.read_to_string(&mut text).await.unwrap();
    assert!(text.starts_with("00000001") && text.ends_with("0099"));
    use futures::AsyncSeekExt;
    r.seek(std::io::SeekFrom::Start(396)).await.unwrap();
    let mut tail = String::new();
    r.read_to_string(&mut tail).await.unwrap();
    assert_eq!(tail, "0099");
    let mut aborted = t.fs.open_write(&t.url("o/aborted")).await.unwrap();
    aborted.write(bytes("x")).await.unwrap();
    aborted.abort().await.unwrap();
    assert!(!t.fs.exists(&t.url("o/aborted")).await.unwrap());
}

/// A 20 MiB streamed write goes multipart and reads back identical.
pub async fn multipart_object_over_16_mib(t: &Target) {
    const SIZE: usize = 20 * 1024 * 1024 + 123;
    let data: Vec<u8> = (0..SIZE).map(|i| (i * 31 % 251) as u8).collect();
    let url = t.url("big/object.bin");
    let mut w = t.fs.open_write(&url).await.unwrap();
    for chunk in data.chunks(3 * 1024 * 1024 + 7) {
        w.write(Bytes::copy_from_slice(chunk)).await.unwrap();
    }
    w.close().await.unwrap();
    assert_eq!(t.fs.info(&url).await.unwrap().size, SIZE as u64);
    let back = t.fs.cat(&url).await.unwrap();
    assert!(back == data[..], "multipart object differs after read-back");
    let tail = t.fs.cat_range(&url, SIZE as u64 - 10, None).await.unwrap();
    assert_eq!(tail, data[SIZE - 10..]);
    if t.s3.is_some() {
        let etag = t.fs.info(&url).await.unwrap().etag.unwrap_or_default();
        assert!(
            etag.contains('-'),
            "expected a multipart ETag, got {etag:?}"
        );
    }
}

/// Listing past 1000 keys (pagination) and removing them in batches.
pub async fn many_keys_list_and_batch_delete(t: &Target) {
    const N: usize = 1100;
    let fs = t.fs.clone();
    let urls: Vec<String> = (0..N).map(|i| t.url(&format!("many/k{i:05}"))).collect();
    futures::future::try_join_all(urls.chunks(N / 16 + 1).map(|chunk| {
        let fs = fs.clone();
        let chunk = chunk.to_vec();
        async move {
            for url in chunk {
                fs.pipe(&url, bytes("x"), WriteMode::Overwrite).await?;
            }
            Ok::<_, cairn_fs::Error>(())
        }
    }))
    .await
    .unwrap();
    assert_eq!(t.fs.ls(&t.url("many")).await.unwrap().len(), N);
    assert_eq!(t.files("many").await.len(), N);
    assert_eq!(t.fs.du(&t.url("many")).await.unwrap().files, N as u64);
    t.fs.rm_with(&t.url("many"), cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
    assert!(!t.fs.exists(&t.url("many")).await.unwrap());
    assert!(t.fs.find(&t.root).await.unwrap().is_empty());
}

/// find with maxdepth and withdirs; find of a file; find of a missing path.
pub async fn find_maxdepth_withdirs(t: &Target) {
    for f in ["f/a", "f/b/c", "f/b/d/e"] {
        t.write(f, "x").await;
    }
    assert_eq!(t.files("f").await, ["a", "b/c", "b/d/e"]);
    let base = t.fs.strip(&t.url("f")).unwrap();
    let rel = |infos: Vec<cairn_fs::FileInfo>| -> Vec<String> {
        infos
            .into_iter()
            .map(|i| {
                i.name
                    .strip_prefix(&base)
                    .unwrap()
                    .trim_start_matches('/')
                    .to_string()
            })
            .collect()
    };
    assert_eq!(
        rel(t
            .fs
            .find_with(&t.url("f"), cairn_fs::FindOptions::new().max_depth(1))
            .await
            .unwrap()),
        ["a"]
    );
    assert_eq!(
        rel(t
            .fs
            .find_with(&t.url("f"), cairn_fs::FindOptions::new().max_depth(2))
            .await
            .unwrap()),
        ["a", "b/c"]
    );
    assert_eq!(
        rel(t
            .fs
            .find_with(&t.url("f"), cairn_fs::FindOptions::new().with_dirs(true))
            .await
            .unwrap()),
        ["", "a", "b", "b/c", "b/d", "b/d/e"]
    );
    assert_eq!(
        rel(t
            .fs
            .find_with(
                &t.url("f"),
                cairn_fs::FindOptions::new().max_depth(1).with_dirs(true)
            )
            .await
            .unwrap()),
        ["", "a", "b"]
    );
    assert_eq!(t.fs.find(&t.url("f/a")).await.unwrap().len(), 1);
    assert!(t.fs.find(&t.url("absent")).await.unwrap().is_empty());
    // The streaming form yields the same entries, each once (it does not
    // name the directory itself).
    for options in [
        cairn_fs::FindOptions::new(),
        cairn_fs::FindOptions::new().max_depth(2),
        cairn_fs::FindOptions::new().with_dirs(true),
        cairn_fs::FindOptions::new().max_depth(1).with_dirs(true),
    ] {
        use futures::TryStreamExt;
        let streamed: Vec<cairn_fs::FileInfo> =
            t.fs.find_stream(&t.url("f"), options)
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
        let mut streamed = rel(streamed);
        let count = streamed.len();
        streamed.sort();
        streamed.dedup();
        assert_eq!(streamed.len(), count, "{options:?}: an entry twice");
        let mut collected = rel(t.fs.find_with(&t.url("f"), options).await.unwrap());
        collected.retain(|name| !name.is_empty());
        assert_eq!(streamed, collected, "{options:?}");
    }
}

/// glob with `*`, `?`, `[...]`, `**`, a trailing slash, and maxdepth.
pub async fn glob_patterns(t: &Target) {
    for f in [
        "g/a1.txt",
        "g/a2.txt",
        "g/b1.csv",
        "g/sub/a3.txt",
        "g/sub/deep/a4.txt",
    ] {
        t.write(f, "x").await;
    }
    let base = t.fs.strip(&t.url("g")).unwrap();
    let glob = |pattern: &'static str, maxdepth: Option<usize>| {
        let url = t.url(&format!("g/{pattern}"));
        let base = base.clone();
        async move {
            use futures::TryStreamExt;
            let options = cairn_fs::FindOptions::new().max_depth_opt(maxdepth);
            let found =
                t.fs.glob_with(&url, options)
                    .await
                    .unwrap_or_else(|e| panic!("glob {pattern}: {e}"));
            // The streaming form: the same entries, each once, with the
            // sizes of the listing.
            let streamed: Vec<cairn_fs::FileInfo> =
                t.fs.glob_stream(&url, options)
                    .await
                    .unwrap()
                    .try_collect()
                    .await
                    .unwrap();
            let mut names: Vec<&str> = streamed.iter().map(|i| i.name.as_str()).collect();
            names.sort();
            assert_eq!(names, found, "glob_stream {pattern}");
            for info in streamed.iter().filter(|i| !i.is_dir()) {
                assert_eq!(info.size, 1, "{}", info.name);
            }
            found
                .into_iter()
                .map(|p| p[base.len() + 1..].to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(glob("*.txt", None).await, ["a1.txt", "a2.txt"]);
    assert_eq!(glob("a?.txt", None).await, ["a1.txt", "a2.txt"]);
    assert_eq!(glob("[ab]1.*", None).await, ["a1.txt", "b1.csv"]);
    assert_eq!(glob("*1*", None).await, ["a1.txt", "b1.csv"]);
    assert_eq!(
        glob("**/*.txt", None).await,
        ["a1.txt", "a2.txt", "sub/a3.txt", "sub/deep/a4.txt"]
    );
    assert_eq!(
        glob("**/*.txt", Some(2)).await,
        ["a1.txt", "a2.txt", "sub/a3.txt"]
    );
    assert_eq!(glob("*/", None).await, ["sub"]);
    assert_eq!(glob("a1.txt", None).await, ["a1.txt"]);
    assert!(glob("zz*", None).await.is_empty());
}

/// du totals.
pub async fn disk_usage(t: &Target) {
    t.write("du/a", "123").await;
    t.write("du/b/c", "45").await;
    let du = t.fs.du(&t.url("du")).await.unwrap();
    assert_eq!((du.bytes, du.files), (5, 2));
    assert_eq!(
        t.fs.du_with(&t.url("du"), cairn_fs::FindOptions::new().max_depth(1))
            .await
            .unwrap()
            .bytes,
        3
    );
}

/// mkdir makes an empty directory; rm refuses a directory without recursive.
/// rm_file deletes the one file named, and nothing that merely shares its
/// name as a prefix; a missing file is not an error; a directory is never
/// removed by it.
pub async fn rm_file_deletes_one_file(t: &Target) {
    for name in ["rmf/a.x", "rmf/a/b", "rmf/ab"] {
        t.write(name, "x").await;
    }
    t.fs.rm_file(&t.url("rmf/a.x")).await.unwrap();
    assert!(!t.fs.exists(&t.url("rmf/a.x")).await.unwrap());
    t.fs.rm_file(&t.url("rmf/ab")).await.unwrap();
    assert!(!t.fs.exists(&t.url("rmf/ab")).await.unwrap());
    // Gone already, or never there: not an error.
    t.fs.rm_file(&t.url("rmf/ab")).await.unwrap();
    t.fs.rm_file(&t.url("rmf/missing")).await.unwrap();
    // A directory: refused with a slash; without one, refused where
    // directories are real and a no-op on object stores (no such key).
    let err = t.fs.rm_file(&t.url("rmf/a/")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::IsADirectory, "{err}");
    let _ = t.fs.rm_file(&t.url("rmf/a")).await;
    assert!(
        t.fs.exists(&t.url("rmf/a/b")).await.unwrap(),
        "nothing under a directory removed"
    );
    // rm_files: several files at once, a missing one fine, nothing that
    // shares a name as a prefix touched; a directory path refused first.
    for name in ["rmfs/x", "rmfs/y", "rmfs/xy"] {
        t.write(name, "x").await;
    }
    let err =
        t.fs.rm_files(&[&t.url("rmfs/x"), &t.url("rmf/a/")])
            .await
            .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::IsADirectory, "{err}");
    assert!(
        t.fs.exists(&t.url("rmfs/x")).await.unwrap(),
        "refused before deleting"
    );
    t.fs.rm_files(&[&t.url("rmfs/x"), &t.url("rmfs/y"), &t.url("rmfs/gone")])
        .await
        .unwrap();
    assert!(!t.fs.exists(&t.url("rmfs/x")).await.unwrap());
    assert!(!t.fs.exists(&t.url("rmfs/y")).await.unwrap());
    assert!(t.fs.exists(&t.url("rmfs/xy")).await.unwrap());
    assert!(t.fs.exists(&t.url("rmf/a/b")).await.unwrap());
}

pub async fn mkdir_and_rm_rules(t: &Target) {
    t.fs.mkdir(&t.url("m/empty/nested")).await.unwrap();
    assert!(t.fs.isdir(&t.url("m/empty/nested")).await.unwrap());
    t.fs.mkdir(&t.url("m/empty/nested")).await.unwrap();
    t.write("m/file", "x").await;
    assert_eq!(
        t.fs.mkdir(&t.url("m/file")).await.unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    // Made as a checkpoint directory is: a marker (on object stores),
    // then a file in it.
    t.fs.mkdir(&t.url("m/full")).await.unwrap();
    t.write("m/full/x", "1").await;
    let err = t.fs.rm(&t.url("m/full")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::IsADirectory);
    assert!(
        t.fs.exists(&t.url("m/full/x")).await.unwrap(),
        "nothing may be deleted"
    );
    assert_eq!(
        t.fs.rm(&t.url("m/missing")).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    // remove_dir_if_empty: a directory with a file (or a subdirectory)
    // stays whole; an empty one (made by mkdir, a marker on object
    // stores) and a missing one are gone.
    assert!(!t.fs.remove_dir_if_empty(&t.url("m/full")).await.unwrap());
    assert!(!t.fs.remove_dir_if_empty(&t.url("m/empty")).await.unwrap());
    assert!(t.fs.exists(&t.url("m/full/x")).await.unwrap());
    assert!(t.fs.isdir(&t.url("m/empty/nested")).await.unwrap());
    assert!(
        t.fs.remove_dir_if_empty(&t.url("m/empty/nested"))
            .await
            .unwrap()
    );
    assert!(!t.fs.exists(&t.url("m/empty/nested")).await.unwrap());
    assert!(t.fs.remove_dir_if_empty(&t.url("m/missing")).await.unwrap());
    t.fs.rm_with(&t.url("m"), cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
    assert!(!t.fs.exists(&t.url("m")).await.unwrap());
    assert!(!t.fs.exists(&t.url("m/empty")).await.unwrap());
    assert!(t.fs.find(&t.root).await.unwrap().is_empty());
}

#[derive(Clone, Copy, Debug)]
enum Direction {
    Copy,
    Put,
    Get,
}

async fn run_scenarios(t: &Target, direction: Direction) {
    let local_fs = FileSystem::new("file", &cairn_fs::StorageOptions::new()).unwrap();
    for (i, sc) in COPY_SCENARIOS.iter().enumerate() {
        let rel = format!("{direction:?}-{i}");
        let (src_fs, src_root) = match direction {
            Direction::Put => (&local_fs, t.local_path(&rel)),
            _ => (&t.fs, t.url(&rel)),
        };
        let (dst_fs, dst_root) = match direction {
            Direction::Get => (&local_fs, t.local_path(&format!("{rel}-out"))),
            _ => (&t.fs, t.url(&format!("{rel}-out"))),
        };
        for f in SOURCE_TREE.iter().chain(sc.extra_sources) {
            src_fs
                .pipe(
                    &format!("{src_root}/source/{f}"),
                    bytes(f),
                    WriteMode::Overwrite,
                )
                .await
                .unwrap();
        }
        if sc.target_exists {
            dst_fs.mkdir(&format!("{dst_root}/target")).await.unwrap();
        }
        let dst = format!("{dst_root}/{}", sc.dst);
        let options = cairn_fs::TreeOptions::new()
            .recursive(sc.recursive)
            .max_depth_opt(sc.maxdepth);
        let result = match sc.src {
            Src::One(s) => {
                let src = format!("{src_root}/{s}");
                match direction {
                    Direction::Copy => t.fs.cp_with(&src, &dst, options).await,
                    Direction::Put => t.fs.put_with(&src, &dst, options).await,
                    Direction::Get => t.fs.get_with(&src, &dst, options).await,
                }
            }
            Src::Many(list) => {
                let srcs: Vec<String> = list.iter().map(|s| format!("{src_root}/{s}")).collect();
                let srcs: Vec<&str> = srcs.iter().map(String::as_str).collect();
                match direction {
                    Direction::Copy => t.fs.cp_list(&srcs, &dst, options).await,
                    Direction::Put => t.fs.put_list(&srcs, &dst, options).await,
                    Direction::Get => t.fs.get_list(&srcs, &dst, options).await,
                }
            }
        };
        result.unwrap_or_else(|e| panic!("{direction:?} scenario {}: {e}", sc.name));
        let target_url = format!("{dst_root}/target");
        let got = Target::files_under(dst_fs, &target_url).await;
        assert_eq!(
            got, sc.expected,
            "{direction:?} scenario {} on {}",
            sc.name, t.backend
        );
        for f in &got {
            let content = dst_fs.cat(&format!("{target_url}/{f}")).await.unwrap();
            let content = String::from_utf8_lossy(&content).to_string();
            let name = f.rsplit('/').next().unwrap();
            let renamed = matches!(name, "newfile");
            assert!(
                SOURCE_TREE.contains(&content.as_str()) && (renamed || content.ends_with(name)),
                "{direction:?} scenario {}: {f} holds {content:?}",
                sc.name
            );
        }
    }
}

/// fsspec's copy scenarios within the filesystem.
pub async fn copy_scenarios(t: &Target) {
    run_scenarios(t, Direction::Copy).await;
}

/// fsspec's put scenarios (local to the filesystem).
pub async fn put_scenarios(t: &Target) {
    run_scenarios(t, Direction::Put).await;
}

/// fsspec's get scenarios (the filesystem to local).
pub async fn get_scenarios(t: &Target) {
    run_scenarios(t, Direction::Get).await;
}

/// List-to-list copies for cp, put and get: each pair as given.
pub async fn list_to_list_copies(t: &Target) {
    t.write("l/a", "A").await;
    t.write("l/sub/b", "B").await;
    t.fs.cp_pairs(&[
        (&t.url("l/a"), &t.url("l2/x")),
        (&t.url("l/sub/b"), &t.url("l2/y/z")),
    ])
    .await
    .unwrap();
    assert_eq!(t.files("l2").await, ["x", "y/z"]);
    let (la, lb) = (t.local_path("la"), t.local_path("deep/lb"));
    t.fs.get_pairs(&[(&t.url("l/a"), &la), (&t.url("l/sub/b"), &lb)])
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&lb).unwrap(), "B");
    t.fs.put_pairs(&[(&la, &t.url("l3/one")), (&lb, &t.url("l3/two/three"))])
        .await
        .unwrap();
    assert_eq!(t.files("l3").await, ["one", "two/three"]);
    assert_eq!(t.fs.cat(&t.url("l3/one")).await.unwrap(), "A");
}

/// mv of a file and of a directory; sources are gone afterwards.
pub async fn move_files_and_dirs(t: &Target) {
    t.write("mv/a", "1").await;
    t.fs.mv(&t.url("mv/a"), &t.url("mv/b")).await.unwrap();
    assert!(!t.fs.exists(&t.url("mv/a")).await.unwrap());
    assert_eq!(t.fs.cat(&t.url("mv/b")).await.unwrap(), "1");
    t.write("mv/dir/x", "2").await;
    t.write("mv/dir/y/z", "3").await;
    t.fs.mv_with(
        &t.url("mv/dir"),
        &t.url("mv/moved"),
        cairn_fs::TreeOptions::new().recursive(true),
    )
    .await
    .unwrap();
    assert!(!t.fs.exists(&t.url("mv/dir")).await.unwrap());
    assert_eq!(t.files("mv/moved").await, ["x", "y/z"]);
    let err =
        t.fs.mv(&t.url("mv/ghost"), &t.url("mv/c"))
            .await
            .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

/// find_prefix matches by string prefix, not by whole path component.
pub async fn prefix_listing(t: &Target) {
    for f in [
        "out/u_1_0.parquet",
        "out/u_1_1.parquet",
        "out/u_10_0.parquet",
        "out/other",
        "out2/u_1_x",
    ] {
        t.write(f, "x").await;
    }
    let base = t.fs.strip(&t.url("out")).unwrap();
    let names: Vec<String> =
        t.fs.find_prefix(&t.url("out/u_1_"))
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.name[base.len() + 1..].to_string())
            .collect();
    assert_eq!(names, ["u_1_0.parquet", "u_1_1.parquet"]);
    assert!(
        t.fs.find_prefix(&t.url("out/zzz"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        t.fs.find_prefix(&t.url("nowhere/u_"))
            .await
            .unwrap()
            .is_empty()
    );
    let streamed = sorted(t.fs.find_prefix_stream(&t.url("out/u_1_")).await).await;
    assert_eq!(
        streamed,
        t.fs.find_prefix(&t.url("out/u_1_")).await.unwrap()
    );
}

/// Missing keys give NotFound naming the URL, from every reading call.
pub async fn missing_key_errors(t: &Target) {
    let url = t.url("absent/key");
    for err in [
        t.fs.cat(&url).await.unwrap_err(),
        t.fs.info(&url).await.unwrap_err(),
        t.fs.open_read(&url).await.err().unwrap(),
        t.fs.cp(&url, &t.url("other")).await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        assert!(err.to_string().contains("absent"), "{err}");
    }
}

/// A missing bucket is its own kind (NoSuchBucket, not an absent file)
/// naming the bucket, and `exists` does not hide it.
pub async fn missing_bucket_error(t: &Target) {
    let scheme = t.fs.protocol();
    let url = format!("{scheme}://cairn-no-such-bucket-xyz/key");
    let err = t.fs.cat(&url).await.unwrap_err();
    // GCS answers a read in a missing bucket as it answers a missing object
    // (404 "notFound"); only its listing tells the bucket is missing.
    let read_kinds: &[ErrorKind] = match scheme {
        "gcs" => &[ErrorKind::NoSuchBucket, ErrorKind::NotFound],
        _ => &[ErrorKind::NoSuchBucket],
    };
    assert!(read_kinds.contains(&err.kind()), "{err}");
    let root = format!("{scheme}://cairn-no-such-bucket-xyz/");
    let err = t.fs.ls(&root).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoSuchBucket, "{err}");
    assert!(
        err.to_string().contains("cairn-no-such-bucket-xyz"),
        "{err}"
    );
    assert!(t.fs.exists(&format!("{root}k")).await.is_err());
}

/// A wrong secret is PermissionDenied naming the bucket; the secret never shows.
pub async fn wrong_secret_error(t: &Target) {
    let s3 = t.s3.as_ref().expect("s3 target");
    let wrong = "WRONGsecretWRONGsecretWRONGsecret0000000";
    let scheme = t.fs.protocol();
    let options = match scheme {
        "cos" => s3.cos_options(
            &std::env::var("CAIRN_TEST_GARAGE_VHOST_ENDPOINT").unwrap_or_default(),
            wrong,
        ),
        _ => s3.options_with_secret(wrong),
    };
    let fs = cairn_fs::FileSystemBuilder::new(scheme)
        .options(options)
        .env(cairn_fs::Environment::default())
        .http_client(crate::loopback::loopback_client())
        .build()
        .unwrap();
    let url = format!("{scheme}://{}/anything", s3.bucket);
    for err in [
        fs.cat(&url).await.unwrap_err(),
        fs.ls(&format!("{scheme}://{}/", s3.bucket))
            .await
            .unwrap_err(),
        fs.pipe(&url, bytes("x"), WriteMode::Overwrite)
            .await
            .unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
        let text = format!("{err} {err:?}");
        assert!(text.contains(&s3.bucket), "{text}");
        assert!(text.contains("credentials"), "{text}");
        assert!(!text.contains(wrong), "the secret leaked: {text}");
    }
    assert!(
        fs.exists(&url).await.is_err(),
        "exists must not hide a wrong secret"
    );
    assert!(!format!("{fs:?}").contains(wrong));
}

/// cp between two buckets of the same filesystem.
pub async fn cross_bucket_copy(t: &Target) {
    let s3 = t.s3.as_ref().expect("s3 target");
    let Some(bucket2) = &s3.bucket2 else {
        panic!("set CAIRN_TEST_<NAME>_BUCKET2 to a second bucket for this test");
    };
    t.write("xb/file", "cross").await;
    let dst = format!(
        "{}://{bucket2}/{}",
        t.fs.protocol(),
        t.fs.strip(&t.url("xb/file")).unwrap()
    );
    t.fs.cp(&t.url("xb/file"), &dst).await.unwrap();
    assert_eq!(t.fs.cat(&dst).await.unwrap(), "cross");
    t.fs.rm(&dst).await.unwrap();
}
