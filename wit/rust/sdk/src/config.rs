//! The operator's configuration for a guest (`env.config`, from `--config
//! GUEST.KEY=VALUE` or the guest's config file), checked: every key must be
//! one the guest knows and no value may be empty, so a typo is an error at
//! `describe` that names the key instead of a silently ignored setting.

use crate::Environment;

/// A checked view of `env.config`.
#[derive(Clone, Copy, Debug)]
pub struct Config<'a> {
    entries: &'a [(String, String)],
}

impl Environment {
    /// The configuration, if every key is in `known` and no value is empty;
    /// otherwise an error naming the offending key (and the known ones).
    pub fn settings(&self, known: &[&str]) -> Result<Config<'_>, String> {
        for (key, value) in &self.config {
            if !known.contains(&key.as_str()) {
                let known = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(format!(
                    "unknown configuration key {key:?} (known: {known})"
                ));
            }
            if value.is_empty() {
                return Err(format!("configuration key {key:?} must not be empty"));
            }
        }
        Ok(Config {
            entries: &self.config,
        })
    }
}

impl<'a> Config<'a> {
    /// The value of `key` (the last one, if given twice).
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `key`, or `default`.
    pub fn get_or(&self, key: &str, default: &str) -> String {
        self.get(key).unwrap_or(default).to_string()
    }
}

#[cfg(test)]
mod tests {
    use crate::Environment;

    #[test]
    fn unknown_keys_and_empty_values_are_errors_naming_the_key() {
        let env = Environment::test("ns")
            .config("name", "a")
            .config("name", "b");
        let config = env.settings(&["name", "resource"]).expect("known keys");
        assert_eq!(config.get("name"), Some("b"));
        assert_eq!(config.get_or("resource", "gpu"), "gpu");
        let err = env
            .clone()
            .config("nmae", "x")
            .settings(&["name"])
            .unwrap_err();
        assert_eq!(err, "unknown configuration key \"nmae\" (known: name)");
        let err = env.clone().settings(&[]).unwrap_err();
        assert!(err.ends_with("(known: none)"), "{err}");
        let err = Environment::test("ns")
            .config("name", "")
            .settings(&["name"])
            .unwrap_err();
        assert!(err.contains("\"name\" must not be empty"), "{err}");
    }
}
