//! Storage options (a map per protocol, the shape fsspec users write), the
//! environment snapshot they are resolved against, and typed value readers.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::error::{Error, ErrorKind, Result};

/// Storage options as a map per protocol: `{"s3": {"key": ..., "client_kwargs": {...}}}`.
///
/// Debug output redacts the value of every key that names a secret.
///
/// ```
/// use cairn_fs::StorageOptions;
/// let mut opts = StorageOptions::new();
/// opts.set_dotted("s3.client_kwargs.endpoint_url=http://127.0.0.1:3900").unwrap();
/// opts.set_dotted("s3.secret=hunter2").unwrap();
/// assert_eq!(opts.protocol("s3").unwrap()["client_kwargs"]["endpoint_url"], "http://127.0.0.1:3900");
/// assert!(!format!("{opts:?}").contains("hunter2"));
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct StorageOptions {
    protocols: BTreeMap<String, Map<String, Value>>,
}

impl StorageOptions {
    /// No options for any protocol.
    ///
    /// ```
    /// assert!(cairn_fs::StorageOptions::new().protocol("s3").is_none());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no option is set for any protocol.
    ///
    /// ```
    /// let mut options = cairn_fs::StorageOptions::new();
    /// assert!(options.is_empty());
    /// options.set("s3", "anon", true.into());
    /// assert!(!options.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.protocols.values().all(Map::is_empty)
    }

    /// Reads `{"<protocol>": {<options>}, ...}`; anything else is a Config error.
    ///
    /// ```
    /// let opts = cairn_fs::StorageOptions::from_json(serde_json::json!({"s3": {"anon": true}})).unwrap();
    /// assert_eq!(opts.protocol("s3").unwrap()["anon"], true);
    /// assert!(cairn_fs::StorageOptions::from_json(serde_json::json!({"s3": 1})).is_err());
    /// ```
    pub fn from_json(value: Value) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(config_error(
                "storage options must be a JSON object of the form {\"s3\": {...}}",
            ));
        };
        let mut out = Self::new();
        for (protocol, options) in map {
            let Value::Object(options) = options else {
                return Err(config_error(format!(
                    "storage options for protocol {protocol:?} must be a JSON object"
                )));
            };
            out.protocols.insert(protocol.to_ascii_lowercase(), options);
        }
        Ok(out)
    }

    /// Sets one option, `value` taken as given.
    ///
    /// ```
    /// let mut opts = cairn_fs::StorageOptions::new();
    /// opts.set("s3", "anon", serde_json::json!(true));
    /// assert_eq!(opts.protocol("s3").unwrap()["anon"], true);
    /// ```
    pub fn set(&mut self, protocol: &str, key: &str, value: Value) -> &mut Self {
        self.protocols
            .entry(protocol.to_ascii_lowercase())
            .or_default()
            .insert(key.to_string(), value);
        self
    }

    /// Sets one option from `protocol.key[.sub...]=value`, the form of the CLI's `-o`.
    ///
    /// The value stays a string unless it starts with `{` or `[`, in which case it
    /// must be JSON. Typed options (booleans, numbers) accept their string form.
    ///
    /// ```
    /// let mut opts = cairn_fs::StorageOptions::new();
    /// opts.set_dotted("s3.config_kwargs.s3.addressing_style=virtual").unwrap();
    /// assert!(opts.set_dotted("s3").is_err());
    /// ```
    pub fn set_dotted(&mut self, assignment: &str) -> Result<&mut Self> {
        let (path, raw) = assignment.split_once('=').ok_or_else(|| {
            config_error(format!(
                "storage option {assignment:?} must look like protocol.key=value (e.g. s3.endpoint_url=http://127.0.0.1:9000)"
            ))
        })?;
        let mut keys = path.split('.');
        let protocol = keys.next().unwrap_or_default();
        let rest: Vec<&str> = keys.collect();
        if protocol.is_empty() || rest.is_empty() || rest.iter().any(|k| k.is_empty()) {
            return Err(config_error(format!(
                "storage option {path:?} must name a protocol and a key, as in s3.endpoint_url"
            )));
        }
        let value = if raw.starts_with('{') || raw.starts_with('[') {
            serde_json::from_str(raw).map_err(|e| {
                config_error(format!("storage option {path:?} is not valid JSON")).with_source(e)
            })?
        } else {
            Value::String(raw.to_string())
        };
        let mut map = self
            .protocols
            .entry(protocol.to_ascii_lowercase())
            .or_default();
        for key in &rest[..rest.len() - 1] {
            let slot = map
                .entry(key.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            map = slot.as_object_mut().expect("just made an object");
        }
        map.insert(rest[rest.len() - 1].to_string(), value);
        Ok(self)
    }

    /// The options of one protocol, as written.
    ///
    /// ```
    /// assert!(cairn_fs::StorageOptions::new().protocol("memory").is_none());
    /// ```
    pub fn protocol(&self, protocol: &str) -> Option<&Map<String, Value>> {
        self.protocols.get(&protocol.to_ascii_lowercase())
    }
}

