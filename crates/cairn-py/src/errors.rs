//! cairn's errors as the Python exceptions callers catch.

use cairn_fs::ErrorKind;
use pyo3::create_exception;
use pyo3::exceptions::{
    PyFileExistsError, PyFileNotFoundError, PyIsADirectoryError, PyNotADirectoryError, PyOSError,
    PyPermissionError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;

create_exception!(
    _native,
    CheckpointError,
    PyRuntimeError,
    "A checkpoint cannot be used as asked (bound to another output, held by a live run, \
     damaged, or its committed data is gone); the message says what to do."
);

/// A cairn error as the Python exception fsspec callers catch; the message
/// names the URL and the fix, never a secret (cairn-fs scrubs them).
pub(crate) fn to_py(e: cairn_fs::Error) -> PyErr {
    let message = e.to_string();
    match e.kind() {
        // s3fs raises FileNotFoundError for a missing bucket too; the
        // message names the bucket.
        ErrorKind::NotFound | ErrorKind::NoSuchBucket => PyFileNotFoundError::new_err(message),
        ErrorKind::AlreadyExists => PyFileExistsError::new_err(message),
        ErrorKind::PermissionDenied => PyPermissionError::new_err(message),
        ErrorKind::IsADirectory => PyIsADirectoryError::new_err(message),
        ErrorKind::NotADirectory => PyNotADirectoryError::new_err(message),
        ErrorKind::Config | ErrorKind::InvalidUrl | ErrorKind::UnknownScheme => {
            PyValueError::new_err(message)
        }
        _ => PyOSError::new_err(message),
    }
}

/// A checkpoint error as a Python exception: storage errors as [`to_py`]
/// maps them, bad settings as `ValueError`, the rest as [`CheckpointError`].
pub(crate) fn checkpoint_to_py(e: cairn_checkpoint::Error) -> PyErr {
    match e {
        cairn_checkpoint::Error::Storage(inner) => to_py(inner),
        cairn_checkpoint::Error::InvalidConfig { .. }
        | cairn_checkpoint::Error::UnsupportedIdType { .. } => PyValueError::new_err(e.to_string()),
        other => CheckpointError::new_err(other.to_string()),
    }
}
