//! SIGINT and SIGTERM during `cairn job run`: the first asks the job to stop
//! cleanly (units in flight committed, lease given back, exit 130 or 143);
//! a second one exits at once (the checkpoint still resumes exactly once:
//! that is what it is for).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::signal::unix::{SignalKind, signal};

/// The signal handling of one job run.
pub struct Signals {
    /// 130 (SIGINT) or 143 (SIGTERM) once one arrived; 0 before.
    code: Arc<AtomicU8>,
    task: tokio::task::JoinHandle<()>,
}

impl Signals {
    /// The exit status for the signal that stopped the job (128 + its number).
    pub fn exit_code(&self) -> u8 {
        match self.code.load(Ordering::SeqCst) {
            0 => 130,
            code => code,
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Listens for SIGINT and SIGTERM while a job runs, requesting `interrupt`
/// on the first.
pub fn on_signals(interrupt: cairn_dataset::Interrupt) -> Signals {
    let code = Arc::new(AtomicU8::new(0));
    let seen = code.clone();
    let task = tokio::spawn(async move {
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            tracing::warn!("cannot listen for SIGINT/SIGTERM: a signal stops the job at once");
            return;
        };
        let first = tokio::select! {
            _ = int.recv() => 130,
            _ = term.recv() => 143,
        };
        seen.store(first, Ordering::SeqCst);
        eprintln!(
            "cairn: stopping: finishing the batches in flight, committing them and giving the checkpoint back (signal again to stop at once)"
        );
        interrupt.request();
        tokio::select! {
            _ = int.recv() => {},
            _ = term.recv() => {},
        }
        eprintln!("cairn: stopped at once; run the same command to resume");
        std::process::exit(i32::from(first));
    });
    Signals { code, task }
}
