//! Copying with fsspec's rules (its `docs/source/copying.rst`): `cp`, `mv`,
//! `put` (local to here), `get` (here to local).
//!
//! - A trailing slash on the source copies its contents; without one, the
//!   directory itself lands inside an existing target directory.
//! - A trailing slash on the target marks it as a directory.
//! - Without `recursive`, directories are not copied.
//! - A list of sources lands flat in the target directory.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt, stream};

use super::walk_options::TreeOptions;
use super::{FileInfo, FileSystem, Location};
use crate::error::{Error, ErrorKind, Result};
use crate::options::StorageOptions;
use crate::url::has_magic;

/// Files copied at once by cp, get, put and their list forms (a large one
/// moves in `max_concurrency` parts on top of that).
const FILES_IN_FLIGHT: usize = 16;

/// The largest file whose server-side copy trusts a size given by its
/// caller or a listing instead of asking the store (every store copies a
/// file this small in one request; S3's single copy goes to 5 GiB).
const SIZED_COPY_MAX_BYTES: u64 = 64 << 20;

/// Called with the bytes written as a transfer's data flows (a progress bar).
pub type TransferProgress = std::sync::Arc<dyn Fn(u64) + Send + Sync>;

/// fsspec's `other_paths`: where each source lands under `target`.
///
/// `exists` says the target is an existing directory that sources go inside;
/// `flatten` puts every source directly in it by base name.
pub(crate) fn other_paths(
    paths: &[String],
    target: &str,
    exists: bool,
    flatten: bool,
) -> Vec<String> {
    let target = target.trim_end_matches('/');
    if flatten {
        return paths
            .iter()
            .map(|p| format!("{target}/{}", p.rsplit('/').next().unwrap_or(p)))
            .collect();
    }
    let mut prefix = common_prefix(paths);
    if exists {
        prefix = prefix
            .rsplit_once('/')
            .map_or("", |(head, _)| head)
            .to_string();
    }
    if prefix.is_empty() && paths.iter().all(|p| !p.starts_with('/')) {
        return paths.iter().map(|p| format!("{target}/{p}")).collect();
    }
    paths
        .iter()
        .map(|p| format!("{target}{}", &p[prefix.len()..]))
        .collect()
}

/// fsspec's `common_prefix`: the longest run of leading path components shared by all.
fn common_prefix(paths: &[String]) -> String {
    let split: Vec<Vec<&str>> = paths.iter().map(|p| p.split('/').collect()).collect();
    let Some(first) = split.first() else {
        return String::new();
    };
    let shortest = split.iter().map(Vec::len).min().unwrap_or(0);
    let mut shared = 0;
    while shared < shortest && split.iter().all(|parts| parts[shared] == first[shared]) {
        shared += 1;
    }
    first[..shared].join("/")
}

/// Which source form was given: one string (globs and trailing slashes have
/// meaning) or a list (flattened into the target).
#[derive(Clone, Copy)]
enum Sources<'a> {
    One(&'a str),
    Many(&'a [&'a str]),
}

impl FileSystem {
    /// Copies within this filesystem (across buckets too), fsspec's `cp`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/cp-doc/src/a", "1".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.cp_with("/cp-doc/src/", "/cp-doc/dst", cairn_fs::TreeOptions::new().recursive(true)).await.unwrap();
    /// assert_eq!(fs.cat("/cp-doc/dst/a").await.unwrap(), "1");
    /// # })
    /// ```
    pub async fn cp(&self, src: &str, dst: &str) -> Result<()> {
        self.cp_with(src, dst, TreeOptions::new()).await
    }

    /// [`FileSystem::cp`] with options: `recursive` for directories (at
    /// most `max_depth` levels down).
    pub async fn cp_with(&self, src: &str, dst: &str, options: TreeOptions) -> Result<()> {
        transfer(self, Sources::One(src), self, dst, options, None).await
    }

