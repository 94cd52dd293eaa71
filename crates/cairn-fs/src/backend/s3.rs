//! `s3://` (alias `s3a://`): OpenDAL's `services-s3`, configured the way s3fs
//! users expect from options and the AWS environment.
//!
//! Resolution, lowest precedence first: defaults < AWS environment <
//! `client_kwargs` < top-level options.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use opendal::Operator;
use serde_json::{Map, Value};

use super::{Backend, BackendFactory, ConditionalWrites, IoPolicy, Layout, open_operator};
use crate::error::{Error, Result};
use crate::options::{
    At, BackendOptions, ConfigLine, Environment, Setting, Source, config_error, unknown_key,
    value_as_bool, value_as_f64, value_as_object, value_as_string,
};

/// The region used when neither options nor environment name one.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Top-level s3 option keys. `FromStr` takes the aliases; `as_ref` gives the
/// canonical name.
///
/// ```
/// use cairn_fs::backend::s3::S3Option;
/// let k: S3Option = "aws_secret_access_key".parse().unwrap();
/// assert_eq!(k.as_ref(), "secret");
/// assert!("secrte".parse::<S3Option>().is_err());
/// ```
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
    /// `max_concurrency`, `fixed_upload_size`, `local_expiry_check`,
    /// `skip_instance_cache`): accepted so s3fs options and `FSSPEC_S3_*`
    /// variables work unchanged; they change nothing in cairn-fs (the Python
    /// package uses `default_block_size` for `open`).
    S3fsNoOp,
}

const TOP_LEVEL: &[(S3Option, &[&str])] = &[
    (
        S3Option::Key,
        &["key", "aws_access_key_id", "access_key_id", "username"],
    ),
    (
        S3Option::Secret,
        &[
            "secret",
            "aws_secret_access_key",
            "secret_access_key",
            "password",
        ],
    ),
    (
        S3Option::Token,
        &["token", "aws_session_token", "session_token"],
    ),
    (S3Option::EndpointUrl, &["endpoint_url", "endpoint"]),
    (S3Option::Region, &["region", "region_name"]),
    (S3Option::Anon, &["anon"]),
    (S3Option::ClientKwargs, &["client_kwargs"]),
    (S3Option::ConfigKwargs, &["config_kwargs"]),
    (S3Option::UseInstanceMetadata, &["use_instance_metadata"]),
    (S3Option::ConditionalWrites, &["conditional_writes"]),
    (S3Option::UseSsl, &["use_ssl"]),
    (S3Option::RequesterPays, &["requester_pays"]),
    (S3Option::S3AdditionalKwargs, &["s3_additional_kwargs"]),
    (S3Option::VersionAware, &["version_aware"]),
    (S3Option::RetryDeadline, &["retry_deadline"]),
    (
        S3Option::S3fsNoOp,
        &[
            "default_block_size",
            "default_fill_cache",
            "default_cache_type",
            "cache_regions",
            "session",
            "asynchronous",
            "loop",
            "max_concurrency",
            "fixed_upload_size",
            "local_expiry_check",
            "skip_instance_cache",
        ],
    ),
];

impl FromStr for S3Option {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
        TOP_LEVEL
            .iter()
            .find(|(_, names)| names.contains(&lower.as_str()))
            .map(|(key, _)| *key)
            .ok_or_else(|| unknown_key(&format!("s3.{s}"), &canonical_names()))
    }
}

impl AsRef<str> for S3Option {
    fn as_ref(&self) -> &str {
        TOP_LEVEL
            .iter()
            .find(|(key, _)| key == self)
            .map(|(_, names)| names[0])
            .expect("every option is in the table")
    }
}

fn canonical_names() -> Vec<&'static str> {
    TOP_LEVEL.iter().map(|(_, names)| names[0]).collect()
}

/// Request addressing: `bucket.host/key` or `host/bucket/key`.
///
/// ```
/// use cairn_fs::backend::s3::AddressingStyle;
/// assert_eq!("virtual".parse::<AddressingStyle>().unwrap(), AddressingStyle::Virtual);
/// assert!("sideways".parse::<AddressingStyle>().is_err());
/// ```
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

/// The resolved s3 configuration; Debug redacts the credentials.
#[derive(Clone)]
pub struct S3Config {
    /// Access key ID.
    pub key: Option<Setting<String>>,
    /// Secret access key.
    pub secret: Option<Setting<String>>,
    /// Session token.
    pub token: Option<Setting<String>>,
    /// Endpoint URL (AWS's regional endpoint when none was configured).
    pub endpoint: Setting<String>,
    /// Signing region.
    pub region: Setting<String>,
    /// Unsigned requests.
    pub anon: Setting<bool>,
    /// Addressing actually used (auto already decided).
    pub virtual_host: Setting<bool>,
    /// Allow EC2 instance metadata credentials.
    pub use_instance_metadata: Setting<bool>,
    /// How create-if-absent is done.
    pub conditional_writes: Setting<ConditionalWrites>,
    /// Send `x-amz-request-payer: requester`.
    pub requester_pays: Setting<bool>,
    /// Server-side encryption for writes (`AES256`, `aws:kms`), and the KMS key.
    pub server_side_encryption: Option<(Setting<String>, Option<String>)>,
    /// Retry and timeouts.
    pub io: IoPolicy,
    /// Where `io.max_attempts` came from.
    pub max_attempts_source: Source,
    /// botocore's retry mode (`legacy`, `standard`, `adaptive`): the same
    /// back-off in cairn (adaptive's client-side rate limiter is not built).
    pub retry_mode: Setting<String>,
    /// Where `io.retry_deadline` came from.
    pub retry_deadline_source: Source,
    /// The checksum each upload carries for the server to verify (`None`:
    /// botocore's `request_checksum_calculation=when_required`).
    pub checksum: Setting<Option<ChecksumHeader>>,
}

