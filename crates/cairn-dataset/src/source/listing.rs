//! The input files of a list of URLs: files as they are, directories'
//! files with the format's extensions (hidden names skipped), globs' matches.

use std::collections::HashMap;

use cairn_fs::{FileSystem, StorageOptions};

use crate::error::{Error, Result};

/// Every input file of `urls`: a file as is, a directory's files with one of
/// `extensions` (hidden names skipped), a glob's matches. Sorted per URL.
pub(super) async fn list_inputs(
    urls: &[String],
    options: &StorageOptions,
    extensions: &[&str],
) -> Result<Vec<(FileSystem, String, u64)>> {
    if urls.is_empty() {
        return Err(Error::Plan {
            reason: "no input URLs; give at least one file, directory or glob".into(),
        });
    }
    let mut filesystems: HashMap<Option<String>, FileSystem> = HashMap::new();
    let mut out = Vec::new();
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
        let mut found: Vec<(String, u64)> = Vec::new();
        if path.contains(['*', '?', '[']) {
            for name in fs.glob(&path, None).await? {
                let info = fs.info(&name).await?;
                if !info.is_dir() {
                    found.push((info.name, info.size));
                }
            }
        } else {
            let info = fs.info(&path).await?;
            if info.is_dir() {
                for entry in fs.find(&path, None, false).await? {
                    let base = entry.name.rsplit('/').next().unwrap_or(&entry.name);
                    let wanted = extensions
                        .iter()
                        .any(|ext| base.ends_with(&format!(".{ext}")));
                    if wanted && !base.starts_with(['.', '_']) {
                        found.push((entry.name, entry.size));
                    }
                }
            } else {
                found.push((info.name, info.size));
            }
        }
        if found.is_empty() {
            return Err(Error::Plan {
                reason: format!(
                    "no input files at {url} (looked for {}); check the URL",
                    extensions
                        .iter()
                        .map(|e| format!("*.{e}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        found.sort();
        out.extend(found.into_iter().map(|(p, s)| (fs.clone(), p, s)));
    }
    Ok(out)
}
