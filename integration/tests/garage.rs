//! The conformance suite on Garage (`CAIRN_TEST_GARAGE_*`, see docs/testing.md).
//! Garage ignores conditional writes, so exclusive creates are emulated.
cairn_conformance::conformance_suite!(
    |test: &str| cairn_conformance::Target::s3(
        "GARAGE",
        cairn_fs::backend::ConditionalWrites::Emulated,
        test
    ),
    buckets: cfg(all()),
    signatures: cfg(all())
);
