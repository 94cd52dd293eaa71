//! `cos://`: Tencent Cloud COS through its S3-compatible API, as the seed
//! system uses it: virtual-host addressing by default (COS refuses path style
//! for buckets created since 2024), the endpoint from `client_kwargs` or built
//! from the region (`cos.<region>.myqcloud.com`), `TENCENTCLOUD_*` credentials
//! as fallbacks, and a hook that guarantees `Content-MD5` on multi-deletes.

use std::sync::Arc;

use super::s3::{ChecksumHeader, S3Backend, S3Config, S3Flavor, string_options};
use super::{Backend, BackendFactory, Layout};
use crate::error::Result;
use crate::hooks::ContentMd5OnMultiDelete;
use crate::options::{BackendOptions, Environment};

/// COS through the S3 API: the s3 options, COS defaults.
pub(crate) const COS: S3Flavor = S3Flavor {
    protocol: "cos",
    key_env: &["TENCENTCLOUD_SECRET_ID"],
    secret_env: &["TENCENTCLOUD_SECRET_KEY"],
    token_env: &["TENCENTCLOUD_SESSION_TOKEN"],
    region_env: &["TENCENTCLOUD_REGION"],
    endpoint_env: &[],
    default_region: None,
    regional_endpoint: super::shared::cos_endpoint,
    virtual_by_default: Some(true),
    botocore_env: false,
    checksum: ChecksumHeader::ContentMd5,
};

/// The factory of `cos://`.
///
/// ```
/// use cairn_fs::backend::{BackendFactory, cos::CosFactory};
/// assert_eq!(CosFactory.protocol(), "cos");
/// assert!(!CosFactory.listings_cache_default());
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct CosFactory;

impl BackendFactory for CosFactory {
    fn protocol(&self) -> &str {
        "cos"
    }
    fn schemes(&self) -> &[&str] {
        &["cos"]
    }
    fn layout(&self) -> Layout {
        Layout::Bucketed
    }
    fn string_options(&self) -> &[&str] {
        string_options()
    }
    fn listings_cache_default(&self) -> bool {
        false
    }
    fn configure(&self, options: &BackendOptions, env: &Environment) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(S3Backend {
            protocol: "cos",
            config: S3Config::resolve_flavor(&COS, options, env)?,
            hooks: vec![Arc::new(ContentMd5OnMultiDelete)],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resolve(opts: serde_json::Value, env: &[(&str, &str)]) -> Result<S3Config> {
        S3Config::resolve_flavor(
            &COS,
            &BackendOptions::from_map("cos", opts.as_object().unwrap()),
            &Environment::from_pairs(env.iter().copied()),
        )
    }

    #[test]
    fn endpoint_from_region_and_virtual_host() {
        let c = resolve(json!({"region": "ap-guangzhou"}), &[]).unwrap();
        assert_eq!(c.endpoint.value, "https://cos.ap-guangzhou.myqcloud.com");
        assert!(c.virtual_host.value);
        let c = resolve(
            json!({"client_kwargs": {"endpoint_url": "https://cos.ap-beijing.myqcloud.com"}}),
            &[],
        )
        .unwrap();
        assert_eq!(c.region.value, "ap-beijing");
        assert!(
            c.virtual_host.value,
            "COS stays virtual-host with a custom endpoint"
        );
        let c = resolve(
            json!({"region": "r", "config_kwargs": {"s3": {"addressing_style": "path"}}}),
            &[],
        )
        .unwrap();
        assert!(!c.virtual_host.value);
    }

    #[test]
    fn tencent_environment_is_the_fallback() {
        let env = [
            ("TENCENTCLOUD_SECRET_ID", "AKID"),
            ("TENCENTCLOUD_SECRET_KEY", "SK"),
            ("TENCENTCLOUD_REGION", "ap-shanghai"),
            ("AWS_ACCESS_KEY_ID", "not-for-cos"),
        ];
        let c = resolve(json!({}), &env).unwrap();
        assert_eq!(c.key.unwrap().value, "AKID");
        assert_eq!(c.region.value, "ap-shanghai");
    }

    #[test]
    fn no_region_and_no_endpoint_is_a_clear_error() {
        let err = resolve(json!({}), &[]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("cos.region") && text.contains("cos.endpoint_url"),
            "{text}"
        );
        let err = resolve(json!({"endpoint_url": "http://127.0.0.1:9000"}), &[]).unwrap_err();
        assert!(err.to_string().contains("cos.region"), "{err}");
    }
}
