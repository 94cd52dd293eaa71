//! The checkpoint machinery under `cairn.ray`: opening a checkpoint (lease,
//! recovery of pending units, loading committed IDs in parallel) and the
//! compact set of committed IDs that Ray's filter actors probe, block by
//! block, through the Arrow C Data Interface.

use arrow_array::{Array, BooleanArray, UInt64Array, make_array};
use arrow_data::ArrayData;
use arrow_pyarrow::PyArrowType;
use bytes::Bytes;

use cairn_checkpoint::Checkpoint;
use cairn_checkpoint::internals::CheckpointConfig;
use cairn_checkpoint::{IdSet, IdSetBuilder, StringMode};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMemoryView};

use crate::errors::checkpoint_to_py;
use crate::filesystem::NativeFileSystem;
use crate::runtime::wait;
use crate::table_log::unit_log_arg;

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
        // SAFETY: `_from_shared_memory` took the address and length from
        // `_owner` itself (an exact `numpy.ndarray`, one-dimensional,
        // contiguous, of bytes, over memory that cannot be written or
        // freed: see `ndarray_memory`), which stays alive and unmoved while
        // held here; the set only reads it.
        unsafe { std::slice::from_raw_parts(self.address as *const u8, self.length) }
    }
}

/// Where an exact `numpy.ndarray` of bytes keeps its memory: `(address,
/// length, immutable)`, where `immutable` says that nothing can write or
/// free it while the array lives (the array is read-only and the buffer
/// at the end of its `base` chain is `bytes` or another read-only buffer).
/// Anything but a one-dimensional, C-contiguous `uint8` array is refused.
fn ndarray_memory(owner: &Bound<'_, PyAny>) -> PyResult<(usize, usize, bool)> {
    let is_ndarray = |object: &Bound<'_, PyAny>| -> PyResult<bool> {
        let kind = object.get_type();
        let module: String = kind.getattr("__module__")?.extract()?;
        let name: String = kind.getattr("__name__")?.extract()?;
        Ok(module == "numpy" && name == "ndarray")
    };
    if !is_ndarray(owner)? {
        return Err(PyTypeError::new_err(format!(
            "the ID set's memory must be a numpy.ndarray of uint8, not {}",
            owner.get_type().name()?
        )));
    }
    let interface = owner.getattr("__array_interface__")?;
    let typestr: String = interface.get_item("typestr")?.extract()?;
    let shape: Vec<usize> = interface.get_item("shape")?.extract()?;
    let strides = interface.get_item("strides")?;
    let (address, readonly): (usize, bool) = interface.get_item("data")?.extract()?;
    if typestr != "|u1" || shape.len() != 1 || !strides.is_none() {
        return Err(PyValueError::new_err(format!(
            "the ID set's memory must be a one-dimensional, contiguous array of uint8 (typestr {typestr}, shape {shape:?})"
        )));
    }
    // The array's own flag, then the memory under it: a read-only view of
    // memory someone else can write is not immutable.
    let mut base = owner.clone();
    while is_ndarray(&base)? {
        let next = base.getattr("base")?;
        if next.is_none() {
            // The array owns its memory: it can be made writable again.
            return Ok((address, shape[0], false));
        }
        base = next;
    }
    let immutable = readonly
        && (base.is_instance_of::<PyBytes>()
            || PyMemoryView::from(&base)
                .and_then(|view| view.getattr("readonly")?.extract::<bool>())
                .unwrap_or(false));
    Ok((address, shape[0], immutable))
}

/// An immutable set of committed IDs.
#[pyclass(module = "cairn._native", frozen)]
pub(crate) struct NativeIdSet {
    set: IdSet,
}

