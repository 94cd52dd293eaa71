//! The retry and timeout layers every operator gets, from the backend's
//! [`IoPolicy`], and the counter of retries they made.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opendal::Operator;
use opendal::layers::{RetryEvent, RetryInterceptor, RetryLayer, TimeoutLayer};

use crate::backend::IoPolicy;

/// Counts the retries of one filesystem's operators and logs each at debug
/// level (OpenDAL's own interceptor warns on every retry, which floods the
/// log of a long job on a throttling store).
/// Each retry is also counted in the store metrics, by cause.
#[derive(Debug, Default, Clone)]
pub(crate) struct RetryCounter {
    count: Arc<AtomicU64>,
    /// The store's name in metrics (its endpoint, or its protocol).
    endpoint_label: Arc<str>,
}

impl RetryCounter {
    pub(crate) fn new(endpoint_label: &str) -> RetryCounter {
        RetryCounter {
            count: Arc::default(),
            endpoint_label: endpoint_label.into(),
        }
    }

    /// Retries made so far.
    pub(crate) fn get(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

impl RetryInterceptor for RetryCounter {
    fn intercept(&self, event: RetryEvent<'_>) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let labels = crate::metrics::store_labels::RetryLabels {
            op: crate::metrics::OpKind::of_operation(event.op),
            endpoint: self.endpoint_label.to_string(),
            cause: crate::metrics::RetryCause::of(event.err),
        };
        crate::metrics::store().retries.get_or_create(&labels).inc();
        tracing::debug!(
            op = ?event.op,
            attempt = event.attempt,
            after_ms = event.retry_after.as_millis() as u64,
            error = %event.err,
            "retrying"
        );
    }
}

/// `op` with per-attempt timeouts inside retries, and the whole call's
/// deadline outside them.
pub(crate) fn with_io_layers(op: Operator, policy: &IoPolicy, retries: &RetryCounter) -> Operator {
    let op = op
        .layer(
            TimeoutLayer::new()
                .with_timeout(policy.op_timeout)
                .with_io_timeout(policy.io_timeout),
        )
        .layer(
            RetryLayer::new()
                .with_max_times(policy.max_attempts.saturating_sub(1))
                .with_min_delay(policy.retry_base_delay)
                .with_max_delay(policy.retry_max_delay)
                .with_factor(2.0)
                .with_jitter()
                .with_notify(retries.clone()),
        );
    match policy.retry_deadline {
        Some(deadline) => op.layer(
            TimeoutLayer::new()
                .with_timeout(deadline)
                .with_io_timeout(deadline.max(Duration::from_secs(1))),
        ),
        None => op,
    }
}
