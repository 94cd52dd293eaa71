//! What a listing or `info` returns: plain data, shared by the filesystem
//! and the listing cache, and the collected (sorted) form of a listing.

use serde::Serialize;

/// Whether an entry is a file or a directory.
///
/// ```
/// assert_eq!(serde_json::to_string(&cairn_fs::FileType::Directory).unwrap(), "\"directory\"");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileType {
    /// A file (an object).
    File,
    /// A directory (on object stores, a common key prefix or a marker).
    Directory,
}

/// One entry, as fsspec's `info` describes it.
///
/// ```
/// let info = cairn_fs::FileInfo::directory("bucket/dir".into());
/// assert_eq!(info.size, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileInfo {
    /// The stripped path (`bucket/key`, `/abs/path`).
    pub name: String,
    /// Size in bytes (0 for directories).
    pub size: u64,
    /// File or directory.
    #[serde(rename = "type")]
    pub kind: FileType,
    /// Last modification time (RFC 3339), when the store reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// The store's entity tag, when it reports one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
}

/// An object's entity tag as a listing reports it: without its quotes.
pub(crate) fn etag_of(meta: &opendal::Metadata) -> Option<String> {
    meta.etag().map(|e| e.trim_matches('"').to_string())
}

impl FileInfo {
    /// A directory entry.
    ///
    /// ```
    /// assert_eq!(cairn_fs::FileInfo::directory("/d".into()).kind, cairn_fs::FileType::Directory);
    /// ```
    pub fn directory(name: String) -> Self {
        Self {
            name,
            size: 0,
            kind: FileType::Directory,
            last_modified: None,
            etag: None,
        }
    }

    pub(crate) fn from_metadata(name: String, meta: &opendal::Metadata) -> Self {
        if meta.is_dir() {
            return Self::directory(name);
        }
        Self {
            name,
            size: meta.content_length(),
            kind: FileType::File,
            last_modified: meta.last_modified().map(|t| t.to_string()),
            etag: etag_of(meta),
        }
    }

    /// Whether this is a directory.
    ///
    /// ```
    /// assert!(cairn_fs::FileInfo::directory("/d".into()).is_dir());
    /// ```
    pub fn is_dir(&self) -> bool {
        self.kind == FileType::Directory
    }
}

/// Totals of `du`.
///
/// ```
/// let du = cairn_fs::DiskUsage { bytes: 3, files: 1 };
/// assert_eq!(du.bytes, 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct DiskUsage {
    /// Sum of file sizes.
    pub bytes: u64,
    /// Number of files.
    pub files: u64,
}

/// One directory of a [`FileSystem::walk`](crate::FileSystem::walk) (fsspec's
/// `(dirpath, dirnames, filenames)`, with each entry's details).
///
/// ```
/// let step = cairn_fs::WalkStep { path: "bucket/d".into(), dirs: vec![], files: vec![] };
/// assert!(step.files.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WalkStep {
    /// The directory (stripped path).
    pub path: String,
    /// Its subdirectories, sorted by name.
    pub dirs: Vec<FileInfo>,
    /// Its files, sorted by name (for a walk of a file path, the file).
    pub files: Vec<FileInfo>,
}

/// A listing stream's entries, sorted by name: the collected form of every
/// streaming listing.
pub(crate) async fn collect_sorted(
    entries: futures::stream::BoxStream<'static, crate::error::Result<FileInfo>>,
) -> crate::error::Result<Vec<FileInfo>> {
    use futures::TryStreamExt;
    let mut out: Vec<FileInfo> = entries.try_collect().await?;
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}
