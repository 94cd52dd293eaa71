//! Walking trees: `find`, `walk`, `du` and prefix listings. Each is a
//! stream that yields entries as the store's listing pages arrive (memory
//! bounded by a page, whatever the number of keys); the collected, sorted
//! forms are built on the streams.

use std::collections::{HashSet, VecDeque};

use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};

use super::info::is_not_found;
use super::walk_options::FindOptions;
use super::{FileInfo, FileSystem, Location};
use crate::entry::{DiskUsage, WalkStep, collect_sorted};
use crate::error::{Error, ErrorKind, Result};

impl FileSystem {
    /// Every file under `path` (and directories too with `withdirs`, the root
    /// included), down to `maxdepth` levels, sorted by name. A file path gives
    /// itself; a missing path gives nothing.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// for p in ["/find-doc/a", "/find-doc/sub/b"] {
    ///     fs.pipe(p, "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// }
    /// let names: Vec<_> = fs.find("/find-doc").await.unwrap().into_iter().map(|i| i.name).collect();
    /// assert_eq!(names, ["/find-doc/a", "/find-doc/sub/b"]);
    /// assert_eq!(fs.find_with("/find-doc", cairn_fs::FindOptions::new().max_depth(1).with_dirs(true)).await.unwrap().len(), 3);
    /// # })
    /// ```
    pub async fn find(&self, path: &str) -> Result<Vec<FileInfo>> {
        self.find_with(path, FindOptions::new()).await
    }

    /// [`FileSystem::find`] with options: how deep, and whether directories
    /// are listed too (fsspec's `maxdepth`, `withdirs`).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use cairn_fs::FindOptions;
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// for p in ["/findw-doc/a", "/findw-doc/sub/b"] {
    ///     fs.pipe(p, "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// }
    /// let found = fs.find_with("/findw-doc", FindOptions::new().max_depth(1).with_dirs(true)).await.unwrap();
    /// assert_eq!(found.len(), 3);
    /// # })
    /// ```
    pub async fn find_with(&self, path: &str, options: FindOptions) -> Result<Vec<FileInfo>> {
        collect_sorted(self.find_entries(path, options, true).await?).await
    }

