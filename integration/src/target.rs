//! Where a conformance test runs: a filesystem and a fresh root inside it.

use cairn_fs::backend::ConditionalWrites;
use cairn_fs::{Environment, FileSystem, FileSystemBuilder, StorageOptions, WriteMode};
use tempfile::TempDir;

/// The variable that lets a run without servers skip the server targets.
pub const OPT_OUT: &str = "CAIRN_TEST_SKIP_SERVERS";

/// Connection settings of an S3 target, read from `CAIRN_TEST_<NAME>_*`.
#[derive(Debug, Clone)]
pub struct S3Settings {
    /// Endpoint URL.
    pub endpoint: String,
    /// Signing region.
    pub region: String,
    /// Access key ID.
    pub key: String,
    /// Secret access key.
    pub secret: String,
    /// Bucket the tests write under (a fresh prefix per test).
    pub bucket: String,
    /// A second bucket, for cross-bucket copies (optional).
    pub bucket2: Option<String>,
}

impl S3Settings {
    /// Reads `CAIRN_TEST_<NAME>_{ENDPOINT,REGION,KEY,SECRET,BUCKET[,BUCKET2]}`.
    pub fn from_env(name: &str) -> Result<Self, String> {
        let var = |field: &str| std::env::var(format!("CAIRN_TEST_{name}_{field}")).ok();
        let need = |field: &str| var(field).ok_or_else(|| format!("CAIRN_TEST_{name}_{field}"));
        Ok(Self {
            endpoint: need("ENDPOINT")?,
            region: var("REGION").unwrap_or_else(|| "us-east-1".into()),
            key: need("KEY")?,
            secret: need("SECRET")?,
            bucket: need("BUCKET")?,
            bucket2: var("BUCKET2"),
        })
    }

    /// `cos` storage options for these settings at a virtual-host endpoint.
    pub fn cos_options(&self, endpoint: &str, secret: &str) -> StorageOptions {
        let mut options = StorageOptions::new();
        options
            .set("cos", "endpoint_url", endpoint.into())
            .set("cos", "region", self.region.clone().into())
            .set("cos", "key", self.key.clone().into())
            .set("cos", "secret", secret.into());
        options
    }

    /// Storage options for these settings, with `secret` in place of the real one.
    pub fn options_with_secret(&self, secret: &str) -> StorageOptions {
        let mut options = StorageOptions::new();
        options
            .set("s3", "endpoint_url", self.endpoint.clone().into())
            .set("s3", "region", self.region.clone().into())
            .set("s3", "key", self.key.clone().into())
            .set("s3", "secret", secret.into());
        options
    }
}

/// A filesystem plus a fresh, empty root URL for one test.
pub struct Target {
    /// Backend label, for messages.
    pub backend: &'static str,
    /// The filesystem under test.
    pub fs: FileSystem,
    /// The test's root URL, without a trailing slash.
    pub root: String,
    /// A scratch local directory (put/get sources and targets).
    pub local: TempDir,
    /// Set for S3 targets.
    pub s3: Option<S3Settings>,
    /// How this store is expected to do create-if-absent.
    pub conditional: ConditionalWrites,
    _file_root: Option<TempDir>,
}

fn unique(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{test}-{}-{nanos}", std::process::id())
}

impl Target {
    /// The in-memory backend.
    pub fn memory(test: &str) -> Option<Self> {
        Some(Self {
            backend: "memory",
            fs: FileSystem::new("memory", &StorageOptions::new()).unwrap(),
            root: format!("memory:///conformance/{}", unique(test)),
            local: TempDir::new().unwrap(),
            s3: None,
            conditional: ConditionalWrites::Native,
            _file_root: None,
        })
    }

    /// The local filesystem, in a temporary directory.
    pub fn file(test: &str) -> Option<Self> {
        let dir = TempDir::new().unwrap();
        Some(Self {
            backend: "file",
            fs: FileSystem::new("file", &StorageOptions::new()).unwrap(),
            root: format!("file://{}/{}", dir.path().display(), unique(test)),
            local: TempDir::new().unwrap(),
            s3: None,
            conditional: ConditionalWrites::Native,
            _file_root: Some(dir),
        })
    }