impl fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted: BTreeMap<&String, Value> = self
            .protocols
            .iter()
            .map(|(p, m)| (p, redact_map(m)))
            .collect();
        f.debug_struct("StorageOptions")
            .field("protocols", &redacted)
            .finish()
    }
}

/// Whether an option or variable name holds a credential.
///
/// ```
/// assert!(cairn_fs::is_secret_name("aws_secret_access_key"));
/// assert!(cairn_fs::is_secret_name("token"));
/// assert!(!cairn_fs::is_secret_name("endpoint_url"));
/// ```
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["secret", "token", "password", "credential"]
        .iter()
        .any(|needle| lower.contains(needle))
        || lower == "sk"
        || lower == "key"
        || lower.ends_with("_key")
}

fn redact_map(map: &Map<String, Value>) -> Value {
    Value::Object(
        map.iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::Object(inner) => redact_map(inner),
                    _ if is_secret_name(k) => Value::String("***".into()),
                    other => other.clone(),
                };
                (k.clone(), v)
            })
            .collect(),
    )
}

/// A snapshot of environment variables that option resolution reads.
///
/// Taken once, so a filesystem's configuration does not change under it;
/// tests build one from pairs. The order of the variables is kept (fsspec
/// applies `FSSPEC_*` variables in environment order). Debug output lists
/// names only, never values.
///
/// ```
/// use cairn_fs::Environment;
/// let env = Environment::from_pairs([("AWS_DEFAULT_REGION", "eu-west-1")]);
/// assert_eq!(env.get("AWS_DEFAULT_REGION"), Some("eu-west-1"));
/// assert!(!format!("{env:?}").contains("eu-west-1"));
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct Environment {
    vars: Vec<(String, String)>,
}

