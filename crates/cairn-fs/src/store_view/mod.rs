//! [`ObjectStoreView`]: a cairn [`FileSystem`] rooted at a bucket, volume
//! or directory, seen as an [`object_store::ObjectStore`], so the Rust data
//! ecosystem (parquet's `ParquetObjectReader`, DataFusion, delta-rs) reads
//! and writes cairn URLs with cairn's options, environment, hooks, retries
//! and tclake volumes.
//!
//! Requests per call: `head` 1; `get`/`get_opts` 2 (a HEAD for the size and
//! the conditions, then one GET of the range, pinned to the ETag where the
//! store supports `If-Match` on reads), `get_range` too (object_store
//! routes it through `get_opts`); `get_ranges` 1 HEAD plus one GET per
//! range; `put` 1 (create-if-absent emulated stores: 2); multipart uploads
//! create + one per 8 MiB part + complete; `list` one per page of 1,000
//! keys, streamed as pages arrive; `delete` 1; `copy` 1 (server side).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    Attributes, CopyMode, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload,
    PutResult,
};

use crate::error::{Error, ErrorKind};
use crate::filesystem::{FileSystem, Location, WriteMode, is_staging_file};
use crate::options::StorageOptions;

mod convert;
mod upload;

use convert::{
    check_conditions, not_found, not_implemented, object_meta, refuse_attributes, to_store_error,
};
use upload::Upload;

/// What object_store's errors name as the store.
const STORE: &str = "cairn";

/// Deletes in flight at once in `delete_stream`.
const DELETE_CONCURRENCY: usize = 16;

/// A [`FileSystem`] rooted at a bucket, a tclake volume or a directory,
/// implementing [`object_store::ObjectStore`]. Object paths are keys under
/// the root; cloning is cheap.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use object_store::{ObjectStore, ObjectStoreExt, path::Path};
/// let store = cairn_fs::ObjectStoreView::from_url("memory:///lake", &cairn_fs::StorageOptions::new()).unwrap();
/// store.put(&Path::from("a/b.txt"), "hello".into()).await.unwrap();
/// let bytes = store.get(&Path::from("a/b.txt")).await.unwrap().bytes().await.unwrap();
/// assert_eq!(bytes, "hello");
/// # })
/// ```
#[derive(Debug, Clone)]
pub struct ObjectStoreView {
    fs: FileSystem,
    /// The stripped path of the root (`bucket`, `bucket/prefix`, `/abs/dir`).
    root: String,
}

impl std::fmt::Display for ObjectStoreView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ObjectStoreView({})", self.fs.url(&self.root))
    }
}

impl ObjectStoreView {
    /// A view of `fs` rooted at `root` (a URL or a stripped path naming a
    /// bucket, a volume or a directory).
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("s3", &cairn_fs::StorageOptions::new()).unwrap();
    /// let view = cairn_fs::ObjectStoreView::new(fs, "s3://bucket/tables").unwrap();
    /// assert_eq!(view.to_string(), "ObjectStoreView(s3://bucket/tables)");
    /// assert!(cairn_fs::ObjectStoreView::new(view.filesystem().clone(), "s3://").is_err());
    /// ```
    pub fn new(fs: FileSystem, root: &str) -> crate::Result<Self> {
        let root = fs.strip(root)?;
        fs.split_root(&root)?;
        Ok(Self { fs, root })
    }

    /// The view rooted at `url`, with the filesystem serving it.
    ///
    /// ```
    /// let view = cairn_fs::ObjectStoreView::from_url("/tmp", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(view.filesystem().protocol(), "file");
    /// ```
    pub fn from_url(url: &str, options: &StorageOptions) -> crate::Result<Self> {
        let (fs, _) = FileSystem::from_url(url, options)?;
        Self::new(fs, url)
    }

    /// The filesystem under this view.
    ///
    /// ```
    /// let view = cairn_fs::ObjectStoreView::from_url("memory:///v", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(view.filesystem().protocol(), "memory");
    /// ```
    pub fn filesystem(&self) -> &FileSystem {
        &self.fs
    }