/// The checksum header an S3-compatible store verifies on uploads.
///
/// ```
/// use cairn_fs::backend::s3::ChecksumHeader;
/// assert_eq!(ChecksumHeader::Crc32c.to_string(), "x-amz-checksum-crc32c");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumHeader {
    /// `x-amz-checksum-crc32c` on every put and part (AWS S3, MinIO, Garage, moto).
    Crc32c,
    /// `Content-MD5` on every put and part (stores of unknown
    /// `x-amz-checksum-*` support, such as COS).
    ContentMd5,
}

impl std::fmt::Display for ChecksumHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Crc32c => "x-amz-checksum-crc32c",
            Self::ContentMd5 => "content-md5",
        })
    }
}

impl std::fmt::Debug for S3Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("key", &self.key.as_ref().map(|s| &s.value))
            .field("secret", &self.secret.as_ref().map(|_| "***"))
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("endpoint", &self.endpoint.value)
            .field("region", &self.region.value)
            .field("anon", &self.anon.value)
            .field("virtual_host", &self.virtual_host.value)
            .finish()
    }
}

/// What distinguishes one S3-compatible service from another: environment
/// names, defaults, addressing, request hooks.
#[derive(Clone, Copy)]
pub struct S3Flavor {
    /// Protocol name, for messages and option paths (`s3`, `cos`).
    pub protocol: &'static str,
    /// Environment variables holding the access key ID, in order of preference.
    pub key_env: &'static [&'static str],
    /// ... the secret key.
    pub secret_env: &'static [&'static str],
    /// ... the session token.
    pub token_env: &'static [&'static str],
    /// ... the region.
    pub region_env: &'static [&'static str],
    /// ... the endpoint (ignored when `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`).
    pub endpoint_env: &'static [&'static str],
    /// Region when none is configured; `None` makes one required (unless the
    /// endpoint names it).
    pub default_region: Option<&'static str>,
    /// The service endpoint of a region.
    pub regional_endpoint: fn(&str) -> String,
    /// Virtual-host addressing unless `addressing_style` says otherwise;
    /// `None` means: path style for a custom endpoint, virtual host otherwise.
    pub virtual_by_default: Option<bool>,
    /// Reads botocore's `AWS_MAX_ATTEMPTS`, `AWS_RETRY_MODE` and
    /// `AWS_REQUEST_CHECKSUM_CALCULATION`.
    pub botocore_env: bool,
    /// The checksum uploads carry unless `request_checksum_calculation` is
    /// `when_required`.
    pub checksum: ChecksumHeader,
}

/// AWS S3 and S3-compatible servers (MinIO, Garage, moto, ...).
pub const AWS: S3Flavor = S3Flavor {
    protocol: "s3",
    key_env: &["AWS_ACCESS_KEY_ID"],
    secret_env: &["AWS_SECRET_ACCESS_KEY"],
    token_env: &["AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"],
    region_env: &["AWS_DEFAULT_REGION", "AWS_REGION"],
    endpoint_env: &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
    default_region: Some(DEFAULT_REGION),
    regional_endpoint: |region| format!("https://s3.{region}.amazonaws.com"),
    virtual_by_default: None,
    botocore_env: true,
    checksum: ChecksumHeader::Crc32c,
};

impl S3Config {
    /// Resolves AWS S3 options (merged over `s3`/`s3a`) against the environment.
    ///
    /// ```
    /// use cairn_fs::{BackendOptions, Environment, backend::s3::S3Config};
    /// let opts = serde_json::json!({"endpoint_url": "http://127.0.0.1:3900"});
    /// let opts = BackendOptions::from_map("s3", opts.as_object().unwrap());
    /// let env = Environment::from_pairs([("AWS_DEFAULT_REGION", "garage")]);
    /// let cfg = S3Config::resolve(&opts, &env).unwrap();
    /// assert_eq!(cfg.region.value, "garage");
    /// assert!(!cfg.virtual_host.value); // custom endpoint: path style
    /// ```
    pub fn resolve(options: &BackendOptions, env: &Environment) -> Result<Self> {
        Self::resolve_flavor(&AWS, options, env)
    }

