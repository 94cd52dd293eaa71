//! `gcs://` (alias `gs://`): OpenDAL's native GCS service, with gcsfs's
//! option names where they fit. Every keyword argument of gcsfs 2026.10's
//! `GCSFileSystem` is recognised: `project`, `token` (an access token, a
//! credentials file, `anon`, `google_default`, `cloud`), `endpoint_url`,
//! `access` (as the OAuth scope) are honoured; `requester_pays` and
//! `version_aware` are refused when true (cairn cannot honour them); the
//! rest concern gcsfs's own machinery and are accepted without effect
//! (`block_size`, `consistency`, `cache_timeout`, `secure_serialize`,
//! `check_connection`, `requests_timeout`, `timeout`, `asynchronous`,
//! `session_kwargs`, `loop`, `default_location`, `skip_instance_cache`;
//! cairn's own timeouts and retries apply).

use std::sync::Arc;

use futures::future::BoxFuture;
use opendal::Operator;

use super::flat::{FlatConfig, Kind, Spec, ignored, text_names};
use super::{Backend, BackendFactory, ConditionalWrites, Layout, open_operator};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{BackendOptions, ConfigLine, Environment};

const SPECS: &[Spec] = &[
    Spec {
        name: "token",
        aliases: &["access_token"],
        kind: Kind::Text,
        env: &[],
        secret: true,
    },
    Spec {
        name: "credential",
        aliases: &[],
        kind: Kind::Text,
        env: &[],
        secret: true,
    },
    Spec {
        name: "credential_path",
        aliases: &["credentials_path"],
        kind: Kind::Text,
        env: &["GOOGLE_APPLICATION_CREDENTIALS"],
        secret: false,
    },
    Spec {
        name: "endpoint",
        aliases: &["endpoint_url"],
        kind: Kind::Text,
        env: &["STORAGE_EMULATOR_HOST"],
        secret: false,
    },
    Spec {
        name: "anon",
        aliases: &["skip_signature"],
        kind: Kind::Flag,
        env: &[],
        secret: false,
    },
    Spec {
        name: "project",
        aliases: &[],
        kind: Kind::Text,
        env: &["GOOGLE_CLOUD_PROJECT"],
        secret: false,
    },
    Spec {
        name: "scope",
        aliases: &[],
        kind: Kind::Text,
        env: &[],
        secret: false,
    },
    Spec {
        name: "use_instance_metadata",
        aliases: &[],
        kind: Kind::Flag,
        env: &[],
        secret: false,
    },
    Spec {
        name: "batch_delete",
        aliases: &[],
        kind: Kind::Flag,
        env: &[],
        secret: false,
    },
    Spec {
        name: "access",
        aliases: &[],
        kind: Kind::Text,
        env: &[],
        secret: false,
    },
    Spec {
        name: "requester_pays",
        aliases: &[],
        kind: Kind::Flag,
        env: &[],
        secret: false,
    },
    Spec {
        name: "version_aware",
        aliases: &[],
        kind: Kind::Flag,
        env: &[],
        secret: false,
    },
    ignored("block_size"),
    ignored("consistency"),
    ignored("cache_timeout"),
    ignored("secure_serialize"),
    ignored("check_connection"),
    ignored("requests_timeout"),
    ignored("timeout"),
    ignored("asynchronous"),
    ignored("session_kwargs"),
    ignored("loop"),
    ignored("default_location"),
    ignored("skip_instance_cache"),
];

/// gcsfs's `access` levels as OAuth scopes.
fn scope_of_access(access: &str) -> Result<String> {
    match access {
        "read_only" | "read_write" | "full_control" => Ok(format!(
            "https://www.googleapis.com/auth/devstorage.{access}"
        )),
        other => Err(Error::new(
            ErrorKind::Config,
            format!(
                "option gcs.access is {other:?}; use \"read_only\", \"read_write\" or \"full_control\" (or give gcs.scope)"
            ),
        )),
    }
}

/// The factory of `gcs://` and `gs://`.
///
/// ```
/// use cairn_fs::backend::{BackendFactory, gcs::GcsFactory};
/// assert_eq!(GcsFactory.schemes(), &["gcs", "gs"]);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct GcsFactory;

