//! The conformance suite on Garage through the fault proxy at 1% faults of
//! every kind (503 SlowDown, 500, dropped connections, cut and truncated
//! bodies, stalls past the read timeout): retries make every operation's
//! outcome the same as on a healthy store. `--nocapture` shows the faults
//! injected so far at the start of each test.
cairn_conformance::conformance_suite!(
    |test: &str| cairn_conformance::Target::s3_through_faults(
        "GARAGE",
        cairn_fs::backend::ConditionalWrites::Emulated,
        0.01,
        test
    ),
    buckets: cfg(all()),
    signatures: cfg(all())
);