    /// Resolves the options of an S3-compatible `flavor`.
    pub fn resolve_flavor(
        flavor: &S3Flavor,
        options: &BackendOptions,
        env: &Environment,
    ) -> Result<Self> {
        let protocol = flavor.protocol;
        let mut top: Vec<(S3Option, At, &Value)> = Vec::new();
        for (name, value, source) in options.iter() {
            let key: S3Option = name
                .parse()
                .map_err(|_| unknown_key(&options.at(name, source).label(), &canonical_names()))?;
            top.push((key, options.at(name, source), value));
        }
        // One option under two of its names (key and username, say) is
        // ambiguous: s3fs refuses it too.
        for (i, (key, at, _)) in top.iter().enumerate() {
            if *key == S3Option::S3fsNoOp {
                continue;
            }
            if let Some((_, other, _)) = top[i + 1..].iter().find(|(k, _, _)| k == key) {
                return Err(config_error(format!(
                    "options {} and {} are one setting under two names; give only one",
                    at.label(),
                    other.label()
                )));
            }
        }
        let get = |wanted: S3Option| {
            top.iter()
                .find(|(k, _, _)| *k == wanted)
                .map(|(_, at, v)| (at.clone(), *v))
        };

        let client = match get(S3Option::ClientKwargs) {
            Some((at, v)) => ClientKwargs::parse(value_as_object(v, &at.label())?, &at)?,
            None => ClientKwargs::default(),
        };
        let config = match get(S3Option::ConfigKwargs) {
            Some((at, v)) => ConfigKwargs::parse(value_as_object(v, &at.label())?, &at)?,
            None => ConfigKwargs::default(),
        };

        let string_opt = |wanted: S3Option| -> Result<Option<Setting<String>>> {
            get(wanted)
                .map(|(at, v)| value_as_string(v, &at.label()).map(|s| at.setting(s)))
                .transpose()
        };
        let bool_opt = |wanted: S3Option, default: bool| -> Result<Setting<bool>> {
            match get(wanted) {
                Some((at, v)) => Ok(at.setting(value_as_bool(v, &at.label())?)),
                None => Ok(Setting::new(default, Source::Default)),
            }
        };
        let env_setting = |names: &[&str]| {
            names.iter().find_map(|n| {
                env.get(n)
                    .map(|v| Setting::new(v.to_string(), Source::Env(n.to_string())))
            })
        };

        let key = string_opt(S3Option::Key)?
            .or(client.access_key_id.clone())
            .or_else(|| env_setting(flavor.key_env));
        let secret = string_opt(S3Option::Secret)?
            .or(client.secret_access_key.clone())
            .or_else(|| env_setting(flavor.secret_env));
        let token = string_opt(S3Option::Token)?
            .or(client.session_token.clone())
            .or_else(|| env_setting(flavor.token_env));
        if key.is_some() != secret.is_some() {
            let (have, missing) = if key.is_some() {
                ("key", "secret")
            } else {
                ("secret", "key")
            };
            let vars = if missing == "key" {
                flavor.key_env
            } else {
                flavor.secret_env
            };
            return Err(config_error(format!(
                "{protocol} credentials are incomplete: a {have} is set but no {missing}; set {protocol}.{missing} or {}",
                vars.join(" or ")
            )));
        }

        let ignore_env_endpoint = env
            .get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let custom_endpoint = string_opt(S3Option::EndpointUrl)?
            .or(client.endpoint_url.clone())
            .or_else(|| {
                (!ignore_env_endpoint)
                    .then(|| env_setting(flavor.endpoint_env))
                    .flatten()
            });
        if let Some(endpoint) = &custom_endpoint {
            check_endpoint(protocol, endpoint)?;
        }

        let configured_region = string_opt(S3Option::Region)?
            .or(client.region_name.clone())
            .or_else(|| env_setting(flavor.region_env));
        let region = match (configured_region, flavor.default_region, &custom_endpoint) {
            (Some(region), _, _) => region,
            (None, Some(default), _) => Setting::new(default.to_string(), Source::Default),
            (None, None, Some(endpoint)) => region_from_endpoint(&endpoint.value)
                .map(|r| Setting::new(r, endpoint.source.clone()))
                .ok_or_else(|| {
                    config_error(format!(
                        "{protocol} needs a region to sign requests and none could be read from the endpoint {:?}; set {protocol}.region (or {})",
                        endpoint.value,
                        flavor.region_env.join(", ")
                    ))
                })?,
            (None, None, None) => {
                return Err(config_error(format!(
                    "{protocol} needs a region or an endpoint: set {protocol}.region (or {}), or {protocol}.endpoint_url",
                    flavor.region_env.join(", ")
                )));
            }
        };
        let mut regional = (flavor.regional_endpoint)(&region.value);
        let use_ssl = bool_opt(S3Option::UseSsl, true)?;
        if !use_ssl.value
            && let Some(rest) = regional.strip_prefix("https://")
        {
            regional = format!("http://{rest}");
        }
        let regional = Setting::new(regional, use_ssl.source.clone());
        if bool_opt(S3Option::VersionAware, false)?.value {
            return Err(config_error(format!(
                "{protocol}.version_aware is true: cairn reads and writes the current version of each object only; drop the option (or set it to false)"
            )));
        }
        let server_side_encryption = match get(S3Option::S3AdditionalKwargs) {
            None => None,
            Some((at, v)) => {
                let mut algorithm = None;
                let mut kms_key = None;
                for (name, value) in value_as_object(v, &at.label())? {
                    let label = format!("{}.{name}", at.label());
                    match name.as_str() {
                        "ServerSideEncryption" => {
                            algorithm = Some(at.setting(value_as_string(value, &label)?))
                        }
                        "SSEKMSKeyId" => kms_key = Some(value_as_string(value, &label)?),
                        other => {
                            return Err(config_error(format!(
                                "option {label} is not supported: of s3_additional_kwargs cairn sends ServerSideEncryption and SSEKMSKeyId ({other} would be ignored, so it is refused)"
                            )));
                        }
                    }
                }
                match (algorithm, kms_key) {
                    (Some(a), key) => Some((a, key)),
                    (None, Some(_)) => {
                        return Err(config_error(format!(
                            "option {}.SSEKMSKeyId needs ServerSideEncryption=\"aws:kms\" beside it",
                            at.label()
                        )));
                    }
                    (None, None) => None,
                }
            }
        };

        let virtual_host = match &config.addressing_style {
            Some(style) if style.value == AddressingStyle::Path => {
                Setting::new(false, style.source.clone())
            }
            Some(style) if style.value == AddressingStyle::Virtual => {
                Setting::new(true, style.source.clone())
            }
            _ => Setting::new(
                flavor
                    .virtual_by_default
                    .unwrap_or(custom_endpoint.is_none()),
                Source::Default,
            ),
        };

        let conditional_writes = match get(S3Option::ConditionalWrites) {
            Some((at, v)) => {
                let text = value_as_string(v, &at.label())?;
                let mode = match text.to_ascii_lowercase().as_str() {
                    "auto" | "probe" => ConditionalWrites::Probe,
                    "native" => ConditionalWrites::Native,
                    "emulate" | "emulated" => ConditionalWrites::Emulated,
                    other => {
                        return Err(config_error(format!(
                            "option {} is {other:?}; use \"auto\", \"native\" or \"emulate\"",
                            at.label()
                        )));
                    }
                };
                at.setting(mode)
            }
            None => Setting::new(ConditionalWrites::Probe, Source::Default),
        };

        let mut io = IoPolicy::default();
        if let Some(secs) = config.read_timeout {
            io.io_timeout = secs;
        }
        if let Some(connect) = config.connect_timeout {
            io.op_timeout = io.op_timeout.max(connect);
        }
        let botocore_env = |name: &str| {
            flavor
                .botocore_env
                .then(|| env.get(name))
                .flatten()
                .map(|v| (v.to_string(), Source::Env(name.to_string())))
        };
        let attempts = match (config.total_attempts, botocore_env("AWS_MAX_ATTEMPTS")) {
            (Some(setting), _) => Some(setting),
            (None, Some((text, source))) => {
                let n = text.trim().parse::<usize>().map_err(|_| {
                    config_error(format!(
                        "{source} is {text:?}: give the total number of attempts per request, e.g. 5"
                    ))
                })?;
                Some(Setting::new(n, source))
            }
            (None, None) => None,
        };
        let max_attempts_source = match attempts {
            Some(setting) => {
                io.max_attempts = setting.value.max(1);
                setting.source
            }
            None => Source::Default,
        };
        let retry_mode = match (config.retry_mode, botocore_env("AWS_RETRY_MODE")) {
            (Some(mode), _) => mode,
            (None, Some((text, source))) => {
                Setting::new(retry_mode(&text, &source.to_string())?, source)
            }
            (None, None) => Setting::new("standard".to_string(), Source::Default),
        };
        let retry_deadline_source = match get(S3Option::RetryDeadline) {
            Some((at, v)) => {
                let label = at.label();
                let secs = value_as_f64(v, &label)?;
                if !(secs >= 0.0 && secs.is_finite()) {
                    return Err(config_error(format!(
                        "option {label} is {secs}: give the seconds a call may take with its retries (0: no deadline)"
                    )));
                }
                io.retry_deadline = (secs > 0.0).then(|| Duration::from_secs_f64(secs));
                at.setting(()).source
            }
            None => Source::Default,
        };
        let checksum_on = match (
            config.checksum_when_supported,
            botocore_env("AWS_REQUEST_CHECKSUM_CALCULATION"),
        ) {
            (Some(on), _) => on,
            (None, Some((text, source))) => {
                Setting::new(checksum_calculation(&text, &source.to_string())?, source)
            }
            (None, None) => Setting::new(true, Source::Default),
        };
        let checksum = Setting::new(
            checksum_on.value.then_some(flavor.checksum),
            checksum_on.source,
        );

        Ok(Self {
            key,
            secret,
            token,
            endpoint: custom_endpoint.unwrap_or(regional),
            region,
            anon: bool_opt(S3Option::Anon, false)?,
            virtual_host,
            use_instance_metadata: bool_opt(S3Option::UseInstanceMetadata, false)?,
            conditional_writes,
            requester_pays: bool_opt(S3Option::RequesterPays, false)?,
            server_side_encryption,
            io,
            max_attempts_source,
            retry_mode,
            retry_deadline_source,
            checksum,
        })
    }
}