    /// An S3 server named by `CAIRN_TEST_<name>_*`. Without those variables the
    /// test fails and says how to start the server, unless [`OPT_OUT`] is set.
    pub fn s3(name: &str, conditional: ConditionalWrites, test: &str) -> Option<Self> {
        let settings = match S3Settings::from_env(name) {
            Ok(s) => s,
            Err(missing) if std::env::var_os(OPT_OUT).is_some() => {
                eprintln!("SKIPPED {test} on {name}: {missing} unset and {OPT_OUT} set");
                return None;
            }
            Err(missing) => panic!(
                "{missing} is not set: this test needs the {name} S3 server. Start the servers with \
                 `scripts/servers.sh start && . target/cairn-servers/servers.env`, or run \
                 `scripts/test.sh`, which does both; set {OPT_OUT}=1 to skip server tests"
            ),
        };
        let fs = FileSystemBuilder::new("s3")
            .options(settings.options_with_secret(&settings.secret))
            .env(Environment::default())
            .build()
            .unwrap();
        Some(Self {
            backend: "s3",
            root: format!("s3://{}/conformance/{}", settings.bucket, unique(test)),
            fs,
            local: TempDir::new().unwrap(),
            s3: Some(settings),
            conditional,
            _file_root: None,
        })
    }

    /// [`Target::s3`] whose filesystem goes through a fault proxy in front
    /// of the server (one per test process, started by the first call):
    /// `rate` of the requests get a fault of every kind a store gives
    /// ([`Fault::JOB`](crate::fault_proxy::Fault::JOB); stalls of 4 s against
    /// a 3 s read timeout: a batch delete of 1,000 keys on Garage under CI's
    /// load can take more than 1 s to answer, and a timeout that tight fails
    /// every attempt of it). `CAIRN_FAULT_SEED` sets the seed (default 1).
    pub fn s3_through_faults(
        name: &str,
        conditional: ConditionalWrites,
        rate: f64,
        test: &str,
    ) -> Option<Self> {
        use crate::fault_proxy::{Fault, FaultPlan, FaultProxy, seed_from_env};
        static PROXY: std::sync::OnceLock<FaultProxy> = std::sync::OnceLock::new();
        let mut target = Self::s3(name, conditional, test)?;
        let settings = target.s3.clone().expect("an s3 target has settings");
        let proxy = PROXY.get_or_init(|| {
            let mut plan = FaultPlan::new(seed_from_env(1), rate, Fault::JOB);
            plan.stall = std::time::Duration::from_secs(4);
            FaultProxy::start(&settings.endpoint, plan)
        });
        eprintln!("{test}: faults so far {:?}", proxy.counts());
        let mut options = settings.options_with_secret(&settings.secret);
        options.set("s3", "endpoint_url", proxy.endpoint().into());
        options.set(
            "s3",
            "config_kwargs",
            serde_json::json!({"read_timeout": 3}),
        );
        target.fs = FileSystemBuilder::new("s3")
            .options(options)
            .env(Environment::default())
            .build()
            .unwrap();
        target.backend = "s3 through faults";
        Some(target)
    }

    /// `cos://` over the S3 server named by `CAIRN_TEST_<name>_*`, in
    /// virtual-host mode: requests go to `<bucket>.<host of
    /// CAIRN_TEST_<name>_VHOST_ENDPOINT>`, a `*.localhost` name that the test
    /// client resolves to 127.0.0.1.
    pub fn cos(name: &str, conditional: ConditionalWrites, test: &str) -> Option<Self> {
        let mut target = Self::s3(name, conditional, test)?;
        let settings = target.s3.clone().expect("s3 settings");
        let vhost =
            std::env::var(format!("CAIRN_TEST_{name}_VHOST_ENDPOINT")).unwrap_or_else(|_| {
                panic!("CAIRN_TEST_{name}_VHOST_ENDPOINT is not set (scripts/servers.sh writes it)")
            });
        target.fs = FileSystemBuilder::new("cos")
            .options(settings.cos_options(&vhost, &settings.secret))
            .env(Environment::default())
            .http_client(crate::loopback::loopback_client())
            .build()
            .unwrap();
        target.backend = "cos";
        target.root = target.root.replacen("s3://", "cos://", 1);
        Some(target)
    }

