//! The tccatalog API client: one signed JSON POST per call, errors from
//! `Response.Error`.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::sign::{CONTENT_TYPE, authorization};
use crate::volume_ref::VolumeRef;

/// The API version the calls use.
pub const API_VERSION: &str = "2024-10-24";
/// The service name signed into every request.
pub const SERVICE: &str = "tccatalog";

/// Who calls the catalog, and where.
///
/// ```
/// let c = cairn_tclake::CatalogSettings::new("ap-guangzhou", "AKID", "s3cr3t-value");
/// assert_eq!(c.endpoint, "https://tccatalog.ap-guangzhou.tencentcloudapi.com");
/// assert!(!format!("{c:?}").contains("s3cr3t-value"));
/// ```
#[derive(Clone)]
pub struct CatalogSettings {
    /// The region (`ap-guangzhou`).
    pub region: String,
    /// SecretId.
    pub secret_id: String,
    /// SecretKey.
    pub secret_key: String,
    /// A session token, with temporary credentials.
    pub token: Option<String>,
    /// The API endpoint URL.
    pub endpoint: String,
}

impl std::fmt::Debug for CatalogSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogSettings")
            .field("region", &self.region)
            .field("secret_id", &self.secret_id)
            .field("secret_key", &"***")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl CatalogSettings {
    /// Settings for `region` with the public endpoint.
    pub fn new(region: &str, secret_id: &str, secret_key: &str) -> Self {
        Self {
            region: region.to_string(),
            secret_id: secret_id.to_string(),
            secret_key: secret_key.to_string(),
            token: None,
            endpoint: format!("https://{SERVICE}.{region}.tencentcloudapi.com"),
        }
    }
}

/// A client of the tccatalog API.
#[derive(Debug, Clone)]
pub struct CatalogClient {
    settings: CatalogSettings,
    host: String,
    http: reqwest::Client,
}

impl CatalogClient {
    /// A client with `settings`, sending through `http`.
    pub fn new(settings: CatalogSettings, http: reqwest::Client) -> Result<Self> {
        let url = reqwest::Url::parse(&settings.endpoint).map_err(|e| {
            Error::Config(format!(
                "tclake.endpoint {:?} is not a URL ({e}); give e.g. https://tccatalog.ap-guangzhou.tencentcloudapi.com",
                settings.endpoint
            ))
        })?;
        let host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            (None, _) => {
                return Err(Error::Config(format!(
                    "tclake.endpoint {:?} has no host",
                    settings.endpoint
                )));
            }
        };
        Ok(Self {
            settings,
            host,
            http,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &CatalogSettings {
        &self.settings
    }

    /// Calls `action` with `body`; returns `Response` without its `RequestId`.
    pub async fn call(&self, action: &str, body: Value) -> Result<Value> {
        let body = serde_json::to_vec(&body).expect("JSON values serialize");
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default();
        let s = &self.settings;
        let auth = authorization(
            &s.secret_id,
            &s.secret_key,
            SERVICE,
            &self.host,
            &body,
            timestamp,
        );
        let transport = |reason: String| Error::Transport {
            action: action.to_string(),
            endpoint: s.endpoint.clone(),
            reason,
        };
        let mut request = self
            .http
            .post(&s.endpoint)
            .header("Authorization", auth)
            .header("Content-Type", CONTENT_TYPE)
            .header("Host", &self.host)
            .header("X-TC-Action", action)
            .header("X-TC-Timestamp", timestamp.to_string())
            .header("X-TC-Version", API_VERSION)
            .header("X-TC-Region", &s.region)
            .body(body);
        if let Some(token) = &s.token {
            request = request.header("X-TC-Token", token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| transport(format!("request failed ({e})")))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| transport(format!("reading the answer failed ({e})")))?;
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            transport(format!(
                "HTTP {status}, not a JSON answer: {}",
                text.chars().take(200).collect::<String>()
            ))
        })?;
        let Some(mut response) = value.get("Response").cloned() else {
            return Err(transport(format!(
                "HTTP {status}, no Response in the answer"
            )));
        };
        let request_id = response["RequestId"].as_str().unwrap_or("-").to_string();
        if let Some(error) = response.get("Error") {
            return Err(Error::Api {
                action: action.to_string(),
                code: error["Code"].as_str().unwrap_or("Unknown").to_string(),
                message: error["Message"].as_str().unwrap_or("").to_string(),
                request_id,
            });
        }
        if let Some(map) = response.as_object_mut() {
            map.remove("RequestId");
        }
        Ok(response)
    }

