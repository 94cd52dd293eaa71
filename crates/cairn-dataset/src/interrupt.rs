//! [`Interrupt`]: a request to stop a running job cleanly, set from outside
//! (the CLI's SIGINT/SIGTERM handler). Workers take no new input once it is
//! set, commit the rows they hold, the lease is given back, and the job
//! returns [`crate::Error::Interrupted`]; the next run resumes at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A shared stop flag: clones see the same request.
///
/// ```
/// let stop = cairn_dataset::Interrupt::new();
/// let seen_by_job = stop.clone();
/// assert!(!seen_by_job.is_requested());
/// stop.request();
/// assert!(seen_by_job.is_requested());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// Not requested yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the job to stop at its next batch boundary.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