    /// The entries under `path` as the store's listing pages arrive (in the
    /// store's order, not sorted): memory stays at one page whatever the
    /// number of keys (with `with_dirs`, plus one name per directory).
    /// [`FileSystem::find_with`] is this, collected and sorted; unlike it,
    /// the stream does not name `path` itself.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::TryStreamExt;
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// for p in ["/finds-doc/a", "/finds-doc/sub/b"] {
    ///     fs.pipe(p, "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// }
    /// let stream = fs.find_stream("/finds-doc", cairn_fs::FindOptions::new()).await.unwrap();
    /// let mut names: Vec<String> = stream.map_ok(|info| info.name).try_collect().await.unwrap();
    /// names.sort();
    /// assert_eq!(names, ["/finds-doc/a", "/finds-doc/sub/b"]);
    /// # })
    /// ```
    pub async fn find_stream(
        &self,
        path: &str,
        options: FindOptions,
    ) -> Result<BoxStream<'static, Result<FileInfo>>> {
        self.find_entries(path, options, false).await
    }

    /// The entries of a find; with `name_root`, also what `find_with` says
    /// of `path` itself, last: the directory (with `with_dirs`, when
    /// anything is under it), or the file when `path` is one.
    pub(crate) async fn find_entries(
        &self,
        path: &str,
        options: FindOptions,
        name_root: bool,
    ) -> Result<BoxStream<'static, Result<FileInfo>>> {
        if options.max_depth == Some(0) {
            return Err(Error::new(ErrorKind::Config, "maxdepth must be at least 1"));
        }
        let loc = self.locate(path).await?;
        let dir_key = loc.dir_key();
        let lister = match loc.op.lister_with(&dir_key).recursive(true).await {
            Ok(lister) => Some(lister),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(self.error(e, &loc)),
        };
        let walk = FindWalk {
            fs: self.clone(),
            prefix_len: dir_key.trim_start_matches('/').len(),
            loc,
            options,
            lister,
            name_root,
            yielded: 0,
            listed_any: false,
            seen_dirs: HashSet::new(),
            ready: VecDeque::new(),
        };
        Ok(stream::unfold(Some(walk), |state| async move {
            let mut walk = state?;
            loop {
                if let Some(info) = walk.ready.pop_front() {
                    walk.yielded += 1;
                    return Some((Ok(info), Some(walk)));
                }
                let Some(lister) = walk.lister.as_mut() else {
                    return match walk.root_entry().await {
                        Ok(Some(info)) => Some((Ok(info), None)),
                        Ok(None) => None,
                        Err(e) => Some((Err(e), None)),
                    };
                };
                match lister.try_next().await {
                    Ok(Some(entry)) => {
                        walk.listed_any = true;
                        if let Err(e) = walk.accept(entry).await {
                            return Some((Err(e), None));
                        }
                    }
                    Ok(None) => walk.lister = None,
                    // Nothing there: a missing path lists nothing. Once
                    // entries came, the rest of the listing is unknown.
                    Err(e) if is_not_found(&e) && !walk.listed_any => walk.lister = None,
                    Err(e) => return Some((Err(listing_cut(&walk.fs, e, &walk.loc)), None)),
                }
            }
        })
        .boxed())
    }

    /// fsspec's `walk`, top down: for `path` and then each directory below
    /// it (depth first, in name order, down to `max_depth` levels), one
    /// [`WalkStep`] with its subdirectories and files, each sorted. Memory
    /// holds one directory's listing and the names of the directories still
    /// to visit. A file path gives one step holding the file; a missing path
    /// gives nothing (as fsspec's default `on_error="omit"`); a directory that
    /// vanishes while walking is skipped; other failures end the stream with
    /// the error.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::TryStreamExt;
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// for p in ["/walk-doc/a", "/walk-doc/d/b", "/walk-doc/d/e/c"] {
    ///     fs.pipe(p, "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// }
    /// let steps: Vec<_> = fs.walk("/walk-doc", cairn_fs::FindOptions::new()).await.unwrap().try_collect().await.unwrap();
    /// let dirs: Vec<&str> = steps.iter().map(|s| s.path.as_str()).collect();
    /// assert_eq!(dirs, ["/walk-doc", "/walk-doc/d", "/walk-doc/d/e"]);
    /// assert_eq!(steps[0].files[0].name, "/walk-doc/a");
    /// assert_eq!(steps[0].dirs[0].name, "/walk-doc/d");
    /// let shallow = fs.walk("/walk-doc", cairn_fs::FindOptions::new().max_depth(1)).await.unwrap();
    /// assert_eq!(shallow.try_collect::<Vec<_>>().await.unwrap().len(), 1);
    /// # })
    /// ```
    pub async fn walk(
        &self,
        path: &str,
        options: FindOptions,
    ) -> Result<BoxStream<'static, Result<WalkStep>>> {
        if options.max_depth == Some(0) {
            return Err(Error::new(ErrorKind::Config, "maxdepth must be at least 1"));
        }
        let top = self.locate(path).await?.path;
        let to_visit = vec![(top, 1usize)];
        let fs = self.clone();
        Ok(stream::try_unfold(to_visit, move |mut to_visit| {
            let fs = fs.clone();
            async move {
                while let Some((dir, depth)) = to_visit.pop() {
                    let Some(step) = fs.walk_step(&dir).await? else {
                        continue;
                    };
                    if options.max_depth.is_none_or(|max| depth < max) {
                        // Reversed onto the stack so the first name is visited first.
                        to_visit
                            .extend(step.dirs.iter().rev().map(|d| (d.name.clone(), depth + 1)));
                    }
                    return Ok(Some((step, to_visit)));
                }
                Ok(None)
            }
        })
        .boxed())
    }

    /// One directory of a walk; `None` when it is not there.
    async fn walk_step(&self, dir: &str) -> Result<Option<WalkStep>> {
        let mut step = WalkStep {
            path: dir.to_string(),
            dirs: Vec::new(),
            files: Vec::new(),
        };
        let listing = self.ls_stream(dir).await;
        let mut listing = match listing {
            Ok(listing) => listing,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        loop {
            match listing.try_next().await {
                Ok(Some(info)) if info.is_dir() && info.name != dir => step.dirs.push(info),
                Ok(Some(info)) => step.files.push(info),
                Ok(None) => break,
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        step.dirs.sort_by(|a, b| a.name.cmp(&b.name));
        step.files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Some(step))
    }

    /// Every file whose path starts with `prefix` (not only whole path
    /// components: `bucket/out/unit_7_` matches `bucket/out/unit_7_0.parquet`),
    /// sorted. On object stores this is one prefix listing, so its cost
    /// follows the matching keys, not the size of the directory.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// for p in ["/pre-doc/u_1_0", "/pre-doc/u_1_1", "/pre-doc/u_10_0"] {
    ///     fs.pipe(p, "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// }
    /// let names: Vec<_> = fs.find_prefix("/pre-doc/u_1_").await.unwrap().into_iter().map(|i| i.name).collect();
    /// assert_eq!(names, ["/pre-doc/u_1_0", "/pre-doc/u_1_1"]);
    /// # })
    /// ```
    pub async fn find_prefix(&self, prefix: &str) -> Result<Vec<FileInfo>> {
        collect_sorted(self.find_prefix_stream(prefix).await?).await
    }

    /// [`FileSystem::find_prefix`] as the listing pages arrive, in the
    /// store's order: memory stays at one page.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::TryStreamExt;
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// for p in ["/pres-doc/u_1_0", "/pres-doc/u_10_0"] {
    ///     fs.pipe(p, "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// }
    /// let found: Vec<_> = fs.find_prefix_stream("/pres-doc/u_1_").await.unwrap().try_collect().await.unwrap();
    /// assert_eq!(found.len(), 1);
    /// # })
    /// ```
    pub async fn find_prefix_stream(
        &self,
        prefix: &str,
    ) -> Result<BoxStream<'static, Result<FileInfo>>> {
        let loc = self.locate(prefix).await?;
        let key = if prefix.ends_with('/') {
            loc.dir_key()
        } else {
            loc.key.clone()
        };
        let lister = match loc.op.lister_with(&key).recursive(true).await {
            Ok(lister) => lister,
            Err(e) if is_not_found(&e) => return Ok(stream::empty().boxed()),
            Err(e) => return Err(self.error(e, &loc)),
        };
        let state = (self.clone(), loc, key, lister, false);
        Ok(stream::unfold(Some(state), |state| async move {
            let (fs, loc, key, mut lister, mut listed_any) = state?;
            loop {
                let entry = match lister.try_next().await {
                    Ok(Some(entry)) => entry,
                    Ok(None) => return None,
                    // As in a find: missing means empty, until entries came.
                    Err(e) if is_not_found(&e) && !listed_any => return None,
                    Err(e) => return Some((Err(listing_cut(&fs, e, &loc)), None)),
                };
                listed_any = true;
                let (path, meta) = entry.into_parts();
                if meta.is_dir()
                    || !path
                        .trim_start_matches('/')
                        .starts_with(key.trim_start_matches('/'))
                {
                    continue;
                }
                let name = fs.entry_path(&loc, &path);
                let info = fs.complete_info(&loc, name, &path, &meta).await;
                let next = info.is_ok().then_some((fs, loc, key, lister, listed_any));
                return Some((info, next));
            }
        })
        .boxed())
    }

    /// Total size and count of the files under `path`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/du-doc/a", "abc".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.pipe("/du-doc/b/c", "de".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// assert_eq!(fs.du("/du-doc").await.unwrap(), cairn_fs::DiskUsage { bytes: 5, files: 2 });
    /// # })
    /// ```
    pub async fn du(&self, path: &str) -> Result<DiskUsage> {
        self.du_with(path, FindOptions::new()).await
    }

    /// [`FileSystem::du`] over files at most `options.max_depth` levels down.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/duw-doc/a", "xy".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// fs.pipe("/duw-doc/d/b", "xyz".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// assert_eq!(fs.du_with("/duw-doc", cairn_fs::FindOptions::new().max_depth(1)).await.unwrap().bytes, 2);
    /// # })
    /// ```
    pub async fn du_with(&self, path: &str, options: FindOptions) -> Result<DiskUsage> {
        let maxdepth = options.max_depth;
        self.find_entries(path, FindOptions::new().max_depth_opt(maxdepth), true)
            .await?
            .try_fold(DiskUsage::default(), |acc, f| async move {
                Ok(DiskUsage {
                    bytes: acc.bytes + f.size,
                    files: acc.files + 1,
                })
            })
            .await
    }
}

