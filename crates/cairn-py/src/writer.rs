//! `NativeWriter`: a streaming write for `CairnFile` in `wb` mode. Parts go
//! out as they fill (a multipart upload on object stores, a temporary file
//! on local disk); nothing is visible until `close`, and `abort` leaves
//! nothing behind.

use std::sync::Mutex;

use bytes::Bytes;
use cairn_fs::FileWriter;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::runtime::wait;

/// An open streaming write; closed or aborted once.
#[pyclass(module = "cairn._native", frozen)]
pub(crate) struct NativeWriter {
    url: String,
    inner: Mutex<Option<FileWriter>>,
}

impl NativeWriter {
    pub(crate) fn new(url: String, writer: FileWriter) -> Self {
        Self {
            url,
            inner: Mutex::new(Some(writer)),
        }
    }

    fn take(&self) -> PyResult<FileWriter> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| self.finished())
    }

    fn finished(&self) -> PyErr {
        PyValueError::new_err(format!("the write of {} is already closed", self.url))
    }
}

#[pymethods]
impl NativeWriter {
    /// Appends `data`; full parts are uploaded while the GIL is released.
    fn write(&self, py: Python<'_>, data: Vec<u8>) -> PyResult<()> {
        let mut writer = self.take()?;
        let written = wait(py, async {
            let result = writer.write(Bytes::from(data)).await;
            (writer, result)
        });
        let (writer, result) = written;
        *self.inner.lock().unwrap_or_else(|e| e.into_inner()) = Some(writer);
        result.map_err(to_py)
    }

    /// Finishes the write: the file appears whole.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let writer = self.take()?;
        wait(py, writer.close()).map_err(to_py)
    }

    /// Abandons the write (aborts the multipart upload, removes the
    /// temporary file); a write already closed or aborted is left alone.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let Some(writer) = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Ok(());
        };
        wait(py, writer.abort()).map_err(to_py)
    }
}
