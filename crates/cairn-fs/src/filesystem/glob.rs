//! Glob patterns: `glob`, `glob_stream`, and fsspec's `expand_path`.

use std::collections::BTreeMap;

use futures::future;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use globset::{GlobBuilder, GlobMatcher};

use super::walk_options::{FindOptions, TreeOptions};
use super::{FileInfo, FileSystem};
use crate::entry::collect_sorted;
use crate::error::{Error, ErrorKind, Result};
use crate::url::has_magic;

/// What a glob pattern lists and keeps.
enum GlobPlan {
    /// No glob characters: the path itself, if it exists.
    Literal(String),
    /// Entries under `root`, down to `depth` levels, kept when `matcher`
    /// matches their name (directories' names with a `/` appended when
    /// `slash_dirs`).
    Match {
        root: String,
        depth: Option<usize>,
        matcher: GlobMatcher,
        slash_dirs: bool,
    },
}

impl FileSystem {
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

    /// The entries matching a glob pattern (see [`FileSystem::glob`]) as the
    /// store's listing pages arrive, in the store's order, each with its
    /// size and type from the listing: memory stays at one page (plus one
    /// name per directory under the pattern's fixed part).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::TryStreamExt;
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// for p in ["/globs-doc/a1.txt", "/globs-doc/a2.csv"] {
    ///     fs.pipe(p, "xy".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// }
    /// let stream = fs.glob_stream("/globs-doc/*.txt", cairn_fs::FindOptions::new()).await.unwrap();
    /// let found: Vec<_> = stream.try_collect().await.unwrap();
    /// assert_eq!((found[0].name.as_str(), found[0].size), ("/globs-doc/a1.txt", 2));
    /// # })
    /// ```
    pub async fn glob_stream(
        &self,
        pattern: &str,
        options: FindOptions,
    ) -> Result<BoxStream<'static, Result<FileInfo>>> {
        match self.glob_plan(pattern, options.max_depth)? {
            GlobPlan::Literal(path) => {
                let found = self.info_or_none(&path).await?;
                Ok(stream::iter(found.map(Ok)).boxed())
            }
            GlobPlan::Match {
                root,
                depth,
                matcher,
                slash_dirs,
            } => {
                let candidates = self
                    .find_entries(
                        &root,
                        FindOptions::new().max_depth_opt(depth).with_dirs(true),
                        true,
                    )
                    .await?;
                Ok(candidates
                    .try_filter(move |info| {
                        let matched = if slash_dirs && info.is_dir() {
                            matcher.is_match(format!("{}/", info.name))
                        } else {
                            matcher.is_match(&info.name)
                        };
                        future::ready(matched)
                    })
                    .boxed())
            }
        }
    }

    /// [`FileSystem::glob_stream`] collected and sorted.
    async fn glob_detail(&self, pattern: &str, maxdepth: Option<usize>) -> Result<Vec<FileInfo>> {
        let options = FindOptions::new().max_depth_opt(maxdepth);
        collect_sorted(self.glob_stream(pattern, options).await?).await
    }

    /// What a pattern asks for: a literal path, or a matcher over a listing
    /// of its fixed part down to the depth the pattern (and `maxdepth`)
    /// allows.
    fn glob_plan(&self, pattern: &str, maxdepth: Option<usize>) -> Result<GlobPlan> {
        if maxdepth == Some(0) {
            return Err(Error::new(ErrorKind::Config, "maxdepth must be at least 1"));
        }
        let ends_with_sep = pattern.ends_with('/');
        let path = self.strip(pattern)?;
        if !has_magic(&path) {
            return Ok(GlobPlan::Literal(path));
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
        if root.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidUrl,
                "a glob needs a fixed bucket or directory before its first wildcard",
            )
            .with_url(pattern));
        }
        Ok(GlobPlan::Match {
            root,
            depth,
            matcher,
            slash_dirs: append_slash_to_dirs,
        })
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
                        self.insert_tree(&mut out, &m.name, maxdepth.map(|d| d - 1))
                            .await?;
                    }
                }
                out.extend(matched.into_iter().map(|m| (m.name.clone(), Some(m))));
                continue;
            }
            if recursive && literal.as_ref().is_some_and(|i| i.is_dir()) {
                self.insert_tree(&mut out, &path, maxdepth).await?;
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

    /// Adds `dir` and everything under it, down to `maxdepth` levels, to
    /// an expansion.
    async fn insert_tree(
        &self,
        out: &mut BTreeMap<String, Option<FileInfo>>,
        dir: &str,
        maxdepth: Option<usize>,
    ) -> Result<()> {
        let options = FindOptions::new().max_depth_opt(maxdepth).with_dirs(true);
        for sub in self.find_with(dir, options).await? {
            out.insert(sub.name.clone(), Some(sub));
        }
        Ok(())
    }
}