/// A listing that failed after some of its entries came: an error, never
/// a short listing (whoever decides what to delete from it would miss
/// files). A NotFound there (the bucket or directory gone mid-way) says so.
fn listing_cut(fs: &FileSystem, err: opendal::Error, loc: &Location) -> Error {
    let not_found = is_not_found(&err);
    let error = fs.error(err, loc);
    if !not_found {
        return error;
    }
    Error::new(
        ErrorKind::Other,
        format!(
            "the listing of {} failed part-way ({error}): what was listed is not all there is; run again",
            fs.url(&loc.path)
        ),
    )
}

/// The state of one find: what each listed entry becomes.
struct FindWalk {
    fs: FileSystem,
    loc: Location,
    /// Length of the listed directory's key, which entry keys start with.
    prefix_len: usize,
    options: FindOptions,
    /// The recursive listing; `None` once it has ended.
    lister: Option<opendal::Lister>,
    /// Whether to end with what `find_with` says of the path itself.
    name_root: bool,
    /// Entries yielded so far.
    yielded: usize,
    /// Whether the store's listing gave any entry.
    listed_any: bool,
    /// Directories already yielded (with `with_dirs`).
    seen_dirs: HashSet<String>,
    /// Entries ready to be yielded.
    ready: VecDeque<FileInfo>,
}