    /// `tclake://volume/lake/raw/files/...`: a TCLake volume of the local
    /// catalog (`crate::tclake_catalog`), its files on Garage through COS.
    pub fn tclake(test: &str) -> Option<Self> {
        let catalog = crate::tclake_catalog(test)?;
        let fs = FileSystemBuilder::new("tclake")
            .options(catalog.options(crate::TCLAKE_SK))
            .env(Environment::default())
            .build()
            .unwrap();
        Some(Self {
            backend: "tclake",
            root: format!(
                "tclake://volume/lake/raw/files/conformance/{}",
                unique(test)
            ),
            fs,
            local: TempDir::new().unwrap(),
            s3: None,
            // Garage behind the volume ignores If-None-Match; the probe says so.
            conditional: ConditionalWrites::Emulated,
            _file_root: None,
        })
    }

    /// `gcs://` on fake-gcs-server, named by `CAIRN_TEST_GCS_{ENDPOINT,BUCKET,BUCKET2}`.
    pub fn gcs(test: &str) -> Option<Self> {
        let var = |field: &str| std::env::var(format!("CAIRN_TEST_GCS_{field}")).ok();
        let (Some(endpoint), Some(bucket)) = (var("ENDPOINT"), var("BUCKET")) else {
            if std::env::var_os(OPT_OUT).is_some() {
                eprintln!("SKIPPED {test} on gcs: CAIRN_TEST_GCS_* unset and {OPT_OUT} set");
                return None;
            }
            panic!(
                "CAIRN_TEST_GCS_ENDPOINT/BUCKET are not set: this test needs fake-gcs-server. Run \
                 `scripts/test.sh`, or `scripts/servers.sh start && . target/cairn-servers/servers.env`"
            );
        };
        let mut options = StorageOptions::new();
        // fake-gcs-server has no batch endpoint: objects are deleted one by one.
        options
            .set("gcs", "endpoint", endpoint.clone().into())
            .set("gcs", "token", "anon".into())
            .set("gcs", "batch_delete", false.into());
        let fs = FileSystemBuilder::new("gcs")
            .options(options)
            .env(Environment::default())
            .build()
            .unwrap();
        Some(Self {
            backend: "gcs",
            root: format!("gcs://{bucket}/conformance/{}", unique(test)),
            fs,
            local: TempDir::new().unwrap(),
            s3: Some(S3Settings {
                endpoint,
                region: String::new(),
                key: String::new(),
                secret: String::new(),
                bucket,
                bucket2: var("BUCKET2"),
            }),
            // fake-gcs-server ignores ifGenerationMatch=0, which the probe notices.
            conditional: ConditionalWrites::Emulated,
            _file_root: None,
        })
    }

    /// The URL of `rel` under the test root.
    pub fn url(&self, rel: &str) -> String {
        if rel.is_empty() {
            self.root.clone()
        } else {
            format!("{}/{rel}", self.root)
        }
    }

    /// The local scratch path of `rel`.
    pub fn local_path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.local.path().display())
    }

    /// Writes `data` at `rel`, overwriting.
    pub async fn write(&self, rel: &str, data: &str) {
        self.fs
            .pipe(
                &self.url(rel),
                data.to_string().into(),
                WriteMode::Overwrite,
            )
            .await
            .unwrap_or_else(|e| panic!("writing {rel}: {e}"));
    }

    /// Files under `url` on `fs`, relative to it, sorted.
    pub async fn files_under(fs: &FileSystem, url: &str) -> Vec<String> {
        let prefix = format!("{}/", fs.strip(url).unwrap());
        let found = fs
            .find(url)
            .await
            .unwrap_or_else(|e| panic!("find {url}: {e}"));
        let mut names: Vec<String> = found
            .into_iter()
            .map(|info| {
                info.name
                    .strip_prefix(&prefix)
                    .unwrap_or_else(|| panic!("{} is not under {prefix}", info.name))
                    .to_string()
            })
            .collect();
        names.sort();
        names
    }

    /// Files under `rel` of the test root, relative to it.
    pub async fn files(&self, rel: &str) -> Vec<String> {
        Self::files_under(&self.fs, &self.url(rel)).await
    }
}

