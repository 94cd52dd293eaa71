//! [`S3Config`]: s3 options, botocore arguments and the environment
//! resolved into one configuration, concern by concern (credentials,
//! endpoint and region, encryption, addressing, conditional writes,
//! retries and checksums), for any S3-compatible [`S3Flavor`].

use std::time::Duration;

use serde_json::Value;

use super::botocore::{ClientKwargs, ConfigKwargs, checksum_calculation, retry_mode};
use super::keys::{AddressingStyle, S3Option, canonical_names};
use crate::backend::shared::{check_http_endpoint, region_from_endpoint};
use crate::backend::{ConditionalWrites, IoPolicy};
use crate::error::Result;
use crate::options::{
    At, BackendOptions, Environment, Setting, Source, config_error, unknown_key, value_as_bool,
    value_as_f64, value_as_object, value_as_string,
};

/// The region used when neither options nor environment name one.
pub const DEFAULT_REGION: &str = "us-east-1";

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
    /// s3fs keywords given that change nothing in cairn-fs
    /// (`default_block_size`, ...), as `(option path, value as given)`, so
    /// `cairn config` shows where they came from.
    pub without_effect: Vec<(String, Setting<String>)>,
    /// Options given as null (fsspec's None): unset, by canonical name,
    /// with where the null came from.
    pub given_null: Vec<(String, Source)>,
    /// Where `io.retry_deadline` came from.
    pub retry_deadline_source: Source,
    /// The checksum each upload carries for the server to verify (`None`:
    /// botocore's `request_checksum_calculation=when_required`).
    pub checksum: Setting<Option<ChecksumHeader>>,
}

/// The checksum header an S3-compatible store verifies on uploads.
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
    pub fn resolve(options: &BackendOptions, env: &Environment) -> Result<Self> {
        Self::resolve_flavor(&AWS, options, env)
    }

    /// Resolves the options of an S3-compatible `flavor`, concern by
    /// concern.
    pub fn resolve_flavor(
        flavor: &S3Flavor,
        options: &BackendOptions,
        env: &Environment,
    ) -> Result<Self> {
        let top = TopLevel::parse(options)?;
        let client = match top.get(S3Option::ClientKwargs) {
            Some((at, v)) => ClientKwargs::parse(value_as_object(v, &at.label())?, &at)?,
            None => ClientKwargs::default(),
        };
        let config = match top.get(S3Option::ConfigKwargs) {
            Some((at, v)) => ConfigKwargs::parse(value_as_object(v, &at.label())?, &at)?,
            None => ConfigKwargs::default(),
        };
        let lookup = Lookup {
            top: &top,
            client: &client,
            env,
        };
        let (key, secret, token) = credentials(flavor, &lookup)?;
        let custom_endpoint = custom_endpoint(flavor, &lookup)?;
        let region = region(flavor, &lookup, custom_endpoint.as_ref())?;
        let regional = regional_endpoint(flavor, &top, &region)?;
        if top.flag(S3Option::VersionAware, false)?.value {
            return Err(config_error(format!(
                "{}.version_aware is true: cairn reads and writes the current version of each object only; drop the option (or set it to false)",
                flavor.protocol
            )));
        }
        let virtual_host = addressing(flavor, &config, custom_endpoint.is_none());
        let retries = retries(flavor, &top, &config, env)?;
        Ok(Self {
            key,
            secret,
            token,
            endpoint: custom_endpoint.unwrap_or(regional),
            region,
            anon: top.flag(S3Option::Anon, false)?,
            virtual_host,
            use_instance_metadata: top.flag(S3Option::UseInstanceMetadata, false)?,
            conditional_writes: conditional_writes(&top)?,
            requester_pays: top.flag(S3Option::RequesterPays, false)?,
            server_side_encryption: server_side_encryption(&top)?,
            io: retries.io,
            max_attempts_source: retries.max_attempts_source,
            retry_mode: retries.retry_mode,
            retry_deadline_source: retries.retry_deadline_source,
            checksum: retries.checksum,
            without_effect: top.without_effect(),
            given_null: top.nulls.clone(),
        })
    }
}

/// The top-level options, each read through the key table once.
struct TopLevel<'a> {
    entries: Vec<(S3Option, At, &'a Value)>,
    /// Options given as null, by canonical name.
    nulls: Vec<(String, Source)>,
}

impl<'a> TopLevel<'a> {
    fn parse(options: &'a BackendOptions) -> Result<Self> {
        let mut entries: Vec<(S3Option, At, &Value)> = Vec::new();
        let mut nulls = Vec::new();
        for (name, value, source) in options.iter() {
            // fsspec hands a keyword left at its default as None (JSON
            // null): unset, as s3fs reads it.
            if value.is_null() {
                if let Ok(key) = name.parse::<S3Option>() {
                    nulls.push((key.as_ref().to_string(), source.clone()));
                }
                continue;
            }
            let key: S3Option = name
                .parse()
                .map_err(|_| unknown_key(&options.at(name, source).label(), &canonical_names()))?;
            entries.push((key, options.at(name, source), value));
        }
        // One option under two of its names (key and username, say) is
        // ambiguous: s3fs refuses it too.
        for (i, (key, at, _)) in entries.iter().enumerate() {
            if *key == S3Option::S3fsNoOp {
                continue;
            }
            if let Some((_, other, _)) = entries[i + 1..].iter().find(|(k, _, _)| k == key) {
                return Err(config_error(format!(
                    "options {} and {} are one setting under two names; give only one",
                    at.label(),
                    other.label()
                )));
            }
        }
        Ok(Self { entries, nulls })
    }

