//! Paths: URLs to stripped paths and back, a stripped path split into the
//! root that picks an operator (bucket, volume) and the key inside it.

use opendal::Operator;

use super::FileSystem;
use crate::backend::Layout;
use crate::error::{Error, ErrorKind, Result};
use crate::url::{absolute_local, normalize_posix, split_protocol};

/// A resolved location: the operator of its root and the key inside it.
#[derive(Clone)]
pub(crate) struct Location {
    pub op: Operator,
    /// The root the operator serves: a bucket, a tclake volume's four path
    /// components, `""` for single-root backends.
    pub root: String,
    /// Key inside the operator, no leading slash; empty for the root itself.
    pub key: String,
    /// The stripped path, as results name it.
    pub path: String,
}

impl Location {
    /// The key of this location seen as a directory (`dir/`, or `/` for the root).
    pub fn dir_key(&self) -> String {
        if self.key.is_empty() {
            "/".to_string()
        } else {
            format!("{}/", self.key)
        }
    }
}

impl FileSystem {
    /// Removes this filesystem's scheme from `url` and normalizes the path:
    /// `s3://b/k/` gives `b/k`, a relative local path becomes absolute.
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("s3", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(fs.strip("s3://bucket/a/b/").unwrap(), "bucket/a/b");
    /// assert!(fs.strip("memory:///x").is_err());
    /// ```
    pub fn strip(&self, url: &str) -> Result<String> {
        let (scheme, rest) = split_protocol(url);
        if let Some(scheme) = &scheme
            && !self.inner.schemes.iter().any(|s| s == scheme)
        {
            return Err(Error::new(
                ErrorKind::InvalidUrl,
                format!(
                    "this is a {} filesystem and cannot serve a {scheme}:// URL; open a filesystem for that URL instead",
                    self.inner.protocol
                ),
            )
            .with_url(url));
        }
        match self.inner.layout {
            Layout::Bucketed | Layout::Rooted(_) => {
                let trimmed = rest.trim_matches('/');
                Ok(trimmed.to_string())
            }
            Layout::SingleRoot => {
                let path = if self.inner.protocol == "file" {
                    if scheme.is_some() && !rest.starts_with('/') {
                        return Err(Error::new(
                            ErrorKind::InvalidUrl,
                            "a file URL must hold an absolute path: write file:///abs/path",
                        )
                        .with_url(url));
                    }
                    absolute_local(rest, url)?
                } else {
                    normalize_posix(&format!("/{rest}"))
                };
                Ok(strip_trailing_slash(&path))
            }
        }
    }

    /// The URL of a stripped path (`bucket/key` gives `s3://bucket/key`).
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(fs.url("/a/b"), "memory:///a/b");
    /// ```
    pub fn url(&self, path: &str) -> String {
        match split_protocol(path) {
            (Some(_), _) => path.to_string(),
            (None, rest) => format!("{}://{rest}", self.inner.protocol),
        }
    }

    /// Splits a stripped path into its root (the bucket, the volume's path
    /// components, `""` for single-root backends) and the key inside it.
    pub(crate) fn split_root(&self, path: &str) -> Result<(String, String)> {
        Ok(match self.inner.layout.root_components() {
            Some(1) => {
                let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
                if bucket.is_empty() {
                    return Err(Error::new(
                        ErrorKind::InvalidUrl,
                        "the URL names no bucket; write it as scheme://bucket/key",
                    )
                    .with_url(self.url(path)));
                }
                (bucket.to_string(), key.to_string())
            }
            Some(n) => {
                let mut parts = path.splitn(n + 1, '/');
                let root: Vec<&str> = parts.by_ref().take(n).collect();
                if root.len() < n || root.iter().any(|p| p.is_empty()) {
                    return Err(Error::new(
                        ErrorKind::InvalidUrl,
                        format!(
                            "the URL names no root: its first {n} path components pick where its files are (e.g. tclake://volume/<catalog>/<schema>/<volume>/<path>)"
                        ),
                    )
                    .with_url(self.url(path)));
                }
                (root.join("/"), parts.next().unwrap_or("").to_string())
            }
            None => (String::new(), path.trim_start_matches('/').to_string()),
        })
    }

    /// The stripped path of an operator entry path inside `loc`'s root.
    pub(crate) fn entry_path(&self, loc: &Location, entry: &str) -> String {
        let entry = entry.trim_matches('/');
        match self.inner.layout {
            Layout::Bucketed | Layout::Rooted(_) if entry.is_empty() => loc.root.clone(),
            Layout::Bucketed | Layout::Rooted(_) => format!("{}/{entry}", loc.root),
            Layout::SingleRoot => format!("/{entry}"),
        }
    }
}

fn strip_trailing_slash(path: &str) -> String {
    if path.len() > 1 {
        path.trim_end_matches('/').to_string()
    } else {
        path.to_string()
    }
}
