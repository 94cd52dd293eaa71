//! The conformance suite on `cos://` (COS's S3-compatible API, virtual-host
//! addressing, the Content-MD5 hook) served by Garage.
cairn_conformance::conformance_suite!(
    |test: &str| cairn_conformance::Target::cos(
        "GARAGE",
        cairn_fs::backend::ConditionalWrites::Emulated,
        test
    ),
    buckets: cfg(all()),
    signatures: cfg(all())
);