    /// Copies a list of paths into the directory `dst`, each by its base name.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/cpl-doc/x/a", "1".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.pipe("/cpl-doc/y/b", "2".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.cp_list(&["/cpl-doc/x/a", "/cpl-doc/y/b"], "/cpl-doc/out/", cairn_fs::TreeOptions::new()).await.unwrap();
    /// assert!(fs.isfile("/cpl-doc/out/b").await.unwrap());
    /// # })
    /// ```
    pub async fn cp_list(&self, srcs: &[&str], dst: &str, options: TreeOptions) -> Result<()> {
        transfer(self, Sources::Many(srcs), self, dst, options, None).await
    }

    /// Moves: copies (any missing source is an error) then removes the sources.
    /// A single file on a store with native rename is renamed instead.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/mv-doc/a", "1".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.mv("/mv-doc/a", "/mv-doc/b").await.unwrap();
    /// assert!(!fs.exists("/mv-doc/a").await.unwrap());
    /// assert_eq!(fs.cat("/mv-doc/b").await.unwrap(), "1");
    /// # })
    /// ```
    pub async fn mv(&self, src: &str, dst: &str) -> Result<()> {
        self.mv_with(src, dst, TreeOptions::new()).await
    }

    /// [`FileSystem::mv`] with options: `recursive` for directories (at
    /// most `max_depth` levels down).
    pub async fn mv_with(&self, src: &str, dst: &str, options: TreeOptions) -> Result<()> {
        if self.strip(src)? == self.strip(dst)? {
            return Ok(());
        }
        if let Some(()) = self.try_rename(src, dst).await? {
            return Ok(());
        }
        transfer(self, Sources::One(src), self, dst, options, None).await?;
        self.rm_with(src, options).await
    }

    /// Moves the one file at `src` to `dst`, as pyarrow's `move` moves a
    /// file: a rename where the store has one, else a copy on the store
    /// (streamed where it cannot copy) and a delete of `src`. On an object
    /// store no path is asked whether it is a directory and nothing is
    /// listed: OpenDAL's checked copy (on S3 a HEAD of the source, then a
    /// copy on its ETag) and a delete, where [`FileSystem::mv`] first
    /// stats both paths and lists the target (ten requests on S3). A `src`
    /// that is no file is `NotFound` and nothing changes; a path ending in
    /// `/` is refused.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use cairn_fs::{ErrorKind, FileSystem, StorageOptions, WriteMode};
    /// let fs = FileSystem::new("memory", &StorageOptions::new()).unwrap();
    /// fs.pipe("/mvf-doc/a.pending", "1".into(), WriteMode::Overwrite).await.unwrap();
    /// fs.mv_file("/mvf-doc/a.pending", "/mvf-doc/a").await.unwrap();
    /// assert_eq!(fs.cat("/mvf-doc/a").await.unwrap(), "1");
    /// let gone = fs.mv_file("/mvf-doc/a.pending", "/mvf-doc/a").await.unwrap_err();
    /// assert_eq!(gone.kind(), ErrorKind::NotFound);
    /// # })
    /// ```
    pub async fn mv_file(&self, src: &str, dst: &str) -> Result<()> {
        self.move_one_file(src, dst, None).await
    }

    /// [`FileSystem::mv_file`] of a file whose size the caller knows (it
    /// wrote the file): on S3 the copy asks nothing first (no HEAD), so a
    /// move is a copy and a delete, two requests. `size` must be the
    /// file's; a file larger than 64 MiB is moved as [`FileSystem::mv_file`]
    /// moves it.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use cairn_fs::{FileSystem, StorageOptions, WriteMode};
    /// let fs = FileSystem::new("memory", &StorageOptions::new()).unwrap();
    /// fs.pipe("/mvs-doc/a.pending", "12".into(), WriteMode::Overwrite).await.unwrap();
    /// fs.mv_file_of_size("/mvs-doc/a.pending", "/mvs-doc/a", 2).await.unwrap();
    /// assert_eq!(fs.cat("/mvs-doc/a").await.unwrap(), "12");
    /// # })
    /// ```
    pub async fn mv_file_of_size(&self, src: &str, dst: &str, size: u64) -> Result<()> {
        self.move_one_file(src, dst, Some(size)).await
    }

