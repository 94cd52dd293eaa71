//! The one error type of cairn-fs.

use crate::answer::{Meaning, StoreAnswer, find_source};

use std::fmt;

/// What went wrong, as a category callers can match on.
///
/// ```
/// use cairn_fs::ErrorKind;
/// assert_eq!(ErrorKind::NotFound.to_string(), "not found");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file or directory does not exist.
    NotFound,
    /// The bucket (or volume) does not exist: a configuration problem, not
    /// an absent file, so `exists` reports it instead of answering false.
    NoSuchBucket,
    /// The target exists and the operation asked for it not to.
    AlreadyExists,
    /// A conditional operation's condition failed (`If-Match`: the object
    /// changed or is gone).
    PreconditionFailed,
    /// No space is left on the disk or in the store.
    StorageFull,
    /// The store refused the credentials or the caller lacks the right.
    PermissionDenied,
    /// The URL or path cannot be understood.
    InvalidUrl,
    /// No backend is registered for the URL's scheme.
    UnknownScheme,
    /// A storage option or environment variable is wrong.
    Config,
    /// A file operation was applied to a directory.
    IsADirectory,
    /// A directory operation was applied to a file.
    NotADirectory,
    /// The backend cannot do this.
    Unsupported,
    /// The store asked us to slow down.
    RateLimited,
    /// Local I/O failed.
    Io,
    /// Anything else the store reported.
    Other,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::NotFound => "not found",
            ErrorKind::NoSuchBucket => "no such bucket",
            ErrorKind::AlreadyExists => "already exists",
            ErrorKind::PreconditionFailed => "precondition failed",
            ErrorKind::StorageFull => "storage full",
            ErrorKind::PermissionDenied => "permission denied",
            ErrorKind::InvalidUrl => "invalid URL",
            ErrorKind::UnknownScheme => "unknown scheme",
            ErrorKind::Config => "configuration error",
            ErrorKind::IsADirectory => "is a directory",
            ErrorKind::NotADirectory => "not a directory",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::RateLimited => "rate limited",
            ErrorKind::Io => "I/O error",
            ErrorKind::Other => "storage error",
        })
    }
}

