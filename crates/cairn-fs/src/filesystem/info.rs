//! What is at a path: `info`, `exists`, `isdir`, `isfile`, `ls`.

use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};

use super::{FileSystem, Location};
use crate::entry::FileInfo;
use crate::error::{Error, ErrorKind, Result};

/// Whether OpenDAL's `err` means nothing is there (a missing bucket is
/// classified ConfigInvalid, never NotFound: see crate::answer).
pub(crate) fn is_not_found(err: &opendal::Error) -> bool {
    matches!(
        err.kind(),
        opendal::ErrorKind::NotFound | opendal::ErrorKind::NotADirectory
    )
}

impl FileSystem {
    /// Describes the file or directory at `path`; NotFound if there is none.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/info-doc/a", "abc".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// assert_eq!(fs.info("/info-doc/a").await.unwrap().size, 3);
    /// assert!(fs.info("/info-doc").await.unwrap().is_dir());
    /// assert_eq!(fs.info("/info-doc/zz").await.unwrap_err().kind(), cairn_fs::ErrorKind::NotFound);
    /// # })
    /// ```
    pub async fn info(&self, path: &str) -> Result<FileInfo> {
        let loc = self.locate(path).await?;
        self.info_at(&loc).await
    }

    pub(crate) async fn info_at(&self, loc: &Location) -> Result<FileInfo> {
        if let Some(answer) = self.info_from_cache(loc) {
            return answer;
        }
        if !loc.key.is_empty() {
            match loc.op.stat(&loc.key).await {
                Ok(meta) => return Ok(FileInfo::from_metadata(loc.path.clone(), &meta)),
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(self.error(e, loc)),
            }
        }
        if self.is_directory(loc).await? {
            return Ok(FileInfo::directory(loc.path.clone()));
        }
        Err(Error::new(ErrorKind::NotFound, "no such file or directory")
            .with_url(self.url(&loc.path)))
    }

