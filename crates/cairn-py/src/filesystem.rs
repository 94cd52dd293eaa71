//! `NativeFileSystem`: one cairn filesystem (a protocol and its storage
//! options) for `cairn.fsspec.CairnFileSystem`.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use cairn_fs::{FileInfo, FileSystem, FileSystemBuilder, StorageOptions, WriteMode};
use futures::StreamExt;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::to_py;
use crate::runtime::wait;
use crate::writer::NativeWriter;

type Entry = (String, u64, &'static str, Option<String>, Option<String>);

/// Requests in flight at once in the batch calls (`cat_many`,
/// `cat_ranges`, `pipe_many`).
const IN_FLIGHT: usize = 32;

/// The outputs of `operations`, run `IN_FLIGHT` at a time, in their order.
async fn in_order<F: std::future::Future>(operations: impl Iterator<Item = F>) -> Vec<F::Output> {
    futures::stream::iter(operations)
        .buffered(IN_FLIGHT)
        .collect()
        .await
}

/// Each outcome of a batch call as Python gets it: `ok(value)`, or the
/// exception its operation raised (not raised here).
fn outcomes<T>(
    py: Python<'_>,
    results: Vec<cairn_fs::Result<T>>,
    ok: impl Fn(T) -> PyResult<Py<PyAny>>,
) -> PyResult<Vec<Py<PyAny>>> {
    results
        .into_iter()
        .map(|r| match r {
            Ok(value) => ok(value),
            Err(e) => Ok(to_py(e).into_value(py).into_any()),
        })
        .collect()
}

/// The store's pieces of a read copied once, into a new `bytes`.
fn pieces_to_bytes(
    py: Python<'_>,
    pieces: cairn_fs::opendal::Buffer,
) -> PyResult<Bound<'_, PyBytes>> {
    PyBytes::new_with(py, pieces.len(), |out| {
        let mut at = 0;
        for piece in pieces {
            out[at..at + piece.len()].copy_from_slice(&piece);
            at += piece.len();
        }
        Ok(())
    })
}

fn entry(info: FileInfo) -> Entry {
    let kind = if info.is_dir() { "directory" } else { "file" };
    (info.name, info.size, kind, info.last_modified, info.etag)
}

/// One cairn filesystem: a protocol and its storage options.
///
/// Its operators and HTTP connection pools belong to the process that made
/// them: after `fork()` (multiprocessing, PyTorch DataLoader workers), a
/// child using the parent's would wait on connections whose tasks ran in
/// the parent. So the filesystem is built again, from the same settings,
/// the first time a new process uses it (as the runtime is).
#[pyclass(module = "cairn._native", frozen)]
pub(crate) struct NativeFileSystem {
    builder: FileSystemBuilder<'static>,
    current: Mutex<(u32, FileSystem)>,
}

impl NativeFileSystem {
    /// The filesystem for this process.
    pub(crate) fn fs(&self) -> FileSystem {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        if current.0 != pid {
            // Built once already from the same settings, so it builds again.
            let fresh = self
                .builder
                .clone()
                .build()
                .expect("the settings built before");
            // The parent's operators hold tasks of a runtime this process
            // does not run: dropping them could wait for those forever.
            std::mem::forget(std::mem::replace(&mut current.1, fresh));
            current.0 = pid;
        }
        current.1.clone()
    }
}

#[pymethods]
impl NativeFileSystem {
    /// `options_json`: `{"<protocol>": {...}}`; `checkpoint`: the preset for
    /// checkpoint storage (listing cache off).
    #[new]
    fn new(protocol: &str, options_json: &str, checkpoint: bool) -> PyResult<Self> {
        let value: serde_json::Value = serde_json::from_str(options_json)
            .map_err(|e| PyValueError::new_err(format!("storage options are not JSON: {e}")))?;
        let options = StorageOptions::from_json(value).map_err(to_py)?;
        let mut builder = FileSystemBuilder::new(protocol).options(options);
        if checkpoint {
            builder = builder.for_checkpoints();
        }
        let fs = builder.clone().build().map_err(to_py)?;
        Ok(Self {
            builder,
            current: Mutex::new((std::process::id(), fs)),
        })
    }

    /// The canonical protocol (`s3` for `s3a`).
    fn protocol(&self) -> String {
        self.fs().protocol().to_string()
    }

    /// The stripped path of a URL or path (`bucket/key`, `/abs/path`).
    fn strip(&self, path: &str) -> PyResult<String> {
        self.fs().strip(path).map_err(to_py)
    }

    /// The URL of a stripped path.
    fn url(&self, path: &str) -> String {
        self.fs().url(path)
    }

