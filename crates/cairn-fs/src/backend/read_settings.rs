//! [`S3ReadSettings`]: what another S3 client needs to read a filesystem's
//! objects as cairn would. pyarrow reads the files of one Parquet file at
//! once only through its own S3 client (a Python file's reads are taken one
//! at a time), so cairn-py hands pyarrow that client, configured from
//! these settings, for random-access reads.

/// The endpoint, region, addressing, credentials and retry budget of an
/// S3-compatible filesystem, resolved from its options and environment as
/// cairn resolved them. Only given where another client reads the same
/// objects the same way: static credentials (or none, anonymous), no
/// requester-pays, cairn's own HTTP client (see
/// [`FileSystem::s3_read_settings`](crate::FileSystem::s3_read_settings)).
/// Debug shows no secret.
///
/// ```
/// let mut options = cairn_fs::StorageOptions::new();
/// options
///     .set("s3", "key", "AKIDEXAMPLE".into())
///     .set("s3", "secret", "wJalrXUtnFEMI".into())
///     .set("s3", "endpoint_url", "http://127.0.0.1:3900".into())
///     .set("s3", "region", "garage".into());
/// let fs = cairn_fs::FileSystem::new("s3", &options).unwrap();
/// let settings = fs.s3_read_settings().unwrap();
/// assert_eq!(settings.endpoint, "http://127.0.0.1:3900");
/// assert!(!format!("{settings:?}").contains("wJalrXUtnFEMI"));
/// ```
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct S3ReadSettings {
    /// The endpoint URL, scheme included (`https://s3.us-east-1.amazonaws.com`).
    pub endpoint: String,
    /// The signing region.
    pub region: String,
    /// Virtual-host addressing (`bucket.host`) rather than path style.
    pub virtual_host: bool,
    /// Unsigned requests; no credentials then.
    pub anonymous: bool,
    /// Access key ID.
    pub key: Option<String>,
    /// Secret access key.
    pub secret: Option<String>,
    /// Session token.
    pub token: Option<String>,
    /// Attempts per request, the first included.
    pub max_attempts: usize,
    /// Deadline of each attempt.
    pub request_timeout: std::time::Duration,
}

impl std::fmt::Debug for S3ReadSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3ReadSettings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("virtual_host", &self.virtual_host)
            .field("anonymous", &self.anonymous)
            .field("key", &self.key)
            .field("secret", &self.secret.as_ref().map(|_| "***"))
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("max_attempts", &self.max_attempts)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}
