//! Reading and writing contents: `cat`, `cat_range`, `pipe`, streaming `open`.

use bytes::Bytes;
use futures::{AsyncRead, AsyncSeek, TryStreamExt};

use super::{FileSystem, Location};
use crate::backend::ConditionalWrites;
use crate::error::{Error, ErrorKind, Result, local_io_reason};

/// What names a streaming write's temporary file on local disk
/// (`.<name>.cairn-tmp-<pid>-<n>`, renamed to `<name>` on close).
const STAGING_MARK: &str = ".cairn-tmp-";

/// Whether `key` names the temporary file of a streaming write in progress,
/// which object-store views do not show (the object does not exist yet).
#[cfg(feature = "object-store")]
pub(crate) fn is_staging_file(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    name.starts_with('.') && name.contains(STAGING_MARK)
}

/// What `pipe` does when the target exists.
///
/// ```
/// assert_ne!(cairn_fs::WriteMode::Create, cairn_fs::WriteMode::Overwrite);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// Replace it.
    #[default]
    Overwrite,
    /// Fail with [`ErrorKind::AlreadyExists`].
    Create,
}

/// A file opened for reading: `futures::AsyncRead + AsyncSeek`, fetched in
/// chunks as it is read.
pub struct FileReader {
    inner: opendal::FuturesAsyncReader,
    size: u64,
}

impl FileReader {
    /// The size of the file when it was opened.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl AsyncRead for FileReader {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncSeek for FileReader {
    fn poll_seek(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        pos: std::io::SeekFrom,
    ) -> std::task::Poll<std::io::Result<u64>> {
        std::pin::Pin::new(&mut self.inner).poll_seek(cx, pos)
    }
}

/// A file opened for writing. Data is buffered into parts; a file larger than
/// one part is uploaded as a multipart object. Nothing is visible until
/// [`FileWriter::close`] succeeds; dropping it unclosed abandons the write.
///
/// On stores with native rename (local disks) the data goes to a temporary
/// file beside the target, renamed into place on close.
pub struct FileWriter {
    inner: opendal::Writer,
    url: String,
    path: String,
    fs: FileSystem,
    staged: Option<Staged>,
    /// The operator and key written, for the check after a lost answer.
    op: opendal::Operator,
    key: String,
    written: u64,
    opened: std::time::SystemTime,
}

/// A write staged in a temporary file of the same directory.
struct Staged {
    op: opendal::Operator,
    temp_key: String,
    final_key: String,
}

impl FileWriter {
    /// Appends `data`.
    pub async fn write(&mut self, data: Bytes) -> Result<()> {
        let len = data.len() as u64;
        self.inner.write(data).await.map_err(|e| self.map(e))?;
        self.written += len;
        Ok(())
    }

    /// Finishes the write and makes the file visible.
    pub async fn close(self) -> Result<()> {
        self.close_with_metadata().await.map(|_| ())
    }

    /// Finishes the write; the store's description of the new object when
    /// its answer carried one (an ETag on object stores).
    pub(crate) async fn close_with_metadata(mut self) -> Result<Option<opendal::Metadata>> {
        let mut written = None;
        match self.inner.close().await {
            Ok(meta) => {
                // Heard: what the completion hook remembered is not needed.
                self.fs.inner.uploads.take(&self.key);
                written = Some(meta)
            }
            // NoSuchUpload on a retried CompleteMultipartUpload: the first
            // attempt completed the object but its answer was lost (a
            // dropped connection), so the upload ID is gone. The object is
            // ours if it is there with our size and the multipart ETag our
            // parts give (the MD5 of their MD5s), written since this writer
            // opened. Without that ETag (no completion was sent), it is not.
            Err(e) if e.kind() == opendal::ErrorKind::NotFound && self.staged.is_none() => {
                if !self.completed_unheard().await {
                    return Err(self.map(e));
                }
                tracing::debug!(url = %self.url, "multipart upload completed by an attempt whose answer was lost");
            }
            Err(e) => return Err(self.map(e)),
        }
        if let Some(staged) = self.staged.take() {
            staged
                .op
                .rename(&staged.temp_key, &staged.final_key)
                .await
                .map_err(|e| self.map(e))?;
            written = None;
        }
        self.fs.cache().invalidate(&self.path);
        Ok(written)
    }

