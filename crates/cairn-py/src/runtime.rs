//! One tokio runtime per process, shared by every Python object, and the
//! wait that releases the GIL around it.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

/// The process's runtime, made again in a forked child (Ray and
/// multiprocessing fork workers; a runtime's threads do not survive a fork).
pub(crate) fn runtime() -> Arc<tokio::runtime::Runtime> {
    static RUNTIME: Mutex<Option<(u32, Arc<tokio::runtime::Runtime>)>> = Mutex::new(None);
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    match slot.as_ref() {
        Some((owner, rt)) if *owner == pid => rt.clone(),
        stale => {
            if let Some((_, old)) = stale {
                // The parent's threads are gone here: dropping its runtime
                // would wait for them forever.
                std::mem::forget(old.clone());
            }
            let rt = Arc::new(
                tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .thread_name("cairn-io")
                    .build()
                    .expect("a tokio runtime starts"),
            );
            *slot = Some((pid, rt.clone()));
            rt
        }
    }
}

/// Runs `future` on the shared runtime with the GIL released.
pub(crate) fn wait<T: Send>(
    py: Python<'_>,
    future: impl std::future::Future<Output = T> + Send,
) -> T {
    let rt = runtime();
    py.detach(|| rt.block_on(future))
}
