//! Temporary COS credentials of a volume, as a credential provider for
//! OpenDAL's S3 signer: fetched from the catalog, kept until shortly before
//! they expire, then fetched again. Requests already signed are unaffected.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqsign_aws_core::Credential;
use reqsign_core::time::Timestamp;
use reqsign_core::{Context, ProvideCredential};

use crate::client::{CatalogClient, TemporaryCredentials};
use crate::volume_ref::VolumeRef;

/// How long before expiry credentials are replaced (or half their remaining
/// lifetime, when that is shorter) ...
pub const REFRESH_MARGIN: Duration = Duration::from_secs(300);
/// ... but never later than this before expiry: the S3 signer refuses
/// credentials with less than 10 s left.
pub const MIN_REMAINING: Duration = Duration::from_secs(15);

/// The credential provider of one volume.
#[derive(Debug)]
pub struct VolumeCredentialProvider {
    client: CatalogClient,
    volume: VolumeRef,
    cached: Mutex<Option<(TemporaryCredentials, i64)>>,
}

impl VolumeCredentialProvider {
    /// Credentials of `volume`, from `client`.
    pub fn new(client: CatalogClient, volume: VolumeRef) -> Self {
        Self {
            client,
            volume,
            cached: Mutex::new(None),
        }
    }

    /// The credentials to sign with now: the cached ones until their
    /// refresh time, else fresh ones from the catalog.
    pub async fn current(&self) -> crate::Result<TemporaryCredentials> {
        let now = now_ms();
        if let Some((creds, refresh_at)) = self.cached.lock().expect("credential cache").as_ref()
            && now < *refresh_at
        {
            return Ok(creds.clone());
        }
        let v = &self.volume;
        let creds = self.client.volume_credentials(v).await?;
        let remaining = (creds.expires_at_ms - now).max(0);
        let margin = (REFRESH_MARGIN.as_millis() as i64)
            .min(remaining / 2)
            .max(MIN_REMAINING.as_millis() as i64);
        let refresh_at = creds.expires_at_ms - margin;
        tracing::debug!(
            "tclake volume {}/{}/{}: new COS credentials, valid {} ms, refreshed in {} ms",
            v.catalog,
            v.schema,
            v.volume,
            remaining,
            refresh_at - now
        );
        *self.cached.lock().expect("credential cache") = Some((creds.clone(), refresh_at));
        Ok(creds)
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

impl ProvideCredential for VolumeCredentialProvider {
    type Credential = Credential;

    async fn provide_credential(&self, _ctx: &Context) -> reqsign_core::Result<Option<Credential>> {
        let creds = self
            .current()
            .await
            .map_err(|e| reqsign_core::Error::credential_invalid(e.to_string()))?;
        Ok(Some(Credential {
            access_key_id: creds.access_key_id,
            secret_access_key: creds.secret_access_key,
            session_token: creds.security_token,
            expires_in: Timestamp::from_millisecond(creds.expires_at_ms).ok(),
        }))
    }
}

impl VolumeCredentialProvider {
    /// This provider as the credential chain OpenDAL's S3 service takes.
    pub fn into_chain(self) -> reqsign_core::ProvideCredentialChain<Credential> {
        reqsign_core::ProvideCredentialChain::new().push(self)
    }
}