    /// Whether the object at this writer's key is the one it uploaded in
    /// parts: its size, the multipart ETag of this writer's completion
    /// request (so the same parts), written since open.
    async fn completed_unheard(&self) -> bool {
        let Some(expected) = self.fs.inner.uploads.take(&self.key) else {
            return false;
        };
        let Ok(meta) = self.op.stat(&self.key).await else {
            return false;
        };
        let etag = meta
            .etag()
            .map(|e| e.trim_matches('"').to_ascii_lowercase());
        let recent = meta.last_modified().is_some_and(|t| {
            std::time::SystemTime::from(t) + std::time::Duration::from_secs(60) >= self.opened
        });
        meta.content_length() == self.written && etag.as_deref() == Some(&expected) && recent
    }

    /// Abandons the write: aborts a multipart upload or removes the staged file.
    pub async fn abort(mut self) -> Result<()> {
        match self.staged.take() {
            Some(staged) => {
                let _ = self.inner.close().await;
                staged
                    .op
                    .delete(&staged.temp_key)
                    .await
                    .map_err(|e| self.map(e))
            }
            None => self.inner.abort().await.map_err(|e| self.map(e)),
        }
    }

    fn map(&self, err: opendal::Error) -> Error {
        self.fs.error_at(err, &self.url, None)
    }
}

/// Writes a local file so that it appears whole or not at all and survives a
/// power cut: a temporary file beside the target, fsync, then rename
/// (overwrite) or hard link (create-if-absent: EEXIST means it exists), then
/// fsync of the directory.
fn durable_local_write(target: &std::path::Path, data: &[u8], mode: WriteMode) -> Result<()> {
    // Another process may remove the (empty) directory between its creation
    // and the write (a checkpoint's clean-up removes its directory): make
    // it again and retry, a few times.
    let mut attempts = 0;
    loop {
        match durable_local_write_once(target, data, mode) {
            // Just created, the directory can only be missing if removed.
            Err(e) if attempts < 3 && e.kind() == ErrorKind::NotFound => {
                attempts += 1;
            }
            other => return other,
        }
    }
}

fn durable_local_write_once(target: &std::path::Path, data: &[u8], mode: WriteMode) -> Result<()> {
    use std::io::Write;
    let dir = target.parent().unwrap_or(std::path::Path::new("/"));
    if let Err(e) = create_dirs_durably(dir) {
        let (kind, why) = if dir.ancestors().any(|a| a.is_file()) {
            (ErrorKind::NotADirectory, "a parent of it is a file")
        } else {
            match local_io_reason(&e) {
                Some((kind, why)) => (kind, why),
                None => (ErrorKind::Io, "see the cause"),
            }
        };
        return Err(Error::new(
            kind,
            format!("cannot create the directory {}: {why}", dir.display()),
        )
        .with_source(e));
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{name}.cairn-tmp-{}-{}",
        std::process::id(),
        unique_suffix()
    ));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(data)?;
        file.sync_all()?;
        match mode {
            WriteMode::Overwrite => std::fs::rename(&temp, target),
            WriteMode::Create => std::fs::hard_link(&temp, target),
        }
    })();
    let _ = std::fs::remove_file(&temp);
    match result {
        Ok(()) => {
            std::fs::File::open(dir)?.sync_all()?;
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::new(
            ErrorKind::AlreadyExists,
            "the file exists and the write asked not to overwrite it",
        )),
        Err(e) => Err(e.into()),
    }
}

