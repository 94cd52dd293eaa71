//! The conformance suite on the in-memory backend.
cairn_conformance::conformance_suite!(
    cairn_conformance::Target::memory,
    buckets: ignore = "memory:// has no buckets",
    signatures: ignore = "memory:// has no credentials"
);
