//! A Garage server of one test's own (its ports, its data directory), so
//! the test can kill it with SIGKILL and start it again on the same data
//! without disturbing the shared test servers.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::target::S3Settings;

const KEY_ID: &str = "GKfeedfacecafebeef0123456789";
const SECRET: &str = "feedfacecafebeef0123456789abcdef0123456789abcdef0123456789abcdef";
const BUCKET: &str = "own";

/// A running (or killed) Garage with one bucket and one key.
pub struct OwnGarage {
    binary: PathBuf,
    config: PathBuf,
    /// Endpoint, region, credentials and bucket of this server.
    pub s3: S3Settings,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl OwnGarage {
    /// Starts Garage from `scripts/tools.sh`'s install (`$CAIRN_TOOLS`,
    /// default `~/.cache/cairn-tools`) with a fresh data directory, one node,
    /// key and bucket. `None` (with a note) when Garage is not installed.
    pub fn start(test: &str) -> Option<Self> {
        let tools = std::env::var("CAIRN_TOOLS").unwrap_or_else(|_| {
            format!(
                "{}/.cache/cairn-tools",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        let binary = PathBuf::from(format!("{tools}/garage/bin/garage"));
        if !binary.exists() {
            if std::env::var_os(crate::OPT_OUT).is_some() {
                eprintln!("SKIPPED {test}: no Garage at {}", binary.display());
                return None;
            }
            panic!(
                "{test} needs Garage at {}: run scripts/tools.sh",
                binary.display()
            );
        }
        let dir = tempfile::tempdir().expect("a directory for Garage");
        let (s3_port, rpc_port, admin_port) =
            (crate::free_port(), crate::free_port(), crate::free_port());
        let config = dir.path().join("garage.toml");
        std::fs::write(
            &config,
            format!(
                r#"metadata_dir = "{d}/meta"
data_dir = "{d}/data"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:{rpc_port}"
rpc_public_addr = "127.0.0.1:{rpc_port}"
rpc_secret = "5a1c6a0e9b3d2c7a8e5f1b0d9c6a3e2f7b8d1c4a9e6f3b0c7d2a5e8f1b4c7d0a"

[s3_api]
s3_region = "us-east-1"
api_bind_addr = "127.0.0.1:{s3_port}"
root_domain = ".s3.own.localhost"

[admin]
api_bind_addr = "127.0.0.1:{admin_port}"
admin_token = "cairn-own-admin-token"
"#,
                d = dir.path().display()
            ),
        )
        .expect("write garage.toml");
        let mut garage = Self {
            binary,
            config,
            s3: S3Settings {
                endpoint: format!("http://127.0.0.1:{s3_port}"),
                region: "us-east-1".into(),
                key: KEY_ID.into(),
                secret: SECRET.into(),
                bucket: BUCKET.into(),
                bucket2: None,
            },
            child: None,
            _dir: dir,
        };
        garage.restart();
        let node = garage.admin(&["node", "id", "-q"]);
        let node = node
            .trim()
            .split('@')
            .next()
            .unwrap_or_default()
            .to_string();
        garage.admin(&["layout", "assign", "-z", "dc1", "-c", "1G", &node]);
        garage.admin(&["layout", "apply", "--version", "1"]);
        garage.admin(&["key", "import", "--yes", "-n", "own", KEY_ID, SECRET]);
        garage.admin(&["key", "allow", "--create-bucket", KEY_ID]);
        garage.retry_admin(&["bucket", "create", BUCKET]);
        garage.admin(&[
            "bucket", "allow", "--read", "--write", "--owner", BUCKET, "--key", KEY_ID,
        ]);
        Some(garage)
    }

    /// Starts the server on its data directory and waits until it answers.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "Garage is running");
        let child = Command::new(&self.binary)
            .arg("-c")
            .arg(&self.config)
            .arg("server")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Garage");
        self.child = Some(child);
        self.retry_admin(&["status"]);
    }

    /// SIGKILL, and reap it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn run_admin(&self, args: &[&str]) -> std::process::Output {
        Command::new(&self.binary)
            .arg("-c")
            .arg(&self.config)
            .args(args)
            .output()
            .expect("run garage")
    }

    fn admin(&self, args: &[&str]) -> String {
        let out = self.run_admin(args);
        assert!(
            out.status.success(),
            "garage {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn retry_admin(&self, args: &[&str]) {
        let started = Instant::now();
        loop {
            let out = self.run_admin(args);
            if out.status.success() {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "garage {args:?} kept failing: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for OwnGarage {
    fn drop(&mut self) {
        self.kill9();
    }
}