/// Creates `dir` and its missing ancestors, fsyncing the parent of each
/// directory it creates, so a file later made durable inside `dir` is not
/// lost with a directory entry still in a cache after a power cut. Returns
/// the parents it synced, deepest last.
pub(crate) fn create_dirs_durably(
    dir: &std::path::Path,
) -> std::io::Result<Vec<std::path::PathBuf>> {
    let missing: Vec<&std::path::Path> = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.is_dir())
        .collect();
    let mut synced = Vec::new();
    for new_dir in missing.into_iter().rev() {
        match std::fs::create_dir(new_dir) {
            Ok(()) => {}
            // Another writer made it meanwhile; its parent is synced by that writer.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && new_dir.is_dir() => continue,
            Err(e) => return Err(e),
        }
        if let Some(parent) = new_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(parent)?.sync_all()?;
            synced.push(parent.to_path_buf());
        }
    }
    Ok(synced)
}

/// The OpenDAL error inside an error of a reader's byte stream (which
/// wraps it in `std::io::Error`), so its kind maps as any other's.
fn opendal_error(err: std::io::Error) -> opendal::Error {
    let message = err.to_string();
    match err
        .into_inner()
        .map(|inner| inner.downcast::<opendal::Error>())
    {
        Some(Ok(inner)) => *inner,
        _ => opendal::Error::new(opendal::ErrorKind::Unexpected, message),
    }
}

/// Whether `op`'s store answers a suffix range (the last N bytes) itself,
/// in one request that also names the object's size. OpenDAL simulates it
/// elsewhere (local files) with a stat first.
fn reads_suffix_natively(op: &opendal::Operator) -> bool {
    matches!(op.info().scheme(), "s3" | "oss" | "gcs" | "memory")
}

/// A suffix that differs between calls in one process.
fn unique_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or_default();
    (nanos << 20) ^ NEXT.fetch_add(1, Ordering::Relaxed)
}

impl FileSystem {
    /// The whole contents of a file.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/cat-doc", "abc".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// assert_eq!(fs.cat("/cat-doc").await.unwrap(), "abc");
    /// # })
    /// ```
    pub async fn cat(&self, path: &str) -> Result<Bytes> {
        let loc = self.locate(path).await?;
        self.refuse_directory(&loc)?;
        if !reads_suffix_natively(&loc.op) {
            return self.read_whole(&loc).await;
        }
        // The last part first, as a suffix range: the one GET a small file
        // (the common case) needs, since a suffix longer than the file is
        // the whole file; and for a larger one, the answer names its size,
        // so the rest goes out as parallel ranged reads with no HEAD.
        let part = self.transfer().part_size.value as u64;
        let reader = loc
            .op
            .reader_with(&loc.key)
            .await
            .map_err(|e| self.error(e, &loc))?;
        let tail = match reader.read(opendal::BytesRange::suffix(part)).await {
            Ok(tail) => tail,
            // An empty object has no last bytes to give: some stores refuse
            // any range on it (416), others answer one OpenDAL cannot parse
            // (fake-gcs-server: `bytes 0--1/0`, an Unexpected error). A
            // plain GET settles it; its error, if any, is the one reported.
            Err(e)
                if matches!(
                    e.kind(),
                    opendal::ErrorKind::RangeNotSatisfied | opendal::ErrorKind::Unexpected
                ) =>
            {
                return self.read_whole(&loc).await;
            }
            Err(e) => return Err(self.error(e, &loc)),
        };
        let Some(meta) = reader.metadata().cloned() else {
            // The store did not say the size: the rest cannot be cut into
            // ranges, so read it all again in one GET (no store cairn
            // serves answers so).
            return self.read_whole(&loc).await;
        };
        let size = meta.content_length();
        let tail_len = tail.len() as u64;
        if tail_len != part.min(size) {
            // A body cut and resumed by the retry layer asks again for the
            // last N bytes less what arrived, which on a file shorter than
            // N is not the rest of it (the bytes would be wrong): read the
            // file whole in one GET instead, whose resumes go by offset.
            return self.read_whole(&loc).await;
        }
        if tail_len == size {
            return Ok(tail.to_bytes());
        }
        // The rest must be the same object: pinned to the ETag the tail
        // came with, where the store checks it, so an overwrite between the
        // two reads is an error rather than a mix of two objects.
        let rest = self
            .parallel_reader(&loc, size, meta.etag())
            .await?
            .into_bytes_stream(0..size - tail_len)
            .await
            .map_err(|e| self.error(e, &loc))?;
        let mut out = Vec::with_capacity(size as usize);
        self.copy_pieces(&loc, rest, &mut out).await?;
        for piece in tail {
            out.extend_from_slice(&piece);
        }
        if out.len() as u64 != size {
            return Err(self.changed_size(
                &loc,
                format!(
                    "read {} bytes of a file that was {size} bytes when its end was read: it changed while it was read; read it again",
                    out.len()
                ),
            ));
        }
        Ok(Bytes::from(out))
    }

