//! fsspec URL conventions: `scheme://bucket/key`, `file:///abs`, bare local paths.

use crate::error::{Error, ErrorKind, Result};

/// Splits `url` into its scheme (lower-cased) and the rest, fsspec style.
///
/// A string without `://` has no scheme and names a local path.
///
/// ```
/// use cairn_fs::split_protocol;
/// assert_eq!(split_protocol("S3://bucket/key"), (Some("s3".to_string()), "bucket/key"));
/// assert_eq!(split_protocol("/tmp/x"), (None, "/tmp/x"));
/// ```
pub fn split_protocol(url: &str) -> (Option<String>, &str) {
    match url.split_once("://") {
        Some((scheme, rest)) if is_scheme(scheme) => (Some(scheme.to_ascii_lowercase()), rest),
        _ => (None, url),
    }
}

fn is_scheme(candidate: &str) -> bool {
    candidate.len() > 1
        && candidate.starts_with(|c: char| c.is_ascii_alphabetic())
        && candidate
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Whether a path contains glob characters (`*`, `?`, `[`), as fsspec's `has_magic`.
///
/// ```
/// assert!(cairn_fs::has_magic("b/dir/*.parquet"));
/// assert!(!cairn_fs::has_magic("b/dir/file"));
/// ```
pub fn has_magic(path: &str) -> bool {
    path.contains(['*', '?', '['])
}

/// Turns a local path (relative or absolute) into an absolute POSIX path with
/// `.` and `..` resolved lexically, as fsspec's `make_path_posix` does.
pub(crate) fn absolute_local(path: &str, url: &str) -> Result<String> {
    if path.is_empty() {
        return Err(Error::new(ErrorKind::InvalidUrl, "empty local path").with_url(url));
    }
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        let cwd = std::env::current_dir().map_err(|e| {
            Error::new(
                ErrorKind::InvalidUrl,
                "cannot resolve a relative path: the current directory is unavailable",
            )
            .with_url(url)
            .with_source(e)
        })?;
        format!("{}/{}", cwd.to_string_lossy(), path)
    };
    Ok(normalize_posix(&joined))
}

/// Resolves `.`, `..` and repeated slashes in an absolute POSIX path; keeps a
/// trailing slash, which marks a directory in fsspec's copy rules.
pub(crate) fn normalize_posix(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let mut out = format!("/{}", parts.join("/"));
    if path.ends_with('/') && out != "/" {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_handles_schemes_and_plain_paths() {
        assert_eq!(
            split_protocol("s3a://b/k/x"),
            (Some("s3a".to_string()), "b/k/x")
        );
        assert_eq!(split_protocol("file:///a/b"), (Some("file".into()), "/a/b"));
        assert_eq!(split_protocol("c://x"), (None, "c://x"));
        assert_eq!(split_protocol("relative/dir"), (None, "relative/dir"));
    }

    #[test]
    fn normalize_resolves_dots() {
        assert_eq!(normalize_posix("/a/./b/../c"), "/a/c");
        assert_eq!(normalize_posix("/a//b/"), "/a/b/");
        assert_eq!(normalize_posix("/.."), "/");
    }

    #[test]
    fn relative_paths_become_absolute() {
        let abs = absolute_local("x/y", "x/y").unwrap();
        assert!(abs.starts_with('/') && abs.ends_with("/x/y"));
    }
}
