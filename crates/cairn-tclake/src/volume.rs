//! `tclake://volume/<catalog>/<schema>/<volume>/<path>`: which volume a path
//! names, and where the catalog says its files are.

use crate::client::CatalogClient;
use crate::error::{Error, Result};

/// The root a tclake path names: its first four components.
pub const ROOT_COMPONENTS: usize = 4;

/// A volume, named as the catalog names it.
///
/// ```
/// let v = cairn_tclake::VolumeRef::parse("volume/lake/raw/videos").unwrap();
/// assert_eq!((v.catalog.as_str(), v.schema.as_str(), v.volume.as_str()), ("lake", "raw", "videos"));
/// assert!(cairn_tclake::VolumeRef::parse("lakehouse/lake/raw/t").unwrap_err().to_string().contains("VOLUME catalogs only"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VolumeRef {
    /// The catalog.
    pub catalog: String,
    /// The schema.
    pub schema: String,
    /// The volume.
    pub volume: String,
}

impl VolumeRef {
    /// The request fields naming this volume in the catalog's API.
    pub(crate) fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "CatalogName": self.catalog,
            "SchemaName": self.schema,
            "VolumeName": self.volume,
        })
    }

    /// Parses the root of a tclake path: `volume/<catalog>/<schema>/<volume>`.
    pub fn parse(root: &str) -> Result<Self> {
        let parts: Vec<&str> = root.split('/').collect();
        let usage = "write tclake paths as tclake://volume/<catalog>/<schema>/<volume>/<path>";
        match parts.as_slice() {
            ["volume", catalog, schema, volume]
                if !catalog.is_empty() && !schema.is_empty() && !volume.is_empty() =>
            {
                Ok(Self {
                    catalog: catalog.to_string(),
                    schema: schema.to_string(),
                    volume: volume.to_string(),
                })
            }
            ["volume", ..] => Err(Error::Unsupported(format!(
                "tclake://{root} does not name a volume; {usage}"
            ))),
            [kind, ..] => Err(Error::Unsupported(format!(
                "tclake://{kind}/... is not supported: cairn serves files in VOLUME catalogs only (LAKEHOUSE tables are not files); {usage}"
            ))),
            [] => Err(Error::Unsupported(usage.to_string())),
        }
    }
}

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
