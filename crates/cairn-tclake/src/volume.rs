//! `tclake://volume/<catalog>/<schema>/<volume>/<path>`: which volume a path
//! names, and where the catalog says its files are.

use crate::client::CatalogClient;
use crate::error::{Error, Result};
use crate::volume_ref::VolumeRef;

/// Where a volume's files are: a COS bucket and a prefix in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeLocation {
    /// The COS bucket (`name-appid`).
    pub bucket: String,
    /// The prefix in the bucket, without slashes at its ends (may be empty).
    pub prefix: String,
}

impl VolumeLocation {
    /// Parses a `StorageLocation` (`cos://bucket/prefix` or `cosn://bucket/prefix`).
    ///
    /// ```
    /// let l = cairn_tclake::VolumeLocation::parse("cosn://data-125/lake/v1/").unwrap();
    /// assert_eq!((l.bucket.as_str(), l.prefix.as_str()), ("data-125", "lake/v1"));
    /// assert!(cairn_tclake::VolumeLocation::parse("hdfs://x/y").is_err());
    /// ```
    pub fn parse(location: &str) -> Result<Self> {
        let rest = location
            .strip_prefix("cos://")
            .or_else(|| location.strip_prefix("cosn://"))
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "the volume's StorageLocation {location:?} is not on COS (cos:// or cosn://); cairn can only serve COS volumes"
                ))
            })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(Error::Unsupported(format!(
                "the volume's StorageLocation {location:?} names no bucket"
            )));
        }
        Ok(Self {
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
        })
    }
}

/// Checks that `volume`'s catalog is a VOLUME catalog and returns where the
/// volume's files are. The schema and the volume must exist.
pub async fn resolve_volume(client: &CatalogClient, volume: &VolumeRef) -> Result<VolumeLocation> {
    let kind = client.catalog_type(&volume.catalog).await?;
    if !kind.eq_ignore_ascii_case("VOLUME") {
        return Err(Error::Unsupported(format!(
            "tclake catalog {:?} is a {kind} catalog; cairn serves files in VOLUME catalogs only",
            volume.catalog
        )));
    }
    let location = client.volume_location(volume).await?;
    VolumeLocation::parse(&location)
}
