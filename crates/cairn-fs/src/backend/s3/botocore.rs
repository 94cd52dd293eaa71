//! botocore's arguments as s3fs passes them: `client_kwargs`,
//! `config_kwargs` (addressing style, timeouts, retries, checksums) and the
//! retry-mode and checksum names of botocore's environment variables.

use std::time::Duration;

use serde_json::{Map, Value};

use super::keys::AddressingStyle;
use crate::error::Result;
use crate::options::{
    At, Setting, config_error, unknown_key, value_as_f64, value_as_object, value_as_string,
};

/// botocore's retry mode names, checked (`what` names where it came from).
pub(super) fn retry_mode(text: &str, what: &str) -> Result<String> {
    match text.trim().to_ascii_lowercase().as_str() {
        mode @ ("legacy" | "standard" | "adaptive") => Ok(mode.to_string()),
        _ => Err(config_error(format!(
            "{what} is {text:?}; use \"standard\" (or botocore's \"legacy\" or \"adaptive\", which cairn treats the same)"
        ))),
    }
}

/// botocore's `request_checksum_calculation`: `when_supported` is true.
pub(super) fn checksum_calculation(text: &str, what: &str) -> Result<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "when_supported" => Ok(true),
        "when_required" => Ok(false),
        _ => Err(config_error(format!(
            "{what} is {text:?}; use \"when_supported\" (a checksum on every upload) or \"when_required\" (none)"
        ))),
    }
}

/// `client_kwargs` as botocore takes them.
#[derive(Default)]
pub(super) struct ClientKwargs {
    pub(super) endpoint_url: Option<Setting<String>>,
    pub(super) region_name: Option<Setting<String>>,
    pub(super) access_key_id: Option<Setting<String>>,
    pub(super) secret_access_key: Option<Setting<String>>,
    pub(super) session_token: Option<Setting<String>>,
}

impl ClientKwargs {
    const VALID: &'static [&'static str] = &[
        "endpoint_url",
        "region_name",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
    ];

    pub(super) fn parse(map: &Map<String, Value>, parent: &At) -> Result<Self> {
        let mut out = Self::default();
        for (name, value) in map {
            let at = parent.child(name);
            let path = at.label();
            let setting = at.setting(value_as_string(value, &path)?);
            let slot = match name.as_str() {
                "endpoint_url" => &mut out.endpoint_url,
                "region_name" => &mut out.region_name,
                "aws_access_key_id" => &mut out.access_key_id,
                "aws_secret_access_key" => &mut out.secret_access_key,
                "aws_session_token" => &mut out.session_token,
                _ => return Err(unknown_key(&path, Self::VALID)),
            };
            *slot = Some(setting);
        }
        Ok(out)
    }
}

/// `config_kwargs` as botocore's `Config` takes them.
#[derive(Default)]
pub(super) struct ConfigKwargs {
    pub(super) addressing_style: Option<Setting<AddressingStyle>>,
    pub(super) connect_timeout: Option<Duration>,
    pub(super) read_timeout: Option<Duration>,
    /// Attempts per request, the first included.
    pub(super) total_attempts: Option<Setting<usize>>,
    pub(super) retry_mode: Option<Setting<String>>,
    pub(super) checksum_when_supported: Option<Setting<bool>>,
}

impl ConfigKwargs {
    const VALID: &'static [&'static str] = &[
        "s3",
        "connect_timeout",
        "read_timeout",
        "retries",
        "request_checksum_calculation",
    ];

    pub(super) fn parse(map: &Map<String, Value>, parent: &At) -> Result<Self> {
        let mut out = Self::default();
        for (name, value) in map {
            let at = parent.child(name);
            let path = at.label();
            match name.as_str() {
                "s3" => {
                    for (sub, v) in value_as_object(value, &path)? {
                        let sub_at = at.child(sub);
                        let sub_path = sub_at.label();
                        match sub.as_str() {
                            "addressing_style" => {
                                let text = value_as_string(v, &sub_path)?;
                                let style = text.parse().map_err(|_| {
                                    config_error(format!(
                                        "option {sub_path} is {text:?}; use \"path\", \"virtual\" or \"auto\""
                                    ))
                                })?;
                                out.addressing_style = Some(sub_at.setting(style));
                            }
                            _ => return Err(unknown_key(&sub_path, &["addressing_style"])),
                        }
                    }
                }
                "connect_timeout" => {
                    out.connect_timeout = Some(Duration::from_secs_f64(value_as_f64(value, &path)?))
                }
                "read_timeout" => {
                    out.read_timeout = Some(Duration::from_secs_f64(value_as_f64(value, &path)?))
                }
                "request_checksum_calculation" => {
                    let text = value_as_string(value, &path)?;
                    out.checksum_when_supported =
                        Some(at.setting(checksum_calculation(&text, &format!("option {path}"))?));
                }
                "retries" => {
                    for (sub, v) in value_as_object(value, &path)? {
                        let sub_at = at.child(sub);
                        let sub_path = sub_at.label();
                        match sub.as_str() {
                            // botocore: `max_attempts` counts the retries,
                            // `total_max_attempts` the first attempt too.
                            "max_attempts" | "total_max_attempts" => {
                                let n = value_as_f64(v, &sub_path)?;
                                if !(n >= 0.0 && n.fract() == 0.0) {
                                    return Err(config_error(format!(
                                        "option {sub_path} is {n}: give a whole number of attempts"
                                    )));
                                }
                                let first = usize::from(sub == "max_attempts");
                                out.total_attempts = Some(sub_at.setting(n as usize + first));
                            }
                            "mode" => {
                                let text = value_as_string(v, &sub_path)?;
                                out.retry_mode = Some(
                                    sub_at
                                        .setting(retry_mode(&text, &format!("option {sub_path}"))?),
                                );
                            }
                            _ => {
                                return Err(unknown_key(
                                    &sub_path,
                                    &["max_attempts", "total_max_attempts", "mode"],
                                ));
                            }
                        }
                    }
                }
                _ => return Err(unknown_key(&path, Self::VALID)),
            }
        }
        Ok(out)
    }
}
