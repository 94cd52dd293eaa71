//! Reads back the samples of the OpenMetrics text cairn's registry encodes
//! (never text from elsewhere): `name{label="value",...} value` lines, label
//! values escaped as prometheus-client escapes them (`\\`, `\"`, `\n`).

/// One sample of a cairn metric: a counter's `_total`, a gauge, or one of a
/// histogram's `_bucket`, `_sum` and `_count` lines.
///
/// ```
/// let s = cairn_fs::metrics::Sample {
///     name: "cairn_store_requests_total".into(),
///     labels: vec![("op".into(), "get".into())],
///     value: 2.0,
/// };
/// assert_eq!(s.label("op"), Some("get"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's name, as Prometheus stores it (`cairn_..._total`).
    pub name: String,
    /// Its labels, in the order they were encoded.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if the sample has it.
    ///
    /// ```
    /// let s = cairn_fs::metrics::Sample { name: "x".into(), labels: vec![], value: 0.0 };
    /// assert_eq!(s.label("op"), None);
    /// ```
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The samples of `text`, skipping comments (`# TYPE`, `# HELP`, `# EOF`).
pub(super) fn read(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(read_line)
        .collect()
}

fn read_line(line: &str) -> Option<Sample> {
    let (name, mut rest) = match line.find(['{', ' ']) {
        Some(at) => (&line[..at], &line[at..]),
        None => return None,
    };
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = inner;
        while !rest.starts_with('}') {
            let eq = rest.find("=\"")?;
            let key = rest[..eq].to_string();
            rest = &rest[eq + 2..];
            let mut value = String::new();
            let mut chars = rest.char_indices();
            let end = loop {
                match chars.next()? {
                    (i, '"') => break i,
                    (_, '\\') => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    (_, c) => value.push(c),
                }
            };
            labels.push((key, value));
            rest = &rest[end + 1..];
            rest = rest.strip_prefix(',').unwrap_or(rest);
        }
        rest = &rest[1..];
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_with_escaped_labels_are_read_back() {
        let text = "# TYPE cairn_x counter\ncairn_x_total{a=\"q\\\"u\\\\o\\nte\",b=\"2\"} 7\ncairn_y 1.5\n# EOF\n";
        let samples = read(text);
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].label("a"), Some("q\"u\\o\nte"));
        assert_eq!(samples[0].label("b"), Some("2"));
        assert_eq!(samples[0].value, 7.0);
        assert_eq!(
            (samples[1].name.as_str(), samples[1].value),
            ("cairn_y", 1.5)
        );
    }
}
