//! What a store's error answer says, read once where the answer arrives
//! (cairn's HTTP transport), so error kinds are decided from the answer's
//! fields (status, error code, region), never from message text.
//!
//! OpenDAL turns an S3 error body into message text; the answers cairn
//! gives a meaning of its own are read here first and travel as the
//! OpenDAL error's typed source ([`StoreAnswer`]).

use std::fmt;

use opendal::Buffer;

/// What a store's answer means, for the answers cairn gives a meaning to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Meaning {
    /// The bucket does not exist (S3/COS/OSS `NoSuchBucket`; a GCS object
    /// listing answered 404).
    NoSuchBucket,
    /// The session token has expired.
    ExpiredToken,
    /// The store has no space left.
    StorageFull,
    /// Requests were signed for another region than the bucket's.
    WrongRegion,
    /// A range starting at or past the end of the object (416), which
    /// some services' own classification leaves unnamed (gcs).
    RangeNotSatisfied,
}

/// A store's error answer: its HTTP status, error code and the region it
/// named, with what cairn makes of it.
#[derive(Debug, Clone)]
pub(crate) struct StoreAnswer {
    pub status: u16,
    pub code: Option<String>,
    /// The region the store says the bucket is in.
    pub region: Option<String>,
    pub meaning: Meaning,
}

impl fmt::Display for StoreAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the store answered {}", self.status)?;
        if let Some(code) = &self.code {
            write!(f, " {code}")?;
        }
        if let Some(region) = &self.region {
            write!(f, " (bucket region {region})")?;
        }
        Ok(())
    }
}

impl std::error::Error for StoreAnswer {}

/// The fields of an S3-style XML error body that cairn reads.
#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "PascalCase")]
struct XmlError {
    code: String,
    region: Option<String>,
}

impl StoreAnswer {
    /// Reads an error answer (`status` ≥ 400, or a 301 redirect) to
    /// `method` `path`; `None` when cairn gives it no meaning of its own
    /// (OpenDAL's classification then stands).
    pub fn read(
        method: &http::Method,
        path: &str,
        parts: &http::response::Parts,
        body: &Buffer,
    ) -> Option<Self> {
        let status = parts.status.as_u16();
        let xml: XmlError =
            quick_xml::de::from_reader(body.clone().to_bytes().as_ref()).unwrap_or_default();
        let header_region = parts
            .headers
            .get("x-amz-bucket-region")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let code = (!xml.code.is_empty()).then_some(xml.code);
        let meaning = match code.as_deref() {
            Some("NoSuchBucket") => Meaning::NoSuchBucket,
            Some("ExpiredToken" | "TokenRefreshRequired" | "SecurityTokenExpired") => {
                Meaning::ExpiredToken
            }
            Some("StorageFull" | "XMinioStorageFull") => Meaning::StorageFull,
            _ if status == 507 => Meaning::StorageFull,
            Some(
                "AuthorizationHeaderMalformed"
                | "PermanentRedirect"
                | "IllegalLocationConstraintException",
            ) if xml.region.is_some() || header_region.is_some() => Meaning::WrongRegion,
            // A bodiless answer to a HEAD signed for the wrong region.
            None if matches!(status, 301 | 400) && header_region.is_some() => Meaning::WrongRegion,
            // GCS answers an object listing of a missing bucket with a bare
            // 404 (a missing prefix lists nothing, never 404).
            _ if status == 404 && *method == http::Method::GET && is_gcs_object_listing(path) => {
                Meaning::NoSuchBucket
            }
            _ if status == 416 => Meaning::RangeNotSatisfied,
            _ => return None,
        };
        Some(Self {
            status,
            code,
            region: xml.region.or(header_region),
            meaning,
        })
    }

    /// The OpenDAL error carrying this answer as its source; never retried.
    pub fn into_opendal(self) -> opendal::Error {
        let kind = match self.meaning {
            // OpenDAL's own kind for NoSuchBucket: a missing bucket is not an
            // absent file.
            Meaning::NoSuchBucket | Meaning::WrongRegion => opendal::ErrorKind::ConfigInvalid,
            Meaning::ExpiredToken => opendal::ErrorKind::PermissionDenied,
            Meaning::StorageFull => opendal::ErrorKind::Unexpected,
            Meaning::RangeNotSatisfied => opendal::ErrorKind::RangeNotSatisfied,
        };
        opendal::Error::new(kind, self.to_string())
            .set_permanent()
            .set_source(self)
    }
}

