//! cairn-tclake: TCLake volumes (Tencent Cloud's `tccatalog` API) for cairn.
//!
//! A `tclake://volume/<catalog>/<schema>/<volume>/<path>` URL is served by
//! cairn-fs (feature `tclake`) through the COS backend rooted at the
//! volume's `StorageLocation`, signed with temporary COS credentials from
//! the catalog. This crate is the catalog side: TC3-HMAC-SHA256 signing
//! ([`authorization`]), the client ([`CatalogClient`]), volume paths and
//! locations ([`VolumeRef`], [`resolve_volume`]), and the credential provider
//! that refreshes before expiry ([`VolumeCredentialProvider`]).

mod client;
mod credentials;
mod error;
mod sign;
mod volume;
mod volume_ref;

pub use client::{API_VERSION, CatalogClient, CatalogSettings, SERVICE, TemporaryCredentials};
pub use credentials::{MIN_REMAINING, REFRESH_MARGIN, VolumeCredentialProvider};
pub use error::{Error, Result};
pub use sign::{CONTENT_TYPE, authorization, utc_date};
pub use volume::{VolumeLocation, resolve_volume};
pub use volume_ref::{ROOT_COMPONENTS, VolumeRef};
