//! Between object_store's types and cairn's: object metadata, conditions,
//! errors.

use object_store::path::Path;
use object_store::{Attributes, GetOptions, ObjectMeta};

use super::STORE;
use crate::error::{Error, ErrorKind};

/// Checks the conditions of `options` against `meta`, as HTTP does.
pub(super) fn check_conditions(
    meta: &ObjectMeta,
    options: &GetOptions,
    location: &Path,
) -> object_store::Result<()> {
    let etag = meta.e_tag.as_deref();
    let precondition = |why: &str| object_store::Error::Precondition {
        path: location.to_string(),
        source: why.to_string().into(),
    };
    let not_modified = |why: &str| object_store::Error::NotModified {
        path: location.to_string(),
        source: why.to_string().into(),
    };
    if let Some(wanted) = &options.if_match
        && wanted != "*"
        && etag != Some(wanted.as_str())
    {
        return Err(precondition("the ETag does not match If-Match"));
    }
    if let Some(unwanted) = &options.if_none_match
        && (unwanted == "*" || etag == Some(unwanted.as_str()))
    {
        return Err(not_modified("the ETag matches If-None-Match"));
    }
    if let Some(since) = options.if_unmodified_since
        && meta.last_modified > since
    {
        return Err(precondition("modified after If-Unmodified-Since"));
    }
    if let Some(since) = options.if_modified_since
        && meta.last_modified <= since
    {
        return Err(not_modified("not modified after If-Modified-Since"));
    }
    Ok(())
}

/// object_store's description of an OpenDAL entry read through `op`.
/// Stores without ETags (local disk) get one made of the modification time
/// and the size, as object_store's own `LocalFileSystem` does; a version is
/// reported only where the store reads by version (GCS reports generations
/// it cannot read by through OpenDAL).
pub(super) fn object_meta(
    op: &opendal::Operator,
    location: Path,
    meta: &opendal::Metadata,
) -> ObjectMeta {
    let modified = meta.last_modified().map(std::time::SystemTime::from);
    let last_modified = modified
        .map(chrono::DateTime::<chrono::Utc>::from)
        .unwrap_or_default();
    let e_tag = meta.etag().map(str::to_string).or_else(|| {
        modified
            .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|since| format!("{:x}-{:x}", since.as_nanos(), meta.content_length()))
    });
    ObjectMeta {
        location,
        last_modified,
        size: meta.content_length(),
        e_tag,
        version: meta
            .version()
            .filter(|_| op.info().capability().read_with_version)
            .map(str::to_string),
    }
}

pub(super) fn refuse_attributes(
    attributes: &Attributes,
    tags: &object_store::TagSet,
) -> object_store::Result<()> {
    if !attributes.is_empty() || !tags.encoded().is_empty() {
        return Err(not_implemented("object attributes and tags"));
    }
    Ok(())
}

pub(super) fn not_implemented(operation: &str) -> object_store::Error {
    object_store::Error::NotImplemented {
        operation: operation.to_string(),
        implementer: STORE.to_string(),
    }
}

pub(super) fn not_found(location: &Path, why: &str) -> object_store::Error {
    object_store::Error::NotFound {
        path: location.to_string(),
        source: why.to_string().into(),
    }
}

/// object_store's error for a cairn error about `location`; the cairn
/// error (its message names the URL and what to do) is the source.
pub(super) fn to_store_error(err: Error, location: &Path) -> object_store::Error {
    let path = location.to_string();
    match err.kind() {
        ErrorKind::NotFound | ErrorKind::IsADirectory | ErrorKind::NotADirectory => {
            object_store::Error::NotFound {
                path,
                source: Box::new(err),
            }
        }
        ErrorKind::AlreadyExists => object_store::Error::AlreadyExists {
            path,
            source: Box::new(err),
        },
        ErrorKind::PreconditionFailed => object_store::Error::Precondition {
            path,
            source: Box::new(err),
        },
        ErrorKind::PermissionDenied => object_store::Error::PermissionDenied {
            path,
            source: Box::new(err),
        },
        ErrorKind::Unsupported => object_store::Error::NotSupported {
            source: Box::new(err),
        },
        _ => object_store::Error::Generic {
            store: STORE,
            source: Box::new(err),
        },
    }
}
