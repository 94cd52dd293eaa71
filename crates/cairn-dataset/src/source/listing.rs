//! The input files of a list of URLs: files as they are, directories'
//! files with the format's extensions (hidden names skipped), globs' matches;
//! each file once, however many of the URLs name it.

use std::collections::{HashMap, HashSet};

use cairn_checkpoint::InputFingerprint;
use cairn_fs::{FileInfo, FileSystem, StorageOptions};

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
        // A directory's files of other formats, for the error if none fits.
        let mut others: Vec<FileInfo> = Vec::new();
        if path.contains(['*', '?', '[']) {
            for name in fs.glob(&path).await? {
                let info = fs.info(&name).await?;
                if !info.is_dir() {
                    found.push(info);
                }
            }
        } else {
            let info = fs.info(&path).await?;
            if info.is_dir() {
                for entry in fs.find(&path).await? {
                    let base = base_name(&entry.name);
                    if has_extension(base, extensions) && !base.starts_with(['.', '_']) {
                        found.push(entry);
                    } else {
                        others.push(entry);
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

/// What to say when a listing found no input files: the other format's
/// files among `others` (the directory's files that did not fit) when there
/// are some (JSON lines given to a Parquet job, or the other way round),
/// else to check the URL.
fn other_format_hint(others: &[FileInfo], extensions: &[&str]) -> String {
    const JSON: &[&str] = &["json", "jsonl", "ndjson"];
    let (other, flag) = if extensions.iter().any(|e| JSON.contains(e)) {
        (
            &["parquet"][..],
            "read them as Parquet (`--format parquet`)",
        )
    } else {
        (JSON, "read them as JSON lines (`--format json`)")
    };
    let named: Vec<&str> = others
        .iter()
        .map(|e| base_name(&e.name))
        .filter(|base| has_extension(base, other))
        .take(3)
        .collect();
    if named.is_empty() {
        "check the URL".into()
    } else {
        format!(
            "it holds {} ({}): {flag}",
            if other.contains(&"parquet") {
                "Parquet files"
            } else {
                "JSON-lines files"
            },
            named.join(", ")
        )
    }
}