impl BackendFactory for GcsFactory {
    fn protocol(&self) -> &str {
        "gcs"
    }
    fn schemes(&self) -> &[&str] {
        &["gcs", "gs"]
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
        // What cairn cannot honour is refused, not ignored.
        if config.flag("requester_pays") {
            return Err(Error::new(
                ErrorKind::Config,
                "option gcs.requester_pays=true is not supported: cairn cannot bill requests to a user project yet; read requester-pays buckets with gcsfs, or copy the data to a bucket you own",
            ));
        }
        if config.flag("version_aware") {
            return Err(Error::new(
                ErrorKind::Config,
                "option gcs.version_aware=true is not supported: cairn reads the live generation of each object; leave it false",
            ));
        }
        if let Some(token @ ("cache" | "browser")) = config.text_value("token") {
            return Err(Error::new(
                ErrorKind::Config,
                format!(
                    "option gcs.token={token:?} is gcsfs's interactive login, which cairn does not do; give a credentials file (gcs.token=/path/key.json or GOOGLE_APPLICATION_CREDENTIALS) or an access token"
                ),
            ));
        }
        let scope = match (config.text_value("scope"), config.text_value("access")) {
            (Some(scope), _) => Some(scope.to_string()),
            (None, Some(access)) => Some(scope_of_access(access)?),
            (None, None) => None,
        };
        // STORAGE_EMULATOR_HOST is often a bare host:port.
        let endpoint = config.text_value("endpoint").map(|e| {
            if e.contains("://") {
                e.to_string()
            } else {
                format!("http://{e}")
            }
        });
        if let Some(endpoint) = &endpoint {
            super::shared::check_http_endpoint(
                "gcs",
                endpoint,
                "option gcs.endpoint or STORAGE_EMULATOR_HOST",
                "http://host:port",
            )?;
        }
        Ok(Arc::new(GcsBackend {
            config,
            endpoint,
            scope,
        }))
    }
}

#[derive(Debug)]
struct GcsBackend {
    config: FlatConfig,
    /// The endpoint as a URL (a scheme added to a bare host:port).
    endpoint: Option<String>,
    /// The OAuth scope (`scope`, or gcsfs's `access` level).
    scope: Option<String>,
}

impl GcsBackend {
    fn build_operator(&self, bucket: &str) -> Result<Operator> {
        let c = &self.config;
        let mut builder = opendal::services::Gcs::default().bucket(bucket);
        if let Some(endpoint) = &self.endpoint {
            builder = builder.endpoint(endpoint);
        }
        match c.text_value("token") {
            // gcsfs's spellings of "no credentials".
            Some("anon") => builder = builder.skip_signature(),
            Some("google_default" | "cloud") | None => {}
            Some(path) if std::path::Path::new(path).is_file() => {
                builder = builder.credential_path(path)
            }
            Some(token) => builder = builder.token(token.to_string()),
        }
        if let Some(credential) = c.text_value("credential") {
            builder = builder.credential(credential);
        }
        if let Some(path) = c.text_value("credential_path") {
            builder = builder.credential_path(path);
        }
        if let Some(scope) = &self.scope {
            builder = builder.scope(scope);
        }
        if c.flag("anon") {
            builder = builder.skip_signature();
        }
        if !c.flag("use_instance_metadata") {
            builder = builder.disable_vm_metadata();
        }
        open_operator(builder, "gcs", bucket)
    }
}

impl Backend for GcsBackend {
    fn operator<'a>(&'a self, bucket: &'a str) -> BoxFuture<'a, Result<Operator>> {
        Box::pin(std::future::ready(self.build_operator(bucket)))
    }

    fn secrets(&self) -> Vec<String> {
        self.config.secrets()
    }
    fn conditional_writes(&self) -> ConditionalWrites {
        ConditionalWrites::Probe
    }
    fn batch_delete(&self) -> bool {
        self.config.flag_or("batch_delete", true)
    }
    fn describe(&self) -> Vec<ConfigLine> {
        self.config.describe()
    }
}
