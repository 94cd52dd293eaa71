//! The s3 option keys: one table of names (with their aliases) and value
//! types, from which parsing and the `FSSPEC_` raw-text list are derived.

use std::str::FromStr;

use crate::error::{Error, Result};
use crate::options::{config_error, unknown_key};

/// Top-level s3 option keys. `FromStr` takes the aliases; `as_ref` gives the
/// canonical name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum S3Option {
    /// Access key ID (`key`, `aws_access_key_id`, `access_key_id`).
    Key,
    /// Secret access key (`secret`, `aws_secret_access_key`, `secret_access_key`).
    Secret,
    /// Session token (`token`, `aws_session_token`, `session_token`).
    Token,
    /// Endpoint URL (`endpoint_url`, `endpoint`).
    EndpointUrl,
    /// Signing region (`region`, `region_name`).
    Region,
    /// Unsigned requests (`anon`).
    Anon,
    /// botocore client arguments: `endpoint_url`, `region_name`, `aws_*` credentials.
    ClientKwargs,
    /// botocore config: `s3.addressing_style`, `connect_timeout`, `read_timeout`, `retries.max_attempts`.
    ConfigKwargs,
    /// Allow credentials from EC2 instance metadata (off by default).
    UseInstanceMetadata,
    /// `auto` (probe), `native` or `emulate` create-if-absent.
    ConditionalWrites,
    /// s3fs's `use_ssl`: `false` uses `http://` for AWS's regional endpoint
    /// (an `endpoint_url` keeps its own scheme).
    UseSsl,
    /// s3fs's `requester_pays`: send `x-amz-request-payer: requester`.
    RequesterPays,
    /// s3fs's `s3_additional_kwargs`: `ServerSideEncryption` and
    /// `SSEKMSKeyId` are sent with every write; other keys are refused.
    S3AdditionalKwargs,
    /// s3fs's `version_aware`: `false` only (cairn reads the current version).
    VersionAware,
    /// cairn's deadline, in seconds, of one call with its retries
    /// (`retry_deadline`; 0 leaves only the attempt limit).
    RetryDeadline,
    /// s3fs keyword arguments about its own Python machinery or caches
    /// (`default_block_size`, `default_fill_cache`, `default_cache_type`,
    /// `cache_regions`, `session`, `asynchronous`, `loop`,
    /// `fixed_upload_size`, `local_expiry_check`, `skip_instance_cache`):
    /// accepted so s3fs options and `FSSPEC_S3_*` variables work unchanged;
    /// they change nothing in cairn-fs (the Python package uses
    /// `default_block_size` for `open`). s3fs's `max_concurrency` is not
    /// among them: every protocol takes it (`TransferConfig`).
    S3fsNoOp,
}

/// One row of [`KEYS`].
struct Key {
    option: S3Option,
    names: &'static [&'static str],
    text: bool,
}

/// The table every s3 option is read through: its names (canonical first,
/// then aliases) and whether its value is text, which `FSSPEC_S3_<KEY>`
/// variables then keep raw instead of decoding as JSON. Option parsing,
/// the raw-text list and the unknown-key message all come from it.
const KEYS: &[Key] = &[
    Key {
        option: S3Option::Key,
        names: &["key", "aws_access_key_id", "access_key_id", "username"],
        text: true,
    },
    Key {
        option: S3Option::Secret,
        names: &[
            "secret",
            "aws_secret_access_key",
            "secret_access_key",
            "password",
        ],
        text: true,
    },
    Key {
        option: S3Option::Token,
        names: &["token", "aws_session_token", "session_token"],
        text: true,
    },
    Key {
        option: S3Option::EndpointUrl,
        names: &["endpoint_url", "endpoint"],
        text: true,
    },
    Key {
        option: S3Option::Region,
        names: &["region", "region_name"],
        text: true,
    },
    Key {
        option: S3Option::Anon,
        names: &["anon"],
        text: false,
    },
    Key {
        option: S3Option::ClientKwargs,
        names: &["client_kwargs"],
        text: false,
    },
    Key {
        option: S3Option::ConfigKwargs,
        names: &["config_kwargs"],
        text: false,
    },
    Key {
        option: S3Option::UseInstanceMetadata,
        names: &["use_instance_metadata"],
        text: false,
    },
    Key {
        option: S3Option::ConditionalWrites,
        names: &["conditional_writes"],
        text: true,
    },
    Key {
        option: S3Option::UseSsl,
        names: &["use_ssl"],
        text: false,
    },
    Key {
        option: S3Option::RequesterPays,
        names: &["requester_pays"],
        text: false,
    },
    Key {
        option: S3Option::S3AdditionalKwargs,
        names: &["s3_additional_kwargs"],
        text: false,
    },
    Key {
        option: S3Option::VersionAware,
        names: &["version_aware"],
        text: false,
    },
    Key {
        option: S3Option::RetryDeadline,
        names: &["retry_deadline"],
        text: false,
    },
    Key {
        option: S3Option::S3fsNoOp,
        names: &[
            "default_block_size",
            "default_fill_cache",
            "cache_regions",
            "session",
            "asynchronous",
            "loop",
            "fixed_upload_size",
            "local_expiry_check",
            "skip_instance_cache",
        ],
        text: false,
    },
    Key {
        option: S3Option::S3fsNoOp,
        names: &["default_cache_type"],
        text: true,
    },
];

