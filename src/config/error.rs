/// A configuration rule broken: `field` is the path of the offending key
/// (`dimensions[1].tile`), `rule` says what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {rule}")]
pub struct ConfigError {
    pub field: String,
    pub rule: String,
}

impl ConfigError {
    pub fn new(field: impl Into<String>, rule: impl Into<String>) -> ConfigError {
        ConfigError {
            field: field.into(),
            rule: rule.into(),
        }
    }
}
