//! The end of a successful Ray job's checkpoint: the protocol's clean-up
//! (step 8) in place of Ray's plain `delete_dir`, so a driver killed while
//! the checkpoint is being deleted leaves a completion marker behind, and
//! the next run knows the job finished instead of writing again the rows
//! whose IDs were already deleted.

use cairn_checkpoint::Checkpoint;
use cairn_checkpoint::internals::{CheckpointConfig, OutputLayout};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::checkpoint::lease_ttl_arg;
use crate::errors::checkpoint_to_py;
use crate::filesystem::NativeFileSystem;
use crate::runtime::wait;
use crate::table_log::unit_log_arg;

/// Deletes the checkpoint at `checkpoint_url` of a job that finished
/// writing to `output_dir` on `output_fs`, crash-safe: takes the lease,
/// settles what is still pending (a table output by its `unit_log`, a file
/// output by rolling back a late unit's data files), writes the completion
/// marker naming the job and deletes the protocol's files. The marker
/// stays (`marker_left`) until [`remove_completion_marker`]: a driver
/// killed before it removes it leaves a checkpoint that says the job
/// finished. A checkpoint bound to another output is refused and left
/// whole. Returns what was deleted.
#[pyfunction]
#[pyo3(signature = (checkpoint_fs, checkpoint_url, id_column, output_fs, output_dir, lease_ttl=None, unit_log=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish_checkpoint<'py>(
    py: Python<'py>,
    checkpoint_fs: &NativeFileSystem,
    checkpoint_url: &str,
    id_column: &str,
    output_fs: &NativeFileSystem,
    output_dir: &str,
    lease_ttl: Option<f64>,
    unit_log: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut config = CheckpointConfig::new(id_column, checkpoint_url);
    config.filesystem = Some(checkpoint_fs.fs());
    if let Some(ttl) = lease_ttl_arg(lease_ttl)? {
        config.lease_ttl = ttl;
    }
    // The units are settled and listed, their IDs never read.
    config.read_ids = false;
    config.unit_log = unit_log_arg(unit_log)?;
    let dir = config.dir().map_err(checkpoint_to_py)?;
    let output = output_fs.fs();
    let cleaned = wait(py, async {
        let output_url = output.url(&output.strip(output_dir)?);
        // Refused before the lease is taken: a wrong output would roll
        // back pending units' files in a directory that is not theirs.
        let job = dir.check_output(&output_url).await?;
        // Ray records no partition columns: as when the run opened, an
        // output holding directories is searched at any depth.
        config.output_layout = match (&job, &config.unit_log) {
            (_, Some(_)) => OutputLayout::Flat,
            (Some(job), None) if job.layout() == OutputLayout::Partitioned => job.layout(),
            _ => cairn_checkpoint::internals::found_layout(&output, output_dir).await?,
        };
        // The one sequence: lease, pending units settled (a table's by its
        // log, a file output's rolled back), then the clean-up to the
        // completion marker.
        let run = Checkpoint::with_config(config, None)
            .without_output_check()
            .open(&output, output_dir)
            .await?;
        // Pending units without a commit are rolled back by the open's
        // recovery now (by the clean-up before): reported as its own.
        let recovery = run.recovery().clone();
        let mut cleaned = run.finish_keeping_marker().await?;
        cleaned.rolled_back.extend(recovery.rolled_back);
        cleaned.data_files_deleted += recovery.data_files_deleted;
        Ok(cleaned)
    })
    .map_err(checkpoint_to_py)?;
    let report = PyDict::new(py);
    report.set_item("deleted", cleaned.deleted)?;
    report.set_item("kept_foreign", cleaned.kept_foreign.clone())?;
    report.set_item("removed_directory", cleaned.removed_directory)?;
    report.set_item(
        "rolled_back",
        cleaned
            .rolled_back
            .iter()
            .map(|u| u.as_str().to_string())
            .collect::<Vec<_>>(),
    )?;
    report.set_item("data_files_deleted", cleaned.data_files_deleted)?;
    report.set_item("marker_left", cleaned.marker_left)?;
    Ok(report)
}

/// The last step of [`finish_checkpoint`]: deletes the completion marker of
/// the checkpoint at `checkpoint_url`, then its directory if nothing else
/// is in it (files not cairn's keep it). Whether the directory is gone.
#[pyfunction]
pub(crate) fn remove_completion_marker(
    py: Python<'_>,
    checkpoint_fs: &NativeFileSystem,
    checkpoint_url: &str,
) -> PyResult<bool> {
    // The ID column names no file here; any name will do.
    let mut config = CheckpointConfig::new("id", checkpoint_url);
    config.filesystem = Some(checkpoint_fs.fs());
    let dir = config.dir().map_err(checkpoint_to_py)?;
    wait(py, dir.remove_completion_marker()).map_err(checkpoint_to_py)
}