    /// The s3fs keywords given that change nothing here, with their values.
    fn without_effect(&self) -> Vec<(String, Setting<String>)> {
        self.entries
            .iter()
            .filter(|(k, _, _)| *k == S3Option::S3fsNoOp)
            .map(|(_, at, v)| {
                let shown = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                (at.path.clone(), at.setting(shown))
            })
            .collect()
    }

    fn get(&self, wanted: S3Option) -> Option<(At, &'a Value)> {
        self.entries
            .iter()
            .find(|(k, _, _)| *k == wanted)
            .map(|(_, at, v)| (at.clone(), *v))
    }

    fn text(&self, wanted: S3Option) -> Result<Option<Setting<String>>> {
        self.get(wanted)
            .map(|(at, v)| value_as_string(v, &at.label()).map(|s| at.setting(s)))
            .transpose()
    }

    fn flag(&self, wanted: S3Option, default: bool) -> Result<Setting<bool>> {
        match self.get(wanted) {
            Some((at, v)) => Ok(at.setting(value_as_bool(v, &at.label())?)),
            None => Ok(Setting::new(default, Source::Default)),
        }
    }
}

/// Where a setting is looked up, highest precedence first: a top-level
/// option, `client_kwargs`, the environment.
struct Lookup<'a> {
    top: &'a TopLevel<'a>,
    client: &'a ClientKwargs,
    env: &'a Environment,
}

impl Lookup<'_> {
    fn env(&self, names: &[&str]) -> Option<Setting<String>> {
        names.iter().find_map(|n| {
            self.env
                .get(n)
                .map(|v| Setting::new(v.to_string(), Source::Env(n.to_string())))
        })
    }
}

type Credentials = (
    Option<Setting<String>>,
    Option<Setting<String>>,
    Option<Setting<String>>,
);

/// Key, secret and token; a key without a secret (or the reverse) is an error.
fn credentials(flavor: &S3Flavor, lookup: &Lookup<'_>) -> Result<Credentials> {
    let protocol = flavor.protocol;
    let key = lookup
        .top
        .text(S3Option::Key)?
        .or(lookup.client.access_key_id.clone())
        .or_else(|| lookup.env(flavor.key_env));
    let secret = lookup
        .top
        .text(S3Option::Secret)?
        .or(lookup.client.secret_access_key.clone())
        .or_else(|| lookup.env(flavor.secret_env));
    let token = lookup
        .top
        .text(S3Option::Token)?
        .or(lookup.client.session_token.clone())
        .or_else(|| lookup.env(flavor.token_env));
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
    Ok((key, secret, token))
}

/// The endpoint the options or the environment name, checked.
fn custom_endpoint(flavor: &S3Flavor, lookup: &Lookup<'_>) -> Result<Option<Setting<String>>> {
    let ignore_env_endpoint = lookup
        .env
        .get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let endpoint = lookup
        .top
        .text(S3Option::EndpointUrl)?
        .or(lookup.client.endpoint_url.clone())
        .or_else(|| {
            (!ignore_env_endpoint)
                .then(|| lookup.env(flavor.endpoint_env))
                .flatten()
        });
    if let Some(endpoint) = &endpoint {
        check_http_endpoint(
            flavor.protocol,
            &endpoint.value,
            &endpoint.source.to_string(),
            "http://host:port",
        )?;
    }
    Ok(endpoint)
}

/// The signing region: configured, the flavor's default, or read from the
/// endpoint.
fn region(
    flavor: &S3Flavor,
    lookup: &Lookup<'_>,
    custom_endpoint: Option<&Setting<String>>,
) -> Result<Setting<String>> {
    let protocol = flavor.protocol;
    let configured = lookup
        .top
        .text(S3Option::Region)?
        .or(lookup.client.region_name.clone())
        .or_else(|| lookup.env(flavor.region_env));
    match (configured, flavor.default_region, custom_endpoint) {
        (Some(region), _, _) => Ok(region),
        (None, Some(default), _) => Ok(Setting::new(default.to_string(), Source::Default)),
        (None, None, Some(endpoint)) => region_from_endpoint(&endpoint.value)
            .map(|r| Setting::new(r, endpoint.source.clone()))
            .ok_or_else(|| {
                config_error(format!(
                    "{protocol} needs a region to sign requests and none could be read from the endpoint {:?}; set {protocol}.region (or {})",
                    endpoint.value,
                    flavor.region_env.join(", ")
                ))
            }),
        (None, None, None) => Err(config_error(format!(
            "{protocol} needs a region or an endpoint: set {protocol}.region (or {}), or {protocol}.endpoint_url",
            flavor.region_env.join(", ")
        ))),
    }
}

