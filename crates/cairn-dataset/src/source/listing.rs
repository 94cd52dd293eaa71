//! The input files of a list of URLs: files as they are, directories'
//! files with the format's extensions (hidden names skipped), globs' matches;
//! each file once, however many of the URLs name it.

use std::collections::{HashMap, HashSet};

use cairn_checkpoint::internals::InputFingerprint;
use cairn_fs::{FileInfo, FileSystem, FindOptions, StorageOptions};
use futures::TryStreamExt;

use crate::error::{Error, Result};

/// One input file as listed.
pub(super) struct Listed {
    pub(super) fs: FileSystem,
    /// The stripped path.
    pub(super) path: String,
    pub(super) size: u64,
    /// What the job record keeps of it.
    pub(super) fingerprint: InputFingerprint,
}

/// Every input file of `urls`: a file as is, a directory's files with one of
/// `extensions` (hidden names skipped), a glob's matches. Sorted per URL. A
/// file that several URLs name (a directory and a file in it, a glob and a
/// path, one URL twice) is listed once, where it first appears: reading it
/// twice would write its rows twice.
pub(super) async fn list_inputs(
    urls: &[String],
    options: &StorageOptions,
    extensions: &[&str],
) -> Result<Vec<Listed>> {
    if urls.is_empty() {
        return Err(Error::Plan {
            reason: "no input URLs; give at least one file, directory or glob".into(),
        });
    }
    let mut filesystems: HashMap<Option<String>, FileSystem> = HashMap::new();
    let mut out = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for url in urls {
        let (scheme, _) = cairn_fs::split_protocol(url);
        let fs = match filesystems.get(&scheme) {
            Some(fs) => fs.clone(),
            None => {
                let (fs, _) = FileSystem::from_url(url, options)?;
                filesystems.insert(scheme, fs.clone());
                fs
            }
        };
        let path = fs.strip(url)?;
        let mut found: Vec<FileInfo> = Vec::new();
        // The first few of a directory's files in the other format, for the
        // error if none fits.
        let (other_extensions, _) = other_format(extensions);
        let mut others: Vec<String> = Vec::new();
        // The listings stream: only the inputs are kept, never the rest of
        // a directory (a large prefix of other files costs one page).
        if path.contains(['*', '?', '[']) {
            let mut matches = fs.glob_stream(&path, FindOptions::new()).await?;
            while let Some(info) = matches.try_next().await? {
                if !info.is_dir() {
                    found.push(info);
                }
            }
        } else {
            let info = fs.info(&path).await?;
            if info.is_dir() {
                let mut entries = fs.find_stream(&path, FindOptions::new()).await?;
                while let Some(entry) = entries.try_next().await? {
                    let base = base_name(&entry.name);
                    if has_extension(base, extensions) && !base.starts_with(['.', '_']) {
                        found.push(entry);
                    } else if has_extension(base, other_extensions) {
                        // The first three names, whatever order the store lists in.
                        others.push(base.to_string());
                        others.sort();
                        others.truncate(3);
                    }
                }
            } else {
                found.push(info);
            }
        }
        if found.is_empty() {
            let looked_for = extensions
                .iter()
                .map(|e| format!("*.{e}"))
                .collect::<Vec<_>>()
                .join(", ");
            let hint = other_format_hint(&others, extensions);
            return Err(Error::NoInputFiles {
                url: url.to_string(),
                looked_for,
                hint,
            });
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        for info in found {
            let url = fs.url(&info.name);
            if !seen.insert(url.clone()) {
                tracing::info!("input {url} is named by more than one --input; it is read once");
                continue;
            }
            out.push(Listed {
                fs: fs.clone(),
                size: info.size,
                fingerprint: InputFingerprint {
                    url,
                    size: info.size,
                    etag: info.etag.clone(),
                    modified: info.last_modified.clone(),
                },
                path: info.name,
            });
        }
    }
    Ok(out)
}

/// The last component of a listed path.
fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether `base` ends with `.` and one of `extensions`.
fn has_extension(base: &str, extensions: &[&str]) -> bool {
    extensions
        .iter()
        .any(|ext| base.strip_suffix(ext).is_some_and(|b| b.ends_with('.')))
}

/// The extensions of the format a job was not given, and the flag that
/// reads them: Parquet for a JSON-lines job, JSON lines for a Parquet job.
fn other_format(extensions: &[&str]) -> (&'static [&'static str], &'static str) {
    if extensions.iter().any(|e| JSON_EXTENSIONS.contains(e)) {
        (&["parquet"], "read them as Parquet (`--format parquet`)")
    } else {
        (JSON_EXTENSIONS, "read them as JSON lines (`--format json`)")
    }
}

const JSON_EXTENSIONS: &[&str] = &["json", "jsonl", "ndjson"];

/// What to say when a listing found no input files: the other format's
/// files the directory holds (`others`, a few of their names) when there
/// are some (JSON lines given to a Parquet job, or the other way round),
/// else to check the URL.
fn other_format_hint(others: &[String], extensions: &[&str]) -> String {
    let (other, flag) = other_format(extensions);
    if others.is_empty() {
        "check the URL".into()
    } else {
        format!(
            "it holds {} ({}): {flag}",
            if other.contains(&"parquet") {
                "Parquet files"
            } else {
                "JSON-lines files"
            },
            others.join(", ")
        )
    }
}
