//! `oss://`: Alibaba Cloud OSS through OpenDAL's native OSS service
//! (create-if-absent with `x-oss-forbid-overwrite`, batch deletes with
//! Content-MD5). Every keyword argument of ossfs 2025.5's `OSSFileSystem`
//! is recognised: `endpoint`, `key`, `secret`, `token` are honoured;
//! `default_cache_type`, `default_block_size`, `psize`,
//! `skip_instance_cache`, `asynchronous` and `loop` concern ossfs's own
//! machinery and are accepted without effect.

use std::sync::Arc;

use futures::future::BoxFuture;
use opendal::Operator;

use super::flat::{FlatConfig, Kind, Spec, ignored, text_names};
use super::{Backend, BackendFactory, ConditionalWrites, Layout, open_operator};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{BackendOptions, ConfigLine, Environment};

const SPECS: &[Spec] = &[
    Spec {
        name: "endpoint",
        aliases: &["endpoint_url"],
        kind: Kind::Text,
        env: &["OSS_ENDPOINT", "ALIBABA_CLOUD_OSS_ENDPOINT"],
        secret: false,
    },
    Spec {
        name: "key",
        aliases: &["access_key_id"],
        kind: Kind::Text,
        env: &["ALIBABA_CLOUD_ACCESS_KEY_ID", "OSS_ACCESS_KEY_ID"],
        secret: false,
    },
    Spec {
        name: "secret",
        aliases: &["access_key_secret"],
        kind: Kind::Text,
        env: &["ALIBABA_CLOUD_ACCESS_KEY_SECRET", "OSS_ACCESS_KEY_SECRET"],
        secret: true,
    },
    Spec {
        name: "token",
        aliases: &["security_token"],
        kind: Kind::Text,
        env: &["ALIBABA_CLOUD_SECURITY_TOKEN", "OSS_SESSION_TOKEN"],
        secret: true,
    },
    Spec {
        name: "addressing_style",
        aliases: &[],
        kind: Kind::Text,
        env: &[],
        secret: false,
    },
    Spec {
        name: "anon",
        aliases: &[],
        kind: Kind::Flag,
        env: &[],
        secret: false,
    },
    ignored("default_cache_type"),
    ignored("default_block_size"),
    ignored("psize"),
    ignored("skip_instance_cache"),
    ignored("asynchronous"),
    ignored("loop"),
];

/// The factory of `oss://`.
///
/// ```
/// use cairn_fs::backend::{BackendFactory, oss::OssFactory};
/// assert_eq!(OssFactory.protocol(), "oss");
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct OssFactory;

impl BackendFactory for OssFactory {
    fn protocol(&self) -> &str {
        "oss"
    }
    fn schemes(&self) -> &[&str] {
        &["oss"]
    }
    fn layout(&self) -> Layout {
        Layout::Bucketed
    }
    fn string_options(&self) -> &[&str] {
        static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        NAMES.get_or_init(|| text_names(SPECS))
    }
    fn listings_cache_default(&self) -> bool {
        false
    }
    fn configure(&self, options: &BackendOptions, env: &Environment) -> Result<Arc<dyn Backend>> {
        let config = FlatConfig::resolve(SPECS, options, env)?;
        let Some(endpoint) = config.text_value("endpoint") else {
            return Err(Error::new(
                ErrorKind::Config,
                "oss needs an endpoint such as https://oss-cn-hangzhou.aliyuncs.com: set oss.endpoint or OSS_ENDPOINT",
            ));
        };
        super::shared::check_http_endpoint(
            "oss",
            endpoint,
            "option oss.endpoint or OSS_ENDPOINT",
            "https://oss-<region>.aliyuncs.com",
        )?;
        if let Some(style) = config.text_value("addressing_style")
            && !matches!(style, "virtual" | "path" | "cname")
        {
            return Err(Error::new(
                ErrorKind::Config,
                format!(
                    "option oss.addressing_style is {style:?}; use \"virtual\", \"path\" or \"cname\""
                ),
            ));
        }
        if config.text_value("key").is_some() != config.text_value("secret").is_some() {
            return Err(Error::new(
                ErrorKind::Config,
                "oss credentials are incomplete: set both oss.key and oss.secret (or ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET)",
            ));
        }
        Ok(Arc::new(OssBackend { config }))
    }
}

#[derive(Debug)]
struct OssBackend {
    config: FlatConfig,
}

impl OssBackend {
    fn build_operator(&self, bucket: &str) -> Result<Operator> {
        let c = &self.config;
        let mut builder = opendal::services::Oss::default()
            .bucket(bucket)
            .endpoint(c.text_value("endpoint").unwrap_or_default());
        if let Some(style) = c.text_value("addressing_style") {
            builder = builder.addressing_style(style);
        }
        if let (Some(key), Some(secret)) = (c.text_value("key"), c.text_value("secret")) {
            builder = builder.access_key_id(key).access_key_secret(secret);
        }
        if let Some(token) = c.text_value("token") {
            builder = builder.security_token(token);
        }
        if c.flag("anon") {
            builder = builder.skip_signature();
        }
        open_operator(builder, "oss", bucket)
    }
}

impl Backend for OssBackend {
    fn operator<'a>(&'a self, bucket: &'a str) -> BoxFuture<'a, Result<Operator>> {
        Box::pin(std::future::ready(self.build_operator(bucket)))
    }

    fn secrets(&self) -> Vec<String> {
        self.config.secrets()
    }
    fn conditional_writes(&self) -> ConditionalWrites {
        ConditionalWrites::Probe
    }
    fn describe(&self) -> Vec<ConfigLine> {
        self.config.describe()
    }
}