    /// `DescribeCatalog`: the catalog's type (`VOLUME`, `LAKEHOUSE`).
    pub async fn catalog_type(&self, catalog: &str) -> Result<String> {
        let answer = self
            .call("DescribeCatalog", json!({ "CatalogName": catalog }))
            .await?;
        let catalog_info = answer.get("Catalog").unwrap_or(&answer);
        catalog_info
            .get("Type")
            .or_else(|| catalog_info.get("CatalogType"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| Error::Transport {
                action: "DescribeCatalog".into(),
                endpoint: self.settings.endpoint.clone(),
                reason: format!("no catalog type in the answer: {answer}"),
            })
    }

    /// `DescribeVolume`: the volume's `StorageLocation`.
    pub async fn volume_location(&self, volume: &VolumeRef) -> Result<String> {
        let answer = self.call("DescribeVolume", volume.params()).await?;
        answer["Volume"]["StorageLocation"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| Error::Transport {
                action: "DescribeVolume".into(),
                endpoint: self.settings.endpoint.clone(),
                reason: "no Volume.StorageLocation in the answer".into(),
            })
    }

    /// `DescribeCredentials`: temporary COS credentials for the volume.
    pub async fn volume_credentials(&self, volume: &VolumeRef) -> Result<TemporaryCredentials> {
        let answer = self.call("DescribeCredentials", volume.params()).await?;
        let missing = |what: &str| Error::Transport {
            action: "DescribeCredentials".into(),
            endpoint: self.settings.endpoint.clone(),
            reason: format!("no {what} in the answer"),
        };
        let first = answer["Credentials"]
            .get(0)
            .ok_or_else(|| missing("Credentials[0]"))?;
        let info = first["CredentialInfo"]
            .as_array()
            .ok_or_else(|| missing("CredentialInfo"))?;
        let field = |key: &str| {
            info.iter()
                .find(|kv| kv["Key"].as_str() == Some(key))
                .and_then(|kv| kv["Value"].as_str())
                .map(str::to_string)
        };
        let expires_at_ms = first["ExpireTimeInMs"]
            .as_i64()
            .or_else(|| {
                first["ExpireTimeInMs"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
            })
            .ok_or_else(|| missing("ExpireTimeInMs"))?;
        Ok(TemporaryCredentials {
            access_key_id: field("cos-access-key-id")
                .ok_or_else(|| missing("cos-access-key-id"))?,
            secret_access_key: field("cos-secret-access-key")
                .ok_or_else(|| missing("cos-secret-access-key"))?,
            security_token: field("cos-security-token"),
            expires_at_ms,
        })
    }
}

/// Temporary COS credentials of a volume.
#[derive(Clone, PartialEq, Eq)]
pub struct TemporaryCredentials {
    /// Access key ID.
    pub access_key_id: String,
    /// Secret access key.
    pub secret_access_key: String,
    /// Session token.
    pub security_token: Option<String>,
    /// Absolute expiry, Unix milliseconds.
    pub expires_at_ms: i64,
}

impl std::fmt::Debug for TemporaryCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemporaryCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"***")
            .field(
                "security_token",
                &self.security_token.as_ref().map(|_| "***"),
            )
            .field("expires_at_ms", &self.expires_at_ms)
            .finish()
    }
}