impl FromStr for S3Option {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
        KEYS.iter()
            .find(|key| key.names.contains(&lower.as_str()))
            .map(|key| key.option)
            .ok_or_else(|| unknown_key(&format!("s3.{s}"), &canonical_names()))
    }
}

impl AsRef<str> for S3Option {
    fn as_ref(&self) -> &str {
        KEYS.iter()
            .find(|key| key.option == *self)
            .map(|key| key.names[0])
            .expect("every option is in the table")
    }
}

/// The canonical name of every option, for unknown-key messages.
pub(crate) fn canonical_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for key in KEYS {
        if !names.contains(&key.option.as_ref()) {
            names.push(key.option.as_ref());
        }
    }
    names
}

/// Every name (aliases included) of an option whose value is text: an
/// `FSSPEC_<P>_<KEY>` variable for one of them keeps its raw text.
pub fn string_options() -> &'static [&'static str] {
    static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        KEYS.iter()
            .filter(|key| key.text)
            .flat_map(|key| key.names.iter().copied())
            .collect()
    })
}

/// Request addressing: `bucket.host/key` or `host/bucket/key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressingStyle {
    /// Path style unless the endpoint is AWS's own.
    Auto,
    /// `host/bucket/key`.
    Path,
    /// `bucket.host/key`.
    Virtual,
}

impl FromStr for AddressingStyle {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "path" => Ok(Self::Path),
            "virtual" => Ok(Self::Virtual),
            other => Err(config_error(format!(
                "option s3.config_kwargs.s3.addressing_style is {other:?}; use \"path\", \"virtual\" or \"auto\""
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_text_list_is_the_old_hand_kept_one() {
        let mut derived: Vec<&str> = string_options().to_vec();
        derived.sort_unstable();
        let mut expected = vec![
            "access_key_id",
            "aws_access_key_id",
            "aws_secret_access_key",
            "aws_session_token",
            "conditional_writes",
            "default_cache_type",
            "endpoint",
            "endpoint_url",
            "key",
            "password",
            "region",
            "region_name",
            "secret",
            "secret_access_key",
            "session_token",
            "token",
            "username",
        ];
        expected.sort_unstable();
        assert_eq!(derived, expected);
    }
}

#[cfg(test)]
mod examples {
    use super::*;

    #[test]
    fn s3option_example() {
        let k: S3Option = "aws_secret_access_key".parse().unwrap();
        assert_eq!(k.as_ref(), "secret");
        assert!("secrte".parse::<S3Option>().is_err());
    }

    #[test]
    fn string_options_example() {
        let names = string_options();
        assert!(names.contains(&"aws_secret_access_key") && !names.contains(&"anon"));
    }

    #[test]
    fn addressingstyle_example() {
        assert_eq!(
            "virtual".parse::<AddressingStyle>().unwrap(),
            AddressingStyle::Virtual
        );
        assert!("sideways".parse::<AddressingStyle>().is_err());
    }
}
