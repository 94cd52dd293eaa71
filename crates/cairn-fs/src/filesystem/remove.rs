//! Creating and removing: `mkdir`, `rm` (batched deletes).

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt, stream};

use super::info::is_not_found;
use super::walk_options::TreeOptions;
use super::{FileSystem, Location};
use crate::error::{Error, ErrorKind, Result};

impl FileSystem {
    /// Creates a directory and its parents. On object stores this writes a
    /// `dir/` marker object; a bucket is never created, only checked.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.mkdir("/mkdir-doc/a/b").await.unwrap();
    /// assert!(fs.isdir("/mkdir-doc/a/b").await.unwrap());
    /// # })
    /// ```
    pub async fn mkdir(&self, path: &str) -> Result<()> {
        let loc = self.locate(path).await?;
        if loc.key.is_empty() {
            return match self.info_at(&loc).await {
                Ok(_) => Ok(()),
                Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "bucket {:?} does not exist and cairn does not create buckets; create it with your provider's tools",
                        loc.root
                    ),
                )
                .with_url(self.url(&loc.path))),
                Err(e) => Err(e),
            };
        }
        if let Some(info) = self.info_or_none(&loc.path).await? {
            if info.is_dir() {
                return Ok(());
            }
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                "a file exists at this path; cannot make a directory here",
            )
            .with_url(self.url(&loc.path)));
        }
        loc.op
            .create_dir(&loc.dir_key())
            .await
            .map_err(|e| self.error(e, &loc))?;
        self.cache().invalidate(&loc.path);
        Ok(())
    }

    /// Removes the directory `path` if nothing is in it: whether it is gone
    /// now (a missing one is gone). On an object store this is one listing
    /// and, when the directory is made by a `dir/` marker object, one
    /// DELETE of the marker, where [`FileSystem::rmdir`] asks what the path
    /// is first (seven requests or more on S3). Nothing but the directory
    /// itself is ever removed.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.mkdir("/rdie-doc/d").await.unwrap();
    /// fs.pipe("/rdie-doc/f", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// assert!(!fs.remove_dir_if_empty("/rdie-doc").await.unwrap());
    /// assert!(fs.remove_dir_if_empty("/rdie-doc/d").await.unwrap());
    /// assert!(!fs.exists("/rdie-doc/d").await.unwrap());
    /// assert!(fs.exists("/rdie-doc/f").await.unwrap());
    /// assert!(fs.remove_dir_if_empty("/rdie-doc/missing").await.unwrap());
    /// # })
    /// ```
    pub async fn remove_dir_if_empty(&self, path: &str) -> Result<bool> {
        let loc = self.locate(path).await?;
        if self.real_directories() || loc.key.is_empty() {
            return match self.rmdir(&loc.path).await {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(true),
                // Not empty (or a file that appeared at the path): kept.
                Err(e) if matches!(e.kind(), ErrorKind::Other | ErrorKind::NotADirectory) => {
                    Ok(!self.exists(&loc.path).await?)
                }
                Err(e) => Err(e),
            };
        }
        let dir_key = loc.dir_key();
        let mut lister = match loc.op.lister(&dir_key).await {
            Ok(lister) => lister,
            Err(e) if is_not_found(&e) => return Ok(true),
            Err(e) => return Err(self.error(e, &loc)),
        };
        let mut marker = false;
        loop {
            match lister.try_next().await {
                Ok(Some(entry)) if entry.path() == dir_key => marker = true,
                Ok(Some(_)) => return Ok(false),
                Ok(None) => break,
                Err(e) if is_not_found(&e) => break,
                Err(e) => return Err(self.error(e, &loc)),
            }
        }
        if marker {
            loc.op
                .delete(&dir_key)
                .await
                .map_err(|e| self.error(e, &loc))?;
        }
        self.cache().invalidate(&loc.path);
        Ok(true)
    }

    /// Removes an empty directory (on object stores, its `dir/` marker if
    /// any). A directory that is not empty is an error and nothing is deleted:
    /// this never removes anything but the directory itself.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.mkdir("/rmdir-doc/d").await.unwrap();
    /// fs.pipe("/rmdir-doc/f", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// assert!(fs.rmdir("/rmdir-doc").await.is_err());
    /// fs.rmdir("/rmdir-doc/d").await.unwrap();
    /// assert!(!fs.exists("/rmdir-doc/d").await.unwrap());
    /// # })
    /// ```
    pub async fn rmdir(&self, path: &str) -> Result<()> {
        let loc = self.locate(path).await?;
        let info = self.info_at(&loc).await?;
        if !info.is_dir() {
            return Err(
                Error::new(ErrorKind::NotADirectory, "rmdir removes directories only")
                    .with_url(self.url(&loc.path)),
            );
        }
        if !self.ls(&loc.path).await?.is_empty() {
            return Err(Error::new(
                ErrorKind::Other,
                "the directory is not empty; nothing was removed",
            )
            .with_url(self.url(&loc.path)));
        }
        if !loc.key.is_empty() {
            loc.op
                .delete(&loc.dir_key())
                .await
                .map_err(|e| self.error(e, &loc))?;
        }
        self.cache().invalidate(&loc.path);
        Ok(())
    }

    /// Deletes the one file at `path`; a file that is not there is not an
    /// error. On an object store this is one DELETE (no stat, no listing, no
    /// glob expansion): what an idempotent protocol step wants. Where
    /// directories are real (local disk) a directory is refused and kept, as
    /// [`FileSystem::rm`] refuses it; a path ending in `/` is refused
    /// everywhere.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/rmf-doc/a", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.rm_file("/rmf-doc/a").await.unwrap();
    /// fs.rm_file("/rmf-doc/a").await.unwrap(); // already gone: fine
    /// assert!(!fs.exists("/rmf-doc/a").await.unwrap());
    /// # })
    /// ```
    pub async fn rm_file(&self, path: &str) -> Result<()> {
        let loc = self.file_location(path, "rm_file").await?;
        if self.real_directories() {
            return self.rm_local_file(path).await;
        }
        loc.op
            .delete(&loc.key)
            .await
            .map_err(|e| self.error(e, &loc))?;
        self.cache().invalidate(&loc.path);
        Ok(())
    }

    /// [`FileSystem::rm_file`] over many files, for a caller that knows
    /// they are files (a listing said so): no stat, no glob expansion, a
    /// file already gone is fine. On object stores the keys go out in
    /// multi-delete batches (1,000 keys a request on S3); [`FileSystem::rm_list`]
    /// would first ask for each path's type, a HEAD per path. A path ending
    /// in `/` is refused before anything is deleted.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/rmfs-doc/a", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.rm_files(&["/rmfs-doc/a", "/rmfs-doc/gone"]).await.unwrap();
    /// assert!(!fs.exists("/rmfs-doc/a").await.unwrap());
    /// # })
    /// ```
    pub async fn rm_files(&self, paths: &[&str]) -> Result<()> {
        let mut located = Vec::with_capacity(paths.len());
        for path in paths {
            located.push(self.file_location(path, "rm_files").await?);
        }
        if self.real_directories() {
            // Local deletes cost no request; each keeps a directory safe.
            for path in paths {
                self.rm_local_file(path).await?;
            }
            return Ok(());
        }
        let mut per_bucket: BTreeMap<String, (super::Location, Vec<String>)> = BTreeMap::new();
        for loc in located {
            self.cache().invalidate(&loc.path);
            let key = loc.key.clone();
            per_bucket
                .entry(loc.root.clone())
                .or_insert_with(|| (loc, Vec::new()))
                .1
                .push(key);
        }
        for (loc, keys) in per_bucket.into_values() {
            self.delete_keys(&loc, keys).await?;
        }
        Ok(())
    }

    /// Removes the local file `path` (already known not to end in `/`);
    /// a file already gone is fine, a directory is refused and kept.
    async fn rm_local_file(&self, path: &str) -> Result<()> {
        match self.rm(path).await {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Where `path` is, refused (IsADirectory) when it can only name a
    /// directory: a bucket's root or a path ending in `/`.
    pub(super) async fn file_location(
        &self,
        path: &str,
        operation: &str,
    ) -> Result<super::Location> {
        let loc = self.locate(path).await?;
        if loc.key.is_empty() || loc.key.ends_with('/') || path.ends_with('/') {
            return Err(Error::new(
                ErrorKind::IsADirectory,
                format!(
                    "{operation} takes files, not directories; name files, or use {} with recursive for a directory",
                    if operation.starts_with("mv") { "mv" } else { "rm" }
                ),
            )
            .with_url(self.url(&loc.path)));
        }
        Ok(loc)
    }

    /// Removes files; with `recursive`, directories and everything under them.
    /// Globs are expanded first. Deletes go out in batches (up to 1000 keys a
    /// request on s3), children before their directories. A directory without
    /// `recursive` is an IsADirectory error and nothing is deleted.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/rm-doc/d/f", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// assert!(fs.rm("/rm-doc/d").await.is_err());
    /// fs.rm_with("/rm-doc/d", cairn_fs::TreeOptions::new().recursive(true)).await.unwrap();
    /// assert!(!fs.exists("/rm-doc/d").await.unwrap());
    /// # })
    /// ```
    pub async fn rm(&self, path: &str) -> Result<()> {
        self.rm_with(path, TreeOptions::new()).await
    }

    /// [`FileSystem::rm`] with options: `recursive` removes a directory and
    /// everything under it (at most `max_depth` levels).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/rmw-doc/d/f", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.rm_with("/rmw-doc/d", cairn_fs::TreeOptions::new().recursive(true)).await.unwrap();
    /// assert!(!fs.exists("/rmw-doc/d").await.unwrap());
    /// # })
    /// ```
    pub async fn rm_with(&self, path: &str, options: TreeOptions) -> Result<()> {
        self.rm_list(&[path], options).await
    }

    /// [`FileSystem::rm`] over several paths.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/rml-doc/a", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.pipe("/rml-doc/b", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.rm_list(&["/rml-doc/a", "/rml-doc/b"], cairn_fs::TreeOptions::new()).await.unwrap();
    /// assert!(!fs.exists("/rml-doc/a").await.unwrap());
    /// # })
    /// ```
    pub async fn rm_list(&self, paths: &[&str], options: TreeOptions) -> Result<()> {
        let (recursive, maxdepth) = (options.recursive, options.max_depth);
        let expanded = self.expand(paths, recursive, maxdepth).await?;
        if let Some((missing, _)) = expanded.iter().find(|(_, kind)| kind.is_none()) {
            return Err(Error::new(ErrorKind::NotFound, "no such file or directory")
                .with_url(self.url(missing)));
        }
        if !recursive
            && let Some((dir, _)) = expanded
                .iter()
                .find(|(_, info)| info.as_ref().is_some_and(|i| i.is_dir()))
        {
            return Err(Error::new(
                ErrorKind::IsADirectory,
                "the path is a directory; pass recursive (-r) to remove it and its contents",
            )
            .with_url(self.url(dir)));
        }
        // Group keys per bucket; reverse order puts children before parents.
        let mut per_bucket: BTreeMap<String, (super::Location, Vec<String>)> = BTreeMap::new();
        for (path, info) in expanded.iter().rev() {
            let loc = self.locate(path).await?;
            if loc.key.is_empty() {
                continue;
            }
            let key = if info.as_ref().is_some_and(|i| i.is_dir()) {
                loc.dir_key()
            } else {
                loc.key.clone()
            };
            per_bucket
                .entry(loc.root.clone())
                .or_insert_with(|| (loc, Vec::new()))
                .1
                .push(key);
        }
        for path in expanded.keys() {
            self.cache().invalidate(path);
        }
        for (loc, keys) in per_bucket.into_values() {
            self.delete_keys(&loc, keys).await?;
        }
        Ok(())
    }

    /// Deletes `keys` (children listed before their directories). Where
    /// directories are only key prefixes, order does not matter, so batches of
    /// the store's multi-delete size go out in parallel; where they are real,
    /// one deleter keeps the order.
    async fn delete_keys(&self, loc: &Location, keys: Vec<String>) -> Result<()> {
        if self.real_directories() {
            return loc
                .op
                .delete_iter(keys)
                .await
                .map_err(|e| self.error(e, loc));
        }
        if !self.batch_delete() {
            // Owned keys and operators: futures that borrow from the
            // iterator are not provably Send inside spawned tasks.
            stream::iter(keys.into_iter().map(|key| {
                let op = loc.op.clone();
                async move { op.delete(&key).await }
            }))
            .buffer_unordered(PARALLEL_SINGLE_DELETES)
            .try_collect::<Vec<()>>()
            .await
            .map_err(|e| self.error(e, loc))?;
            return Ok(());
        }
        let batch = loc
            .op
            .info()
            .capability()
            .delete_max_size
            .unwrap_or(1)
            .max(1);
        let batches: Vec<Vec<String>> = keys.chunks(batch).map(<[String]>::to_vec).collect();
        stream::iter(batches.into_iter().map(|chunk| {
            let op = loc.op.clone();
            async move { op.delete_iter(chunk).await }
        }))
        .buffer_unordered(PARALLEL_DELETE_BATCHES)
        .try_collect::<Vec<()>>()
        .await
        .map_err(|e| self.error(e, loc))?;
        Ok(())
    }
}

/// Multi-delete requests in flight at once on object stores.
const PARALLEL_DELETE_BATCHES: usize = 8;
/// Single-object deletes in flight at once where batches are off.
const PARALLEL_SINGLE_DELETES: usize = 32;