    /// The stripped path of an object path under the root.
    fn full_path(&self, location: &Path) -> String {
        let root = self.root.trim_end_matches('/');
        match location.as_ref() {
            "" => self.root.clone(),
            key => format!("{root}/{key}"),
        }
    }

    async fn locate(&self, location: &Path) -> object_store::Result<Location> {
        self.fs
            .locate(&self.full_path(location))
            .await
            .map_err(|e| to_store_error(e, location))
    }

    /// The object path of an operator key found under the root `loc`.
    fn object_path(root: &Location, key: &str) -> object_store::Result<Path> {
        let relative = if root.key.is_empty() {
            key
        } else {
            key.strip_prefix(&root.key)
                .and_then(|k| k.strip_prefix('/'))
                .unwrap_or(key)
        };
        Path::parse(relative.trim_matches('/'))
            .map_err(|source| object_store::Error::InvalidPath { source })
    }

    /// The metadata of the object at `loc`; a directory is NotFound, as
    /// object stores have none.
    async fn head_at(
        &self,
        loc: &Location,
        location: &Path,
        version: Option<&str>,
    ) -> object_store::Result<ObjectMeta> {
        if loc.key.is_empty() {
            return Err(not_found(location, "the root is not an object"));
        }
        let mut stat = loc.op.stat_with(&loc.key);
        if let Some(version) = version {
            stat = stat.version(version);
        }
        let meta = stat
            .await
            .map_err(|e| to_store_error(self.fs.error(e, loc), location))?;
        if meta.is_dir() {
            return Err(not_found(location, "a directory is not an object"));
        }
        Ok(object_meta(&loc.op, location.clone(), &meta))
    }

    async fn put_at(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        refuse_attributes(&opts.attributes, &opts.tags)?;
        let loc = self.locate(location).await?;
        let data = Bytes::from(payload);
        let written = match opts.mode {
            PutMode::Overwrite => self.fs.pipe_at(&loc, data, WriteMode::Overwrite).await,
            PutMode::Create => self.fs.pipe_at(&loc, data, WriteMode::Create).await,
            PutMode::Update(version) => {
                // A store that ignores create-if-absent (the probe) is not
                // trusted with If-Match either: an ignored condition would
                // overwrite another writer's version.
                let honoured = loc.op.info().capability().write_with_if_match
                    && self
                        .fs
                        .conditional_mode(&loc)
                        .await
                        .map_err(|e| to_store_error(e, location))?
                        == crate::backend::ConditionalWrites::Native;
                if !honoured {
                    return Err(not_implemented(
                        "put_opts with PutMode::Update on this store",
                    ));
                }
                let Some(etag) = version.e_tag else {
                    return Err(object_store::Error::Generic {
                        store: STORE,
                        source: "PutMode::Update needs the object's ETag".into(),
                    });
                };
                self.fs.pipe_if_match(&loc, data, &etag).await
            }
        };
        let written = written.map_err(|e| to_store_error(e, location))?;
        let meta = match written {
            Some(meta) if meta.etag().is_some() => object_meta(&loc.op, location.clone(), &meta),
            // Local writes go through a temporary file: ask the file itself.
            _ => self.head_at(&loc, location, None).await?,
        };
        Ok(PutResult {
            e_tag: meta.e_tag,
            version: meta.version,
            extensions: Default::default(),
        })
    }
}

