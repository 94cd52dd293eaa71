//! `FSSPEC_*` environment variables, read exactly as fsspec's
//! `config.set_conf_env` reads them (fsspec 2026.9):
//!
//! - Only names starting with the case-sensitive `FSSPEC_`, longer than 7
//!   characters, whose 8th character is not `_`, count; other `FSSPEC...`
//!   names are ignored (with a warning).
//! - Every value is JSON-decoded; when decoding fails the raw text is kept.
//! - `FSSPEC_<P>` (one underscore) must decode to an object, merged into the
//!   options of protocol `p` (lower-cased; keys are kept as written); anything
//!   else is ignored.
//! - `FSSPEC_<P>_<K>` sets option `k` of protocol `p` (both lower-cased, split
//!   on the first two underscores), after all the whole-object forms.
//!
//! One deliberate difference, when asked for: options known to be strings
//! keep the variable's raw text, so `FSSPEC_S3_SECRET=12345` stays `"12345"`.
//! Python's decoder also accepts `NaN`, `Infinity` and integers beyond 64
//! bits, which cairn keeps as raw text.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::options::{BackendOptions, Environment, Source};

/// The options the `FSSPEC_*` variables give, per protocol, each with the
/// variable it came from, plus the variables that were ignored and why.
///
/// ```
/// use cairn_fs::{Environment, FsspecEnv};
/// let env = Environment::from_pairs([
///     ("FSSPEC_S3", r#"{"anon": true, "key": "a"}"#),
///     ("FSSPEC_S3_KEY", "b"),
///     ("FSSPEC_GCS", "not json"),
/// ]);
/// let conf = FsspecEnv::parse(&env, |_, _| false);
/// assert_eq!(conf.protocol_json("s3"), serde_json::json!({"anon": true, "key": "b"}));
/// assert_eq!(conf.ignored()[0].0, "FSSPEC_GCS");
/// ```
#[derive(Debug, Clone, Default)]
pub struct FsspecEnv {
    protocols: BTreeMap<String, Vec<(String, Value, String)>>,
    ignored: Vec<(String, String)>,
}