/// botocore's retry mode names, checked (`what` names where it came from).
fn retry_mode(text: &str, what: &str) -> Result<String> {
    match text.trim().to_ascii_lowercase().as_str() {
        mode @ ("legacy" | "standard" | "adaptive") => Ok(mode.to_string()),
        _ => Err(config_error(format!(
            "{what} is {text:?}; use \"standard\" (or botocore's \"legacy\" or \"adaptive\", which cairn treats the same)"
        ))),
    }
}

/// botocore's `request_checksum_calculation`: `when_supported` is true.
fn checksum_calculation(text: &str, what: &str) -> Result<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "when_supported" => Ok(true),
        "when_required" => Ok(false),
        _ => Err(config_error(format!(
            "{what} is {text:?}; use \"when_supported\" (a checksum on every upload) or \"when_required\" (none)"
        ))),
    }
}

/// The region in an endpoint such as `https://cos.ap-guangzhou.myqcloud.com`.
fn region_from_endpoint(endpoint: &str) -> Option<String> {
    let host = url::Url::parse(endpoint).ok()?.host_str()?.to_string();
    let mut labels = host.split('.');
    match (labels.next(), labels.next()) {
        (Some("cos" | "s3"), Some(region)) if region.contains('-') => Some(region.to_string()),
        _ => None,
    }
}