    async fn move_one_file(&self, src: &str, dst: &str, size: Option<u64>) -> Result<()> {
        let from = self.file_location(src, "mv_file").await?;
        let to = self.file_location(dst, "mv_file").await?;
        if from.path == to.path {
            return Ok(());
        }
        if self.real_directories() {
            // A stat is free here, and a directory must not be renamed
            // over by a file's move.
            if !self.isfile(&from.path).await? {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    "mv_file moves one file, and there is none here",
                )
                .with_url(self.url(&from.path)));
            }
            return self.mv(&from.path, &to.path).await;
        }
        if from.root == to.root && from.op.info().capability().rename {
            from.op
                .rename(&from.key, &to.key)
                .await
                .map_err(|e| self.error(e, &from))?;
        } else {
            // The size spares only a server-side copy its HEAD: a copy
            // streamed between buckets or stores reads what it asks
            // itself, so a wrong size can never cut it short.
            let size = size.filter(|_| self.copies_on_the_store(&from, self, &to));
            self.copy_file(&from.path, self, &to.path, size, None)
                .await?;
            from.op
                .delete(&from.key)
                .await
                .map_err(|e| self.error(e, &from))?;
        }
        self.cache().invalidate(&from.path);
        self.cache().invalidate(&to.path);
        Ok(())
    }

    /// Uploads from the local filesystem, fsspec's `put`.
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.put_with("/tmp/data/", "/uploaded", cairn_fs::TreeOptions::new().recursive(true)).await.unwrap();
    /// # })
    /// ```
    pub async fn put(&self, local: &str, dst: &str) -> Result<()> {
        self.put_with(local, dst, TreeOptions::new()).await
    }

    /// [`FileSystem::put`] with options: `recursive` for directories (at
    /// most `max_depth` levels down).
    pub async fn put_with(&self, local: &str, dst: &str, options: TreeOptions) -> Result<()> {
        let local_fs = FileSystem::new("file", &StorageOptions::new())?;
        transfer(&local_fs, Sources::One(local), self, dst, options, None).await
    }

    /// Downloads to the local filesystem, fsspec's `get`.
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.get_with("/uploaded/", "/tmp/copy", cairn_fs::TreeOptions::new().recursive(true)).await.unwrap();
    /// # })
    /// ```
    pub async fn get(&self, src: &str, local: &str) -> Result<()> {
        self.get_with(src, local, TreeOptions::new()).await
    }

    /// [`FileSystem::get`] with options: `recursive` for directories (at
    /// most `max_depth` levels down).
    pub async fn get_with(&self, src: &str, local: &str, options: TreeOptions) -> Result<()> {
        let local_fs = FileSystem::new("file", &StorageOptions::new())?;
        transfer(self, Sources::One(src), &local_fs, local, options, None).await
    }

    /// Copies each `(src, dst)` file pair as given, fsspec's list-to-list copy.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/pairs-doc/a", "1".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.cp_pairs(&[("/pairs-doc/a", "/pairs-doc/x/y")]).await.unwrap();
    /// assert_eq!(fs.cat("/pairs-doc/x/y").await.unwrap(), "1");
    /// # })
    /// ```
    pub async fn cp_pairs(&self, pairs: &[(&str, &str)]) -> Result<()> {
        copy_pairs(self, self, pairs).await
    }

    /// Uploads each `(local, dst)` file pair as given.
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.put_pairs(&[("/tmp/a.txt", "/up/a.txt")]).await.unwrap();
    /// # })
    /// ```
    pub async fn put_pairs(&self, pairs: &[(&str, &str)]) -> Result<()> {
        let local_fs = FileSystem::new("file", &StorageOptions::new())?;
        copy_pairs(&local_fs, self, pairs).await
    }

    /// Downloads each `(src, local)` file pair as given.
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.get_pairs(&[("/up/a.txt", "/tmp/b.txt")]).await.unwrap();
    /// # })
    /// ```
    pub async fn get_pairs(&self, pairs: &[(&str, &str)]) -> Result<()> {
        let local_fs = FileSystem::new("file", &StorageOptions::new())?;
        copy_pairs(self, &local_fs, pairs).await
    }

    /// Copies a list of local paths into the directory `dst`, each by its base name.
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.put_list(&["/tmp/a.txt", "/tmp/b.txt"], "/up/", cairn_fs::TreeOptions::new()).await.unwrap();
    /// # })
    /// ```
    pub async fn put_list(&self, locals: &[&str], dst: &str, options: TreeOptions) -> Result<()> {
        let local_fs = FileSystem::new("file", &StorageOptions::new())?;
        transfer(&local_fs, Sources::Many(locals), self, dst, options, None).await
    }

    /// Downloads a list of paths into the local directory `local`, each by its base name.
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.get_list(&["/up/a.txt", "/up/b.txt"], "/tmp/down/", cairn_fs::TreeOptions::new()).await.unwrap();
    /// # })
    /// ```
    pub async fn get_list(&self, srcs: &[&str], local: &str, options: TreeOptions) -> Result<()> {
        let local_fs = FileSystem::new("file", &StorageOptions::new())?;
        transfer(self, Sources::Many(srcs), &local_fs, local, options, None).await
    }

    /// Renames one file in place when the store can (POSIX rename).
    async fn try_rename(&self, src: &str, dst: &str) -> Result<Option<()>> {
        if has_magic(src) || src.ends_with('/') || dst.ends_with('/') {
            return Ok(None);
        }
        let from = self.locate(src).await?;
        let to = self.locate(dst).await?;
        if from.root != to.root || !from.op.info().capability().rename {
            return Ok(None);
        }
        match self.info_or_none(&from.path).await? {
            Some(info) if !info.is_dir() => {}
            _ => return Ok(None),
        }
        if self.isdir(&to.path).await? {
            return Ok(None);
        }
        from.op
            .rename(&from.key, &to.key)
            .await
            .map_err(|e| self.error(e, &from))?;
        self.cache().invalidate(&from.path);
        self.cache().invalidate(&to.path);
        Ok(Some(()))
    }

    /// Copies `src` on this filesystem to `dst` on another (`dst_fs`, any
    /// protocol) with fsspec's `cp` rules; `progress`, when given, is called
    /// with the bytes written as the data flows.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use cairn_fs::{FileSystem, StorageOptions, TreeOptions, WriteMode};
    /// let mem = FileSystem::new("memory", &StorageOptions::new()).unwrap();
    /// mem.pipe("/cpto-doc/d/a", "abc".into(), WriteMode::Overwrite).await.unwrap();
    /// let dir = tempfile::tempdir().unwrap();
    /// let local = FileSystem::new("file", &StorageOptions::new()).unwrap();
    /// let target = format!("{}/out", dir.path().display());
    /// mem.cp_to("/cpto-doc/d", &local, &target, TreeOptions::new().recursive(true), None).await.unwrap();
    /// assert_eq!(local.cat(&format!("{target}/a")).await.unwrap(), "abc");
    /// # })
    /// ```
    pub async fn cp_to(
        &self,
        src: &str,
        dst_fs: &FileSystem,
        dst: &str,
        options: TreeOptions,
        progress: Option<TransferProgress>,
    ) -> Result<()> {
        transfer(
            self,
            Sources::One(src),
            dst_fs,
            dst,
            options,
            progress.as_ref(),
        )
        .await
    }

    /// Moves `src` on this filesystem to `dst` on another: [`FileSystem::cp_to`],
    /// then, once every file is copied, removes the sources (a failed copy
    /// removes nothing).
    pub async fn mv_to(
        &self,
        src: &str,
        dst_fs: &FileSystem,
        dst: &str,
        options: TreeOptions,
        progress: Option<TransferProgress>,
    ) -> Result<()> {
        self.cp_to(src, dst_fs, dst, options, progress).await?;
        self.rm_with(src, options).await
    }

    /// Whether [`FileSystem::copy_file`] copies `from` (on `self`) to `to`
    /// on `dst_fs` on the store itself (one bucket of one store that can
    /// copy), rather than streaming it through this process.
    fn copies_on_the_store(&self, from: &Location, dst_fs: &FileSystem, to: &Location) -> bool {
        std::ptr::eq(
            std::sync::Arc::as_ptr(&self.inner),
            std::sync::Arc::as_ptr(&dst_fs.inner),
        ) && from.root == to.root
            && from.op.info().capability().copy
    }

    /// Copies one file from `src` (on `self`) to `dst` on `dst_fs`: server-side
    /// within one bucket when the store can, streamed otherwise.
    /// `size`, when a listing gave it, lets a copy between stores start its
    /// read without asking for it, and a server-side copy of a file no
    /// larger than `SIZED_COPY_MAX_BYTES` skip its HEAD (OpenDAL heads
    /// the source to choose between one copy and a multipart one, which a
    /// file that small never needs, and copies on the ETag it read; with
    /// the size given the copy is not pinned to that ETag and takes the
    /// source as it is when the copy runs. A wrong size could only make
    /// the returned metadata wrong, which is not used).
    pub(crate) async fn copy_file(
        &self,
        src: &str,
        dst_fs: &FileSystem,
        dst: &str,
        size: Option<u64>,
        progress: Option<&TransferProgress>,
    ) -> Result<()> {
        let from = self.locate(src).await?;
        let to = dst_fs.locate(dst).await?;
        if self.copies_on_the_store(&from, dst_fs, &to) {
            let copy = from.op.copy_with(&from.key, &to.key);
            match size.filter(|&size| size <= SIZED_COPY_MAX_BYTES) {
                Some(size) => copy.source_content_length_hint(size).await,
                None => copy.await,
            }
            .map_err(|e| self.error(e, &from))?;
        } else {
            self.stream_file(&from, dst_fs, &to, size, progress).await?;
        }
        dst_fs.cache().invalidate(&to.path);
        Ok(())
    }
}

