//! Random tokens: a lease holder's identity, a probe file's name.

use std::time::{SystemTime, UNIX_EPOCH};

/// A random 128-bit token: the standard library's randomly keyed hasher,
/// fed the time, the process and a counter.
pub(crate) fn random_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let half = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        h.write_u32(std::process::id());
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.finish()
    };
    format!("{:016x}{:016x}", half(), half())
}
