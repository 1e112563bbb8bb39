//! Prometheus text exposition, read the way a scraper reads it.

/// Every sample of `text`: the series (name and labels, as written) and its
/// value. Comments and unparsable lines are skipped.
#[must_use]
pub fn samples(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The sum of the samples of metric `name` whose labels include every one
/// of `labels` (each written `key="value"`); 0 when there is none.
#[must_use]
pub fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    samples(text)
        .iter()
        .filter(|(series, _)| {
            series.split('{').next() == Some(name) && labels.iter().all(|l| series.contains(l))
        })
        .map(|(_, value)| value)
        .sum()
}

/// Whether `text` has any sample of metric `name`.
#[must_use]
pub fn has_metric(text: &str, name: &str) -> bool {
    samples(text)
        .iter()
        .any(|(series, _)| series.split('{').next() == Some(name))
}