impl Environment {
    /// The current process environment (variables that are not valid UTF-8 are skipped).
    ///
    /// ```
    /// let env = cairn_fs::Environment::process();
    /// let _ = env.get("HOME");
    /// ```
    pub fn process() -> Self {
        Self {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }

    /// An environment made of the given pairs only, in that order.
    ///
    /// ```
    /// let env = cairn_fs::Environment::from_pairs([("A", "1")]);
    /// assert_eq!(env.get("A"), Some("1"));
    /// ```
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// The value of a variable; an empty value counts as unset.
    ///
    /// ```
    /// let env = cairn_fs::Environment::from_pairs([("A", "")]);
    /// assert_eq!(env.get("A"), None);
    /// ```
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// Every variable, in environment order, empty values included.
    ///
    /// ```
    /// let env = cairn_fs::Environment::from_pairs([("B", "2"), ("A", "1")]);
    /// assert_eq!(env.iter().next(), Some(("B", "2")));
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Environment")
            .field(
                "names",
                &self.vars.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The options one backend receives: top-level keys, each with its value and
/// origin (an explicit option or an `FSSPEC_*` variable), later sources
/// replacing earlier ones key by key, as fsspec's shallow `update` does.
/// Debug output redacts secrets.
///
/// ```
/// use cairn_fs::{BackendOptions, Source};
/// let mut o = BackendOptions::new("s3");
/// o.set("region", "eu".into(), Source::Env("FSSPEC_S3_REGION".into()));
/// o.set("region", "us".into(), Source::Option("s3.region".into()));
/// assert_eq!(o.iter().count(), 1);
/// assert_eq!(o.iter().next().unwrap().1, "us");
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct BackendOptions {
    protocol: String,
    entries: Vec<(String, Value, Source)>,
}

impl BackendOptions {
    /// No options, for `protocol` (used in messages: `s3.region`).
    ///
    /// ```
    /// assert_eq!(cairn_fs::BackendOptions::new("s3").protocol(), "s3");
    /// ```
    pub fn new(protocol: &str) -> Self {
        Self {
            protocol: protocol.to_string(),
            entries: Vec::new(),
        }
    }

    /// Explicit options from a JSON map.
    ///
    /// ```
    /// let map = serde_json::json!({"anon": true});
    /// let o = cairn_fs::BackendOptions::from_map("s3", map.as_object().unwrap());
    /// assert_eq!(o.iter().next().unwrap().2, &cairn_fs::Source::Option("s3.anon".into()));
    /// ```
    pub fn from_map(protocol: &str, map: &Map<String, Value>) -> Self {
        let mut out = Self::new(protocol);
        for (k, v) in map {
            out.set(k, v.clone(), Source::Option(format!("{protocol}.{k}")));
        }
        out
    }

    /// The protocol these options are for.
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    /// Sets `key`, replacing an earlier value of it.
    pub fn set(&mut self, key: &str, value: Value, source: Source) -> &mut Self {
        self.entries.retain(|(k, _, _)| k != key);
        self.entries.push((key.to_string(), value, source));
        self
    }

    /// Every option: key, value, origin.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value, &Source)> {
        self.entries.iter().map(|(k, v, s)| (k.as_str(), v, s))
    }

    /// Removes and returns `key`.
    pub(crate) fn take(&mut self, key: &str) -> Option<(Value, Source)> {
        let idx = self.entries.iter().position(|(k, _, _)| k == key)?;
        let (_, v, s) = self.entries.remove(idx);
        Some((v, s))
    }

    /// Where `key` sits, for messages and reports.
    pub(crate) fn at(&self, key: &str, source: &Source) -> At {
        At {
            path: format!("{}.{key}", self.protocol),
            source: source.clone(),
        }
    }
}

impl fmt::Debug for BackendOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (k, v, s) in &self.entries {
            let shown = match v {
                Value::Object(inner) => redact_map(inner),
                _ if is_secret_name(k) => Value::String("***".into()),
                other => other.clone(),
            };
            map.entry(k, &format!("{shown} ({s})"));
        }
        map.finish()
    }
}

/// Where an option sits: its dotted path, and where its value came from.
#[derive(Debug, Clone)]
pub(crate) struct At {
    pub path: String,
    pub source: Source,
}

impl At {
    /// The nested option `key` inside this one.
    pub fn child(&self, key: &str) -> At {
        At {
            path: format!("{}.{key}", self.path),
            source: match &self.source {
                Source::Option(p) => Source::Option(format!("{p}.{key}")),
                other => other.clone(),
            },
        }
    }

    /// The option's name for a message: `s3.key`, or `s3.key (from env FSSPEC_S3_KEY)`.
    pub fn label(&self) -> String {
        match &self.source {
            Source::Env(name) => format!("{} (from env {name})", self.path),
            _ => self.path.clone(),
        }
    }

    /// A setting holding `value` from here.
    pub fn setting<T>(&self, value: T) -> Setting<T> {
        Setting::new(value, self.source.clone())
    }
}

/// Where a resolved setting came from, for reports and error messages.
///
/// ```
/// use cairn_fs::Source;
/// assert_eq!(Source::Env("AWS_REGION".into()).to_string(), "env AWS_REGION");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// Built into cairn.
    Default,
    /// An environment variable of this name.
    Env(String),
    /// A storage option at this dotted path (e.g. `s3.client_kwargs.endpoint_url`).
    Option(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::Env(name) => write!(f, "env {name}"),
            Source::Option(path) => write!(f, "option {path}"),
        }
    }
}

/// A resolved value with its origin.
///
/// ```
/// use cairn_fs::{Setting, Source};
/// let s = Setting::new("us-east-1".to_string(), Source::Default);
/// assert_eq!(s.value, "us-east-1");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