fn check_endpoint(protocol: &str, endpoint: &Setting<String>) -> Result<()> {
    match url::Url::parse(&endpoint.value) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(()),
        _ => Err(config_error(format!(
            "the {protocol} endpoint {:?} (from {}) is not an http(s) URL; write it as http://host:port",
            endpoint.value, endpoint.source
        ))),
    }
}

/// `client_kwargs` as botocore takes them.
#[derive(Default)]
struct ClientKwargs {
    endpoint_url: Option<Setting<String>>,
    region_name: Option<Setting<String>>,
    access_key_id: Option<Setting<String>>,
    secret_access_key: Option<Setting<String>>,
    session_token: Option<Setting<String>>,
}

impl ClientKwargs {
    const VALID: &'static [&'static str] = &[
        "endpoint_url",
        "region_name",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
    ];

    fn parse(map: &Map<String, Value>, parent: &At) -> Result<Self> {
        let mut out = Self::default();
        for (name, value) in map {
            let at = parent.child(name);
            let path = at.label();
            let setting = at.setting(value_as_string(value, &path)?);
            let slot = match name.as_str() {
                "endpoint_url" => &mut out.endpoint_url,
                "region_name" => &mut out.region_name,
                "aws_access_key_id" => &mut out.access_key_id,
                "aws_secret_access_key" => &mut out.secret_access_key,
                "aws_session_token" => &mut out.session_token,
                _ => return Err(unknown_key(&path, Self::VALID)),
            };
            *slot = Some(setting);
        }
        Ok(out)
    }
}

/// `config_kwargs` as botocore's `Config` takes them.
#[derive(Default)]
struct ConfigKwargs {
    addressing_style: Option<Setting<AddressingStyle>>,
    connect_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    /// Attempts per request, the first included.
    total_attempts: Option<Setting<usize>>,
    retry_mode: Option<Setting<String>>,
    checksum_when_supported: Option<Setting<bool>>,
}

impl ConfigKwargs {
    const VALID: &'static [&'static str] = &[
        "s3",
        "connect_timeout",
        "read_timeout",
        "retries",
        "request_checksum_calculation",
    ];

    fn parse(map: &Map<String, Value>, parent: &At) -> Result<Self> {
        let mut out = Self::default();
        for (name, value) in map {
            let at = parent.child(name);
            let path = at.label();
            match name.as_str() {
                "s3" => {
                    for (sub, v) in value_as_object(value, &path)? {
                        let sub_at = at.child(sub);
                        let sub_path = sub_at.label();
                        match sub.as_str() {
                            "addressing_style" => {
                                let text = value_as_string(v, &sub_path)?;
                                let style = text.parse().map_err(|_| {
                                    config_error(format!(
                                        "option {sub_path} is {text:?}; use \"path\", \"virtual\" or \"auto\""
                                    ))
                                })?;
                                out.addressing_style = Some(sub_at.setting(style));
                            }
                            _ => return Err(unknown_key(&sub_path, &["addressing_style"])),
                        }
                    }
                }
                "connect_timeout" => {
                    out.connect_timeout = Some(Duration::from_secs_f64(value_as_f64(value, &path)?))
                }
                "read_timeout" => {
                    out.read_timeout = Some(Duration::from_secs_f64(value_as_f64(value, &path)?))
                }
                "request_checksum_calculation" => {
                    let text = value_as_string(value, &path)?;
                    out.checksum_when_supported =
                        Some(at.setting(checksum_calculation(&text, &format!("option {path}"))?));
                }
                "retries" => {
                    for (sub, v) in value_as_object(value, &path)? {
                        let sub_at = at.child(sub);
                        let sub_path = sub_at.label();
                        match sub.as_str() {
                            // botocore: `max_attempts` counts the retries,
                            // `total_max_attempts` the first attempt too.
                            "max_attempts" | "total_max_attempts" => {
                                let n = value_as_f64(v, &sub_path)?;
                                if !(n >= 0.0 && n.fract() == 0.0) {
                                    return Err(config_error(format!(
                                        "option {sub_path} is {n}: give a whole number of attempts"
                                    )));
                                }
                                let first = usize::from(sub == "max_attempts");
                                out.total_attempts = Some(sub_at.setting(n as usize + first));
                            }
                            "mode" => {
                                let text = value_as_string(v, &sub_path)?;
                                out.retry_mode = Some(
                                    sub_at
                                        .setting(retry_mode(&text, &format!("option {sub_path}"))?),
                                );
                            }
                            _ => {
                                return Err(unknown_key(
                                    &sub_path,
                                    &["max_attempts", "total_max_attempts", "mode"],
                                ));
                            }
                        }
                    }
                }
                _ => return Err(unknown_key(&path, Self::VALID)),
            }
        }
        Ok(out)
    }
}