    /// The whole of `loc` in one GET.
    async fn read_whole(&self, loc: &Location) -> Result<Bytes> {
        let buf = loc
            .op
            .read(&loc.key)
            .await
            .map_err(|e| self.error(e, loc))?;
        Ok(buf.to_bytes())
    }

    /// The whole file, whose size the caller knows (the listing that found
    /// it said so): a file larger than one part is read in parallel ranges
    /// of `part_size`, `max_concurrency` in flight ([`FileSystem::transfer`]),
    /// with no stat; a smaller one in one GET.
    /// A file found shorter than `size` is an error (it changed since it was
    /// listed).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/sized-cat-doc", "abc".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// let size = fs.ls("/").await.unwrap().into_iter().find(|i| i.name == "/sized-cat-doc").unwrap().size;
    /// assert_eq!(fs.cat_with_size("/sized-cat-doc", size).await.unwrap(), "abc");
    /// # })
    /// ```
    pub async fn cat_with_size(&self, path: &str, size: u64) -> Result<Bytes> {
        let loc = self.locate(path).await?;
        self.refuse_directory(&loc)?;
        let transfer = self.transfer();
        if size <= transfer.part_size.value as u64 {
            return self.read_range_at(&loc, 0, size).await;
        }
        let parts = self
            .parallel_reader(&loc, size, None)
            .await?
            .into_bytes_stream(0..size)
            .await
            .map_err(|e| self.error(e, &loc))?;
        let mut out = Vec::with_capacity(size as usize);
        self.copy_pieces(&loc, parts, &mut out).await?;
        if out.len() as u64 != size {
            return Err(self.changed_size(
                &loc,
                format!(
                    "read {} bytes where the listing said {size}: the file changed since it was listed; list it again",
                    out.len()
                ),
            ));
        }
        Ok(Bytes::from(out))
    }

    /// Bytes `start..end` of a file (`end` = None reads to the end). A range
    /// past the end is truncated, as fsspec's `cat_file` does; it may be empty.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/range-doc", "abcdef".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// assert_eq!(fs.cat_range("/range-doc", 2, Some(4)).await.unwrap(), "cd");
    /// assert_eq!(fs.cat_range("/range-doc", 4, Some(100)).await.unwrap(), "ef");
    /// assert_eq!(fs.cat_range("/range-doc", 10, None).await.unwrap(), "");
    /// # })
    /// ```
    pub async fn cat_range(&self, path: &str, start: u64, end: Option<u64>) -> Result<Bytes> {
        let loc = self.locate(path).await?;
        self.refuse_directory(&loc)?;
        if end.is_some_and(|e| e <= start) {
            return Ok(Bytes::new());
        }
        let Some(end) = end else {
            // To the end: one open-ended GET; a start at or past the end is
            // refused (416) by stores that do not answer it empty.
            return match loc.op.read_with(&loc.key).range(start..).await {
                Ok(buf) => Ok(buf.to_bytes()),
                Err(e) if e.kind() == opendal::ErrorKind::RangeNotSatisfied => Ok(Bytes::new()),
                Err(e) => Err(self.error(e, &loc)),
            };
        };
        // A bounded range needs the size to be cut at the end (a store
        // answers a range past the end short, which OpenDAL reads as an
        // error): a stat, then the read. Callers that know the size use
        // cat_range_with_size: one request.
        let meta = loc
            .op
            .stat(&loc.key)
            .await
            .map_err(|e| self.error(e, &loc))?;
        self.read_range_at(&loc, start, end.min(meta.content_length()))
            .await
    }

