//! Where an object store lives: `s3://bucket/prefix`, and the endpoint a
//! configuration may name. Checked here so that a bad URL is a
//! configuration error naming `store.url` before anything is contacted.

use super::ConfigError;

/// A parsed `s3://bucket/prefix` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectUrl {
    pub bucket: String,
    /// The store's key prefix without leading or trailing `/` (empty: the
    /// bucket's root).
    pub prefix: String,
}

impl ObjectUrl {
    pub fn parse(url: &str) -> Result<ObjectUrl, ConfigError> {
        let bad = |rule: String| ConfigError::new("store.url", rule);
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(bad(format!(
                "{url:?} is not a URL; an object store is named s3://bucket/prefix"
            )));
        };
        if !scheme.eq_ignore_ascii_case("s3") {
            return Err(bad(format!(
                "unknown scheme {scheme:?} in {url:?}; only s3:// (S3 and compatible \
                 servers) is supported"
            )));
        }
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        check_bucket(bucket).map_err(|why| bad(format!("bucket {bucket:?} in {url:?}: {why}")))?;
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == "." || p == "..") || prefix.contains("//") {
            return Err(bad(format!(
                "the key prefix {prefix:?} in {url:?} has an empty, '.' or '..' part"
            )));
        }
        // Characters the client would percent-encode into the key: the
        // objects would not be where the URL says.
        const ENCODED: &[char] = &[
            '\\', '{', '}', '^', '%', '`', '[', ']', '"', '<', '>', '~', '#', '|', '*', '?',
        ];
        if let Some(c) = prefix
            .chars()
            .find(|c| ENCODED.contains(c) || c.is_control())
        {
            return Err(bad(format!(
                "the key prefix {prefix:?} in {url:?} has {c:?}, which object keys here may not \
                 hold (use letters, digits, spaces and - _ . /)"
            )));
        }
        Ok(ObjectUrl {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// The key of `name` inside the store.
    pub fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.prefix)
        }
    }
}

/// S3's bucket naming rules (3 to 63 lowercase letters, digits, `.` and
/// `-`, starting and ending with a letter or digit).
fn check_bucket(b: &str) -> Result<(), &'static str> {
    if b.is_empty() {
        return Err("no bucket name");
    }
    if !(3..=63).contains(&b.len()) {
        return Err("a bucket name has 3 to 63 characters");
    }
    if !b
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
    {
        return Err("a bucket name has only lowercase letters, digits, '.' and '-'");
    }
    let ends_ok = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !ends_ok(b.as_bytes()[0]) || !ends_ok(b.as_bytes()[b.len() - 1]) {
        return Err("a bucket name starts and ends with a letter or digit");
    }
    Ok(())
}

/// An endpoint is `http://` or `https://` with a host.
pub fn check_endpoint(endpoint: &str) -> Result<(), ConfigError> {
    let bad = |rule: String| ConfigError::new("store.endpoint", rule);
    let Some((scheme, rest)) = endpoint.split_once("://") else {
        return Err(bad(format!(
            "{endpoint:?} is not a URL (http://host:port or https://host)"
        )));
    };
    if scheme != "http" && scheme != "https" {
        return Err(bad(format!(
            "unknown scheme {scheme:?} in {endpoint:?}; use http or https"
        )));
    }
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err(bad(format!("no host in {endpoint:?}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bucket_and_prefix() {
        let u = ObjectUrl::parse("s3://my-bucket/acq/run 1.zarr/").unwrap();
        assert_eq!(u.bucket, "my-bucket");
        assert_eq!(u.prefix, "acq/run 1.zarr");
        assert_eq!(u.key("zarr.json"), "acq/run 1.zarr/zarr.json");
        let root = ObjectUrl::parse("s3://bkt").unwrap();
        assert_eq!(root.key("zarr.json"), "zarr.json");
    }

    #[test]
    fn bad_urls_name_the_problem() {
        for (url, says) in [
            ("gs://bucket/x", "unknown scheme \"gs\""),
            ("bucket/x", "not a URL"),
            ("s3:///x", "no bucket name"),
            ("s3://Bucket/x", "lowercase"),
            ("s3://ab/x", "3 to 63"),
            ("s3://bucket/a/../b", "'..'"),
            ("s3://bucket/a//b", "empty"),
            ("s3://bucket/a~b", "'~'"),
            ("s3://bucket/run?x", "'?'"),
        ] {
            let e = ObjectUrl::parse(url).unwrap_err();
            assert_eq!(e.field, "store.url");
            assert!(e.rule.contains(says), "{url}: {}", e.rule);
        }
    }

    #[test]
    fn endpoints() {
        check_endpoint("http://127.0.0.1:9000").unwrap();
        check_endpoint("https://s3.example.org").unwrap();
        assert!(check_endpoint("ftp://x").unwrap_err().rule.contains("ftp"));
        assert!(check_endpoint("127.0.0.1:9000").is_err());
        assert!(check_endpoint("http://").is_err());
    }
}