#[async_trait::async_trait]
impl ObjectStore for ObjectStoreView {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.put_at(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        refuse_attributes(&opts.attributes, &opts.tags)?;
        let writer = self
            .fs
            .open_write(&self.full_path(location))
            .await
            .map_err(|e| to_store_error(e, location))?;
        Ok(Box::new(Upload::start(writer, location.clone())))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let loc = self.locate(location).await?;
        let meta = self
            .head_at(&loc, location, options.version.as_deref())
            .await?;
        check_conditions(&meta, &options, location)?;
        let range = match &options.range {
            Some(range) => range
                .as_range(meta.size)
                .map_err(|e| object_store::Error::Generic {
                    store: STORE,
                    source: Box::new(e),
                })?,
            None => 0..meta.size,
        };
        let payload = if options.head || range.is_empty() {
            stream::empty().boxed()
        } else {
            self.read_stream(
                &loc,
                location,
                &meta,
                options.version.as_deref(),
                range.clone(),
            )
            .await?
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(payload),
            meta,
            range,
            attributes: Attributes::new(),
            extensions: Default::default(),
        })
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        // One HEAD for the size, then one GET per range.
        let loc = self.locate(location).await?;
        let size = self.head_at(&loc, location, None).await?.size;
        let path = self.full_path(location);
        futures::future::try_join_all(ranges.iter().map(|range| {
            let path = &path;
            async move {
                if range.start > range.end || range.end > size {
                    return Err(object_store::Error::Generic {
                        store: STORE,
                        source: format!("range {range:?} is outside the object's {size} bytes")
                            .into(),
                    });
                }
                self.fs
                    .cat_range_with_size(path, range.start, Some(range.end), size)
                    .await
                    .map_err(|e| to_store_error(e, location))
            }
        }))
        .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let view = self.clone();
        locations
            .map(move |location| {
                let view = view.clone();
                async move {
                    let location = location?;
                    let loc = view.locate(&location).await?;
                    if loc.key.is_empty() {
                        return Err(not_found(&location, "the root is not an object"));
                    }
                    loc.op
                        .delete(&loc.key)
                        .await
                        .map_err(|e| to_store_error(view.fs.error(e, &loc), &location))?;
                    view.fs.cache().invalidate(&loc.path);
                    Ok(location)
                }
            })
            .buffered(DELETE_CONCURRENCY)
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let view = self.clone();
        let prefix = prefix.cloned().unwrap_or_default();
        stream::once(async move {
            let root = view.locate(&Path::default()).await?;
            let dir = view.locate(&prefix).await?;
            let lister = dir
                .op
                .lister_with(&dir.dir_key())
                .recursive(true)
                .await
                .map_err(|e| to_store_error(view.fs.error(e, &dir), &prefix))?;
            let (fs, listed) = (view.fs.clone(), prefix.clone());
            let entries = lister
                .map_err(move |e| to_store_error(fs.error(e, &dir), &listed))
                .try_filter(|entry| {
                    std::future::ready(!entry.metadata().is_dir() && !is_staging_file(entry.path()))
                })
                .and_then(move |entry| {
                    let (root, fs) = (root.clone(), view.fs.clone());
                    async move {
                        let location = Self::object_path(&root, entry.path())?;
                        let meta = entry.metadata();
                        // Local directories list names only: the size needs a stat.
                        if meta.content_length() == 0 && fs.real_directories() {
                            let full = root
                                .op
                                .stat(entry.path())
                                .await
                                .map_err(|e| to_store_error(fs.error(e, &root), &location))?;
                            return Ok(object_meta(&root.op, location, &full));
                        }
                        Ok(object_meta(&root.op, location, meta))
                    }
                });
            Ok::<_, object_store::Error>(entries)
        })
        .try_flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let prefix = prefix.cloned().unwrap_or_default();
        let root = self.locate(&Path::default()).await?;
        let dir = self.locate(&prefix).await?;
        let dir_key = dir.dir_key();
        let entries = dir
            .op
            .list(&dir_key)
            .await
            .map_err(|e| to_store_error(self.fs.error(e, &dir), &prefix))?;
        let mut result = ListResult {
            common_prefixes: Vec::new(),
            objects: Vec::new(),
            extensions: Default::default(),
        };
        for entry in entries {
            if entry.path() == dir_key
                || entry.path().trim_matches('/').is_empty()
                || is_staging_file(entry.path())
            {
                continue;
            }
            let location = Self::object_path(&root, entry.path())?;
            if entry.metadata().is_dir() {
                result.common_prefixes.push(location);
            } else if entry.metadata().content_length() == 0 && self.fs.real_directories() {
                result.objects.push(
                    self.head_at(&self.locate(&location).await?, &location, None)
                        .await?,
                );
            } else {
                result
                    .objects
                    .push(object_meta(&root.op, location, entry.metadata()));
            }
        }
        result.common_prefixes.sort();
        result.objects.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(result)
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        let source = self.locate(from).await?;
        self.head_at(&source, from, None).await?;
        match options.mode {
            CopyMode::Overwrite => self
                .fs
                .copy_file(
                    &self.full_path(from),
                    &self.fs,
                    &self.full_path(to),
                    None,
                    None,
                )
                .await
                .map_err(|e| to_store_error(e, from)),
            // No store copies create-if-absent; the bytes go through a
            // create-if-absent write instead (atomic where the store
            // honours create-if-absent, see FileSystem::conditional_writes).
            CopyMode::Create => {
                let data = self
                    .fs
                    .cat(&self.full_path(from))
                    .await
                    .map_err(|e| to_store_error(e, from))?;
                let target = self.locate(to).await?;
                self.fs
                    .pipe_at(&target, data, WriteMode::Create)
                    .await
                    .map(|_| ())
                    .map_err(|e| to_store_error(e, to))
            }
        }
    }
}