    /// [`FileSystem::cat_range`] of a file whose size the caller knows (the
    /// listing that found it said so): one request, no stat. A file found
    /// shorter than `size` is an error (it changed since it was listed).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/sized-doc", "abcdef".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// let size = fs.info("/sized-doc").await.unwrap().size;
    /// assert_eq!(fs.cat_range_with_size("/sized-doc", 2, Some(100), size).await.unwrap(), "cdef");
    /// assert_eq!(fs.cat_range_with_size("/sized-doc", 6, None, size).await.unwrap(), "");
    /// # })
    /// ```
    pub async fn cat_range_with_size(
        &self,
        path: &str,
        start: u64,
        end: Option<u64>,
        size: u64,
    ) -> Result<Bytes> {
        let loc = self.locate(path).await?;
        self.refuse_directory(&loc)?;
        self.read_range_at(&loc, start, end.map_or(size, |e| e.min(size)))
            .await
    }

    /// Bytes `start..end` (`end` None: to the end) of a file whose size the
    /// caller knows, as the pieces the store sent: no stat, and no copy
    /// into one buffer (the caller copies the pieces once, to where it
    /// needs them). A range longer than one part is read as parallel
    /// ranged requests of `part_size`, `max_concurrency` in flight
    /// ([`FileSystem::transfer`]), so one large read (pyarrow's coalesced
    /// Parquet ranges) is not one GET stream; a shorter one is one GET. A
    /// range past `size` is cut there. A file found shorter than `size` is
    /// an error (it changed since its size was found).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/pieces-doc", "abcdef".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// let size = fs.info("/pieces-doc").await.unwrap().size;
    /// let pieces = fs.read_range_with_size("/pieces-doc", 1, Some(100), size).await.unwrap();
    /// assert_eq!(pieces.to_bytes(), "bcdef");
    /// # })
    /// ```
    pub async fn read_range_with_size(
        &self,
        path: &str,
        start: u64,
        end: Option<u64>,
        size: u64,
    ) -> Result<opendal::Buffer> {
        let loc = self.locate(path).await?;
        self.refuse_directory(&loc)?;
        let end = end.map_or(size, |e| e.min(size));
        if start >= end {
            return Ok(opendal::Buffer::new());
        }
        let pieces = if end - start <= self.transfer().part_size.value as u64 {
            loc.op.read_with(&loc.key).range(start..end).await
        } else {
            self.parallel_reader(&loc, size, None)
                .await?
                .read(start..end)
                .await
        }
        .map_err(|e| self.error(e, &loc))?;
        if (pieces.len() as u64) != end - start {
            return Err(self.changed_size(
                &loc,
                format!(
                    "read {} bytes of {start}..{end} where the file was {size} bytes: it changed since its size was found; open it again",
                    pieces.len()
                ),
            ));
        }
        Ok(pieces)
    }

    /// A reader of `loc`, a file of `size` bytes, whose reads go out as
    /// ranged requests of `part_size`, `max_concurrency` in flight; with
    /// `etag`, each request is conditional on it (`If-Match`) where the
    /// store checks that on reads.
    async fn parallel_reader(
        &self,
        loc: &Location,
        size: u64,
        etag: Option<&str>,
    ) -> Result<opendal::Reader> {
        let transfer = self.transfer();
        let mut reader = loc
            .op
            .reader_with(&loc.key)
            .chunk(transfer.part_size.value)
            .concurrent(transfer.concurrency.value)
            .content_length_hint(size);
        if let Some(etag) = etag
            && loc.op.info().capability().read_with_if_match
        {
            reader = reader.if_match(etag);
        }
        reader.await.map_err(|e| self.error(e, loc))
    }