/// Whether `path` is GCS's JSON API object listing (`/storage/v1/b/{bucket}/o`).
fn is_gcs_object_listing(path: &str) -> bool {
    let mut parts = path.trim_end_matches('/').split('/');
    matches!(
        (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next()
        ),
        (
            Some(""),
            Some("storage"),
            Some("v1"),
            Some("b"),
            Some(_),
            Some("o"),
            None
        )
    )
}

/// The first error of type `T` in `err`'s chain of sources.
pub(crate) fn find_source<'a, T: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        // An io::Error wrapping another error (reqwest, hyper) hides it in
        // get_ref, not in source.
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(found) = io.get_ref().and_then(|inner| inner.downcast_ref::<T>())
        {
            return Some(found);
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(
        status: u16,
        headers: &[(&str, &str)],
        body: &str,
        method: http::Method,
        path: &str,
    ) -> Option<StoreAnswer> {
        let mut builder = http::Response::builder().status(status);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let (parts, ()) = builder.body(()).unwrap().into_parts();
        StoreAnswer::read(&method, path, &parts, &Buffer::from(body.to_string()))
    }

    #[test]
    fn each_store_s_answer_is_read_from_its_fields() {
        let xml = |code: &str, extra: &str| {
            format!(
                "<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>m</Message>{extra}</Error>"
            )
        };
        let get = http::Method::GET;
        let no_bucket = answer(404, &[], &xml("NoSuchBucket", ""), get.clone(), "/b/k").unwrap();
        assert_eq!(no_bucket.meaning, Meaning::NoSuchBucket);
        assert_eq!(
            answer(400, &[], &xml("ExpiredToken", ""), get.clone(), "/b/k")
                .unwrap()
                .meaning,
            Meaning::ExpiredToken
        );
        assert_eq!(
            answer(507, &[], "", get.clone(), "/b/k").unwrap().meaning,
            Meaning::StorageFull
        );
        assert_eq!(
            answer(507, &[], &xml("XMinioStorageFull", ""), get.clone(), "/b/k")
                .unwrap()
                .meaning,
            Meaning::StorageFull
        );
        // AWS and Garage both put the bucket's region in a Region element.
        let region = answer(
            400,
            &[],
            &xml("AuthorizationHeaderMalformed", "<Region>eu-west-1</Region>"),
            get.clone(),
            "/b/k",
        )
        .unwrap();
        assert_eq!(
            (region.meaning, region.region.as_deref()),
            (Meaning::WrongRegion, Some("eu-west-1"))
        );
        let head = answer(
            400,
            &[("x-amz-bucket-region", "ap-south-1")],
            "",
            http::Method::HEAD,
            "/b/k",
        )
        .unwrap();
        assert_eq!(head.region.as_deref(), Some("ap-south-1"));
        // GCS: a 404 on an object listing is a missing bucket; on an object, not.
        assert_eq!(
            answer(404, &[], "{}", get.clone(), "/storage/v1/b/bkt/o")
                .unwrap()
                .meaning,
            Meaning::NoSuchBucket
        );
        assert!(answer(404, &[], "{}", get.clone(), "/storage/v1/b/bkt/o/key").is_none());
        // Answers cairn has nothing to add to.
        assert_eq!(
            answer(416, &[], "", get.clone(), "/b/k").unwrap().meaning,
            Meaning::RangeNotSatisfied
        );
        assert!(answer(404, &[], &xml("NoSuchKey", ""), get.clone(), "/b/k").is_none());
        assert!(
            answer(
                403,
                &[("x-amz-bucket-region", "us-east-1")],
                &xml("AccessDenied", ""),
                get.clone(),
                "/b/k"
            )
            .is_none()
        );
        assert!(answer(503, &[], &xml("SlowDown", ""), get, "/b/k").is_none());
    }
}