/// The factory of `s3://` and `s3a://`.
///
/// ```
/// use cairn_fs::backend::{BackendFactory, s3::S3Factory};
/// assert_eq!(S3Factory.schemes(), &["s3", "s3a"]);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct S3Factory;

impl BackendFactory for S3Factory {
    fn protocol(&self) -> &str {
        "s3"
    }
    fn schemes(&self) -> &[&str] {
        &["s3", "s3a"]
    }
    fn layout(&self) -> Layout {
        Layout::Bucketed
    }
    fn string_options(&self) -> &[&str] {
        STRING_OPTIONS
    }
    fn configure(&self, options: &BackendOptions, env: &Environment) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(S3Backend {
            protocol: "s3",
            config: S3Config::resolve(options, env)?,
            hooks: Vec::new(),
        }))
    }
}

/// Options whose values are text, kept raw when they come from `FSSPEC_<P>_<K>`.
pub(crate) const STRING_OPTIONS: &[&str] = &[
    "key",
    "aws_access_key_id",
    "access_key_id",
    "secret",
    "aws_secret_access_key",
    "secret_access_key",
    "token",
    "aws_session_token",
    "session_token",
    "endpoint_url",
    "endpoint",
    "region",
    "region_name",
    "conditional_writes",
    "username",
    "password",
    "default_cache_type",
];

/// A configured S3-compatible backend.
#[derive(Debug)]
pub struct S3Backend {
    pub(crate) protocol: &'static str,
    pub(crate) config: S3Config,
    pub(crate) hooks: Vec<Arc<dyn crate::hooks::RequestHook>>,
}

impl S3Backend {
    fn build_operator(&self, bucket: &str) -> Result<Operator> {
        let c = &self.config;
        let mut builder = opendal::services::S3::default()
            .bucket(bucket)
            .region(&c.region.value)
            .endpoint(&c.endpoint.value);
        if c.virtual_host.value {
            builder = builder.enable_virtual_host_style();
        }
        if let (Some(key), Some(secret)) = (&c.key, &c.secret) {
            builder = builder
                .access_key_id(&key.value)
                .secret_access_key(&secret.value);
        }
        if let Some(token) = &c.token {
            builder = builder.session_token(&token.value);
        }
        if c.anon.value {
            builder = builder.skip_signature();
        }
        if !c.use_instance_metadata.value {
            builder = builder.disable_ec2_metadata();
        }
        if c.requester_pays.value {
            builder = builder.enable_request_payer();
        }
        if c.checksum.value == Some(ChecksumHeader::Crc32c) {
            builder = builder.checksum_algorithm("crc32c");
        }
        if let Some((algorithm, kms_key)) = &c.server_side_encryption {
            builder = builder.server_side_encryption(&algorithm.value);
            if let Some(key) = kms_key {
                builder = builder.server_side_encryption_aws_kms_key_id(key);
            }
        }
        open_operator(builder, self.protocol, bucket)
    }
}

impl Backend for S3Backend {
    fn operator<'a>(&'a self, bucket: &'a str) -> BoxFuture<'a, Result<Operator>> {
        Box::pin(std::future::ready(self.build_operator(bucket)))
    }

    fn conditional_writes(&self) -> ConditionalWrites {
        self.config.conditional_writes.value
    }

    fn endpoint(&self) -> Option<String> {
        Some(self.config.endpoint.value.clone())
    }

    fn secrets(&self) -> Vec<String> {
        [&self.config.secret, &self.config.token]
            .into_iter()
            .flatten()
            .map(|s| s.value.clone())
            .collect()
    }

