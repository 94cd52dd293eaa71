//! The HTTP client cairn-fs sends requests with when the caller gives none:
//! reqwest with a resolver that answers `localhost` and `*.localhost` with
//! the loopback address itself (RFC 6761, section 6.3, as curl and
//! systemd-resolved do) and asks the system for every other name. So a
//! virtual-host endpoint such as `http://s3.minio.localhost:9000` reaches a
//! local server as `bucket.s3.minio.localhost` without an /etc/hosts entry.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether `host` is a localhost name (RFC 6761): `localhost` or under it.
pub(crate) fn is_localhost_name(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

/// Localhost names to 127.0.0.1; every other name through the system.
#[derive(Debug, Default)]
struct LocalhostResolver;

impl Resolve for LocalhostResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            if is_localhost_name(&host) {
                let loopback = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
                return Ok(Box::new(std::iter::once(loopback)) as Addrs);
            }
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            Ok(Box::new(found.into_iter()) as Addrs)
        })
    }
}

/// A new client with cairn's resolver.
pub(crate) fn default_client() -> reqwest::Client {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(LocalhostResolver))
        .build()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::is_localhost_name;

    #[test]
    fn localhost_names_are_localhost_and_the_names_under_it() {
        assert!(is_localhost_name("bucket.s3.garage.localhost"));
        assert!(is_localhost_name("LOCALHOST"));
        assert!(is_localhost_name("localhost."));
        assert!(!is_localhost_name("localhost.example.com"));
    }
}