    /// Appends the pieces of `stream` (a read of `loc`) to `out` as each
    /// arrives, while the later ones are still in flight (gathering them
    /// first and copying at the end made the copy a serial tail of the
    /// read).
    async fn copy_pieces(
        &self,
        loc: &Location,
        mut stream: opendal::FuturesBytesStream,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        while let Some(piece) = stream
            .try_next()
            .await
            .map_err(|e| self.error(opendal_error(e), loc))?
        {
            out.extend_from_slice(&piece);
        }
        Ok(())
    }

    /// The error of a read that found `loc` another size than it was told.
    fn changed_size(&self, loc: &Location, message: String) -> Error {
        Error::new(ErrorKind::Other, message).with_url(self.url(&loc.path))
    }

    /// Bytes `start..end` of `loc`, `end` within the file: one GET.
    async fn read_range_at(&self, loc: &Location, start: u64, end: u64) -> Result<Bytes> {
        if start >= end {
            return Ok(Bytes::new());
        }
        let buf = loc
            .op
            .read_with(&loc.key)
            .range(start..end)
            .await
            .map_err(|e| self.error(e, loc))?;
        Ok(buf.to_bytes())
    }

    /// Writes `data` to a file in one request. With [`WriteMode::Create`] an
    /// existing file is an AlreadyExists error and is left untouched; this is
    /// atomic where the store supports create-if-absent (see
    /// [`FileSystem::conditional_writes`]). On local disk the file appears
    /// whole or not at all and is durable when this returns (temporary file,
    /// fsync, rename or link, fsync of the directory).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use cairn_fs::{ErrorKind, WriteMode};
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/pipe-doc", "1".into(), WriteMode::Create).await.unwrap();
    /// let err = fs.pipe("/pipe-doc", "2".into(), WriteMode::Create).await.unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    /// assert_eq!(fs.cat("/pipe-doc").await.unwrap(), "1");
    /// # })
    /// ```
    pub async fn pipe(&self, path: &str, data: Bytes, mode: WriteMode) -> Result<()> {
        let loc = self.locate(path).await?;
        self.pipe_at(&loc, data, mode).await.map(|_| ())
    }

    /// [`FileSystem::pipe`] that gives the written object's entity tag (as
    /// a listing reports it, without quotes) when the store's answer carried
    /// one; None on local disk and on stores that return none. A writer that
    /// later finds this tag on the object in a listing knows the object
    /// still holds what it wrote, without reading it.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use cairn_fs::WriteMode;
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// let tag = fs.pipe_tagged("/tag-doc", "1".into(), WriteMode::Create).await.unwrap();
    /// let listed = fs.info("/tag-doc").await.unwrap().etag;
    /// assert!(tag.is_none() || tag == listed);
    /// # })
    /// ```
    pub async fn pipe_tagged(
        &self,
        path: &str,
        data: Bytes,
        mode: WriteMode,
    ) -> Result<Option<String>> {
        let loc = self.locate(path).await?;
        let written = self.pipe_at(&loc, data, mode).await?;
        Ok(written.as_ref().and_then(crate::entry::etag_of))
    }