/// The Python with fsspec and pyarrow that `scripts/tools.sh` installs
/// (`CAIRN_PYTHON`, else `$CAIRN_TOOLS/venv/bin/python`). Without one, the
/// calling test fails with how to get it, unless [`OPT_OUT`] is set (then `None`).
pub fn tools_python(test: &str) -> Option<String> {
    venv_python("CAIRN_PYTHON", "venv", "fsspec and pyarrow", test)
}

/// The Python with Ray Data 2.60 that `scripts/tools.sh` installs
/// (`CAIRN_RAY_PYTHON`, else `$CAIRN_TOOLS/ray-venv/bin/python`); as
/// [`tools_python`] when missing.
pub fn ray_python(test: &str) -> Option<String> {
    venv_python("CAIRN_RAY_PYTHON", "ray-venv", "Ray Data 2.60", test)
}

/// The Prometheus server `scripts/tools.sh` installs (`CAIRN_PROMETHEUS`,
/// else `prometheus` on the PATH); as [`tools_python`] when missing.
pub fn prometheus_binary(test: &str) -> Option<String> {
    let found = std::env::var("CAIRN_PROMETHEUS").ok().or_else(|| {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("prometheus"))
                .find(|p| p.is_file())
                .map(|p| p.display().to_string())
        })
    });
    found_or_skip(found, test, "a Prometheus server", "CAIRN_PROMETHEUS")
}

fn venv_python(variable: &str, venv: &str, what: &str, test: &str) -> Option<String> {
    let found = std::env::var(variable).ok().or_else(|| {
        let home = std::env::var("HOME").ok()?;
        let tools = std::env::var("CAIRN_TOOLS").unwrap_or(format!("{home}/.cache/cairn-tools"));
        let python = format!("{tools}/{venv}/bin/python");
        std::path::Path::new(&python).exists().then_some(python)
    });
    found_or_skip(found, test, &format!("Python with {what}"), variable)
}

/// A tool `scripts/tools.sh` installs, as `found`; when it was not found,
/// the test fails saying how to get it (`variable` names it instead),
/// unless [`OPT_OUT`] is set (then `None`, and the test says it skipped).
fn found_or_skip(found: Option<String>, test: &str, what: &str, variable: &str) -> Option<String> {
    if found.is_none() {
        if std::env::var_os(OPT_OUT).is_some() {
            eprintln!("SKIPPED {test}: no {what} and {OPT_OUT} set");
            return None;
        }
        panic!("{test} needs {what}: run scripts/tools.sh or set {variable}");
    }
    found
}

/// s3 storage options for the server `CAIRN_TEST_<name>_*` names, and its
/// settings. Without them the calling test fails with how to start the
/// servers, unless [`OPT_OUT`] is set (then `None`).
pub fn s3_server(name: &str, test: &str) -> Option<(StorageOptions, S3Settings)> {
    match S3Settings::from_env(name) {
        Ok(settings) => Some((settings.options_with_secret(&settings.secret), settings)),
        Err(missing) if std::env::var_os(OPT_OUT).is_some() => {
            eprintln!("SKIPPED {test}: {missing} unset and {OPT_OUT} set");
            None
        }
        Err(missing) => panic!(
            "{missing} is not set: {test} needs the {name} server. Run `scripts/test.sh`, or \
             `scripts/servers.sh start && . target/cairn-servers/servers.env`; set {OPT_OUT}=1 to skip"
        ),
    }
}