/// An error of cairn-fs: a kind, the URL it concerns, what to do, and the cause.
///
/// The message never contains a credential: messages built from a store's
/// answer pass through the filesystem's redaction of its secrets.
///
/// ```
/// use cairn_fs::{Error, ErrorKind};
/// let err = Error::new(ErrorKind::NotFound, "no such file").with_url("s3://b/k");
/// assert_eq!(err.kind(), ErrorKind::NotFound);
/// assert!(err.to_string().contains("s3://b/k"));
/// ```
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    url: Option<String>,
    temporary: bool,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// The result type of cairn-fs.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with a message saying what failed and what to do.
    ///
    /// ```
    /// let e = cairn_fs::Error::new(cairn_fs::ErrorKind::Config, "bad option");
    /// assert!(e.url().is_none());
    /// ```
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            url: None,
            temporary: false,
            source: None,
        }
    }

    /// Attaches the URL the error concerns.
    ///
    /// ```
    /// let e = cairn_fs::Error::new(cairn_fs::ErrorKind::NotFound, "gone").with_url("memory:///x");
    /// assert_eq!(e.url(), Some("memory:///x"));
    /// ```
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// Attaches the underlying cause.
    ///
    /// ```
    /// let io = std::io::Error::other("disk on fire");
    /// let e = cairn_fs::Error::new(cairn_fs::ErrorKind::Io, "write failed").with_source(io);
    /// assert!(std::error::Error::source(&e).is_some());
    /// ```
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Marks the error as worth retrying.
    ///
    /// ```
    /// let e = cairn_fs::Error::new(cairn_fs::ErrorKind::RateLimited, "slow down").set_temporary();
    /// assert!(e.is_temporary());
    /// ```
    pub fn set_temporary(mut self) -> Self {
        self.temporary = true;
        self
    }

    /// The category of the error.
    ///
    /// ```
    /// let e = cairn_fs::Error::new(cairn_fs::ErrorKind::Io, "x");
    /// assert_eq!(e.kind(), cairn_fs::ErrorKind::Io);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The URL the error concerns, when known.
    ///
    /// ```
    /// assert!(cairn_fs::Error::new(cairn_fs::ErrorKind::Io, "x").url().is_none());
    /// ```
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// Whether retrying the same call may succeed (OpenDAL's temporary flag).
    ///
    /// ```
    /// assert!(!cairn_fs::Error::new(cairn_fs::ErrorKind::Io, "x").is_temporary());
    /// ```
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }

    /// The message without the URL or cause.
    ///
    /// ```
    /// assert_eq!(cairn_fs::Error::new(cairn_fs::ErrorKind::Io, "x").message(), "x");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn redact(mut self, secrets: &[String]) -> Self {
        if secrets.is_empty() {
            return self;
        }
        let scrub = |text: &str| {
            secrets
                .iter()
                .filter(|s| !s.is_empty())
                .fold(text.to_string(), |acc, s| acc.replace(s.as_str(), "***"))
        };
        self.message = scrub(&self.message);
        if let Some(source) = self.source.take() {
            let text = scrub(&source.to_string());
            self.source = Some(Box::new(RedactedCause(text)));
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if let Some(url) = &self.url {
            write!(f, " at {url}")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(source) = &self.source {
            write!(f, " (cause: {source})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// A cause whose text was scrubbed of secrets; keeps only the text.
#[derive(Debug)]
struct RedactedCause(String);

impl fmt::Display for RedactedCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedactedCause {}

/// Where the credentials of `url`'s protocol come from, for the error that
/// none were found.
fn credential_hint(url: &str) -> &'static str {
    match url.split_once("://").map(|(scheme, _)| scheme) {
        Some("cos") => {
            "set TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY, or -o cos.key=... -o cos.secret=..."
        }
        Some("oss") => {
            "set ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, or -o oss.key=... -o oss.secret=..."
        }
        Some("gcs" | "gs") => {
            "set GOOGLE_APPLICATION_CREDENTIALS to a key file, or -o gcs.token=..., or -o gcs.anon=true for a public bucket"
        }
        _ => {
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or -o s3.key=... -o s3.secret=..., or -o s3.anon=true for a public bucket"
        }
    }
}

/// What a storage error says when nothing more precise is known.
const GENERIC_FAILURE: &str = "the storage operation failed";

/// Names the store behind `err` when it failed or stopped answering (a
/// 5xx, throttling or network trouble that outlasted the retries), with the
/// retry budget spent (`max_attempts`, `retry_deadline`) and what to do.
pub(crate) fn with_store_hint(
    mut err: Error,
    endpoint: &str,
    max_attempts: usize,
    retry_deadline: Option<std::time::Duration>,
) -> Error {
    // Only where nothing better was said (a full store says so itself).
    if err.kind == ErrorKind::RateLimited || err.message == GENERIC_FAILURE {
        let deadline = retry_deadline
            .map(|d| format!(" or {} s", d.as_secs_f64()))
            .unwrap_or_default();
        err.message = format!(
            "{}: the store at {endpoint} failed or did not answer within {max_attempts} attempts{deadline}; once it answers again, run the same command to continue (retries: config_kwargs.retries.total_max_attempts, retry_deadline)",
            err.message
        );
    }
    err
}

/// Converts an OpenDAL error about `url` (in `bucket`, for bucketed
/// stores) into a cairn error with advice. The kind is decided from typed
/// fields only: OpenDAL's kind, the store's answer read by cairn's
/// transport ([`StoreAnswer`]), the local I/O error, the credential
/// loader's error kind; never from message text.
pub(crate) fn from_opendal(err: opendal::Error, url: &str, bucket: Option<&str>) -> Error {
    use opendal::ErrorKind as K;
    let answer = find_source::<StoreAnswer>(&err).map(|a| (a.meaning, a.region.clone()));
    let local = find_source::<std::io::Error>(&err).map(std::io::Error::kind);
    let credentials = find_source::<reqsign_core::Error>(&err).map(reqsign_core::Error::kind);
    let protocol = url.split_once("://").map_or("s3", |(p, _)| p);
    let (kind, message) = match (answer, err.kind()) {
        (Some((Meaning::NoSuchBucket, _)), _) => (
            ErrorKind::NoSuchBucket,
            format!(
                "bucket {:?} does not exist; create it or check the bucket name",
                bucket.unwrap_or("?")
            ),
        ),
        (Some((Meaning::StorageFull, _)), _) => (ErrorKind::StorageFull, NO_SPACE.to_string()),
        (Some((Meaning::ExpiredToken, _)), _) => (
            ErrorKind::PermissionDenied,
            format!(
                "the session token has expired; get new temporary credentials and set them again ({})",
                credential_hint(url)
            ),
        ),
        (Some((Meaning::RangeNotSatisfied, _)), _) => (
            ErrorKind::Other,
            "the range starts at or past the end of the file".to_string(),
        ),
        (Some((Meaning::WrongRegion, region)), _) => {
            let region = region.unwrap_or_default();
            (
                ErrorKind::Config,
                format!(
                    "the store expects region {region:?}, not the one requests were signed for: set -o {protocol}.region={region} (or AWS_REGION={region})"
                ),
            )
        }
        (None, K::NotFound) => (ErrorKind::NotFound, "no such file or directory".to_string()),
        (None, K::AlreadyExists) => (
            ErrorKind::AlreadyExists,
            "the target already exists and the write asked not to overwrite it".to_string(),
        ),
        (None, K::ConditionNotMatch) => (
            ErrorKind::PreconditionFailed,
            "the object changed since the version the operation was conditional on".to_string(),
        ),
        _ if matches!(local, Some(std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)) => {
            (ErrorKind::StorageFull, NO_SPACE.to_string())
        }
        (None, K::PermissionDenied) => match bucket {
            Some(bucket) => (
                ErrorKind::PermissionDenied,
                format!(
                    "access to bucket {bucket:?} was refused; check the credentials (key/secret/token) and the bucket policy"
                ),
            ),
            None => (
                ErrorKind::PermissionDenied,
                "permission denied: this user may not read or write here, or the filesystem is read-only".to_string(),
            ),
        },
        _ if local == Some(std::io::ErrorKind::IsADirectory) || err.kind() == K::IsADirectory => (
            ErrorKind::IsADirectory,
            "the path is a directory; use a recursive operation or name a file".to_string(),
        ),
        _ if local == Some(std::io::ErrorKind::NotADirectory) || err.kind() == K::NotADirectory => (
            ErrorKind::NotADirectory,
            "a parent of this path is a file, not a directory".to_string(),
        ),
        (_, K::Unsupported) => (
            ErrorKind::Unsupported,
            "the backend does not support this operation".to_string(),
        ),
        (_, K::RateLimited) => (
            ErrorKind::RateLimited,
            "the store is throttling requests; retry later or lower concurrency".to_string(),
        ),
        (_, K::ConfigInvalid) => (ErrorKind::Config, err.message().to_string()),
        // The credential loader found no credentials anywhere it looks.
        _ if credentials == Some(reqsign_core::ErrorKind::CredentialInvalid) => (
            ErrorKind::PermissionDenied,
            format!("no credentials were found; {}", credential_hint(url)),
        ),
        _ => (ErrorKind::Other, GENERIC_FAILURE.to_string()),
    };
    let temporary = err.is_temporary();
    let mut out = Error::new(kind, message).with_url(url).with_source(err);
    out.temporary = temporary;
    out
}

/// What a full disk or store error says.
const NO_SPACE: &str = "no space is left where this is written; free some space or write somewhere else (committed units are kept: the same command resumes)";

/// The kind and the fix of a local I/O error a user can act on: no space,
/// a read-only filesystem, no permission.
pub(crate) fn local_io_reason(err: &std::io::Error) -> Option<(ErrorKind, &'static str)> {
    use std::io::ErrorKind as K;
    match err.kind() {
        K::StorageFull | K::QuotaExceeded => Some((
            ErrorKind::StorageFull,
            "no space is left on this filesystem; free some space or write somewhere else (committed units are kept: the same command resumes)",
        )),
        K::ReadOnlyFilesystem => Some((
            ErrorKind::PermissionDenied,
            "the filesystem is read-only; write somewhere else",
        )),
        K::PermissionDenied => Some((
            ErrorKind::PermissionDenied,
            "permission denied: this user may not write here",
        )),
        _ => None,
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        let (kind, message) = match local_io_reason(&err) {
            Some((kind, why)) => (kind, format!("local I/O failed: {why}")),
            None => {
                let kind = match err.kind() {
                    std::io::ErrorKind::NotFound => ErrorKind::NotFound,
                    std::io::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
                    _ => ErrorKind::Io,
                };
                (kind, "local I/O failed".to_string())
            }
        };
        Error::new(kind, message).with_source(err)
    }
}

/// A cairn error as an [`std::io::Error`] of the matching kind, the cairn
/// error as its inner error, for code written against `std::io`.
///
/// ```
/// let err = cairn_fs::Error::new(cairn_fs::ErrorKind::NotFound, "gone").with_url("s3://b/k");
/// let io: std::io::Error = err.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
/// assert!(io.to_string().contains("s3://b/k"));
/// ```
impl From<Error> for std::io::Error {
    fn from(err: Error) -> Self {
        use std::io::ErrorKind as K;
        let kind = match err.kind {
            ErrorKind::NotFound | ErrorKind::NoSuchBucket => K::NotFound,
            ErrorKind::AlreadyExists => K::AlreadyExists,
            ErrorKind::PermissionDenied => K::PermissionDenied,
            ErrorKind::InvalidUrl | ErrorKind::UnknownScheme | ErrorKind::Config => K::InvalidInput,
            ErrorKind::IsADirectory => K::IsADirectory,
            ErrorKind::NotADirectory => K::NotADirectory,
            ErrorKind::Unsupported => K::Unsupported,
            ErrorKind::StorageFull => K::StorageFull,
            ErrorKind::RateLimited => K::ResourceBusy,
            ErrorKind::PreconditionFailed | ErrorKind::Io | ErrorKind::Other => K::Other,
        };
        std::io::Error::new(kind, err)
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn redaction_scrubs_message_and_cause() {
        let err = Error::new(ErrorKind::Other, "secret=hunter2")
            .with_source(std::io::Error::other("sig hunter2 bad"))
            .redact(&["hunter2".to_string()]);
        let text = format!("{err} {err:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("***"));
    }
}
