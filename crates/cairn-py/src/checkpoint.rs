//! The checkpoint machinery under `cairn.ray`: opening a checkpoint (lease,
//! recovery of pending units, loading committed IDs in parallel) and the
//! compact set of committed IDs that Ray's filter actors probe, block by
//! block, through the Arrow C Data Interface.

use arrow_array::{Array, BooleanArray, make_array};
use arrow_data::ArrayData;
use arrow_pyarrow::PyArrowType;
use bytes::Bytes;
use cairn_checkpoint::{CheckpointConfig, IdSet, StringMode};
use cairn_fs::ErrorKind;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::checkpoint_to_py;
use crate::filesystem::NativeFileSystem;
use crate::runtime::wait;

/// Memory a Python object holds, as the owner of shared bytes: the object
/// is kept alive (and released, with the GIL, when the last set using the
/// memory is dropped).
struct SharedMemory {
    _owner: Py<PyAny>,
    address: usize,
    length: usize,
}

impl AsRef<[u8]> for SharedMemory {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `_from_shared_memory`'s caller passes the address and
        // length of the contiguous memory of `_owner`, which stays alive and
        // unmoved while held here; the set only reads it.
        unsafe { std::slice::from_raw_parts(self.address as *const u8, self.length) }
    }
}

/// An immutable set of committed IDs.
#[pyclass(module = "cairn._native", frozen)]
pub(crate) struct NativeIdSet {
    set: IdSet,
}

#[pymethods]
impl NativeIdSet {
    /// The set [`NativeIdSet::to_bytes`] wrote, read in place from the
    /// `length` bytes at `address` that `owner` (a C-contiguous NumPy array,
    /// as Ray returns from its shared object store) holds: the big arrays
    /// are not copied, so the filter actors of a machine share one copy.
    /// `owner` is kept alive by the set. Called by `cairn.ray`, which takes
    /// address and length from the array itself (the buffer protocol is not
    /// in the stable ABI before Python 3.11).
    #[staticmethod]
    fn _from_shared_memory(
        py: Python<'_>,
        owner: Py<PyAny>,
        address: usize,
        length: usize,
    ) -> PyResult<Self> {
        if address == 0 && length > 0 {
            return Err(PyValueError::new_err("the ID set's memory has no address"));
        }
        let bytes = Bytes::from_owner(SharedMemory {
            _owner: owner,
            address,
            length,
        });
        let set = py
            .detach(|| IdSet::from_shared(bytes))
            .map_err(checkpoint_to_py)?;
        Ok(Self { set })
    }

    /// The set [`NativeIdSet::to_bytes`] wrote.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let set = py
            .detach(|| IdSet::from_bytes(data))
            .map_err(checkpoint_to_py)?;
        Ok(Self { set })
    }

    /// The set as bytes, to ship to another process.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let bytes = py.detach(|| self.set.to_bytes());
        PyBytes::new(py, &bytes)
    }

    fn __len__(&self) -> usize {
        self.set.len() as usize
    }

    /// Heap bytes the set holds.
    fn memory_bytes(&self) -> usize {
        self.set.memory_bytes()
    }

    /// For each ID of `ids` (a pyarrow integer, string or binary array),
    /// whether the row is still to do: true when its ID is not committed (a
    /// null ID never is). A `pyarrow.BooleanArray` of the same length.
    fn uncommitted(
        &self,
        py: Python<'_>,
        ids: PyArrowType<ArrayData>,
    ) -> PyResult<PyArrowType<ArrayData>> {
        let ids = make_array(ids.0);
        let committed = py
            .detach(|| self.set.contains_array(ids.as_ref()))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let keep = BooleanArray::new(!committed.values(), None);
        Ok(PyArrowType(keep.into_data()))
    }

    /// Pickles by its bytes (Ray ships it to its filter actors).
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let from_bytes = py.get_type::<NativeIdSet>().getattr("from_bytes")?;
        Ok((from_bytes, (self.to_bytes(py),)))
    }
}

/// Opens the checkpoint at `checkpoint_url` for a run writing to
/// `output_dir` on `output_fs`: takes the lease, refuses a checkpoint bound
/// to another output, rolls back pending units, loads the committed IDs,
/// checks that every committed unit's data is still in the output, and
/// releases the lease (the writers that follow are Ray's). Without an
/// output, only loads: pending units are left as they are.
#[pyfunction]
#[pyo3(signature = (checkpoint_fs, checkpoint_url, id_column, output_fs=None, output_dir=None, exact_strings=false))]
pub(crate) fn open_checkpoint<'py>(
    py: Python<'py>,
    checkpoint_fs: &NativeFileSystem,
    checkpoint_url: &str,
    id_column: &str,
    output_fs: Option<&NativeFileSystem>,
    output_dir: Option<&str>,
    exact_strings: bool,
) -> PyResult<(NativeIdSet, Bound<'py, PyDict>)> {
    let mut config = CheckpointConfig::new(id_column, checkpoint_url);
    config.filesystem = Some(checkpoint_fs.fs.clone());
    if exact_strings {
        config.string_mode = StringMode::Exact;
    }
    let report = PyDict::new(py);
    let set = match (output_fs, output_dir) {
        (Some(output_fs), Some(output_dir)) => {
            let output = output_fs.fs.clone();
            let (state, recovery) = wait(py, async {
                let subdirs = match output.ls(output_dir).await {
                    Ok(entries) => entries.into_iter().filter(|e| e.is_dir()).count(),
                    Err(e) if e.kind() == ErrorKind::NotFound => 0,
                    Err(e) => return Err(cairn_checkpoint::Error::from(e)),
                };
                if subdirs > 0 {
                    return Err(cairn_checkpoint::Error::InvalidConfig {
                        reason: format!(
                            "the output {} holds directories: cairn's checkpoint manager settles units whose data files sit directly in the output (no partition_cols); write unpartitioned, or use Ray's own manager",
                            output.url(&output.strip(output_dir)?)
                        ),
                    });
                }
                let open = config.open(&output, output_dir).await?;
                let checked = open.dir.require_data(&open.state, &output, output_dir).await;
                let released = open.dir.release_lease(open.lease).await;
                checked?;
                released?;
                Ok((open.state, open.recovery))
            })
            .map_err(checkpoint_to_py)?;
            let names = |units: &[cairn_checkpoint::UnitName]| -> Vec<String> {
                units.iter().map(|u| u.as_str().to_string()).collect()
            };
            report.set_item("committed_units", state.committed.len())?;
            report.set_item("rolled_back", names(&recovery.rolled_back))?;
            report.set_item("data_files_deleted", recovery.data_files_deleted)?;
            report.set_item("foreign", state.foreign.clone())?;
            state.ids
        }
        (None, None) => {
            let dir = config.dir().map_err(checkpoint_to_py)?;
            let state = wait(py, dir.load(config.string_mode)).map_err(checkpoint_to_py)?;
            let pending: Vec<String> = state.in_flight().map(|u| u.as_str().to_string()).collect();
            report.set_item("committed_units", state.committed.len())?;
            report.set_item("pending_kept", pending)?;
            report.set_item("foreign", state.foreign.clone())?;
            state.ids
        }
        _ => {
            return Err(PyValueError::new_err(
                "give both output_fs and output_dir, or neither",
            ));
        }
    };
    report.set_item("ids", set.len())?;
    report.set_item("memory_bytes", set.memory_bytes())?;
    Ok((NativeIdSet { set }, report))
}
