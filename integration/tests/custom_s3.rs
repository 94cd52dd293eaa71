//! The conformance suite on your own S3 endpoint (MinIO, AWS, ...), named by
//! `CAIRN_TEST_S3_*` (see docs/testing.md). Ignored unless asked for:
//! `cargo test -p cairn-conformance --test custom_s3 -- --ignored`.
//! `CAIRN_TEST_S3_CONDITIONAL` says what the store does with create-if-absent
//! (`native`, the default, or `emulated`).
mod custom {
    fn target(test: &str) -> Option<cairn_conformance::Target> {
        let conditional = match std::env::var("CAIRN_TEST_S3_CONDITIONAL").as_deref() {
            Ok("emulated") => cairn_fs::backend::ConditionalWrites::Emulated,
            _ => cairn_fs::backend::ConditionalWrites::Native,
        };
        cairn_conformance::Target::s3("S3", conditional, test)
    }
    mod suite {
        cairn_conformance::conformance_suite!(
            super::target,
            buckets: cfg(all()),
            signatures: cfg(all()),
            every: ignore = "set CAIRN_TEST_S3_* and run with --ignored"
        );
    }
}