/// The service's own endpoint of `region` (`use_ssl=false`: over http).
fn regional_endpoint(
    flavor: &S3Flavor,
    top: &TopLevel<'_>,
    region: &Setting<String>,
) -> Result<Setting<String>> {
    let mut regional = (flavor.regional_endpoint)(&region.value);
    let use_ssl = top.flag(S3Option::UseSsl, true)?;
    if !use_ssl.value
        && let Some(rest) = regional.strip_prefix("https://")
    {
        regional = format!("http://{rest}");
    }
    Ok(Setting::new(regional, use_ssl.source))
}

/// s3fs's `s3_additional_kwargs`: server-side encryption and its KMS key.
fn server_side_encryption(top: &TopLevel<'_>) -> Result<Option<(Setting<String>, Option<String>)>> {
    let Some((at, v)) = top.get(S3Option::S3AdditionalKwargs) else {
        return Ok(None);
    };
    let mut algorithm = None;
    let mut kms_key = None;
    for (name, value) in value_as_object(v, &at.label())? {
        let label = format!("{}.{name}", at.label());
        match name.as_str() {
            "ServerSideEncryption" => algorithm = Some(at.setting(value_as_string(value, &label)?)),
            "SSEKMSKeyId" => kms_key = Some(value_as_string(value, &label)?),
            other => {
                return Err(config_error(format!(
                    "option {label} is not supported: of s3_additional_kwargs cairn sends ServerSideEncryption and SSEKMSKeyId ({other} would be ignored, so it is refused)"
                )));
            }
        }
    }
    match (algorithm, kms_key) {
        (Some(a), key) => Ok(Some((a, key))),
        (None, Some(_)) => Err(config_error(format!(
            "option {}.SSEKMSKeyId needs ServerSideEncryption=\"aws:kms\" beside it",
            at.label()
        ))),
        (None, None) => Ok(None),
    }
}

/// Virtual-host or path addressing: `addressing_style`, else the flavor's
/// default (path style for a custom endpoint on s3).
fn addressing(flavor: &S3Flavor, config: &ConfigKwargs, aws_endpoint: bool) -> Setting<bool> {
    match &config.addressing_style {
        Some(style) if style.value == AddressingStyle::Path => {
            Setting::new(false, style.source.clone())
        }
        Some(style) if style.value == AddressingStyle::Virtual => {
            Setting::new(true, style.source.clone())
        }
        _ => Setting::new(
            flavor.virtual_by_default.unwrap_or(aws_endpoint),
            Source::Default,
        ),
    }
}

/// `conditional_writes`: `auto` (probe), `native` or `emulate`.
fn conditional_writes(top: &TopLevel<'_>) -> Result<Setting<ConditionalWrites>> {
    let Some((at, v)) = top.get(S3Option::ConditionalWrites) else {
        return Ok(Setting::new(ConditionalWrites::Probe, Source::Default));
    };
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
    Ok(at.setting(mode))
}

/// Timeouts, retries and upload checksums, with their sources.
struct Retries {
    io: IoPolicy,
    max_attempts_source: Source,
    retry_mode: Setting<String>,
    retry_deadline_source: Source,
    checksum: Setting<Option<ChecksumHeader>>,
}

/// botocore's timeouts, attempts, retry mode and checksum calculation
/// (`config_kwargs`, then botocore's variables), and cairn's `retry_deadline`.
fn retries(
    flavor: &S3Flavor,
    top: &TopLevel<'_>,
    config: &ConfigKwargs,
    env: &Environment,
) -> Result<Retries> {
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
    let attempts = match (
        config.total_attempts.clone(),
        botocore_env("AWS_MAX_ATTEMPTS"),
    ) {
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
    let retry_mode = match (config.retry_mode.clone(), botocore_env("AWS_RETRY_MODE")) {
        (Some(mode), _) => mode,
        (None, Some((text, source))) => {
            Setting::new(retry_mode(&text, &source.to_string())?, source)
        }
        (None, None) => Setting::new("standard".to_string(), Source::Default),
    };
    let retry_deadline_source = match top.get(S3Option::RetryDeadline) {
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
        config.checksum_when_supported.clone(),
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

    Ok(Retries {
        io,
        max_attempts_source,
        retry_mode,
        retry_deadline_source,
        checksum,
    })
}

#[cfg(test)]
mod examples {
    use super::*;

    #[test]
    fn checksumheader_example() {
        assert_eq!(ChecksumHeader::Crc32c.to_string(), "x-amz-checksum-crc32c");
    }

    #[test]
    fn resolve_example() {
        let opts = serde_json::json!({"endpoint_url": "http://127.0.0.1:3900"});
        let opts = BackendOptions::from_map("s3", opts.as_object().unwrap());
        let env = Environment::from_pairs([("AWS_DEFAULT_REGION", "garage")]);
        let cfg = S3Config::resolve(&opts, &env).unwrap();
        assert_eq!(cfg.region.value, "garage");
        assert!(!cfg.virtual_host.value); // custom endpoint: path style
    }
}
