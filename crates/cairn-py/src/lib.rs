//! `cairn._native`: the Rust half of the Python package `cairn`. A thin
//! layer over `cairn_fs::FileSystem` and `cairn_checkpoint` (the checkpoint
//! machinery of `cairn.ray`): one shared tokio runtime per process,
//! the GIL released during every wait, cairn errors turned into the Python
//! exceptions fsspec callers catch. Everything else (fsspec's surface,
//! pickling, pyarrow) is in `python/cairn/`.

mod checkpoint;
mod errors;
mod filesystem;
mod finish;
mod metrics;
mod row_hash;
mod runtime;
mod table_log;
mod writer;

use pyo3::prelude::*;

/// The module `cairn._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The crash points of the tests' builds (`FAILPOINTS`); a no-op in a
    // release wheel, built without them.
    cairn_checkpoint::internals::failpoint::setup_from_env();
    m.add_class::<filesystem::NativeFileSystem>()?;
    m.add_class::<checkpoint::NativeIdSet>()?;
    m.add_class::<checkpoint::NativeIdSetBuilder>()?;
    m.add_class::<writer::NativeWriter>()?;
    m.add_function(wrap_pyfunction!(checkpoint::open_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::load_ids, m)?)?;
    m.add_function(wrap_pyfunction!(finish::finish_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(finish::remove_completion_marker, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::routing_keys, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::metric_samples, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::metrics_text, m)?)?;
    m.add(
        "CheckpointError",
        m.py().get_type::<errors::CheckpointError>(),
    )?;
    Ok(())
}