impl ObjectStoreView {
    /// The bytes `range` of the object `meta` describes, as a stream; pinned
    /// to its ETag where the store checks `If-Match` on reads, so a
    /// concurrent overwrite is a Precondition error, never mixed contents.
    async fn read_stream(
        &self,
        loc: &Location,
        location: &Path,
        meta: &ObjectMeta,
        version: Option<&str>,
        range: Range<u64>,
    ) -> object_store::Result<BoxStream<'static, object_store::Result<Bytes>>> {
        let mut reader = loc.op.reader_with(&loc.key);
        if let Some(etag) = &meta.e_tag
            && loc.op.info().capability().read_with_if_match
        {
            reader = reader.if_match(etag);
        }
        // A version is sent only when the caller named one: GCS reports a
        // generation for every object but reads by version only on demand.
        if let Some(version) = version {
            reader = reader.version(version);
        }
        let reader = reader
            .chunk(self.fs.transfer().part_size.value)
            .concurrent(self.fs.transfer().concurrency.value)
            .await
            .map_err(|e| to_store_error(self.fs.error(e, loc), location))?;
        let fs = self.fs.clone();
        let (loc, location) = (loc.clone(), location.clone());
        let stream = reader
            .into_bytes_stream(range)
            .await
            .map_err(|e| to_store_error(self.fs.error(e, &loc), &location))?;
        Ok(stream
            .map_err(move |e: std::io::Error| {
                // OpenDAL's stream errors are its own errors inside io::Error.
                let err = match e
                    .into_inner()
                    .map(|inner| inner.downcast::<opendal::Error>())
                {
                    Some(Ok(opendal)) => fs.error(*opendal, &loc),
                    Some(Err(other)) => Error::new(ErrorKind::Other, "the read failed")
                        .with_url(fs.url(&loc.path))
                        .with_source(std::io::Error::other(other)),
                    None => {
                        Error::new(ErrorKind::Other, "the read failed").with_url(fs.url(&loc.path))
                    }
                };
                to_store_error(err, &location)
            })
            .boxed())
    }
}

/// A handle that keeps the trait object alive for callers that want one.
///
/// ```
/// let store = cairn_fs::ObjectStoreView::from_url("memory:///d", &cairn_fs::StorageOptions::new()).unwrap();
/// let dynamic: std::sync::Arc<dyn object_store::ObjectStore> = store.into_dyn();
/// assert!(dynamic.to_string().starts_with("ObjectStoreView"));
/// ```
impl ObjectStoreView {
    /// This view as a shared trait object (`Arc<dyn ObjectStore>`), the
    /// form DataFusion's object store registry and delta-rs take.
    pub fn into_dyn(self) -> Arc<dyn ObjectStore> {
        Arc::new(self)
    }
}