    /// `pipe` at a resolved location; the store's description of the new
    /// object when its answer carried one (not for local files).
    pub(crate) async fn pipe_at(
        &self,
        loc: &Location,
        data: Bytes,
        mode: WriteMode,
    ) -> Result<Option<opendal::Metadata>> {
        self.refuse_directory(loc)?;
        if let Some(root) = self.inner.backend.local_root() {
            let target = root.join(&loc.key);
            tokio::task::spawn_blocking(move || durable_local_write(&target, &data, mode))
                .await
                .expect("local write does not panic")
                .map_err(|e| e.with_url(self.url(&loc.path)))?;
            self.cache().invalidate(&loc.path);
            return Ok(None);
        }
        let written = match mode {
            WriteMode::Overwrite => loc
                .op
                .write(&loc.key, data)
                .await
                .map_err(|e| self.error(e, loc))?,
            WriteMode::Create => match self.conditional_mode(loc).await? {
                // The key alone is checked (one HEAD; `exists` would also
                // list the prefix when the key is absent), as a store's own
                // create-if-absent condition checks only the key.
                ConditionalWrites::Emulated => {
                    match loc.op.stat(&loc.key).await {
                        Ok(_) => return Err(self.already_exists(loc)),
                        Err(e) if e.kind() == opendal::ErrorKind::NotFound => {}
                        Err(e) => return Err(self.error(e, loc)),
                    }
                    loc.op
                        .write(&loc.key, data)
                        .await
                        .map_err(|e| self.error(e, loc))?
                }
                // A failed create-if-absent condition means the target exists.
                _ => loc
                    .op
                    .write_with(&loc.key, data)
                    .if_not_exists(true)
                    .await
                    .map_err(|e| match self.error(e, loc) {
                        e if e.kind() == ErrorKind::PreconditionFailed => self.already_exists(loc),
                        e => e,
                    })?,
            },
        };
        self.cache().invalidate(&loc.path);
        Ok(Some(written))
    }

    /// Replaces the object at `loc` only if its ETag is still `etag`
    /// (`If-Match`); a changed or missing object is a PreconditionFailed
    /// error and nothing is written. For stores whose capability says they
    /// honour `If-Match` on writes.
    #[cfg(feature = "object-store")]
    pub(crate) async fn pipe_if_match(
        &self,
        loc: &Location,
        data: Bytes,
        etag: &str,
    ) -> Result<Option<opendal::Metadata>> {
        self.refuse_directory(loc)?;
        let written = loc
            .op
            .write_with(&loc.key, data)
            .if_match(etag)
            .await
            .map_err(|e| match self.error(e, loc) {
                e if e.kind() == ErrorKind::NotFound => Error::new(
                    ErrorKind::PreconditionFailed,
                    "the object is gone, so it no longer has the version the write was conditional on",
                )
                .with_url(self.url(&loc.path)),
                e => e,
            })?;
        self.cache().invalidate(&loc.path);
        Ok(Some(written))
    }

