//! The volume a tclake path names (`volume/<catalog>/<schema>/<volume>`):
//! plain data, used by the catalog client and the volume resolver alike.

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
