//! `tclake://volume/<catalog>/<schema>/<volume>/<path>`: files of a TCLake
//! volume. The first use of a volume asks the catalog (cairn-tclake) that it
//! is in a VOLUME catalog and where it lives (`cos://bucket/prefix`); the
//! volume is then served by an S3 operator on COS rooted at that prefix,
//! signed with the volume's temporary credentials, which are fetched again
//! shortly before they expire. Without the `tclake` feature, the scheme is
//! known but refuses with how to enable it.

use std::sync::Arc;

use super::{Backend, BackendFactory, Layout};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{BackendOptions, Environment};

/// What serves `tclake://` in a build without the `tclake` feature: every
/// use is an error that says how to enable it.
///
/// ```
/// use std::sync::Arc;
/// use cairn_fs::backend::tclake::TclakeUnavailable;
/// let registry = cairn_fs::Registry::empty();
/// registry.register(Arc::new(TclakeUnavailable));
/// let err = cairn_fs::FileSystemBuilder::new("tclake").registry(&registry).build().unwrap_err();
/// assert!(err.to_string().contains("cargo feature `tclake`"));
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct TclakeUnavailable;

impl BackendFactory for TclakeUnavailable {
    fn protocol(&self) -> &str {
        "tclake"
    }
    fn schemes(&self) -> &[&str] {
        &["tclake"]
    }
    fn layout(&self) -> Layout {
        Layout::Rooted(4)
    }
    fn configure(&self, _: &BackendOptions, _: &Environment) -> Result<Arc<dyn Backend>> {
        Err(Error::new(
            ErrorKind::Unsupported,
            "tclake:// support is not built into this program: build cairn-fs with the cargo feature `tclake` (the `cairn` binary has it on)",
        ))
    }
}

#[cfg(feature = "tclake")]
pub use enabled::{TclakeBackend, TclakeFactory};

#[cfg(feature = "tclake")]
mod enabled {
    use futures::future::BoxFuture;
    use std::sync::Arc;

    use cairn_tclake::{
        CatalogClient, CatalogSettings, VolumeCredentialProvider, VolumeRef, resolve_volume,
    };
    use opendal::Operator;

    use super::super::cos::COS;
    use super::super::flat::{FlatConfig, Kind, Spec, text_names};
    use super::super::s3::{S3Backend, S3Config};
    use super::super::shared::cos_endpoint;
    use super::super::{
        Backend, BackendFactory, ConditionalWrites, IoPolicy, Layout, open_operator,
    };

    /// The factory of `tclake://` (feature `tclake`).
    ///
    /// ```
    /// use cairn_fs::backend::{BackendFactory, Layout, tclake::TclakeFactory};
    /// assert_eq!(TclakeFactory.layout(), Layout::Rooted(4));
    /// ```
    #[derive(Debug, Default, Clone, Copy)]
    pub struct TclakeFactory;
    use crate::error::{Error, ErrorKind, Result};
    use crate::hooks::{ContentMd5OnMultiDelete, RequestHook};
    use crate::options::{BackendOptions, ConfigLine, Environment, Source};

    const SPECS: &[Spec] = &[
        Spec {
            name: "region",
            aliases: &[],
            kind: Kind::Text,
            env: &["TENCENTCLOUD_REGION"],
            secret: false,
        },
        Spec {
            name: "sid",
            aliases: &["secret_id"],
            kind: Kind::Text,
            env: &["TENCENTCLOUD_SECRET_ID"],
            secret: false,
        },
        Spec {
            name: "sk",
            aliases: &["secret_key"],
            kind: Kind::Text,
            env: &["TENCENTCLOUD_SECRET_KEY"],
            secret: true,
        },
        Spec {
            name: "token",
            aliases: &[],
            kind: Kind::Text,
            env: &["TENCENTCLOUD_SESSION_TOKEN"],
            secret: true,
        },
        Spec {
            name: "endpoint",
            aliases: &["endpoint_url"],
            kind: Kind::Text,
            env: &[],
            secret: false,
        },
        Spec {
            name: "cos_endpoint",
            aliases: &[],
            kind: Kind::Text,
            env: &[],
            secret: false,
        },
        Spec {
            name: "addressing_style",
            aliases: &[],
            kind: Kind::Text,
            env: &[],
            secret: false,
        },
    ];