/// Copies file pairs from `src_fs` to `dst_fs` without expansion.
async fn copy_pairs(
    src_fs: &FileSystem,
    dst_fs: &FileSystem,
    pairs: &[(&str, &str)],
) -> Result<()> {
    for (src, dst) in pairs {
        src_fs.copy_file(src, dst_fs, dst, None, None).await?;
    }
    Ok(())
}

/// The body of cp/put/get: expands the sources on `src_fs`, maps them under
/// `dst` with fsspec's rules, copies each file and makes each directory where
/// directories are real.
async fn transfer(
    src_fs: &FileSystem,
    sources: Sources<'_>,
    dst_fs: &FileSystem,
    dst: &str,
    options: TreeOptions,
    progress: Option<&TransferProgress>,
) -> Result<()> {
    let recursive = options.recursive;
    // fsspec's list forms take no maxdepth: a list is copied to full depth.
    let maxdepth = match sources {
        Sources::One(_) => options.max_depth,
        Sources::Many(_) => None,
    };
    let raw: Vec<&str> = match sources {
        Sources::One(s) => vec![s],
        Sources::Many(list) => list.to_vec(),
    };
    let mut expanded: BTreeMap<String, Option<FileInfo>> =
        src_fs.expand(&raw, recursive, maxdepth).await?;
    let source_is_str = matches!(sources, Sources::One(_));
    if source_is_str && (!recursive || maxdepth.is_some()) {
        expanded.retain(|_, info| !info.as_ref().is_some_and(|i| i.is_dir()));
        if expanded.is_empty() {
            return Ok(());
        }
    }
    let paths1: Vec<String> = expanded.keys().cloned().collect();
    let dst_is_dir = dst.ends_with('/') || dst_fs.isdir(dst).await?;
    let exists = match sources {
        Sources::One(src) => {
            (has_magic(src) && paths1.len() == 1)
                || (!has_magic(src) && dst_is_dir && !src.ends_with('/'))
        }
        Sources::Many(_) => false,
    };
    let target = dst_fs.strip(dst)?;
    let paths2 = other_paths(&paths1, &target, exists, !source_is_str);
    let missing_is_error = !recursive;
    // Directories first (in order, parents before children), then the
    // files, several at a time, each with the size its listing gave.
    let mut files: Vec<(String, String, Option<u64>)> = Vec::new();
    for (p1, p2) in paths1.into_iter().zip(paths2) {
        match expanded.remove(&p1) {
            Some(Some(info)) if info.is_dir() => {
                if dst_fs.real_directories() {
                    dst_fs.mkdir(&p2).await?;
                }
            }
            info => files.push((p1, p2, info.flatten().map(|i| i.size))),
        }
    }
    let copies = files.into_iter().map(|(p1, p2, size)| {
        copy_listed_file(src_fs, dst_fs, p1, p2, size, missing_is_error, progress)
    });
    stream::iter(copies)
        .buffer_unordered(FILES_IN_FLIGHT)
        .try_collect::<()>()
        .await
}

