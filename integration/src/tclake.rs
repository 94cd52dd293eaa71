//! The local TCLake catalog the tclake tests talk to
//! (`scripts/tclake_catalog.py`): it checks TC3 signatures with a known key
//! and points its volumes at the Garage bucket of the test servers.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use cairn_fs::StorageOptions;
use serde_json::{Value, json};

use crate::target::{S3Settings, s3_server, tools_python};

/// The SecretId the catalog accepts.
pub const TCLAKE_SID: &str = "AKIDcairntest0000000000000000000000";
/// The SecretKey the catalog verifies signatures with.
pub const TCLAKE_SK: &str = "cairn-tclake-test-secret-key";

/// A running catalog.
pub struct Catalog {
    /// Its endpoint URL (`http://127.0.0.1:<port>`).
    pub endpoint: String,
    /// The S3 server behind the volumes.
    pub s3: S3Settings,
    _child: Mutex<Child>,
}

impl Catalog {
    /// Calls per action and credentials issued so far.
    pub async fn stats(&self) -> Value {
        let text = reqwest::get(format!("{}/stats", self.endpoint))
            .await
            .expect("catalog stats")
            .text()
            .await
            .expect("catalog stats");
        serde_json::from_str(&text).expect("stats are JSON")
    }

    /// The `tclake` settings of this catalog, with `sk` as the SecretKey.
    fn settings<'a>(&'a self, sk: &'a str) -> [(&'static str, &'a str); 6] {
        [
            ("region", self.s3.region.as_str()),
            ("sid", TCLAKE_SID),
            ("sk", sk),
            ("endpoint", self.endpoint.as_str()),
            ("cos_endpoint", self.s3.endpoint.as_str()),
            ("addressing_style", "path"),
        ]
    }

    /// `tclake` storage options for this catalog, with `sk` as the SecretKey.
    pub fn options(&self, sk: &str) -> StorageOptions {
        let mut options = StorageOptions::new();
        for (key, value) in self.settings(sk) {
            options.set("tclake", key, value.into());
        }
        options
    }

    /// The same options as `-o` arguments of the `cairn` command.
    pub fn cli_options(&self) -> Vec<String> {
        self.settings(TCLAKE_SK)
            .iter()
            .flat_map(|(k, v)| ["-o".to_string(), format!("tclake.{k}={v}")])
            .collect()
    }
}

/// The catalog of this test process, started on first use: catalog `lake`
/// (VOLUME) with schema `raw` and volumes `files` (12 h credentials) and
/// `short` (credentials that expire after 20 s, replaced after 5 s), and the
/// user guide's `raw/videos` and `curated/clips`; `tables` (LAKEHOUSE);
/// `broken`, whose every call answers `InternalError`. `None` when the
/// servers are opted out.
pub fn tclake_catalog(test: &str) -> Option<&'static Catalog> {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    let (_, s3) = s3_server("GARAGE", test)?;
    let python = tools_python(test)?;
    Some(CATALOG.get_or_init(|| {
        let config = json!({
            "sid": TCLAKE_SID, "sk": TCLAKE_SK,
            "catalogs": {"lake": "VOLUME", "tables": "LAKEHOUSE", "broken": "VOLUME"},
            "schemas": ["lake/raw", "lake/curated", "tables/t", "broken/s"],
            "volumes": {
                // The volumes of docs/user-guide.md's examples.
                "lake/raw/videos": {"location": format!("cos://{}/docs/tclake/videos", s3.bucket)},
                "lake/curated/clips": {"location": format!("cos://{}/docs/tclake/clips", s3.bucket)},
                "lake/raw/files": {"location": format!("cos://{}/tclake/files", s3.bucket), "expiry_seconds": 43200},
                "lake/raw/short": {"location": format!("cosn://{}/tclake/short/", s3.bucket), "expiry_seconds": 20},
                "broken/s/v": {"location": format!("cos://{}/tclake/broken", s3.bucket)},
            },
            "errors": {"broken": {"Code": "InternalError", "Message": "the catalog service is unavailable"}},
            "key": s3.key, "secret": s3.secret,
        });
        let script = format!("{}/../scripts/tclake_catalog.py", env!("CARGO_MANIFEST_DIR"));
        let mut child = Command::new(python)
            .arg(script)
            .arg(config.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the tclake catalog");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the catalog prints its port");
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .unwrap_or_else(|| panic!("unexpected catalog output {line:?}"));
        Catalog {
            endpoint: format!("http://127.0.0.1:{port}"),
            s3,
            _child: Mutex::new(child),
        }
    }))
}
