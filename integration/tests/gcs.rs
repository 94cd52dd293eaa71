//! The conformance suite on `gcs://`, served by fake-gcs-server.
cairn_conformance::conformance_suite!(
    cairn_conformance::Target::gcs,
    buckets: cfg(all()),
    signatures: ignore = "fake-gcs-server accepts any credentials, so a wrong one cannot be detected locally",
    multipart: ignore = "fake-gcs-server lacks the XML multipart-upload API that OpenDAL's GCS writer uses"
);
