//! An HTTP client whose resolver sends every `*.localhost` name to 127.0.0.1,
//! so virtual-host requests (`bucket.s3.garage.localhost`) reach local servers
//! without touching /etc/hosts or any public address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Resolves `localhost` and `*.localhost` to 127.0.0.1 and refuses anything else.
#[derive(Debug, Default)]
pub struct LoopbackResolver;

impl Resolve for LoopbackResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_ascii_lowercase();
        Box::pin(async move {
            if host == "localhost" || host.ends_with(".localhost") || host == "127.0.0.1" {
                let addrs: Addrs = Box::new(std::iter::once(SocketAddr::new(
                    IpAddr::V4(Ipv4Addr::LOCALHOST),
                    0,
                )));
                Ok(addrs)
            } else {
                Err(format!("{host} is not a loopback name; tests only reach 127.0.0.1").into())
            }
        })
    }
}

/// A reqwest client that resolves `*.localhost` to 127.0.0.1.
pub fn loopback_client() -> reqwest::Client {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(LoopbackResolver))
        .no_proxy()
        .build()
        .expect("build the loopback HTTP client")
}
