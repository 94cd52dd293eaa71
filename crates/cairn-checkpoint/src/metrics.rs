//! Checkpoint metrics in cairn's registry ([`cairn_fs::metrics`]): units
//! committed and rolled back, lease renewals.

use std::sync::LazyLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Outcome {
    pub outcome: &'static str,
}

pub(crate) struct CheckpointMetrics {
    units: Family<Outcome, Counter>,
    lease_renewals: Family<Outcome, Counter>,
}

impl CheckpointMetrics {
    pub(crate) fn unit_committed(&self) {
        self.units
            .get_or_create(&Outcome {
                outcome: "committed",
            })
            .inc();
    }

    pub(crate) fn unit_rolled_back(&self) {
        self.units
            .get_or_create(&Outcome {
                outcome: "rolled_back",
            })
            .inc();
    }

    pub(crate) fn lease_renewed(&self, ok: bool) {
        let outcome = if ok { "ok" } else { "failed" };
        self.lease_renewals
            .get_or_create(&Outcome { outcome })
            .inc();
    }
}

static METRICS: LazyLock<CheckpointMetrics> = LazyLock::new(|| {
    let metrics = CheckpointMetrics {
        units: Family::default(),
        lease_renewals: Family::default(),
    };
    // Listed at zero from the start, so a scrape before the first commit
    // already has the series.
    for outcome in ["committed", "rolled_back"] {
        metrics.units.get_or_create_owned(&Outcome { outcome });
    }
    for outcome in ["ok", "failed"] {
        metrics
            .lease_renewals
            .get_or_create_owned(&Outcome { outcome });
    }
    cairn_fs::metrics::register(
        "checkpoint_units",
        "Units committed (the commit point written) and rolled back (their data files deleted)",
        metrics.units.clone(),
    );
    cairn_fs::metrics::register(
        "checkpoint_lease_renewals",
        "Lease renewals, by outcome (ok, failed)",
        metrics.lease_renewals.clone(),
    );
    metrics
});

pub(crate) fn metrics() -> &'static CheckpointMetrics {
    &METRICS
}

/// Puts the checkpoint metrics in cairn's registry now (they are otherwise
/// added at the first commit), so that [`cairn_fs::metrics::encode`] lists
/// them at zero.
///
/// ```
/// cairn_checkpoint::register_metrics();
/// assert!(cairn_fs::metrics::encode().contains("cairn_checkpoint_units_total{outcome=\"committed\"}"));
/// ```
pub fn register_metrics() {
    LazyLock::force(&METRICS);
}
