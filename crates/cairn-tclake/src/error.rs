//! The one error type of cairn-tclake.

/// What went wrong talking to the catalog, with what to do about it.
///
/// ```
/// let e = cairn_tclake::Error::Api {
///     action: "DescribeVolume".into(), code: "ResourceNotFound.Volume".into(),
///     message: "volume v not found".into(), request_id: "r-1".into(),
/// };
/// assert!(e.to_string().contains("ResourceNotFound.Volume"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The catalog answered with an error code.
    #[error(
        "tclake {action}: {code}: {message} (request {request_id}){}",
        hint(code)
    )]
    Api {
        /// The call.
        action: String,
        /// The API's error code (`AuthFailure.SignatureFailure`, `ResourceNotFound...`).
        code: String,
        /// The API's message.
        message: String,
        /// The request ID, for Tencent support.
        request_id: String,
    },
    /// The catalog could not be reached or answered something unreadable.
    #[error("tclake {action} at {endpoint}: {reason}")]
    Transport {
        /// The call.
        action: String,
        /// The catalog endpoint.
        endpoint: String,
        /// What happened.
        reason: String,
    },
    /// The path or the catalog is not a volume cairn can serve.
    #[error("{0}")]
    Unsupported(String),
    /// Settings are missing or wrong.
    #[error("{0}")]
    Config(String),
}

fn hint(code: &str) -> &'static str {
    if code.starts_with("AuthFailure") {
        "; check tclake.sid and tclake.sk (or TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY) and the machine's clock"
    } else if code.starts_with("ResourceNotFound") {
        "; the catalog, schema and volume must already exist (cairn creates none)"
    } else {
        ""
    }
}

/// Results of cairn-tclake.
pub type Result<T> = std::result::Result<T, Error>;