    fn describe(&self) -> Vec<ConfigLine> {
        let c = &self.config;
        let line = |name: &str, value: String, source: &Source| ConfigLine {
            name: name.to_string(),
            value,
            source: source.clone(),
        };
        let mut out = vec![
            line("endpoint_url", c.endpoint.value.clone(), &c.endpoint.source),
            line("region", c.region.value.clone(), &c.region.source),
            line(
                "addressing_style",
                if c.virtual_host.value {
                    "virtual"
                } else {
                    "path"
                }
                .into(),
                &c.virtual_host.source,
            ),
            line("anon", c.anon.value.to_string(), &c.anon.source),
            line(
                "use_instance_metadata",
                c.use_instance_metadata.value.to_string(),
                &c.use_instance_metadata.source,
            ),
            line(
                "conditional_writes",
                c.conditional_writes.value.to_string(),
                &c.conditional_writes.source,
            ),
            line(
                "requester_pays",
                c.requester_pays.value.to_string(),
                &c.requester_pays.source,
            ),
            line(
                "max_attempts",
                c.io.max_attempts.to_string(),
                &c.max_attempts_source,
            ),
            line(
                "retry_mode",
                c.retry_mode.value.clone(),
                &c.retry_mode.source,
            ),
            line(
                "retry_deadline",
                match c.io.retry_deadline {
                    Some(d) => format!("{} s", d.as_secs_f64()),
                    None => "none".into(),
                },
                &c.retry_deadline_source,
            ),
            line(
                "upload_checksum",
                match c.checksum.value {
                    Some(header) => header.to_string(),
                    None => "none".into(),
                },
                &c.checksum.source,
            ),
        ];
        if let Some((algorithm, kms_key)) = &c.server_side_encryption {
            let value = match kms_key {
                Some(key) => format!("{} (key {key})", algorithm.value),
                None => algorithm.value.clone(),
            };
            out.push(line("server_side_encryption", value, &algorithm.source));
        }
        if let Some(key) = &c.key {
            out.push(line("key", key.value.clone(), &key.source));
        }
        for (name, secret) in [("secret", &c.secret), ("token", &c.token)] {
            if let Some(s) = secret {
                out.push(line(name, "***".into(), &s.source));
            }
        }
        out
    }

    fn io_policy(&self) -> IoPolicy {
        self.config.io
    }

