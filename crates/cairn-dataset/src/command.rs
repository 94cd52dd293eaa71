//! A transform in any language: a long-lived process that reads Arrow IPC
//! stream batches on stdin and writes one transformed batch on stdout for
//! each batch it reads.

use std::collections::VecDeque;
use std::io::{BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;

use crate::error::{Error, Result};

/// The stderr kept for error messages.
const STDERR_TAIL: usize = 8 * 1024;

/// One running transform process (one per worker).
pub(crate) struct CommandProcess {
    command: String,
    child: Child,
    stdin: Option<ChildStdin>,
    writer: Option<StreamWriter<ChildStdin>>,
    stdout: Option<ChildStdout>,
    reader: Option<StreamReader<BufReader<ChildStdout>>>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    /// The thread reading stderr: it ends at the pipe's end of file.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    batches: u64,
    watchdog: Option<Watchdog>,
}

/// Kills a process group that takes longer than `timeout` over one batch.
struct Watchdog {
    timeout: Duration,
    watch: Arc<Mutex<Watch>>,
    fired: Arc<AtomicBool>,
}

/// What the watchdog looks at, under one lock: the kill happens with it
/// held, so it cannot race the reaping of the child.
#[derive(Default)]
struct Watch {
    /// When the batch in flight was sent (`None` between batches).
    busy_since: Option<Instant>,
    /// The child is about to be (or was) reaped: its process group ID may
    /// belong to another process from then on, so it is never signalled.
    retired: bool,
}

impl Watchdog {
    fn start(timeout: Duration, group: u32) -> Self {
        let watch = Arc::new(Mutex::new(Watch::default()));
        let fired = Arc::new(AtomicBool::new(false));
        let (shared, fire) = (watch.clone(), fired.clone());
        std::thread::spawn(move || {
            loop {
                {
                    let watch = shared.lock().expect("watchdog lock");
                    if watch.retired {
                        return;
                    }
                    if watch.busy_since.is_some_and(|t| t.elapsed() > timeout) {
                        fire.store(true, Ordering::Relaxed);
                        kill_group(group);
                        return;
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Self {
            timeout,
            watch,
            fired,
        }
    }

    fn busy(&self, busy: bool) {
        self.watch.lock().expect("watchdog lock").busy_since = busy.then(Instant::now);
    }

    /// Called before the child is waited for: no signal after this.
    fn retire(&self) {
        self.watch.lock().expect("watchdog lock").retired = true;
    }
}

/// SIGKILL to the process group `group` (the transform runs in its own: the
/// shell and whatever it started).
fn kill_group(group: u32) {
    #[cfg(unix)]
    // SAFETY: killpg only sends a signal; `group` is the process group this
    // module created for the transform (its leader's PID), and the leader
    // has not been reaped (`Watchdog::retire` comes first), so the ID is
    // still that group's.
    unsafe {
        libc::killpg(group as libc::pid_t, libc::SIGKILL);
    }
}

impl CommandProcess {
    /// Starts `command` with `sh -c`; with a `timeout`, each batch must be
    /// answered within it.
    pub(crate) fn spawn(command: &str, timeout: Option<Duration>) -> Result<Self> {
        let mut child = Command::new("sh");
        child
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group: Ctrl-C in a terminal signals the whole
        // foreground group, and the job, not the terminal, decides when a
        // transform stops (it finishes its batch; the job commits it). It
        // still ends when the job does: its stdin closes.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut child, 0);
        let mut child = child.spawn().map_err(|e| Error::Transform {
            operator: describe(command),
            reason: format!("cannot start it: {e}"),
        })?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let mut pipe = child.stderr.take().expect("stderr is piped");
        let tail = stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut tail = tail.lock().expect("stderr tail lock");
                tail.extend(&chunk[..n]);
                let excess = tail.len().saturating_sub(STDERR_TAIL);
                tail.drain(..excess);
            }
        });
        let watchdog = timeout.map(|t| Watchdog::start(t, child.id()));
        Ok(Self {
            watchdog,
            command: command.to_string(),
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            writer: None,
            reader: None,
            stderr,
            stderr_reader: Some(stderr_reader),
            batches: 0,
        })
    }

    /// Sends `batch`, returns the process's answer to it.
    pub(crate) fn transform(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        if let Some(watchdog) = &self.watchdog {
            watchdog.busy(true);
        }
        let answer = self.exchange(batch);
        if let Some(watchdog) = &self.watchdog {
            watchdog.busy(false);
        }
        answer
    }

    fn exchange(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        if let Err(reason) = self.send(batch) {
            return Err(self.failure(&format!("writing a batch to it failed ({reason})")));
        }
        if self.reader.is_none() {
            let stdout = self.stdout.take().expect("stdout taken once");
            match StreamReader::try_new(BufReader::new(stdout), None) {
                Ok(reader) => self.reader = Some(reader),
                Err(e) => {
                    return Err(
                        self.failure(&format!("its stdout is not an Arrow IPC stream ({e})"))
                    );
                }
            }
        }
        let answer = self.reader.as_mut().expect("set above").next();
        match answer {
            Some(Ok(out)) => {
                self.batches += 1;
                Ok(out)
            }
            Some(Err(e)) => {
                Err(self.failure(&format!("its answer is not a valid Arrow batch ({e})")))
            }
            None => Err(self.failure("it closed its output before answering")),
        }
    }

    fn send(&mut self, batch: &RecordBatch) -> std::result::Result<(), String> {
        if self.writer.is_none() {
            let stdin = self.stdin.take().expect("stdin taken once");
            let writer =
                StreamWriter::try_new(stdin, &batch.schema()).map_err(|e| e.to_string())?;
            self.writer = Some(writer);
        }
        let writer = self.writer.as_mut().expect("set above");
        writer.write(batch).map_err(|e| e.to_string())?;
        writer.get_mut().flush().map_err(|e| e.to_string())
    }

    /// The error for a failed exchange: what went wrong, the exit status when
    /// the process has ended, and the tail of its stderr.
    fn failure(&mut self, what: &str) -> Error {
        let timed_out = self
            .watchdog
            .as_ref()
            .filter(|w| w.fired.load(Ordering::Relaxed))
            .map(|w| w.timeout);
        let what = match timed_out {
            Some(timeout) => format!(
                "it gave no answer within {} s (the transform timeout, --map-timeout), so it was killed; {what}",
                timeout.as_secs_f64()
            ),
            None => what.to_string(),
        };
        if let Some(watchdog) = &self.watchdog {
            watchdog.retire();
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => break None,
            }
        };
        // Let the stderr reader drain what the process wrote last: it ends
        // at the pipe's end of file, once the process (and any child that
        // inherited the pipe) is gone; a pipe held open longer is not
        // waited on past the deadline.
        if let Some(reader) = self.stderr_reader.take() {
            let drained = deadline.max(Instant::now() + Duration::from_millis(500));
            while !reader.is_finished() && Instant::now() < drained {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let tail: Vec<u8> = self
            .stderr
            .lock()
            .expect("stderr tail lock")
            .iter()
            .copied()
            .collect();
        let stderr = String::from_utf8_lossy(&tail);
        let mut reason = format!("{what} after {} batches", self.batches);
        if let Some(status) = status {
            reason.push_str(&format!("; it exited with {status}"));
        }
        if stderr.trim().is_empty() {
            reason.push_str("; it wrote nothing on stderr");
        } else {
            reason.push_str(&format!("; its stderr ends with:\n{}", stderr.trim_end()));
        }
        reason.push_str(
            "\nThe job stopped; committed units are kept, so fix the transform and run the same command again to resume",
        );
        Error::Transform {
            operator: describe(&self.command),
            reason,
        }
    }
}

impl Drop for CommandProcess {
    fn drop(&mut self) {
        if let Some(watchdog) = &self.watchdog {
            watchdog.retire();
        }
        if let Some(mut writer) = self.writer.take() {
            let _ = writer.finish();
        }
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn describe(command: &str) -> String {
    format!("map command `{command}`")
}
