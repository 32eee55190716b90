//! A node's address as the user wrote it: parsed into the redis crate's
//! `ConnectionInfo`, or the reason it does not parse (scheme, host, port,
//! database, protocol), and the address as it may be shown — never with a
//! password. Pure: no I/O.

use redis::IntoConnectionInfo;

/// An address that does not parse: as it may be shown, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadAddress {
    /// The address with any password replaced by `***`.
    pub(crate) shown: String,
    /// What is wrong with it, in words.
    pub(crate) reason: String,
}

/// The schemes the redis crate connects to.
const SCHEMES: [&str; 7] = [
    "redis",
    "rediss",
    "valkey",
    "valkeys",
    "unix",
    "redis+unix",
    "valkey+unix",
];

/// Parses `text` as a node address (`redis://[user[:password]@]host[:port][/db]`,
/// `rediss://…`, `unix:///path`), or says why it cannot be one.
pub(crate) fn parse(text: &str) -> Result<redis::ConnectionInfo, BadAddress> {
    let bad = |reason: String| BadAddress {
        shown: redacted(text),
        reason,
    };
    let url = url::Url::parse(text.trim()).map_err(|e| bad(url_reason(e)))?;
    let scheme = url.scheme();
    if !SCHEMES.contains(&scheme) {
        return Err(bad(format!(
            "unknown scheme {scheme:?}: use redis://host:port, rediss://host:port (TLS) \
             or unix:///path/to/socket"
        )));
    }
    if !scheme.ends_with("unix") {
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("no host: write redis://host:port".to_owned()));
        }
        if url.port() == Some(0) {
            return Err(bad("port 0: a node's port is 1 to 65535".to_owned()));
        }
        let db = url.path().trim_matches('/');
        if !db.is_empty() && db.parse::<i64>().is_err() {
            return Err(bad(format!(
                "database {db:?} is not a number: write redis://host:port/0"
            )));
        }
    }
    url.into_connection_info()
        .map_err(|e| bad(format!("not a usable Redis address: {}", redis_reason(&e))))
}

/// The url crate's reason, for a node address.
fn url_reason(e: url::ParseError) -> String {
    match e {
        url::ParseError::RelativeUrlWithoutBase => {
            "no scheme: write redis://host:port (or rediss://, unix://)".to_owned()
        }
        url::ParseError::InvalidPort => "invalid port: a node's port is 1 to 65535".to_owned(),
        url::ParseError::EmptyHost => "no host: write redis://host:port".to_owned(),
        other => format!("invalid host: {other}"),
    }
}

/// The redis crate's reason, without its error kind's name.
fn redis_reason(e: &redis::RedisError) -> String {
    e.to_string()
        .replace(" - InvalidClientConfig", "")
        .replace("- InvalidClientConfig", "")
}

/// `text` with the password hidden: the part of the user information after
/// the first `:` (`redis://user:***@host`), and a unix URL's `pass=` query
/// value. Whatever stands before the last `@` is user information, so a
/// password with an unescaped `@` is hidden too.
pub(crate) fn redacted(text: &str) -> String {
    let (scheme, rest) = match text.find("://") {
        Some(i) => text.split_at(i + 3),
        None => ("", text),
    };
    let rest = match rest.rfind('@') {
        Some(at) => {
            let (user, host) = rest.split_at(at);
            match user.split_once(':') {
                Some((name, _)) => format!("{name}:***{host}"),
                None => rest.to_owned(),
            }
        }
        None => rest.to_owned(),
    };
    let rest = hide_query(&rest, "pass=");
    format!("{scheme}{rest}")
}

/// `text` with the value of every `name` query pair replaced by `***`.
fn hide_query(text: &str, name: &str) -> String {
    let Some((head, query)) = text.split_once('?') else {
        return text.to_owned();
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.strip_prefix(name) {
            Some(_) => format!("{name}***"),
            None => pair.to_owned(),
        })
        .collect();
    format!("{head}?{}", pairs.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(text: &str) -> String {
        let err = parse(text).expect_err(text);
        assert!(!err.shown.contains("hunter2"), "{err:?}");
        err.reason
    }

    #[test]
    fn addresses_that_parse() {
        for text in [
            "redis://127.0.0.1:7001",
            "redis://user:pw@localhost:7002/3",
            "redis://[::1]:7003",
            "valkey://cache",
            "unix:///run/redis.sock",
            "redis://127.0.0.1:7001/?protocol=resp3",
        ] {
            assert!(parse(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn each_bad_address_says_what_is_wrong() {
        assert!(reason("not a url").starts_with("no scheme"));
        assert!(reason("localhost:7001").starts_with("unknown scheme \"localhost\""));
        assert!(reason("http://127.0.0.1:7001").starts_with("unknown scheme \"http\""));
        assert!(reason("redis://:hunter2@127.0.0.1:notaport").starts_with("invalid port"));
        assert!(reason("redis://127.0.0.1:70000").starts_with("invalid port"));
        assert!(reason("redis://127.0.0.1:0").starts_with("port 0"));
        assert!(reason("redis://").starts_with("no host"));
        assert!(reason("redis://:hunter2@").starts_with("no host"));
        assert!(reason("redis://[::1:7001").starts_with("invalid host"));
        assert!(reason("redis://h:1/zero").starts_with("database \"zero\""));
        let protocol = reason("redis://h:1/?protocol=9");
        assert!(protocol.contains("protocol"), "{protocol}");
        assert!(!protocol.contains("InvalidClientConfig"), "{protocol}");
    }

    #[test]
    fn passwords_are_never_shown() {
        let cases = [
            ("redis://:hunter2@h:1", "redis://:***@h:1"),
            ("redis://me:hunter2@h:x", "redis://me:***@h:x"),
            ("redis://me:hun@ter2@h:1", "redis://me:***@h:1"),
            ("redis://me@h:1", "redis://me@h:1"),
            (
                "unix:///s.sock?pass=hunter2&db=1",
                "unix:///s.sock?pass=***&db=1",
            ),
            ("redis://h:1", "redis://h:1"),
            ("garbage", "garbage"),
        ];
        for (text, shown) in cases {
            assert_eq!(redacted(text), shown, "{text}");
        }
    }
}