#[pymethods]
impl NativeIdSet {
    /// The set [`NativeIdSet::to_bytes`] wrote, held by `owner`: a
    /// one-dimensional, C-contiguous `numpy.ndarray` of `uint8`, as Ray
    /// returns from its shared object store. When the array's memory cannot
    /// change (read-only, over an immutable buffer: Ray's object store,
    /// `bytes`), it is read in place, so the filter actors of a machine share
    /// one copy, and `owner` is kept alive by the set; otherwise the bytes
    /// are copied. The address and length come from the array itself (the
    /// buffer protocol is not in the stable ABI before Python 3.11), never
    /// from the caller.
    #[staticmethod]
    fn _from_shared_memory(py: Python<'_>, owner: Bound<'_, PyAny>) -> PyResult<Self> {
        let (address, length, immutable) = ndarray_memory(&owner)?;
        if !immutable {
            let bytes: Vec<u8> = owner.call_method0("tobytes")?.extract()?;
            return Self::from_bytes(py, &bytes);
        }
        if address == 0 && length > 0 {
            return Err(PyValueError::new_err("the ID set's memory has no address"));
        }
        let bytes = Bytes::from_owner(SharedMemory {
            _owner: owner.unbind(),
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

    /// The set as bytes, to ship to another process: written straight into
    /// the `bytes` object, with no vector of them in between (the set and
    /// its bytes, not a third copy).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let set = &self.set;
        let len = py.detach(|| set.encoded_len());
        PyBytes::new_with(py, len, |out| {
            py.detach(|| set.write_bytes(out));
            Ok(())
        })
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

    /// Whether every integer from `min` to `max` (inclusive) is a committed
    /// ID: what a row group's statistics of a signed integer ID column
    /// prove without reading it. False for a string set or `min > max`.
    fn covers_int_range(&self, py: Python<'_>, min: i64, max: i64) -> bool {
        py.detach(|| self.set.contains_int_range(min, max))
    }

    /// Whether the Ray `row_hash` IDs of rows `first_row .. first_row +
    /// rows` of the file whose path seeds `seed` are all committed: a row
    /// group of it need not be read. Stops at the first row that is not.
    /// With `low`/`high`, only the IDs whose keys lie in `[low, high)` are
    /// asked about (`high` None: no upper end): a shard's part of the
    /// question.
    #[pyo3(signature = (seed, first_row, rows, low=0, high=None))]
    fn covers_row_hashes(
        &self,
        py: Python<'_>,
        seed: u64,
        first_row: u64,
        rows: u64,
        low: u64,
        high: Option<u64>,
    ) -> bool {
        let window = crate::row_hash::KeyWindow { low, high };
        py.detach(|| {
            crate::row_hash::all_row_hashes_committed(&self.set, seed, first_row, rows, window)
        })
    }

    /// Pickles by its bytes (Ray ships it to its filter actors).
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let from_bytes = py.get_type::<NativeIdSet>().getattr("from_bytes")?;
        Ok((from_bytes, (self.to_bytes(py)?,)))
    }
}

/// A `lease_ttl=` argument in seconds as a duration (None: the default).
pub(crate) fn lease_ttl_arg(seconds: Option<f64>) -> PyResult<Option<std::time::Duration>> {
    seconds
        .map(|seconds| {
            std::time::Duration::try_from_secs_f64(seconds).map_err(|_| {
                PyValueError::new_err(format!(
                    "lease_ttl={seconds} is not a number of seconds; give at least 3"
                ))
            })
        })
        .transpose()
}

/// Opens the checkpoint at `checkpoint_url` for a run writing to
/// `output_dir` on `output_fs`: takes the lease, refuses a checkpoint bound
/// to another output, rolls back pending units, loads the committed IDs,
/// checks that every committed unit's data is still in the output, and
/// releases the lease (the writers that follow are Ray's). Without an
/// output, only loads: pending units are left as they are. `input_digest`
/// names the input the run reads (recorded for the completion marker).
/// `output_ids_committed` says that the output already holds rows whose
/// IDs count as committed: kept in the job record by a checkpoint's first
/// open, and reported (`output_ids_committed`) from the record by every
/// open, so each run of the job knows to skip them.
#[pyfunction]
#[pyo3(signature = (checkpoint_fs, checkpoint_url, id_column, output_fs=None, output_dir=None, exact_strings=false, lease_ttl=None, read_ids=true, unit_log=None, input_digest=None, output_ids_committed=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn open_checkpoint<'py>(
    py: Python<'py>,
    checkpoint_fs: &NativeFileSystem,
    checkpoint_url: &str,
    id_column: &str,
    output_fs: Option<&NativeFileSystem>,
    output_dir: Option<&str>,
    exact_strings: bool,
    lease_ttl: Option<f64>,
    read_ids: bool,
    unit_log: Option<&Bound<'py, PyAny>>,
    input_digest: Option<String>,
    output_ids_committed: bool,
) -> PyResult<(NativeIdSet, Bound<'py, PyDict>)> {
    let mut config = CheckpointConfig::new(id_column, checkpoint_url);
    config.output_ids_committed = output_ids_committed;
    // The input the job reads: a finished job's marker over other input
    // refuses the run instead of making it write nothing.
    config.input_digest = input_digest;
    let unit_log = unit_log_arg(unit_log)?;
    config.unit_log = unit_log.clone();
    config.filesystem = Some(checkpoint_fs.fs());
    config.read_ids = read_ids;
    if let Some(ttl) = lease_ttl_arg(lease_ttl)? {
        config.lease_ttl = ttl;
    }
    if exact_strings {
        config.string_mode = StringMode::Exact;
    }
    let report = PyDict::new(py);
    let set = match (output_fs, output_dir) {
        (Some(output_fs), Some(output_dir)) => {
            let output = output_fs.fs();
            let (state, recovery, output_ids_committed) = wait(py, async {
                // Ray records no partition columns: an output holding
                // directories (partition_cols) is searched at any depth.
                if unit_log.is_none() {
                    config.output_layout =
                        cairn_checkpoint::internals::found_layout(&output, output_dir).await?;
                }
                // The one sequence: lease, recovery (a table's pending
                // units settled by its log), the committed units checked
                // against the output; then the lease is released, since
                // the writers that follow are Ray's. An output holding
                // files is Ray's save mode's to judge.
                let run = Checkpoint::with_config(config, None)
                    .open(&output, output_dir)
                    .await?;
                let output_ids_committed = run.job().output_ids_committed;
                let (state, recovery) = run.hand_over().await?;
                Ok::<_, cairn_checkpoint::Error>((state, recovery, output_ids_committed))
            })
            .map_err(checkpoint_to_py)?;
            let names = |units: &[cairn_checkpoint::UnitName]| -> Vec<String> {
                units.iter().map(|u| u.as_str().to_string()).collect()
            };
            report.set_item("committed_units", state.committed.len())?;
            report.set_item("committed_bytes", state.committed_bytes)?;
            report.set_item("committed", names(&state.committed))?;
            report.set_item("rolled_back", names(&recovery.rolled_back))?;
            report.set_item(
                "committed_from_table",
                names(&recovery.committed_from_table),
            )?;
            report.set_item("data_files_deleted", recovery.data_files_deleted)?;
            // The job finished here before: its clean-up was cut short, and
            // every one of its rows is in the output.
            report.set_item("finished", state.complete)?;
            report.set_item("output_ids_committed", output_ids_committed)?;
            report.set_item("foreign", state.foreign.clone())?;
            state.ids
        }
        (None, None) => {
            let dir = config.dir().map_err(checkpoint_to_py)?;
            let state = if read_ids {
                wait(py, dir.load(config.string_mode))
            } else {
                wait(py, dir.list())
            }
            .map_err(checkpoint_to_py)?;
            let pending: Vec<String> = state.in_flight().map(|u| u.as_str().to_string()).collect();
            let committed: Vec<String> = state
                .committed
                .iter()
                .map(|u| u.as_str().to_string())
                .collect();
            report.set_item("committed_units", state.committed.len())?;
            report.set_item("committed_bytes", state.committed_bytes)?;
            report.set_item("committed", committed)?;
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

/// Reads the committed IDs of the checkpoint at `checkpoint_url` into a
/// set, and nothing else: no lease, no recovery (see `open_checkpoint`,
/// with `read_ids=False`, for those).
#[pyfunction]
#[pyo3(signature = (checkpoint_fs, checkpoint_url, id_column, exact_strings=false))]
pub(crate) fn load_ids(
    py: Python<'_>,
    checkpoint_fs: &NativeFileSystem,
    checkpoint_url: &str,
    id_column: &str,
    exact_strings: bool,
) -> PyResult<NativeIdSet> {
    let mut config = CheckpointConfig::new(id_column, checkpoint_url);
    config.filesystem = Some(checkpoint_fs.fs());
    let mode = if exact_strings {
        StringMode::Exact
    } else {
        StringMode::Fingerprint
    };
    let dir = config.dir().map_err(checkpoint_to_py)?;
    let state = wait(py, dir.load(mode)).map_err(checkpoint_to_py)?;
    Ok(NativeIdSet { set: state.ids })
}

/// For each ID of `ids` (a pyarrow integer, string or binary array), the
/// 64-bit key that places it in a shard of a set split by key range: an
/// integer ID's key in the set (its bit pattern), a string ID's fingerprint's
/// high 64 bits. 0 for a null. A `pyarrow.UInt64Array` of the same length.
#[pyfunction]
pub(crate) fn routing_keys(
    py: Python<'_>,
    ids: PyArrowType<ArrayData>,
) -> PyResult<PyArrowType<ArrayData>> {
    let ids = make_array(ids.0);
    let strings = !ids.data_type().is_integer();
    let keys = py
        .detach(|| cairn_checkpoint::internals::id_keys(ids.as_ref()))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let keys: UInt64Array = keys
        .into_iter()
        .map(|key| match key {
            Some(key) if strings => (key >> 64) as u64,
            Some(key) => key as u64,
            None => 0,
        })
        .collect();
    Ok(PyArrowType(keys.into_data()))
}

/// A set of IDs built from arrays pushed one at a time (a shard of a set
/// spread over a cluster), sealing random integer IDs into compressed runs
/// every `seal_every` keys so the builder stays within a memory budget.
#[pyclass(module = "cairn._native")]
pub(crate) struct NativeIdSetBuilder {
    builder: Option<IdSetBuilder>,
}

#[pymethods]
impl NativeIdSetBuilder {
    #[new]
    #[pyo3(signature = (seal_every=None))]
    fn new(seal_every: Option<usize>) -> Self {
        let builder = IdSetBuilder::new(StringMode::Fingerprint);
        let builder = match seal_every {
            Some(keys) => builder.sealing_every(keys),
            None => builder,
        };
        Self {
            builder: Some(builder),
        }
    }

    /// Adds the non-null IDs of `ids` (a pyarrow integer or string array).
    fn push(&mut self, py: Python<'_>, ids: PyArrowType<ArrayData>) -> PyResult<()> {
        let builder = self
            .builder
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the builder was already built"))?;
        let ids = make_array(ids.0);
        py.detach(|| builder.push_array(ids.as_ref()))
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The set of every ID pushed; the builder is spent.
    fn build(&mut self, py: Python<'_>) -> PyResult<NativeIdSet> {
        let builder = self
            .builder
            .take()
            .ok_or_else(|| PyValueError::new_err("the builder was already built"))?;
        let set = py.detach(|| builder.build());
        Ok(NativeIdSet { set })
    }
}
