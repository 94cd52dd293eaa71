//! What a job refuses before it writes anything: an ID column that is not
//! there or cannot identify rows, an output that overlaps an input, an
//! overwrite that would lose committed rows or delete an input, and a fresh
//! run into a full output.

use std::collections::HashSet;

use arrow_schema::SchemaRef;
use cairn_checkpoint::IdSet;
use cairn_checkpoint::internals::InputFingerprint;
use cairn_fs::{ErrorKind, FileSystem, StorageOptions};
use futures::TryStreamExt;

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
    cairn_checkpoint::internals::check_id_type(field.data_type()).map_err(|_| Error::Plan {
        reason: format!(
            "the ID column {id:?} has type {}; IDs must be integers or strings",
            field.data_type()
        ),
    })
}

/// Where each input URL of `source` reads: its URL, filesystem and the
/// stripped path of the file or directory it names, or of a glob's base
/// (the directory before its first wildcard). URLs that name no filesystem
/// are left to the planner, which reports them.
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
            let base = match path.find(['*', '?', '[']) {
                Some(at) => path[..at]
                    .rsplit_once('/')
                    .map_or("", |(d, _)| d)
                    .to_string(),
                None => path,
            };
            Some((url.as_str(), fs, base))
        })
        .collect()
}

/// An input that is, contains or lies inside the output would lose files
/// to `--mode overwrite` (and to the roll-back of a unit), and a job
/// writing into what it reads would read its own output on the next run.
pub(crate) fn output_apart_from_inputs(
    source: &Source,
    out_fs: &FileSystem,
    out_dir: &str,
    options: &StorageOptions,
) -> Result<()> {
    for (url, fs, base) in input_locations(source, options) {
        if cairn_checkpoint::internals::paths_overlap(&fs, &base, out_fs, out_dir)? {
            return Err(Error::Plan {
                reason: format!(
                    "the input {url} and the output {} overlap (one is, contains or lies inside the other); nothing was written. The job could delete or overwrite its own input, and a later run would read its output. Write the output to a directory of its own",
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
    checkpoint: &cairn_checkpoint::internals::CheckpointDir,
    options: &StorageOptions,
) -> Result<()> {
    for (_, fs, base) in input_locations(source, options) {
        cairn_checkpoint::internals::refuse_overlap(
            checkpoint.fs(),
            checkpoint.path(),
            &fs,
            &base,
            "input",
        )?;
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

/// Applies the save mode to the output directory: for overwrite, deletes
/// the files a listing of it finds, after checking that none of them is an
/// input of this job (`inputs`); for the default mode, refuses a directory
/// that holds files unless this run resumes committed IDs.
pub(crate) async fn prepare_output(
    fs: &FileSystem,
    dir: &str,
    mode: SaveMode,
    nothing_committed: bool,
    checkpointed: bool,
    inputs: &[InputFingerprint],
) -> Result<()> {
    match mode {
        SaveMode::Overwrite => empty_output(fs, dir, inputs).await?,
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

/// Deletes the files under `dir` that one listing finds, none of them an
/// input: the whole listing is checked before the first delete.
async fn empty_output(fs: &FileSystem, dir: &str, inputs: &[InputFingerprint]) -> Result<()> {
    let inputs: HashSet<&str> = inputs.iter().map(|f| f.url.as_str()).collect();
    let mut files: Vec<String> = Vec::new();
    let listing = fs.find_stream(dir, cairn_fs::FindOptions::new()).await;
    let mut listed = match listing {
        Ok(listed) => listed,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    loop {
        let file = match listed.try_next().await {
            Ok(Some(file)) => file,
            Ok(None) => break,
            Err(e) if e.kind() == ErrorKind::NotFound => break,
            Err(e) => return Err(e.into()),
        };
        let url = fs.url(&file.name);
        if inputs.contains(url.as_str()) {
            return Err(Error::Plan {
                reason: format!(
                    "mode overwrite would delete {url}, which is an input of this job; nothing was deleted. Write the output to a directory of its own"
                ),
            });
        }
        files.push(file.name);
    }
    for batch in files.chunks(OVERWRITE_DELETE_BATCH) {
        let paths: Vec<&str> = batch.iter().map(String::as_str).collect();
        // Listed as files: deleted without a stat each.
        fs.rm_files(&paths).await?;
    }
    Ok(())
}

/// Files deleted per request by an overwrite (an S3 DeleteObjects takes
/// 1,000 keys).
const OVERWRITE_DELETE_BATCH: usize = 1000;

/// The name of some file under `dir` at any depth, if it holds any. Empty
/// directories do not count: a partitioned run killed before its first
/// commit leaves its partition directories behind on local disk, empty once
/// recovery has rolled its files back.
async fn first_file(fs: &FileSystem, dir: &str) -> Result<Option<String>> {
    let mut files = match fs.find_stream(dir, cairn_fs::FindOptions::new()).await {
        Ok(files) => files,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    match files.try_next().await {
        Ok(first) => Ok(first.map(|f| f.name)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}
