//! Small helpers the test files of every crate share, so each has one
//! definition: a seeded random sequence (kill instants that replay from a
//! seed) and a free loopback port.

use std::net::TcpListener;

/// splitmix64: the next number of the sequence `state` seeds, so a failing
/// sequence of kill instants replays from its seed.
///
/// ```
/// let (mut a, mut b) = (7, 7);
/// assert_eq!(cairn_conformance::splitmix64(&mut a), cairn_conformance::splitmix64(&mut b));
/// assert_ne!(cairn_conformance::splitmix64(&mut a), cairn_conformance::splitmix64(&mut a));
/// ```
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A loopback port free now (the OS picks it; another process may take it
/// before it is used, which a server start then reports).
///
/// ```
/// assert_ne!(cairn_conformance::free_port(), 0);
/// ```
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