/// One file of [`transfer`]: `size` is what the listing said (`None`: a
/// literal path that was not found, skipped unless `missing_is_error`).
async fn copy_listed_file(
    src_fs: &FileSystem,
    dst_fs: &FileSystem,
    src: String,
    dst: String,
    size: Option<u64>,
    missing_is_error: bool,
    progress: Option<&TransferProgress>,
) -> Result<()> {
    match src_fs.copy_file(&src, dst_fs, &dst, size, progress).await {
        Err(e) if e.kind() == ErrorKind::NotFound && size.is_none() && !missing_is_error => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bindings run these futures on a multi-threaded runtime (the Python
    /// package spawns them): they must be `Send`, which a closure over
    /// borrowed paths in the copy loop once broke without any test noticing.
    #[test]
    fn transfer_futures_are_send() {
        fn send<T: Send>(_: T) {}
        let fs = FileSystem::new("memory", &StorageOptions::new()).unwrap();
        let recursive = TreeOptions::new().recursive(true);
        send(fs.cp_with("/a", "/b", recursive));
        send(fs.mv_with("/a", "/b", recursive));
        send(fs.put("/a", "/b"));
        send(fs.get_with("/a", "/b", recursive));
        send(fs.put_list(&["/a"], "/b/", recursive));
        send(fs.get_list(&["/a"], "/b/", recursive));
        send(fs.cp_to("/a", &fs, "/b", recursive, None));
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn common_prefix_is_by_component() {
        assert_eq!(common_prefix(&s(&["a/bc/d", "a/bd/e"])), "a");
        assert_eq!(common_prefix(&s(&["a/b"])), "a/b");
        assert_eq!(common_prefix(&s(&["x/1", "y/2"])), "");
    }

    #[test]
    fn single_file_maps_to_target_or_inside() {
        assert_eq!(other_paths(&s(&["b/f"]), "b/t", false, false), ["b/t"]);
        assert_eq!(other_paths(&s(&["b/f"]), "b/t/", true, false), ["b/t/f"]);
    }

    #[test]
    fn disjoint_relative_paths_are_joined() {
        assert_eq!(
            other_paths(&s(&["x/1", "y/2"]), "t", false, false),
            ["t/x/1", "t/y/2"]
        );
    }

    #[test]
    fn sources_land_under_the_target_as_fsspec_puts_them() {
        let src = s(&["b/src/a", "b/src/sub/c"]);
        assert_eq!(
            other_paths(&src, "b/dst", false, false),
            ["b/dst/a", "b/dst/sub/c"]
        );
        assert_eq!(
            other_paths(&src, "b/dst", true, false),
            ["b/dst/src/a", "b/dst/src/sub/c"]
        );
        assert_eq!(
            other_paths(&src, "b/dst/", false, true),
            ["b/dst/a", "b/dst/c"]
        );
    }
}
