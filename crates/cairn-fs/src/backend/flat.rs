//! Typed, flat option tables for backends whose options are plain keys
//! (gcs, oss): canonical names, aliases, a type, environment fallbacks, and
//! which ones are secret. One parser serves options, `FSSPEC_*` variables
//! and native variables.

use serde_json::Value;

use crate::error::Result;
use crate::options::{
    BackendOptions, ConfigLine, Environment, Setting, Source, unknown_key, value_as_bool,
    value_as_string,
};

/// The type of an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    Flag,
    /// A keyword of the Python library (gcsfs, ossfs) about its own
    /// machinery: accepted with any value and without effect, so its
    /// storage options and `FSSPEC_*` variables work unchanged.
    Ignored,
}

/// A [`Kind::Ignored`] keyword.
pub(crate) const fn ignored(name: &'static str) -> Spec {
    Spec {
        name,
        aliases: &[],
        kind: Kind::Ignored,
        env: &[],
        secret: false,
    }
}

/// One option of a backend.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub kind: Kind,
    pub env: &'static [&'static str],
    pub secret: bool,
}

/// A resolved option value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolved {
    Text(String),
    Flag(bool),
}

/// The resolved options of a flat backend; Debug redacts secrets.
#[derive(Clone)]
pub(crate) struct FlatConfig {
    specs: &'static [Spec],
    values: Vec<(&'static str, Setting<Resolved>)>,
    /// Keywords of the Python library given, accepted without effect.
    ignored: Vec<(&'static str, Setting<String>)>,
}

impl std::fmt::Debug for FlatConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut map = f.debug_map();
        for line in self.describe() {
            map.entry(&line.name, &line.value);
        }
        map.finish()
    }
}

/// The canonical names of `specs`, for error messages.
fn names(specs: &[Spec]) -> Vec<&'static str> {
    specs
        .iter()
        .filter(|s| s.kind != Kind::Ignored)
        .map(|s| s.name)
        .collect()
}

/// The text options of `specs`, aliases included (kept raw from `FSSPEC_<P>_<K>`).
pub(crate) fn text_names(specs: &'static [Spec]) -> Vec<&'static str> {
    specs
        .iter()
        .filter(|s| s.kind == Kind::Text)
        .flat_map(|s| std::iter::once(s.name).chain(s.aliases.iter().copied()))
        .collect()
}

impl FlatConfig {
    /// Reads `options` against `specs`, falling back to each spec's variables.
    pub fn resolve(
        specs: &'static [Spec],
        options: &BackendOptions,
        env: &Environment,
    ) -> Result<Self> {
        let mut values: Vec<(&'static str, Setting<Resolved>)> = Vec::new();
        let mut ignored: Vec<(&'static str, Setting<String>)> = Vec::new();
        for (key, value, source) in options.iter() {
            let at = options.at(key, source);
            // fsspec hands a keyword left at its default as None (JSON
            // null): unset.
            if value.is_null() {
                continue;
            }
            let lower = key.to_ascii_lowercase();
            let spec = specs
                .iter()
                .find(|s| s.name == lower || s.aliases.contains(&lower.as_str()))
                .ok_or_else(|| unknown_key(&at.label(), &names(specs)))?;
            if spec.kind == Kind::Ignored {
                let shown = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_string);
                ignored.push((spec.name, at.setting(shown)));
                continue;
            }
            let resolved = read(spec, value, &at.label())?;
            values.retain(|(n, _)| *n != spec.name);
            values.push((spec.name, at.setting(resolved)));
        }
        for spec in specs {
            if values.iter().any(|(n, _)| *n == spec.name) {
                continue;
            }
            if let Some((var, raw)) = spec.env.iter().find_map(|v| env.get(v).map(|raw| (v, raw))) {
                let resolved = read(
                    spec,
                    &Value::String(raw.to_string()),
                    &format!("variable {var}"),
                )?;
                values.push((
                    spec.name,
                    Setting::new(resolved, Source::Env(var.to_string())),
                ));
            }
        }
        Ok(Self {
            specs,
            values,
            ignored,
        })
    }

    /// A text option.
    pub fn text(&self, name: &str) -> Option<&Setting<Resolved>> {
        self.values.iter().find(|(n, _)| *n == name).map(|(_, s)| s)
    }

    /// A text option's value.
    pub fn text_value(&self, name: &str) -> Option<&str> {
        match self.text(name).map(|s| &s.value) {
            Some(Resolved::Text(t)) => Some(t),
            _ => None,
        }
    }

    /// A flag, false when unset.
    pub fn flag(&self, name: &str) -> bool {
        matches!(
            self.values
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, s)| &s.value),
            Some(Resolved::Flag(true))
        )
    }

    /// A flag, `default` when unset.
    pub fn flag_or(&self, name: &str, default: bool) -> bool {
        match self
            .values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| &s.value)
        {
            Some(Resolved::Flag(b)) => *b,
            _ => default,
        }
    }

    /// Values of secret options, to scrub from errors.
    pub fn secrets(&self) -> Vec<String> {
        self.values
            .iter()
            .filter(|(n, _)| self.specs.iter().any(|s| s.name == *n && s.secret))
            .filter_map(|(_, s)| match &s.value {
                Resolved::Text(t) => Some(t.clone()),
                Resolved::Flag(_) => None,
            })
            .collect()
    }

    /// Report lines, secrets redacted.
    pub fn describe(&self) -> Vec<ConfigLine> {
        self.values
            .iter()
            .map(|(name, setting)| {
                let secret = self.specs.iter().any(|s| s.name == *name && s.secret);
                let value = match (&setting.value, secret) {
                    (_, true) => "***".to_string(),
                    (Resolved::Text(t), false) => t.clone(),
                    (Resolved::Flag(b), false) => b.to_string(),
                };
                ConfigLine {
                    name: name.to_string(),
                    value,
                    source: setting.source.clone(),
                    note: None,
                    unset: false,
                }
            })
            .chain(self.ignored.iter().map(|(name, setting)| ConfigLine {
                name: name.to_string(),
                value: setting.value.clone(),
                source: setting.source.clone(),
                note: Some("accepted for the Python library; no effect in cairn".into()),
                unset: false,
            }))
            .collect()
    }
}

fn read(spec: &Spec, value: &Value, label: &str) -> Result<Resolved> {
    Ok(match spec.kind {
        Kind::Text => Resolved::Text(value_as_string(value, label)?),
        Kind::Flag => Resolved::Flag(value_as_bool(value, label)?),
        Kind::Ignored => unreachable!("ignored keywords are skipped before reading"),
    })
}
