//! Helpers every HTTP backend shares: endpoint checks, the region an
//! endpoint names, COS's regional endpoint.

use crate::error::Result;
use crate::options::config_error;

/// Checks that `endpoint` (of `protocol`, from `source`) is an http(s) URL
/// with a host; the error shows how to write one (`example`).
pub fn check_http_endpoint(
    protocol: &str,
    endpoint: &str,
    source: &str,
    example: &str,
) -> Result<()> {
    match url::Url::parse(endpoint) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(()),
        _ => Err(config_error(format!(
            "the {protocol} endpoint {endpoint:?} (from {source}) is not an http(s) URL; write it as {example}"
        ))),
    }
}

/// The region an endpoint names, such as `ap-guangzhou` in
/// `https://cos.ap-guangzhou.myqcloud.com`.
pub fn region_from_endpoint(endpoint: &str) -> Option<String> {
    let host = url::Url::parse(endpoint).ok()?.host_str()?.to_string();
    let mut labels = host.split('.');
    match (labels.next(), labels.next()) {
        (Some("cos" | "s3"), Some(region)) if region.contains('-') => Some(region.to_string()),
        _ => None,
    }
}

/// Tencent COS's endpoint of `region` (cos and tclake).
pub fn cos_endpoint(region: &str) -> String {
    format!("https://cos.{region}.myqcloud.com")
}

#[cfg(test)]
mod examples {
    use super::*;

    #[test]
    fn check_http_endpoint_example() {
        assert!(
            check_http_endpoint(
                "s3",
                "http://127.0.0.1:3900",
                "option s3.endpoint_url",
                "http://host:port"
            )
            .is_ok()
        );
        let err = check_http_endpoint(
            "s3",
            "127.0.0.1:3900",
            "option s3.endpoint_url",
            "http://host:port",
        )
        .unwrap_err();
        assert!(err.to_string().contains("s3.endpoint_url"));
    }

    #[test]
    fn region_from_endpoint_example() {
        assert_eq!(
            region_from_endpoint("https://cos.ap-guangzhou.myqcloud.com").as_deref(),
            Some("ap-guangzhou")
        );
        assert_eq!(region_from_endpoint("http://127.0.0.1:3900"), None);
    }

    #[test]
    fn cos_endpoint_example() {
        assert_eq!(
            cos_endpoint("ap-beijing"),
            "https://cos.ap-beijing.myqcloud.com"
        );
    }
}