    /// Answers `info` from cached listings, as s3fs does: a cached listing of
    /// the path itself makes it a directory; a cached listing of its parent
    /// either holds the entry or proves it absent.
    fn info_from_cache(&self, loc: &Location) -> Option<Result<FileInfo>> {
        let cache = self.read_cache()?;
        if loc.key.is_empty() {
            return None;
        }
        if cache.get(&loc.path).is_some() {
            return Some(Ok(FileInfo::directory(loc.path.clone())));
        }
        let parent = parent_path(&loc.path)?;
        let listing = cache.get(parent)?;
        Some(
            listing
                .into_iter()
                .find(|entry| entry.name == loc.path)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::NotFound,
                        "no such file or directory (cached listing)",
                    )
                    .with_url(self.url(&loc.path))
                }),
        )
    }

    /// Whether `loc` names a directory: a real one, a marker, or a prefix of keys.
    async fn is_directory(&self, loc: &Location) -> Result<bool> {
        let dir_key = loc.dir_key();
        if self.real_directories() {
            return match loc.op.stat(&dir_key).await {
                Ok(meta) => Ok(meta.is_dir()),
                Err(e) if is_not_found(&e) => Ok(false),
                Err(e) => Err(self.error(e, loc)),
            };
        }
        let mut lister = loc
            .op
            .lister_with(&dir_key)
            .limit(1)
            .await
            .map_err(|e| self.error(e, loc))?;
        Ok(lister
            .try_next()
            .await
            .map_err(|e| self.error(e, loc))?
            .is_some())
    }

    /// Whether something exists at `path`. Only NotFound becomes `false`;
    /// any other failure (a wrong credential, a missing bucket) is an error.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert!(!fs.exists("/nothing/here").await.unwrap());
    /// # })
    /// ```
    pub async fn exists(&self, path: &str) -> Result<bool> {
        match self.info(path).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether `path` is a directory (false when missing).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert!(!fs.isdir("/nothing").await.unwrap());
    /// # })
    /// ```
    pub async fn isdir(&self, path: &str) -> Result<bool> {
        Ok(self.info_or_none(path).await?.is_some_and(|i| i.is_dir()))
    }

    /// Whether `path` is a file (false when missing).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert!(!fs.isfile("/nothing").await.unwrap());
    /// # })
    /// ```
    pub async fn isfile(&self, path: &str) -> Result<bool> {
        Ok(self.info_or_none(path).await?.is_some_and(|i| !i.is_dir()))
    }

    pub(crate) async fn info_or_none(&self, path: &str) -> Result<Option<FileInfo>> {
        match self.info(path).await {
            Ok(info) => Ok(Some(info)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The entries directly inside the directory `path`, sorted by name; for a
    /// file, the file itself. NotFound if nothing is there. This is
    /// [`FileSystem::ls_stream`] collected and sorted (and kept in the
    /// listing cache when it is on).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/ls-doc/d/f", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.pipe("/ls-doc/g", "y".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// let names: Vec<_> = fs.ls("/ls-doc").await.unwrap().into_iter().map(|i| i.name).collect();
    /// assert_eq!(names, ["/ls-doc/d", "/ls-doc/g"]);
    /// # })
    /// ```
    pub async fn ls(&self, path: &str) -> Result<Vec<FileInfo>> {
        let loc = self.locate(path).await?;
        let cache = self.read_cache();
        if let Some(listing) = cache.and_then(|c| c.get(&loc.path)) {
            return Ok(listing);
        }
        let out = crate::entry::collect_sorted(self.list_dir(loc.clone())).await?;
        // A file's "listing" (itself) is not a directory's to cache.
        if let Some(cache) = cache
            && (out.len() != 1 || out[0].name != loc.path)
        {
            cache.put(&loc.path, out.clone());
        }
        Ok(out)
    }

    /// The entries directly inside the directory `path` as the store's
    /// listing pages arrive, in the store's order: memory stays at one page
    /// however large the directory. A file gives itself; a missing path
    /// ends the stream with NotFound (after nothing else), as `ls` fails.
    /// The listing cache answers when it holds the directory; the stream
    /// does not fill it.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::TryStreamExt;
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/lss-doc/d/f", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.pipe("/lss-doc/g", "y".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// let stream = fs.ls_stream("/lss-doc").await.unwrap();
    /// let mut names: Vec<String> = stream.map_ok(|i| i.name).try_collect().await.unwrap();
    /// names.sort();
    /// assert_eq!(names, ["/lss-doc/d", "/lss-doc/g"]);
    /// # })
    /// ```
    pub async fn ls_stream(&self, path: &str) -> Result<BoxStream<'static, Result<FileInfo>>> {
        let loc = self.locate(path).await?;
        if let Some(listing) = self.read_cache().and_then(|c| c.get(&loc.path)) {
            return Ok(stream::iter(listing.into_iter().map(Ok)).boxed());
        }
        Ok(self.list_dir(loc))
    }

    /// One directory's entries, uncached (see [`FileSystem::ls_stream`]).
    fn list_dir(&self, loc: Location) -> BoxStream<'static, Result<FileInfo>> {
        enum State {
            Start(FileSystem, Location),
            Listing {
                fs: FileSystem,
                loc: Location,
                dir_key: String,
                lister: opendal::Lister,
                /// Whether an entry was yielded (an empty listing asks
                /// what the path is).
                any: bool,
            },
            Done,
        }
        let step = |state: State| async move {
            match state {
                State::Done => None,
                State::Start(fs, loc) => {
                    let dir_key = loc.dir_key();
                    match loc.op.lister(&dir_key).await {
                        Ok(lister) => Some((
                            None,
                            State::Listing {
                                fs,
                                loc,
                                dir_key,
                                lister,
                                any: false,
                            },
                        )),
                        Err(e) if is_not_found(&e) => {
                            Some((fs.lone_entry(&loc).await, State::Done))
                        }
                        Err(e) => Some((Some(Err(fs.error(e, &loc))), State::Done)),
                    }
                }
                State::Listing {
                    fs,
                    loc,
                    dir_key,
                    mut lister,
                    any,
                } => loop {
                    let entry = match lister.try_next().await {
                        Ok(Some(entry)) => entry,
                        Ok(None) if any => return None,
                        Ok(None) => return Some((fs.lone_entry(&loc).await, State::Done)),
                        Err(e) if is_not_found(&e) => {
                            return Some((fs.lone_entry(&loc).await, State::Done));
                        }
                        Err(e) => return Some((Some(Err(fs.error(e, &loc))), State::Done)),
                    };
                    let key = entry.path();
                    if key == dir_key || key.trim_matches('/').is_empty() {
                        continue;
                    }
                    let name = fs.entry_path(&loc, key);
                    let info = fs.complete_info(&loc, name, key, entry.metadata()).await;
                    let next = if info.is_ok() {
                        State::Listing {
                            fs,
                            loc,
                            dir_key,
                            lister,
                            any: true,
                        }
                    } else {
                        State::Done
                    };
                    return Some((Some(info), next));
                },
            }
        };
        // `None` items are steps that yield nothing (the lister opening, an
        // empty directory).
        stream::unfold(State::Start(self.clone(), loc), step)
            .filter_map(|item| async move { item })
            .boxed()
    }

    /// What `ls` gives for a path whose listing is empty: the file itself,
    /// nothing for an empty directory, NotFound for nothing at all.
    async fn lone_entry(&self, loc: &Location) -> Option<Result<FileInfo>> {
        match self.info_at(loc).await {
            Ok(info) if info.is_dir() => None,
            answer => Some(answer),
        }
    }

    /// Turns a listed entry into a [`FileInfo`]; stats files whose listing
    /// carried no size (local directories list names only).
    pub(crate) async fn complete_info(
        &self,
        loc: &Location,
        name: String,
        entry_key: &str,
        meta: &opendal::Metadata,
    ) -> Result<FileInfo> {
        if meta.is_file() && meta.content_length() == 0 && self.real_directories() {
            let full = loc
                .op
                .stat(entry_key)
                .await
                .map_err(|e| self.error(e, loc))?;
            return Ok(FileInfo::from_metadata(name, &full));
        }
        Ok(FileInfo::from_metadata(name, meta))
    }
}

/// The directory holding `path` (`bucket/a` for `bucket/a/b`, `/` for `/a`).
pub(crate) fn parent_path(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) if path.len() > 1 => Some("/"),
        Some(idx) if idx > 0 => Some(&path[..idx]),
        _ => None,
    }
}