    /// Opens a file for streaming reads (`futures::AsyncRead + AsyncSeek`).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::AsyncReadExt;
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.pipe("/open-doc", "stream".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
    /// let mut reader = fs.open_read("/open-doc").await.unwrap();
    /// let mut text = String::new();
    /// reader.read_to_string(&mut text).await.unwrap();
    /// assert_eq!(text, "stream");
    /// # })
    /// ```
    pub async fn open_read(&self, path: &str) -> Result<FileReader> {
        let loc = self.locate(path).await?;
        self.refuse_directory(&loc)?;
        let meta = loc
            .op
            .stat(&loc.key)
            .await
            .map_err(|e| self.error(e, &loc))?;
        if meta.is_dir() {
            return Err(self.is_a_directory(&loc));
        }
        let size = meta.content_length();
        let transfer = self.transfer();
        let reader = loc
            .op
            .reader_with(&loc.key)
            .chunk(transfer.part_size.value)
            .concurrent(transfer.concurrency.value)
            .await
            .map_err(|e| self.error(e, &loc))?;
        let inner = reader
            .into_futures_async_read(0..size)
            .await
            .map_err(|e| self.error(e, &loc))?;
        Ok(FileReader { inner, size })
    }

    /// Opens a file for streaming writes; see [`FileWriter`].
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// let mut w = fs.open_write("/write-doc").await.unwrap();
    /// w.write("a".into()).await.unwrap();
    /// w.write("b".into()).await.unwrap();
    /// w.close().await.unwrap();
    /// assert_eq!(fs.cat("/write-doc").await.unwrap(), "ab");
    /// # })
    /// ```
    pub async fn open_write(&self, path: &str) -> Result<FileWriter> {
        let loc = self.locate(path).await?;
        self.refuse_directory(&loc)?;
        let staged = (self.real_directories() && loc.op.info().capability().rename).then(|| {
            let (dir, name) = loc.key.rsplit_once('/').unwrap_or(("", &loc.key));
            let temp_name = format!(
                ".{name}{STAGING_MARK}{}-{}",
                std::process::id(),
                unique_suffix()
            );
            Staged {
                op: loc.op.clone(),
                temp_key: if dir.is_empty() {
                    temp_name
                } else {
                    format!("{dir}/{temp_name}")
                },
                final_key: loc.key.clone(),
            }
        });
        let write_key = staged.as_ref().map_or(&loc.key, |s| &s.temp_key);
        let transfer = self.transfer();
        let inner = loc
            .op
            .writer_with(write_key)
            .chunk(transfer.part_size.value)
            .concurrent(transfer.concurrency.value)
            .await
            .map_err(|e| self.error(e, &loc))?;
        Ok(FileWriter {
            inner,
            url: self.url(&loc.path),
            path: loc.path.clone(),
            fs: self.clone(),
            staged,
            op: loc.op.clone(),
            key: loc.key.clone(),
            written: 0,
            opened: std::time::SystemTime::now(),
        })
    }

    /// Streams one file from `loc` on `self` into `dst` on `dst_fs`; with
    /// its `size` known, the read starts without a stat.
    pub(crate) async fn stream_file(
        &self,
        loc: &Location,
        dst_fs: &FileSystem,
        dst: &Location,
        size: Option<u64>,
        progress: Option<&super::copy::TransferProgress>,
    ) -> Result<()> {
        let (read, write) = (self.transfer(), dst_fs.transfer());
        let mut reader = loc
            .op
            .reader_with(&loc.key)
            .chunk(read.part_size.value)
            .concurrent(read.concurrency.value);
        if let Some(size) = size {
            reader = reader.content_length_hint(size);
        }
        let reader = reader.await.map_err(|e| self.error(e, loc))?;
        let mut stream = reader
            .into_stream(..)
            .await
            .map_err(|e| self.error(e, loc))?;
        let mut writer = dst
            .op
            .writer_with(&dst.key)
            .chunk(write.part_size.value)
            .concurrent(write.concurrency.value)
            .await
            .map_err(|e| dst_fs.error(e, dst))?;
        while let Some(buf) = stream.try_next().await.map_err(|e| self.error(e, loc))? {
            let len = buf.len() as u64;
            if let Err(e) = writer.write(buf).await {
                let _ = writer.abort().await;
                return Err(dst_fs.error(e, dst));
            }
            if let Some(report) = progress {
                report(len);
            }
        }
        writer.close().await.map_err(|e| dst_fs.error(e, dst))?;
        Ok(())
    }

    fn refuse_directory(&self, loc: &Location) -> Result<()> {
        if loc.key.is_empty() {
            return Err(self.is_a_directory(loc));
        }
        Ok(())
    }

    fn is_a_directory(&self, loc: &Location) -> Error {
        Error::new(
            ErrorKind::IsADirectory,
            "the path is a bucket or directory; name a file inside it",
        )
        .with_url(self.url(&loc.path))
    }

    fn already_exists(&self, loc: &Location) -> Error {
        Error::new(
            ErrorKind::AlreadyExists,
            "the file exists and the write asked not to overwrite it",
        )
        .with_url(self.url(&loc.path))
    }
}

#[cfg(test)]
mod durable_dirs {
    #[test]
    fn every_created_directory_has_its_parent_synced_up_to_the_existing_root() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("a/b/c");
        let synced = super::create_dirs_durably(&deep).unwrap();
        assert!(deep.is_dir());
        assert_eq!(
            synced,
            vec![
                root.path().to_path_buf(),
                root.path().join("a"),
                root.path().join("a/b")
            ]
        );
        // Nothing new to create: nothing to sync.
        assert!(super::create_dirs_durably(&deep).unwrap().is_empty());
        std::fs::write(root.path().join("file"), b"x").unwrap();
        assert!(super::create_dirs_durably(&root.path().join("file/sub")).is_err());
    }
}
