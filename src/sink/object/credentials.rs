//! The part of the AWS credential chain that `object_store` leaves out: the
//! shared credentials and config files (`~/.aws/credentials`,
//! `~/.aws/config`) and their profiles. The environment's keys come first
//! (read by `object_store`); after the files, `object_store` goes on to web
//! identity, container and instance metadata credentials.
//!
//! Secrets read here go into the client only: no message, log or file of
//! the library ever holds them.

use configparser::ini::Ini;
use std::path::PathBuf;

/// Keys from a profile of the shared credentials (or config) file.
pub struct ProfileKeys {
    pub key_id: String,
    pub secret: String,
    pub token: Option<String>,
}

/// What the environment says about the shared files, as a function so
/// that tests need not change the process's environment.
pub struct Env<'a>(pub &'a dyn Fn(&str) -> Option<String>);

impl Env<'_> {
    fn var(&self, name: &str) -> Option<String> {
        (self.0)(name).filter(|v| !v.is_empty())
    }

    fn profile(&self) -> String {
        self.var("AWS_PROFILE")
            .unwrap_or_else(|| "default".to_string())
    }

    fn file(&self, var: &str, default: &str) -> Option<PathBuf> {
        self.var(var).map(PathBuf::from).or_else(|| {
            self.var("HOME")
                .map(|h| PathBuf::from(h).join(".aws").join(default))
        })
    }

    /// The section of `profile` in `file`: `[name]` in the credentials
    /// file, `[profile name]` (or `[default]`) in the config file.
    fn lookup(&self, var: &str, default: &str, key: &str) -> Option<String> {
        let path = self.file(var, default)?;
        let text = std::fs::read_to_string(path).ok()?;
        let mut ini = Ini::new_cs();
        ini.read(text).ok()?;
        let profile = self.profile();
        let sections = if default == "config" && profile != "default" {
            vec![format!("profile {profile}")]
        } else {
            vec![profile.clone(), format!("profile {profile}")]
        };
        sections
            .iter()
            .find_map(|s| ini.get(s, key))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// Keys from the profile (`AWS_PROFILE`, else `default`) of the shared
    /// credentials file, else of the config file.
    pub fn profile_keys(&self) -> Option<ProfileKeys> {
        for (var, default) in [
            ("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
            ("AWS_CONFIG_FILE", "config"),
        ] {
            let get = |k: &str| self.lookup(var, default, k);
            if let (Some(key_id), Some(secret)) =
                (get("aws_access_key_id"), get("aws_secret_access_key"))
            {
                return Some(ProfileKeys {
                    key_id,
                    secret,
                    token: get("aws_session_token"),
                });
            }
        }
        None
    }

    /// The profile's region, from the config file.
    pub fn profile_region(&self) -> Option<String> {
        self.lookup("AWS_CONFIG_FILE", "config", "region")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: HashMap<&'static str, String>) -> impl Fn(&str) -> Option<String> {
        move |k| vars.get(k).cloned()
    }

    #[test]
    fn reads_the_named_profile_then_default() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("credentials");
        std::fs::write(
            &creds,
            "[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key = s1\n\n\
             [lab]\naws_access_key_id=AKLAB\naws_secret_access_key=s2\naws_session_token=t\n",
        )
        .unwrap();
        let config = dir.path().join("config");
        std::fs::write(
            &config,
            "[default]\nregion = eu-west-1\n[profile lab]\nregion = us-west-2\n",
        )
        .unwrap();
        let mut vars = HashMap::new();
        vars.insert("AWS_SHARED_CREDENTIALS_FILE", creds.display().to_string());
        vars.insert("AWS_CONFIG_FILE", config.display().to_string());
        let f = env(vars.clone());
        let e = Env(&f);
        let k = e.profile_keys().unwrap();
        assert_eq!((k.key_id.as_str(), k.token), ("AKDEFAULT", None));
        assert_eq!(e.profile_region().as_deref(), Some("eu-west-1"));

        vars.insert("AWS_PROFILE", "lab".into());
        let f = env(vars.clone());
        let e = Env(&f);
        let k = e.profile_keys().unwrap();
        assert_eq!(
            (k.key_id.as_str(), k.token.as_deref()),
            ("AKLAB", Some("t"))
        );
        assert_eq!(e.profile_region().as_deref(), Some("us-west-2"));

        vars.insert("AWS_PROFILE", "absent".into());
        let f = env(vars.clone());
        assert!(Env(&f).profile_keys().is_none());
    }

    #[test]
    fn no_files_no_keys() {
        let dir = tempfile::tempdir().unwrap();
        let mut vars = HashMap::new();
        vars.insert("HOME", dir.path().display().to_string());
        let f = env(vars.clone());
        assert!(Env(&f).profile_keys().is_none());
        assert!(Env(&f).profile_region().is_none());
    }
}