    impl BackendFactory for TclakeFactory {
        fn protocol(&self) -> &str {
            "tclake"
        }
        fn schemes(&self) -> &[&str] {
            &["tclake"]
        }
        fn layout(&self) -> Layout {
            Layout::Rooted(cairn_tclake::ROOT_COMPONENTS)
        }
        fn string_options(&self) -> &[&str] {
            static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
            NAMES.get_or_init(|| text_names(SPECS))
        }
        fn listings_cache_default(&self) -> bool {
            false
        }
        fn configure(
            &self,
            options: &BackendOptions,
            env: &Environment,
        ) -> Result<Arc<dyn Backend>> {
            let config = FlatConfig::resolve(SPECS, options, env)?;
            let need = |name: &str, variable: &str| {
                config.text_value(name).map(str::to_string).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Config,
                        format!("tclake needs tclake.{name} (or the variable {variable})"),
                    )
                })
            };
            let region = need("region", "TENCENTCLOUD_REGION")?;
            let mut settings = CatalogSettings::new(
                &region,
                &need("sid", "TENCENTCLOUD_SECRET_ID")?,
                &need("sk", "TENCENTCLOUD_SECRET_KEY")?,
            );
            settings.token = config.text_value("token").map(str::to_string);
            if let Some(endpoint) = config.text_value("endpoint") {
                settings.endpoint = endpoint.to_string();
            }
            // The files of every volume are on COS: the S3 backend with COS
            // settings, credentials from the volume's provider (no static
            // keys: the environment is not consulted for them).
            let mut cos = BackendOptions::new("tclake");
            let source = |name: &str| Source::Option(format!("tclake.{name}"));
            cos.set("region", region.clone().into(), source("region"));
            let cos_endpoint = config
                .text_value("cos_endpoint")
                .map(str::to_string)
                .unwrap_or_else(|| cos_endpoint(&region));
            cos.set("endpoint_url", cos_endpoint.into(), source("cos_endpoint"));
            if let Some(style) = config.text_value("addressing_style") {
                cos.set(
                    "config_kwargs",
                    serde_json::json!({"s3": {"addressing_style": style}}),
                    source("addressing_style"),
                );
            }
            let s3 = S3Backend {
                protocol: "tclake",
                config: S3Config::resolve_flavor(&COS, &cos, &Environment::default())?,
                hooks: vec![Arc::new(ContentMd5OnMultiDelete)],
            };
            // Built now, so a bad endpoint is a configuration error; the
            // credential providers of every volume send through it.
            let client =
                CatalogClient::new(settings, reqwest::Client::new()).map_err(tclake_error)?;
            Ok(Arc::new(TclakeBackend { config, client, s3 }))
        }
    }

    /// A configured tclake backend: one operator per volume, each the S3
    /// backend's (COS settings) with the volume's root and credentials.
    #[derive(Debug)]
    pub struct TclakeBackend {
        config: FlatConfig,
        client: CatalogClient,
        s3: S3Backend,
    }

    /// Maps a catalog error to a cairn error of the right kind.
    fn tclake_error(e: cairn_tclake::Error) -> Error {
        let kind = match &e {
            cairn_tclake::Error::Api { code, .. } if code.starts_with("AuthFailure") => {
                ErrorKind::PermissionDenied
            }
            cairn_tclake::Error::Api { code, .. } if code.starts_with("ResourceNotFound") => {
                ErrorKind::NotFound
            }
            cairn_tclake::Error::Api { .. } => ErrorKind::Other,
            cairn_tclake::Error::Transport { .. } => ErrorKind::Io,
            cairn_tclake::Error::Unsupported(_) => ErrorKind::Unsupported,
            cairn_tclake::Error::Config(_) => ErrorKind::Config,
            _ => ErrorKind::Other,
        };
        Error::new(kind, e.to_string())
    }

    impl Backend for TclakeBackend {
        fn operator<'a>(&'a self, root: &'a str) -> BoxFuture<'a, Result<Operator>> {
            Box::pin(async move {
                let volume = VolumeRef::parse(root).map_err(tclake_error)?;
                // Two catalog calls, awaited on the caller's runtime: a
                // slow catalog holds up the callers of this volume only.
                let location = resolve_volume(&self.client, &volume)
                    .await
                    .map_err(tclake_error)?;
                let credentials = VolumeCredentialProvider::new(self.client.clone(), volume);
                let service = self
                    .s3
                    .service(&location.bucket)
                    .root(&format!("/{}", location.prefix))
                    .credential_provider_chain(credentials.into_chain());
                open_operator(service, "tclake", root)
            })
        }

        fn conditional_writes(&self) -> ConditionalWrites {
            ConditionalWrites::Probe
        }

        fn secrets(&self) -> Vec<String> {
            self.config.secrets()
        }

        fn describe(&self) -> Vec<ConfigLine> {
            self.config.describe()
        }

        fn endpoint(&self) -> Option<String> {
            self.s3.endpoint()
        }

        fn io_policy(&self) -> IoPolicy {
            self.s3.io_policy()
        }

        fn request_hooks(&self) -> Vec<Arc<dyn RequestHook>> {
            self.s3.request_hooks()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::TclakeUnavailable;
    use crate::{FileSystemBuilder, Registry};

    /// The registry of a build without the feature: tclake refuses with how
    /// to enable it, and every other scheme keeps working.
    #[test]
    fn without_the_feature_tclake_says_how_to_enable_it() {
        let registry = Registry::with_builtins();
        registry.register(Arc::new(TclakeUnavailable));
        let err = FileSystemBuilder::new("tclake")
            .registry(&registry)
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("cargo feature `tclake`"), "{err}");
        for other in ["s3", "gcs", "file", "memory"] {
            FileSystemBuilder::new(other)
                .registry(&registry)
                .build()
                .unwrap();
        }
    }
}
