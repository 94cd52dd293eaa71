//! TC3-HMAC-SHA256, the signature of Tencent Cloud API 3.0 requests, for a
//! JSON POST to `/` with `content-type` and `host` as the signed headers.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The content type every catalog call sends (and signs).
pub const CONTENT_TYPE: &str = "application/json; charset=utf-8";

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// The UTC date (`YYYY-MM-DD`) of a Unix timestamp in seconds.
///
/// ```
/// assert_eq!(cairn_tclake::utc_date(1551113065), "2019-02-25");
/// ```
pub fn utc_date(timestamp: i64) -> String {
    // Days to civil date (Howard Hinnant's algorithm).
    let days = timestamp.div_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The `Authorization` header of a POST of `body` to `host`, made at
/// `timestamp` (seconds) by `secret_id`/`secret_key`, for `service`.
///
/// ```
/// let auth = cairn_tclake::authorization("AKIDEXAMPLE", "secret", "tccatalog", "tccatalog.ap-guangzhou.tencentcloudapi.com", b"{}", 1700000000);
/// assert!(auth.starts_with("TC3-HMAC-SHA256 Credential=AKIDEXAMPLE/2023-11-14/tccatalog/tc3_request, SignedHeaders=content-type;host, Signature="));
/// ```
pub fn authorization(
    secret_id: &str,
    secret_key: &str,
    service: &str,
    host: &str,
    body: &[u8],
    timestamp: i64,
) -> String {
    let date = utc_date(timestamp);
    let canonical = format!(
        "POST\n/\n\ncontent-type:{CONTENT_TYPE}\nhost:{host}\n\ncontent-type;host\n{}",
        sha256_hex(body)
    );
    let scope = format!("{date}/{service}/tc3_request");
    let to_sign = format!(
        "TC3-HMAC-SHA256\n{timestamp}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let k_date = hmac(format!("TC3{secret_key}").as_bytes(), &date);
    let k_service = hmac(&k_date, service);
    let k_signing = hmac(&k_service, "tc3_request");
    let signature = hex::encode(hmac(&k_signing, &to_sign));
    format!(
        "TC3-HMAC-SHA256 Credential={secret_id}/{scope}, SignedHeaders=content-type;host, Signature={signature}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors computed by scripts/tc3_vectors.py (Python's hmac and hashlib,
    /// following the documented algorithm independently of this code).
    #[test]
    fn matches_fixed_vectors() {
        for (sid, sk, host, body, ts, expected) in VECTORS {
            assert_eq!(
                authorization(sid, sk, "tccatalog", host, body.as_bytes(), *ts),
                *expected,
                "vector for body {body}"
            );
        }
    }

    #[test]
    fn dates_cross_days_and_leap_years() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_709_251_199), "2024-02-29");
        assert_eq!(utc_date(1_709_251_200), "2024-03-01");
    }

    include!("sign_vectors.rs");
}
