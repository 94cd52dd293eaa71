//! Walking trees: `find`, `glob`, `du`, and fsspec's `expand_path`.

use std::collections::{BTreeMap, HashSet, VecDeque};

use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use globset::GlobBuilder;

use super::info::{is_not_found, list_keys_from};
use super::walk_options::{FindOptions, TreeOptions};
use super::{FileInfo, FileSystem, Location};
use crate::entry::DiskUsage;
use crate::error::{Error, ErrorKind, Result};
use crate::url::has_magic;

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
        let mut entries = self.find_stream(path, options).await?;
        let mut out: BTreeMap<String, FileInfo> = BTreeMap::new();
        while let Some(info) = entries.try_next().await? {
            out.insert(info.name.clone(), info);
        }
        let loc = self.locate(path).await?;
        if options.with_dirs && !out.is_empty() && !loc.key.is_empty() {
            out.insert(loc.path.clone(), FileInfo::directory(loc.path.clone()));
        }
        if out.is_empty() {
            match self.info_or_none(&loc.path).await? {
                Some(info) if !info.is_dir() => return Ok(vec![info]),
                Some(info) if options.with_dirs && !loc.key.is_empty() => return Ok(vec![info]),
                _ => {}
            }
        }
        Ok(out.into_values().collect())
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
        if options.max_depth == Some(0) {
            return Err(Error::new(ErrorKind::Config, "maxdepth must be at least 1"));
        }
        let loc = self.locate(path).await?;
        let dir_key = loc.dir_key();
        let lister = match loc.op.lister_with(&dir_key).recursive(true).await {
            Ok(lister) => lister,
            Err(e) if is_not_found(&e) => return Ok(stream::empty().boxed()),
            Err(e) => return Err(self.error(e, &loc)),
        };
        let walk = Walk {
            fs: self.clone(),
            prefix_len: dir_key.trim_start_matches('/').len(),
            loc,
            options,
            seen_dirs: HashSet::new(),
            ready: VecDeque::new(),
        };
        Ok(stream::unfold(Some((lister, walk)), |state| async move {
            let (mut lister, mut walk) = state?;
            loop {
                if let Some(info) = walk.ready.pop_front() {
                    return Some((Ok(info), Some((lister, walk))));
                }
                match lister.try_next().await {
                    Ok(Some(entry)) => {
                        if let Err(e) = walk.accept(entry).await {
                            return Some((Err(e), None));
                        }
                    }
                    Ok(None) => return None,
                    Err(e) if is_not_found(&e) => return None,
                    Err(e) => return Some((Err(walk.fs.error(e, &walk.loc)), None)),
                }
            }
        })
        .boxed())
    }

    /// Paths matching a glob pattern: `*` and `?` within one level, `[...]`
    /// classes, `**` across levels; a pattern ending in `/` matches directories
    /// only. Without glob characters: the path if it exists.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// for p in ["/glob-doc/a1.txt", "/glob-doc/a2.csv", "/glob-doc/d/a3.txt"] {
    ///     fs.pipe(p, "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// }
    /// assert_eq!(fs.glob("/glob-doc/*.txt").await.unwrap(), ["/glob-doc/a1.txt"]);
    /// assert_eq!(fs.glob("/glob-doc/**/*.txt").await.unwrap().len(), 2);
    /// # })
    /// ```
    pub async fn glob(&self, pattern: &str) -> Result<Vec<String>> {
        self.glob_with(pattern, FindOptions::new()).await
    }

    /// [`FileSystem::glob`] descending at most `options.max_depth` levels.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/globw-doc/d/a.txt", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// let shallow = fs.glob_with("/globw-doc/**", cairn_fs::FindOptions::new().max_depth(1)).await.unwrap();
    /// assert!(shallow.contains(&"/globw-doc/d".to_string()));
    /// assert!(!shallow.contains(&"/globw-doc/d/a.txt".to_string()), "one level down only");
    /// # })
    /// ```
    pub async fn glob_with(&self, pattern: &str, options: FindOptions) -> Result<Vec<String>> {
        let maxdepth = options.max_depth;
        Ok(self
            .glob_detail(pattern, maxdepth)
            .await?
            .into_iter()
            .map(|i| i.name)
            .collect())
    }

    async fn glob_detail(&self, pattern: &str, maxdepth: Option<usize>) -> Result<Vec<FileInfo>> {
        if maxdepth == Some(0) {
            return Err(Error::new(ErrorKind::Config, "maxdepth must be at least 1"));
        }
        let ends_with_sep = pattern.ends_with('/');
        let path = self.strip(pattern)?;
        if !has_magic(&path) {
            return Ok(self.info_or_none(&path).await?.into_iter().collect());
        }
        let append_slash_to_dirs = ends_with_sep || path.ends_with("/**");
        let first_magic = path.find(['*', '?', '[']).unwrap_or(path.len());
        let (root, tail) = match path[..first_magic].rfind('/') {
            Some(idx) => (&path[..=idx], &path[idx + 1..]),
            None => ("", path.as_str()),
        };
        let tail_depth = tail.matches('/').count() + 1;
        // `**` spans any depth; with maxdepth it spans at most that many levels.
        let depth = match path.find("**") {
            Some(idx) => maxdepth.map(|m| tail_depth - (path[idx..].matches('/').count() + 1) + m),
            None => Some(tail_depth),
        };
        let glob_text = format!("{path}{}", if ends_with_sep { "/" } else { "" });
        if glob_text
            .split('/')
            .any(|part| part.contains("**") && part != "**")
        {
            return Err(Error::new(
                ErrorKind::InvalidUrl,
                "'**' can only be an entire path component, as in a/**/b",
            )
            .with_url(pattern));
        }
        let matcher = GlobBuilder::new(&glob_text)
            .literal_separator(true)
            .backslash_escape(false)
            .empty_alternates(false)
            .build()
            .map_err(|e| {
                Error::new(ErrorKind::InvalidUrl, "invalid glob pattern")
                    .with_url(pattern)
                    .with_source(e)
            })?
            .compile_matcher();
        let root = if root.is_empty() || root == "/" {
            root.to_string()
        } else {
            root.trim_end_matches('/').to_string()
        };
        let candidates = if root.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidUrl,
                "a glob needs a fixed bucket or directory before its first wildcard",
            )
            .with_url(pattern));
        } else {
            self.find_with(
                &root,
                crate::FindOptions::new()
                    .max_depth_opt(depth)
                    .with_dirs(true),
            )
            .await?
        };
        Ok(candidates
            .into_iter()
            .filter(|info| {
                let candidate = if append_slash_to_dirs && info.is_dir() {
                    format!("{}/", info.name)
                } else {
                    info.name.clone()
                };
                matcher.is_match(&candidate)
            })
            .collect())
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
        let loc = self.locate(prefix).await?;
        let keep_slash = prefix.ends_with('/');
        let key = if keep_slash {
            loc.dir_key()
        } else {
            loc.key.clone()
        };
        let entries = list_keys_from(self, &loc, &key).await?;
        let mut out = Vec::new();
        for (path, meta) in entries {
            if meta.is_dir()
                || !path
                    .trim_start_matches('/')
                    .starts_with(key.trim_start_matches('/'))
            {
                continue;
            }
            let name = self.entry_path(&loc, &path);
            out.push(self.complete_info(&loc, name, &path, &meta).await?);
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
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
        let files = self
            .find_with(path, crate::FindOptions::new().max_depth_opt(maxdepth))
            .await?;
        Ok(files.iter().fold(DiskUsage::default(), |acc, f| DiskUsage {
            bytes: acc.bytes + f.size,
            files: acc.files + 1,
        }))
    }

    /// fsspec's `expand_path`: turns paths, globs and (with `recursive`)
    /// directories into the sorted list of every path they cover. A path that
    /// exists as written is taken literally even if it holds glob characters,
    /// so `rm` of a key named `a[1]` never deletes `a1`. NotFound when nothing
    /// matches.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/exp-doc/d/f", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// let all = fs.expand_path(&["/exp-doc/d"], cairn_fs::TreeOptions::new().recursive(true)).await.unwrap();
    /// assert_eq!(all, ["/exp-doc/d", "/exp-doc/d/f"]);
    /// # })
    /// ```
    pub async fn expand_path(&self, paths: &[&str], options: TreeOptions) -> Result<Vec<String>> {
        let (recursive, maxdepth) = (options.recursive, options.max_depth);
        Ok(self
            .expand(paths, recursive, maxdepth)
            .await?
            .into_keys()
            .collect())
    }

    /// [`FileSystem::expand_path`] keeping what each path is: `None` for a
    /// literal path that does not exist (kept, as fsspec keeps it, so the
    /// operation on it can report NotFound).
    pub(crate) async fn expand(
        &self,
        paths: &[&str],
        recursive: bool,
        maxdepth: Option<usize>,
    ) -> Result<BTreeMap<String, Option<FileInfo>>> {
        if maxdepth == Some(0) {
            return Err(Error::new(ErrorKind::Config, "maxdepth must be at least 1"));
        }
        let mut out = BTreeMap::new();
        for raw in paths {
            let path = self.strip(raw)?;
            let literal = self.info_or_none(&path).await?;
            if has_magic(&path) && literal.is_none() {
                let matched = self.glob_detail(&path, maxdepth).await?;
                if recursive && maxdepth.is_none_or(|d| d > 1) {
                    for m in matched.iter().filter(|m| m.is_dir()) {
                        for sub in self
                            .find_with(
                                &m.name,
                                crate::FindOptions::new()
                                    .max_depth_opt(maxdepth.map(|d| d - 1))
                                    .with_dirs(true),
                            )
                            .await?
                        {
                            out.insert(sub.name.clone(), Some(sub));
                        }
                    }
                }
                out.extend(matched.into_iter().map(|m| (m.name.clone(), Some(m))));
                continue;
            }
            if recursive && literal.as_ref().is_some_and(|i| i.is_dir()) {
                for sub in self
                    .find_with(
                        &path,
                        crate::FindOptions::new()
                            .max_depth_opt(maxdepth)
                            .with_dirs(true),
                    )
                    .await?
                {
                    out.insert(sub.name.clone(), Some(sub));
                }
            }
            if !out.contains_key(&path) && (!recursive || literal.is_some()) {
                out.insert(path, literal);
            }
        }
        if out.is_empty() {
            return Err(
                Error::new(ErrorKind::NotFound, "no such file, directory or match")
                    .with_url(paths.join(", ")),
            );
        }
        Ok(out)
    }
}

/// The state of one `find_stream`: what each listed entry becomes.
struct Walk {
    fs: FileSystem,
    loc: Location,
    /// Length of the listed directory's key, which entry keys start with.
    prefix_len: usize,
    options: FindOptions,
    /// Directories already yielded (with `with_dirs`).
    seen_dirs: HashSet<String>,
    /// Entries ready to be yielded.
    ready: VecDeque<FileInfo>,
}

impl Walk {
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