    /// What pyarrow's own S3 client needs to read this filesystem's
    /// objects as cairn does (`FileSystem::s3_read_settings`), as a dict,
    /// or None where that client would not read them the same way.
    fn s3_read_settings<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(s) = self.fs().s3_read_settings() else {
            return Ok(None);
        };
        let settings = PyDict::new(py);
        settings.set_item("endpoint", s.endpoint)?;
        settings.set_item("region", s.region)?;
        settings.set_item("virtual_host", s.virtual_host)?;
        settings.set_item("anonymous", s.anonymous)?;
        settings.set_item("key", s.key)?;
        settings.set_item("secret", s.secret)?;
        settings.set_item("token", s.token)?;
        settings.set_item("max_attempts", s.max_attempts)?;
        settings.set_item("request_timeout", s.request_timeout.as_secs_f64())?;
        Ok(Some(settings))
    }

    fn info(&self, py: Python<'_>, path: &str) -> PyResult<Entry> {
        wait(py, self.fs().info(path)).map(entry).map_err(to_py)
    }

    fn ls(&self, py: Python<'_>, path: &str) -> PyResult<Vec<Entry>> {
        let found = wait(py, self.fs().ls(path)).map_err(to_py)?;
        Ok(found.into_iter().map(entry).collect())
    }

    #[pyo3(signature = (path, maxdepth=None, withdirs=false))]
    fn find(
        &self,
        py: Python<'_>,
        path: &str,
        maxdepth: Option<usize>,
        withdirs: bool,
    ) -> PyResult<Vec<Entry>> {
        let found = wait(
            py,
            self.fs().find_with(
                path,
                cairn_fs::FindOptions::new()
                    .max_depth_opt(maxdepth)
                    .with_dirs(withdirs),
            ),
        )
        .map_err(to_py)?;
        Ok(found.into_iter().map(entry).collect())
    }

    /// Bytes `start..end` (`end` None: to the end) of a file.
    #[pyo3(signature = (path, start=None, end=None))]
    fn cat_file<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        start: Option<u64>,
        end: Option<u64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let data = match (start, end) {
            (None | Some(0), None) => wait(py, self.fs().cat(path)),
            (start, end) => wait(py, self.fs().cat_range(path, start.unwrap_or(0), end)),
        }
        .map_err(to_py)?;
        Ok(PyBytes::new(py, &data))
    }

    /// Bytes `start..end` (`end` None: to the end) of a file of `size`
    /// bytes, as found when it was opened: no stat, a range longer than
    /// one part read in parallel pieces, the pieces copied once into the
    /// `bytes` returned.
    #[pyo3(signature = (path, start, end, size))]
    fn read_range<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        start: u64,
        end: Option<u64>,
        size: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let pieces =
            wait(py, self.fs().read_range_with_size(path, start, end, size)).map_err(to_py)?;
        pieces_to_bytes(py, pieces)
    }

    /// Byte ranges `(path, start, end)` (`end` None: to the end) of files,
    /// fetched concurrently: one size lookup a file, then each range as
    /// `read_range` reads it. Each a `bytes`, or the exception its read
    /// raised.
    fn cat_ranges(
        &self,
        py: Python<'_>,
        ranges: Vec<(String, u64, Option<u64>)>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let fs = self.fs();
        let results: Vec<cairn_fs::Result<cairn_fs::opendal::Buffer>> = wait(py, async move {
            let mut files: Vec<String> = ranges.iter().map(|r| r.0.clone()).collect();
            files.sort_unstable();
            files.dedup();
            let sizes: HashMap<String, u64> = futures::stream::iter(files)
                .map(|path| {
                    let fs = fs.clone();
                    async move { fs.info(&path).await.ok().map(|i| (path, i.size)) }
                })
                .buffer_unordered(IN_FLIGHT)
                .filter_map(std::future::ready)
                .collect()
                .await;
            let reads = ranges.into_iter().map(|(path, start, end)| {
                let fs = fs.clone();
                let size = sizes.get(&path).copied();
                async move {
                    match size {
                        Some(size) => fs.read_range_with_size(&path, start, end, size).await,
                        // The lookup failed: the read says why, in its own error.
                        None => fs
                            .cat_range(&path, start, end)
                            .await
                            .map(cairn_fs::opendal::Buffer::from),
                    }
                }
            });
            in_order(reads).await
        });
        outcomes(py, results, |pieces| {
            Ok(pieces_to_bytes(py, pieces)?.into_any().unbind())
        })
    }

    /// Many whole files at once, fetched concurrently: each a `bytes`, or
    /// the exception its read raised.
    fn cat_many<'py>(&self, py: Python<'py>, paths: Vec<String>) -> PyResult<Vec<Py<PyAny>>> {
        let fs = self.fs().clone();
        let results: Vec<cairn_fs::Result<Bytes>> = wait(py, async move {
            let reads = paths.into_iter().map(move |p| {
                let fs = fs.clone();
                async move { fs.cat(&p).await }
            });
            in_order(reads).await
        });
        outcomes(py, results, |data| {
            Ok(PyBytes::new(py, &data).into_any().unbind())
        })
    }

    /// Opens `path` for a streaming write (see `NativeWriter`).
    fn open_write(&self, py: Python<'_>, path: &str) -> PyResult<NativeWriter> {
        let writer = wait(py, self.fs().open_write(path)).map_err(to_py)?;
        Ok(NativeWriter::new(self.fs().url(path), writer))
    }

    /// Writes many whole files at once, concurrently: for each, `None` or
    /// the exception its write raised.
    fn pipe_many(&self, py: Python<'_>, files: Vec<(String, Vec<u8>)>) -> PyResult<Vec<Py<PyAny>>> {
        let fs = self.fs().clone();
        let results: Vec<cairn_fs::Result<()>> = wait(py, async move {
            let writes = files.into_iter().map(move |(p, data)| {
                let fs = fs.clone();
                async move { fs.pipe(&p, Bytes::from(data), WriteMode::Overwrite).await }
            });
            in_order(writes).await
        });
        outcomes(py, results, |()| Ok(py.None()))
    }

    /// Writes a whole file in one request; `exclusive`: fail if it exists.
    #[pyo3(signature = (path, data, exclusive=false))]
    fn pipe_file(
        &self,
        py: Python<'_>,
        path: &str,
        data: Vec<u8>,
        exclusive: bool,
    ) -> PyResult<()> {
        let mode = if exclusive {
            WriteMode::Create
        } else {
            WriteMode::Overwrite
        };
        wait(py, self.fs().pipe(path, Bytes::from(data), mode)).map_err(to_py)
    }

    #[pyo3(signature = (paths, recursive=false, maxdepth=None))]
    fn rm(
        &self,
        py: Python<'_>,
        paths: Vec<String>,
        recursive: bool,
        maxdepth: Option<usize>,
    ) -> PyResult<()> {
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        wait(
            py,
            self.fs().rm_list(
                &refs,
                cairn_fs::TreeOptions::new()
                    .recursive(recursive)
                    .max_depth_opt(maxdepth),
            ),
        )
        .map_err(to_py)
    }

    fn mkdir(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        wait(py, self.fs().mkdir(path)).map_err(to_py)
    }

    fn rmdir(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        wait(py, self.fs().rmdir(path)).map_err(to_py)
    }

    #[pyo3(signature = (src, dst, recursive=false))]
    fn cp(&self, py: Python<'_>, src: &str, dst: &str, recursive: bool) -> PyResult<()> {
        wait(
            py,
            self.fs()
                .cp_with(src, dst, cairn_fs::TreeOptions::new().recursive(recursive)),
        )
        .map_err(to_py)
    }

    #[pyo3(signature = (src, dst, recursive=false))]
    fn mv(&self, py: Python<'_>, src: &str, dst: &str, recursive: bool) -> PyResult<()> {
        wait(
            py,
            self.fs()
                .mv_with(src, dst, cairn_fs::TreeOptions::new().recursive(recursive)),
        )
        .map_err(to_py)
    }

    /// Moves the one file `src` to `dst` with no lookup first on an object
    /// store (a copy and a delete, or a rename); FileNotFoundError when
    /// `src` is no file. `size`, the file's size when the caller wrote it,
    /// spares the copy its HEAD on S3.
    #[pyo3(signature = (src, dst, size=None))]
    fn mv_file(&self, py: Python<'_>, src: &str, dst: &str, size: Option<u64>) -> PyResult<()> {
        let fs = self.fs();
        wait(py, async move {
            match size {
                Some(size) => fs.mv_file_of_size(src, dst, size).await,
                None => fs.mv_file(src, dst).await,
            }
        })
        .map_err(to_py)
    }

    /// Uploads the local file `local` to `dst`.
    fn put_file(&self, py: Python<'_>, local: &str, dst: &str) -> PyResult<()> {
        wait(py, self.fs().put(local, dst)).map_err(to_py)
    }

    /// Downloads `src` to the local file `local`.
    fn get_file(&self, py: Python<'_>, src: &str, local: &str) -> PyResult<()> {
        wait(py, self.fs().get(src, local)).map_err(to_py)
    }
}