impl<T> Setting<T> {
    /// Pairs a value with its origin.
    ///
    /// ```
    /// let s = cairn_fs::Setting::new(1, cairn_fs::Source::Default);
    /// assert_eq!(s.value, 1);
    /// ```
    pub fn new(value: T, source: Source) -> Self {
        Self { value, source }
    }
}

/// One line of a resolved-configuration report: option name, display value
/// (secrets redacted), origin.
///
/// ```
/// let line = cairn_fs::ConfigLine { name: "region".into(), value: "us-east-1".into(), source: cairn_fs::Source::Default, note: None, unset: false };
/// assert_eq!(line.name, "region");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigLine {
    /// Canonical option name.
    pub name: String,
    /// The value as shown to a person; `***` for secrets.
    pub value: String,
    /// Where it came from.
    pub source: Source,
    /// A remark about the setting (that it has no effect in cairn, say),
    /// kept out of `value` so a value is only ever the value.
    pub note: Option<String>,
    /// Given as null (Python's `None`, as fsspec hands a keyword left at
    /// its default): unset, so the backend's default applies; `value` is
    /// that default and `source` where the null came from.
    pub unset: bool,
}

pub(crate) fn config_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Config, message)
}

/// Reads a string option; numbers keep their textual form.
pub(crate) fn value_as_string(value: &Value, path: &str) -> Result<String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(config_error(format!("option {path} must be a string"))),
    }
}

/// Reads a boolean option: JSON booleans or `true/false/1/0/yes/no`.
pub(crate) fn value_as_bool(value: &Value, path: &str) -> Result<bool> {
    let parsed = match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_i64().map(|i| i != 0),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Some(true),
            "false" | "0" | "no" | "off" => Some(false),
            _ => None,
        },
        _ => None,
    };
    parsed.ok_or_else(|| {
        config_error(format!(
            "option {path} is {value}; it must be true or false"
        ))
    })
}

/// Reads a non-negative number option (seconds, counts).
pub(crate) fn value_as_f64(value: &Value, path: &str) -> Result<f64> {
    let parsed = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    parsed
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| config_error(format!("option {path} must be a non-negative number")))
}

/// Reads an object option.
pub(crate) fn value_as_object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| config_error(format!("option {path} must be an object")))
}

/// The error for a key no backend option matches, listing the valid ones.
pub(crate) fn unknown_key(path: &str, valid: &[&str]) -> Error {
    config_error(format!(
        "unknown option {path}; valid options here are: {}",
        valid.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_assignments_nest() {
        let mut o = StorageOptions::new();
        o.set_dotted("S3.config_kwargs.s3.addressing_style=path")
            .unwrap();
        o.set_dotted("s3.client_kwargs={\"region_name\":\"eu\"}")
            .unwrap();
        let s3 = o.protocol("s3").unwrap();
        assert_eq!(s3["config_kwargs"]["s3"]["addressing_style"], "path");
        assert_eq!(s3["client_kwargs"]["region_name"], "eu");
        assert!(o.set_dotted("s3.x={bad").is_err());
        assert!(o.set_dotted("=x").is_err());
        assert!(o.set_dotted("s3..k=x").is_err());
    }

    #[test]
    fn typed_readers_coerce_strings() {
        assert!(value_as_bool(&Value::String("True".into()), "x").unwrap());
        assert!(value_as_bool(&Value::String("maybe".into()), "x").is_err());
        assert_eq!(
            value_as_string(&serde_json::json!(12345), "x").unwrap(),
            "12345"
        );
        assert_eq!(
            value_as_f64(&Value::String("2.5".into()), "x").unwrap(),
            2.5
        );
        assert!(value_as_f64(&serde_json::json!(-1), "x").is_err());
    }

    #[test]
    fn debug_redacts_nested_secrets() {
        let o = StorageOptions::from_json(serde_json::json!({
            "s3": {"secret": "s1", "client_kwargs": {"aws_secret_access_key": "s2", "aws_session_token": "s3tok"}}
        }))
        .unwrap();
        let text = format!("{o:?}");
        for s in ["s1", "s2", "s3tok"] {
            assert!(!text.contains(&format!("\"{s}\"")), "{text}");
        }
    }
}
