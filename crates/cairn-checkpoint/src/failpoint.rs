//! Failpoints in the code that runs in production, for crash tests: inert
//! unless the crate is built with the `failpoints` feature and the
//! `FAILPOINTS` variable names them (the `fail` crate's syntax, e.g.
//! `FAILPOINTS='after-commit=2*off->return'`: pass twice, then fire).

/// Reads `FAILPOINTS` once; call at the start of a program that tests crash
/// points in (the `cairn` binary does). A no-op without the feature.
///
/// ```
/// cairn_checkpoint::internals::failpoint::setup_from_env();
/// ```
pub fn setup_from_env() {
    #[cfg(feature = "failpoints")]
    std::mem::forget(fail::FailScenario::setup());
}

/// A crash point: when the failpoint `name` fires, the process aborts on the
/// spot (no destructors, no clean-up: what a SIGKILL or a power cut leaves).
///
/// ```
/// cairn_checkpoint::internals::failpoint::crash_point("never-configured");
/// ```
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub fn crash_point(name: &str) {
    fail::fail_point!(name, |_| {
        eprintln!("cairn: failpoint {name} fired: aborting the process");
        std::process::abort()
    });
}

/// Whether the failpoint `name` fires now (for faults other than a crash).
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub(crate) fn triggered(name: &str) -> bool {
    fail::fail_point!(name, |_| true);
    false
}