impl FindWalk {
    /// What `find_with` names besides the listed entries, once the listing
    /// has ended: the directory itself (with `with_dirs`, when anything was
    /// under it), or the path when it is a file.
    async fn root_entry(&mut self) -> Result<Option<FileInfo>> {
        if !std::mem::take(&mut self.name_root) {
            return Ok(None);
        }
        let named_dir = self.options.with_dirs && !self.loc.key.is_empty();
        if self.yielded > 0 {
            return Ok(named_dir.then(|| FileInfo::directory(self.loc.path.clone())));
        }
        Ok(match self.fs.info_or_none(&self.loc.path).await? {
            Some(info) if !info.is_dir() || named_dir => Some(info),
            _ => None,
        })
    }

    /// Turns one listed entry into what the walk yields: its parent
    /// directories first (with `with_dirs`; a prefix is a directory whether
    /// or not a marker exists), then the entry if it is within `max_depth`.
    async fn accept(&mut self, entry: opendal::Entry) -> Result<()> {
        let (key, meta) = entry.into_parts();
        let rel = key.trim_start_matches('/')[self.prefix_len..].trim_end_matches('/');
        if rel.is_empty() {
            return Ok(());
        }
        let max_depth = self.options.max_depth;
        let within = |rel: &str| max_depth.is_none_or(|d| rel.split('/').count() <= d);
        if self.options.with_dirs {
            let parts: Vec<&str> = rel.split('/').collect();
            for depth in 1..parts.len() {
                let dir_rel = parts[..depth].join("/");
                if within(&dir_rel) {
                    let name = self
                        .fs
                        .entry_path(&self.loc, &format!("{}{dir_rel}", self.loc.dir_key()));
                    if self.seen_dirs.insert(name.clone()) {
                        self.ready.push_back(FileInfo::directory(name));
                    }
                }
            }
        }
        if !within(rel) || (meta.is_dir() && !self.options.with_dirs) {
            return Ok(());
        }
        let name = self.fs.entry_path(&self.loc, &key);
        if meta.is_dir() {
            if !self.seen_dirs.insert(name.clone()) {
                return Ok(());
            }
            self.ready.push_back(FileInfo::directory(name));
            return Ok(());
        }
        let info = self.fs.complete_info(&self.loc, name, &key, &meta).await?;
        self.ready.push_back(info);
        Ok(())
    }
}