    fn request_hooks(&self) -> Vec<Arc<dyn crate::hooks::RequestHook>> {
        let mut hooks = self.hooks.clone();
        if self.config.checksum.value == Some(ChecksumHeader::ContentMd5) {
            hooks.push(Arc::new(crate::hooks::ContentMd5OnUpload));
        }
        hooks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resolve(opts: Value, env: &[(&str, &str)]) -> Result<S3Config> {
        S3Config::resolve(
            &BackendOptions::from_map("s3", opts.as_object().unwrap()),
            &Environment::from_pairs(env.iter().copied()),
        )
    }

    #[test]
    fn defaults_without_anything() {
        let c = resolve(json!({}), &[]).unwrap();
        assert_eq!(c.region.value, DEFAULT_REGION);
        assert_eq!(c.endpoint.value, "https://s3.us-east-1.amazonaws.com");
        assert!(c.virtual_host.value);
        assert!(c.key.is_none());
        assert!(!c.use_instance_metadata.value);
    }

    #[test]
    fn retries_as_botocore_counts_them() {
        let c = resolve(json!({}), &[]).unwrap();
        assert_eq!(c.io.max_attempts, 10);
        assert_eq!(c.retry_mode.value, "standard");
        assert_eq!(c.io.retry_deadline, Some(Duration::from_secs(300)));
        assert_eq!(c.checksum.value, Some(ChecksumHeader::Crc32c));
        // botocore: max_attempts counts the retries, total_max_attempts all.
        let c = resolve(
            json!({"config_kwargs": {"retries": {"max_attempts": 2}}}),
            &[],
        )
        .unwrap();
        assert_eq!(c.io.max_attempts, 3);
        let c = resolve(
            json!({"config_kwargs": {"retries": {"total_max_attempts": 2, "mode": "Adaptive"}}}),
            &[("AWS_MAX_ATTEMPTS", "7")],
        )
        .unwrap();
        assert_eq!(c.io.max_attempts, 2);
        assert_eq!(c.retry_mode.value, "adaptive");
        let c = resolve(
            json!({}),
            &[("AWS_MAX_ATTEMPTS", "7"), ("AWS_RETRY_MODE", "legacy")],
        )
        .unwrap();
        assert_eq!(c.io.max_attempts, 7);
        assert_eq!(
            c.max_attempts_source,
            Source::Env("AWS_MAX_ATTEMPTS".into())
        );
        assert_eq!(c.retry_mode.value, "legacy");
        let c = resolve(json!({"retry_deadline": 0}), &[]).unwrap();
        assert_eq!(c.io.retry_deadline, None);
        let c = resolve(json!({"retry_deadline": 2.5}), &[]).unwrap();
        assert_eq!(c.io.retry_deadline, Some(Duration::from_millis(2500)));
        let c = resolve(
            json!({}),
            &[("AWS_REQUEST_CHECKSUM_CALCULATION", "WHEN_REQUIRED")],
        )
        .unwrap();
        assert_eq!(c.checksum.value, None);

        for (bad, named) in [
            (
                json!({"config_kwargs": {"retries": {"mode": "eager"}}}),
                "retries.mode",
            ),
            (
                json!({"config_kwargs": {"retries": {"max_attempts": 1.5}}}),
                "max_attempts",
            ),
            (json!({"retry_deadline": -1}), "retry_deadline"),
            (
                json!({"config_kwargs": {"request_checksum_calculation": "always"}}),
                "request_checksum_calculation",
            ),
        ] {
            let err = resolve(bad.clone(), &[]).unwrap_err().to_string();
            assert!(err.contains(named), "{bad}: {err}");
        }
        let err = resolve(json!({}), &[("AWS_MAX_ATTEMPTS", "many")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("AWS_MAX_ATTEMPTS"), "{err}");
    }

    #[test]
    fn endpoint_precedence() {
        let env = [
            ("AWS_ENDPOINT_URL", "http://generic:1"),
            ("AWS_ENDPOINT_URL_S3", "http://s3specific:2"),
        ];
        let c = resolve(json!({}), &env).unwrap();
        assert_eq!(c.endpoint.value, "http://s3specific:2");
        assert_eq!(c.endpoint.source, Source::Env("AWS_ENDPOINT_URL_S3".into()));
        assert!(!c.virtual_host.value, "custom endpoint means path style");
        let c = resolve(
            json!({"client_kwargs": {"endpoint_url": "http://ck:3"}}),
            &env,
        )
        .unwrap();
        assert_eq!(c.endpoint.value, "http://ck:3");
        let c = resolve(
            json!({"endpoint_url": "http://top:4", "client_kwargs": {"endpoint_url": "http://ck:3"}}),
            &env,
        )
        .unwrap();
        assert_eq!(c.endpoint.value, "http://top:4");
        let mut ignoring = env.to_vec();
        ignoring.push(("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"));
        let c = resolve(json!({}), &ignoring).unwrap();
        assert!(c.endpoint.value.ends_with("amazonaws.com"));
    }

    #[test]
    fn region_precedence() {
        let env = [("AWS_REGION", "r2"), ("AWS_DEFAULT_REGION", "r1")];
        assert_eq!(resolve(json!({}), &env).unwrap().region.value, "r1");
        assert_eq!(resolve(json!({}), &env[..1]).unwrap().region.value, "r2");
        let c = resolve(json!({"client_kwargs": {"region_name": "ck"}}), &env).unwrap();
        assert_eq!(c.region.value, "ck");
    }

    #[test]
    fn credentials_from_env_and_options() {
        let env = [
            ("AWS_ACCESS_KEY_ID", "AKENV"),
            ("AWS_SECRET_ACCESS_KEY", "SKENV"),
            ("AWS_SECURITY_TOKEN", "TOKOLD"),
        ];
        let c = resolve(json!({}), &env).unwrap();
        assert_eq!(c.key.unwrap().value, "AKENV");
        assert_eq!(c.token.unwrap().value, "TOKOLD");
        let c = resolve(json!({"key": "AKOPT", "secret": 12345}), &env).unwrap();
        assert_eq!(c.key.unwrap().value, "AKOPT");
        assert_eq!(c.secret.unwrap().value, "12345");
        assert!(resolve(json!({"key": "only"}), &[]).is_err());
    }

    #[test]
    fn addressing_style_rules() {
        let c = resolve(
            json!({"endpoint_url": "http://h:1", "config_kwargs": {"s3": {"addressing_style": "virtual"}}}),
            &[],
        )
        .unwrap();
        assert!(c.virtual_host.value);
        let err = resolve(
            json!({"config_kwargs": {"s3": {"addressing_style": "sideways"}}}),
            &[],
        )
        .unwrap_err();
        assert!(err.to_string().contains("addressing_style"), "{err}");
    }

    #[test]
    fn unknown_keys_list_the_valid_ones() {
        let err = resolve(json!({"endpont_url": "x"}), &[]).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Config);
        assert!(err.to_string().contains("s3.endpont_url"));
        assert!(err.to_string().contains("endpoint_url"));
        let err = resolve(json!({"client_kwargs": {"verify": false}}), &[]).unwrap_err();
        assert!(err.to_string().contains("s3.client_kwargs.verify"), "{err}");
    }

    #[test]
    fn bad_endpoint_is_named() {
        let err = resolve(json!({}), &[("AWS_ENDPOINT_URL", "localhost:9000")]).unwrap_err();
        assert!(err.to_string().contains("AWS_ENDPOINT_URL"), "{err}");
    }

    #[test]
    fn debug_hides_secrets() {
        let c = resolve(
            json!({"key": "AK", "secret": "topsecret", "token": "tok3n"}),
            &[],
        )
        .unwrap();
        let text = format!("{c:?}");
        assert!(
            !text.contains("topsecret") && !text.contains("tok3n"),
            "{text}"
        );
    }
}
