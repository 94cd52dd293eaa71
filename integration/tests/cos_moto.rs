//! The conformance suite on `cos://` (virtual-host addressing) served by moto.
cairn_conformance::conformance_suite!(
    |test: &str| cairn_conformance::Target::cos(
        "MOTO",
        cairn_fs::backend::ConditionalWrites::Native,
        test
    ),
    buckets: cfg(all()),
    signatures: ignore = "moto runs without signature checks (see tests/moto.rs); signatures are checked on Garage"
);
