//! `s3://` (alias `s3a://`): OpenDAL's `services-s3`, configured the way s3fs
//! users expect from options and the AWS environment.
//!
//! Resolution, lowest precedence first: defaults < AWS environment <
//! `client_kwargs` < top-level options. The modules: `keys` (the option
//! table), `botocore` (botocore's arguments), `config` (resolution, for s3
//! and every S3-compatible flavor); this one holds the backend.

use std::sync::Arc;

use futures::future::BoxFuture;
use opendal::Operator;

use super::{Backend, BackendFactory, ConditionalWrites, IoPolicy, Layout, open_operator};
use crate::error::Result;
use crate::options::{BackendOptions, ConfigLine, Environment, Setting, Source};

mod botocore;
mod config;
mod keys;

pub(crate) use config::{ChecksumHeader, S3Config, S3Flavor};
pub(crate) use keys::string_options;

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
        string_options()
    }
    fn configure(&self, options: &BackendOptions, env: &Environment) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(S3Backend {
            protocol: "s3",
            config: S3Config::resolve(options, env)?,
            hooks: Vec::new(),
        }))
    }
}

/// A configured S3-compatible backend.
#[derive(Debug)]
pub(crate) struct S3Backend {
    pub(crate) protocol: &'static str,
    pub(crate) config: S3Config,
    pub(crate) hooks: Vec<Arc<dyn crate::hooks::RequestHook>>,
}

impl S3Backend {
    fn build_operator(&self, bucket: &str) -> Result<Operator> {
        open_operator(self.service(bucket), self.protocol, bucket)
    }

    /// OpenDAL's S3 service for `bucket`, configured from this backend's
    /// settings (the tclake backend adds a root and its volume credentials).
    pub(crate) fn service(&self, bucket: &str) -> opendal::services::S3 {
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
        builder
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

    fn s3_read_settings(&self) -> Option<crate::backend::S3ReadSettings> {
        let c = &self.config;
        // Requester-pays reads carry a header another client would not
        // send; a credential chain is OpenDAL's to resolve, so there are no
        // keys to hand over.
        let static_keys = c.key.is_some() && c.secret.is_some();
        if c.requester_pays.value || !(c.anon.value || static_keys) {
            return None;
        }
        let value = |s: &Option<Setting<String>>| s.as_ref().map(|s| s.value.clone());
        Some(crate::backend::S3ReadSettings {
            endpoint: c.endpoint.value.clone(),
            region: c.region.value.clone(),
            virtual_host: c.virtual_host.value,
            anonymous: c.anon.value,
            key: value(&c.key).filter(|_| !c.anon.value),
            secret: value(&c.secret).filter(|_| !c.anon.value),
            token: value(&c.token).filter(|_| !c.anon.value),
            max_attempts: c.io.max_attempts,
            request_timeout: c.io.op_timeout,
        })
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
            note: None,
            unset: false,
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
            out.push(ConfigLine {
                note: kms_key.as_ref().map(|key| format!("KMS key {key}")),
                ..line(
                    "server_side_encryption",
                    algorithm.value.clone(),
                    &algorithm.source,
                )
            });
        }
        if let Some(key) = &c.key {
            out.push(line("key", key.value.clone(), &key.source));
        }
        for (path, setting) in &c.without_effect {
            let name = path.split_once('.').map_or(path.as_str(), |(_, n)| n);
            out.push(ConfigLine {
                note: Some("accepted for s3fs; no effect in cairn".into()),
                ..line(name, setting.value.clone(), &setting.source)
            });
        }
        for (name, secret) in [("secret", &c.secret), ("token", &c.token)] {
            if let Some(s) = secret {
                out.push(line(name, "***".into(), &s.source));
            }
        }
        for (name, source) in &c.given_null {
            if let Some(l) = out
                .iter_mut()
                .find(|l| &l.name == name && l.source == Source::Default)
            {
                l.source = source.clone();
                l.unset = true;
                l.note = Some(format!(
                    "given as null: unset, as s3fs reads None; the default ({}) applies",
                    l.value
                ));
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
    use super::config::DEFAULT_REGION;
    use super::*;
    use serde_json::Value;
    use serde_json::json;
    use std::time::Duration;

    fn resolve(opts: Value, env: &[(&str, &str)]) -> Result<S3Config> {
        S3Config::resolve(
            &BackendOptions::from_map("s3", opts.as_object().unwrap()),
            &Environment::from_pairs(env.iter().copied()),
        )
    }

    fn read_settings(opts: Value, env: &[(&str, &str)]) -> Option<crate::backend::S3ReadSettings> {
        let backend = S3Backend {
            protocol: "s3",
            config: resolve(opts, env).unwrap(),
            hooks: Vec::new(),
        };
        backend.s3_read_settings()
    }

    #[test]
    fn read_settings_only_for_static_keys_or_anonymous_without_requester_pays() {
        let keys = json!({"key": "AK", "secret": "SK", "token": "TK", "endpoint_url": "http://h:1", "region": "r"});
        let s = read_settings(keys.clone(), &[]).unwrap();
        assert_eq!(
            (s.endpoint.as_str(), s.region.as_str()),
            ("http://h:1", "r")
        );
        assert_eq!(
            (s.key.as_deref(), s.secret.as_deref(), s.token.as_deref()),
            (Some("AK"), Some("SK"), Some("TK"))
        );
        assert!(!s.anonymous && !s.virtual_host);
        let debug = format!("{s:?}");
        assert!(!debug.contains("SK") && !debug.contains("TK"), "{debug}");
        // Keys from the environment are resolved static keys too.
        let from_env = read_settings(
            json!({}),
            &[("AWS_ACCESS_KEY_ID", "EK"), ("AWS_SECRET_ACCESS_KEY", "ES")],
        )
        .unwrap();
        assert_eq!(from_env.key.as_deref(), Some("EK"));
        // No keys: a credential chain, OpenDAL's to resolve.
        assert!(read_settings(json!({}), &[]).is_none());
        let mut payer = keys.clone();
        payer["requester_pays"] = json!(true);
        assert!(read_settings(payer, &[]).is_none());
        let anon = read_settings(json!({"anon": true}), &[]).unwrap();
        assert!(anon.anonymous && anon.key.is_none() && anon.secret.is_none());
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