/// Decodes like Python's `json.loads`, or gives the raw text back.
fn decode(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

impl FsspecEnv {
    /// Reads the `FSSPEC_*` variables of `env`. `keep_raw(protocol, option)`
    /// says which `FSSPEC_<P>_<K>` values keep their raw text instead of
    /// being JSON-decoded (pass `|_, _| false` for fsspec's exact behaviour).
    pub fn parse(env: &Environment, keep_raw: impl Fn(&str, &str) -> bool) -> Self {
        let mut out = Self::default();
        let mut kwarg_vars: Vec<(&str, &str)> = Vec::new();
        for (name, raw) in env.iter() {
            let eighth = name.chars().nth(7);
            if name.starts_with("FSSPEC_") && eighth.is_some_and(|c| c != '_') {
                if name.matches('_').count() > 1 {
                    kwarg_vars.push((name, raw));
                    continue;
                }
                match decode(raw) {
                    Value::Object(map) => {
                        let protocol = name["FSSPEC_".len()..].to_lowercase();
                        out.protocols.entry(protocol.clone()).or_default();
                        for (key, value) in map {
                            out.upsert(&protocol, key, value, name);
                        }
                    }
                    _ => out.ignored.push((
                        name.to_string(),
                        "its value is not a JSON object, as FSSPEC_<PROTOCOL> must be".to_string(),
                    )),
                }
            } else if name.starts_with("FSSPEC") {
                out.ignored.push((
                    name.to_string(),
                    "the name is not FSSPEC_<PROTOCOL> or FSSPEC_<PROTOCOL>_<OPTION>".to_string(),
                ));
            }
        }
        for (name, raw) in kwarg_vars {
            let mut parts = name.splitn(3, '_').skip(1);
            let protocol = parts.next().unwrap_or_default().to_lowercase();
            let option = parts.next().unwrap_or_default().to_lowercase();
            let value = if keep_raw(&protocol, &option) {
                Value::String(raw.to_string())
            } else {
                decode(raw)
            };
            out.upsert(&protocol, option, value, name);
        }
        out
    }

    fn upsert(&mut self, protocol: &str, key: String, value: Value, var: &str) {
        let entries = self.protocols.entry(protocol.to_string()).or_default();
        match entries.iter_mut().find(|(k, _, _)| *k == key) {
            Some(slot) => *slot = (key, value, var.to_string()),
            None => entries.push((key, value, var.to_string())),
        }
    }

    /// The options of `protocol` as one JSON object (what fsspec's config holds).
    pub fn protocol_json(&self, protocol: &str) -> Value {
        Value::Object(
            self.protocols
                .get(protocol)
                .into_iter()
                .flatten()
                .map(|(k, v, _)| (k.clone(), v.clone()))
                .collect::<Map<String, Value>>(),
        )
    }

    /// Every protocol's options, `{"s3": {...}, ...}`, as fsspec's `conf` dict.
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.protocols
                .keys()
                .map(|p| (p.clone(), self.protocol_json(p)))
                .collect(),
        )
    }

    /// Variables that were ignored, with the reason.
    pub fn ignored(&self) -> &[(String, String)] {
        &self.ignored
    }

    /// Adds the options of `protocol` to `options`, each marked with its variable.
    pub(crate) fn apply(&self, protocol: &str, options: &mut BackendOptions) {
        for (key, value, var) in self.protocols.get(protocol).into_iter().flatten() {
            options.set(key, value.clone(), Source::Env(var.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(pairs: &[(&str, &str)]) -> FsspecEnv {
        FsspecEnv::parse(&Environment::from_pairs(pairs.iter().copied()), |_, _| {
            false
        })
    }

    #[test]
    fn values_are_json_decoded_with_raw_fallback() {
        let c = parse(&[
            ("FSSPEC_S3_A", "true"),
            ("FSSPEC_S3_B", "123"),
            ("FSSPEC_S3_C", "1e5"),
            ("FSSPEC_S3_D", "null"),
            ("FSSPEC_S3_E", " 5 "),
            ("FSSPEC_S3_F", "\"q\""),
            ("FSSPEC_S3_G", "True"),
            ("FSSPEC_S3_H", "0123"),
            ("FSSPEC_S3_I", ""),
        ]);
        assert_eq!(
            c.protocol_json("s3"),
            json!({"a": true, "b": 123, "c": 100000.0, "d": null, "e": 5, "f": "q",
                   "g": "True", "h": "0123", "i": ""})
        );
    }

    #[test]
    fn names_protocols_and_precedence() {
        let c = parse(&[
            ("FSSPEC_S3_CLIENT_KWARGS", r#"{"endpoint_url": "http://x"}"#),
            ("FSSPEC_S3", r#"{"client_kwargs": {}, "Key": 1}"#),
            ("FSSPEC_S3_", "empty"),
            ("FSSPEC__S3", "{}"),
            ("FSSPEC", "{}"),
            ("fsspec_s3_key", "lower"),
            ("FSSPEC_GCS", "[1]"),
        ]);
        assert_eq!(
            c.protocol_json("s3"),
            json!({"client_kwargs": {"endpoint_url": "http://x"}, "Key": 1, "": "empty"})
        );
        let ignored: Vec<&str> = c.ignored().iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(ignored, ["FSSPEC__S3", "FSSPEC", "FSSPEC_GCS"]);
    }

    #[test]
    fn string_options_keep_raw_text_when_asked() {
        let env =
            Environment::from_pairs([("FSSPEC_S3_SECRET", "12345"), ("FSSPEC_S3_ANON", "true")]);
        let c = FsspecEnv::parse(&env, |p, k| p == "s3" && k == "secret");
        assert_eq!(
            c.protocol_json("s3"),
            json!({"secret": "12345", "anon": true})
        );
    }
}
