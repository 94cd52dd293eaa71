//! The conformance suite on the local filesystem.
cairn_conformance::conformance_suite!(
    cairn_conformance::Target::file,
    buckets: ignore = "file:// has no buckets",
    signatures: ignore = "file:// has no credentials"
);
