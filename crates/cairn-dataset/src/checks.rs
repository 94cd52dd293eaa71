//! What a job refuses before it writes anything: an ID column that is not
//! there or cannot identify rows, an output inside an input, an overwrite
//! that would lose committed rows, and a fresh run into a full output.

use arrow_schema::SchemaRef;
use cairn_checkpoint::IdSet;
use cairn_fs::{ErrorKind, FileSystem, StorageOptions};

use crate::error::{Error, Result};
use crate::ops::column_names;
use crate::row_hash::ROW_HASH_COLUMN;
use crate::sink::SaveMode;
use crate::source::Source;

/// The ID column must be in the input with a type IDs can have.
pub(crate) fn id_column(schema: &SchemaRef, id: &str) -> Result<()> {
    let Ok(field) = schema.field_with_name(id) else {
        let hint = if id == ROW_HASH_COLUMN {
            "; row_hash IDs need include_row_hash (--include-row-hash) on a Parquet input"
        } else {
            ""
        };
        return Err(Error::Plan {
            reason: format!(
                "the ID column {id:?} is not in the input (columns: {}){hint}",
                column_names(schema)
            ),
        });
    };
    cairn_checkpoint::idset::check_id_type(field.data_type()).map_err(|_| Error::Plan {
        reason: format!(
            "the ID column {id:?} has type {}; IDs must be integers or strings",
            field.data_type()
        ),
    })
}

/// Each input URL of `source` with its filesystem and stripped path (URLs
/// that name no filesystem are left to the planner, which reports them).
fn input_locations<'a>(
    source: &'a Source,
    options: &StorageOptions,
) -> Vec<(&'a str, FileSystem, String)> {
    let urls: &[String] = match source {
        Source::Parquet { urls, .. } | Source::Json { urls, .. } => urls,
        Source::Items(_) => &[],
    };
    urls.iter()
        .filter_map(|url| {
            let (fs, path) = FileSystem::from_url(url, options).ok()?;
            Some((url.as_str(), fs, path))
        })
        .collect()
}

/// A job that writes into a directory it reads would read its own output
/// on the next run.
pub(crate) fn output_outside_inputs(
    source: &Source,
    out_fs: &FileSystem,
    out_dir: &str,
    options: &StorageOptions,
) -> Result<()> {
    for (url, fs, path) in input_locations(source, options) {
        let input = path.trim_end_matches('/');
        let output = out_dir.trim_end_matches('/');
        let nested = output == input || output.starts_with(&format!("{input}/"));
        if fs.protocol() == out_fs.protocol() && nested {
            return Err(Error::Plan {
                reason: format!(
                    "the output {} is inside the input {url}; a later run would read this job's own output. Write somewhere else",
                    out_fs.url(out_dir)
                ),
            });
        }
    }
    Ok(())
}

/// A checkpoint that is, contains or lies inside an input directory would
/// have its files read as input, and its clean-up could delete input files.
pub(crate) fn checkpoint_outside_inputs(
    source: &Source,
    checkpoint: &cairn_checkpoint::CheckpointDir,
    options: &StorageOptions,
) -> Result<()> {
    for (_, fs, path) in input_locations(source, options) {
        // A glob names the directory before its first wildcard.
        let dir = match path.find(['*', '?', '[']) {
            Some(at) => path[..at]
                .rsplit_once('/')
                .map_or("", |(d, _)| d)
                .to_string(),
            None => path,
        };
        if dir.is_empty() {
            continue;
        }
        cairn_checkpoint::refuse_overlap(checkpoint.fs(), checkpoint.path(), &fs, &dir, "input")?;
    }
    Ok(())
}

/// Overwriting the output while the checkpoint holds committed IDs would
/// delete rows that every later run skips.
pub(crate) fn overwrite_keeps_committed_rows(
    mode: SaveMode,
    committed: &IdSet,
    output_url: &str,
) -> Result<()> {
    if mode == SaveMode::Overwrite && !committed.is_empty() {
        return Err(Error::Plan {
            reason: format!(
                "mode overwrite would delete {output_url} while the checkpoint holds {} committed IDs, whose rows would then be skipped and lost. Use append to resume, or remove the checkpoint to start over",
                committed.len()
            ),
        });
    }
    Ok(())
}

/// Applies the save mode to the output directory: empties it for
/// overwrite; for the default mode, refuses a directory that holds files
/// unless this run resumes committed IDs.
pub(crate) async fn prepare_output(
    fs: &FileSystem,
    dir: &str,
    mode: SaveMode,
    nothing_committed: bool,
    checkpointed: bool,
) -> Result<()> {
    match mode {
        SaveMode::Overwrite if fs.exists(dir).await? => {
            fs.rm_with(dir, cairn_fs::TreeOptions::new().recursive(true))
                .await?
        }
        SaveMode::ErrorIfExists if nothing_committed => {
            if let Some(first) = first_file(fs, dir).await? {
                return Err(Error::Plan {
                    reason: format!(
                        "the output {} already holds files ({first}, ...) and there is no checkpoint to resume{}. Writing now would add every row again: write somewhere else, or choose mode append (add anyway) or overwrite (replace)",
                        fs.url(dir),
                        if checkpointed {
                            " (a finished run removes its checkpoint)"
                        } else {
                            ""
                        }
                    ),
                });
            }
        }
        _ => {}
    }
    Ok(())
}

/// The name of some file under `dir`, if it holds any.
async fn first_file(fs: &FileSystem, dir: &str) -> Result<Option<String>> {
    match fs.ls(dir).await {
        Ok(entries) => Ok(entries.into_iter().next().map(|e| e.name)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}
