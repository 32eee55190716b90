//! The builder, its defaults, and validation of nodes, TTLs and resources.

use std::collections::HashSet;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::quorum;

/// Default per-node response timeout.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);
/// Default per-node connection timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Default drift factor (the specification's 1 %).
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;
/// Default number of retries after the first attempt of [`acquire`](crate::Redlock::acquire).
pub const DEFAULT_RETRY_COUNT: u32 = 3;
/// Default lower bound of the random delay between attempts.
pub const DEFAULT_RETRY_DELAY_MIN: Duration = Duration::ZERO;
/// Default upper bound of the random delay between attempts.
pub const DEFAULT_RETRY_DELAY_MAX: Duration = Duration::from_millis(200);
/// Largest TTL accepted (one year): far beyond any sensible lease, and far
/// from the overflow of Redis' millisecond expiry times.
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// Tuning shared by every operation of a [`Redlock`](crate::Redlock).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) node_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) retry_count: u32,
    pub(crate) retry_delay_min: Duration,
    pub(crate) retry_delay_max: Duration,
    pub(crate) retry_deadline: Option<Duration>,
    pub(crate) restart_quarantine: Option<Duration>,
    pub(crate) fast_handoff: bool,
    /// Root CA and client certificate for `rediss://` nodes.
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<redis::TlsCertificates>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            node_timeout: DEFAULT_NODE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            retry_count: DEFAULT_RETRY_COUNT,
            retry_delay_min: DEFAULT_RETRY_DELAY_MIN,
            retry_delay_max: DEFAULT_RETRY_DELAY_MAX,
            retry_deadline: None,
            restart_quarantine: None,
            fast_handoff: true,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl Config {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.node_timeout.is_zero() {
            return Err(Error::invalid("node timeout must be larger than zero"));
        }
        if self.connect_timeout.is_zero() {
            return Err(Error::invalid("connect timeout must be larger than zero"));
        }
        if !self.drift_factor.is_finite() || !(0.0..1.0).contains(&self.drift_factor) {
            return Err(Error::invalid(format!(
                "drift factor must be in [0, 1), got {}",
                self.drift_factor
            )));
        }
        if self.retry_delay_min > self.retry_delay_max {
            return Err(Error::invalid(format!(
                "retry delay minimum {:?} is larger than its maximum {:?}",
                self.retry_delay_min, self.retry_delay_max
            )));
        }
        Ok(())
    }

    /// Checks a TTL and returns it truncated to whole milliseconds together
    /// with its drift allowance.
    pub(crate) fn check_ttl(&self, ttl: Duration) -> Result<(Duration, Duration)> {
        if ttl > MAX_TTL {
            return Err(Error::invalid(format!(
                "TTL {ttl:?} is larger than the maximum {MAX_TTL:?}"
            )));
        }
        let whole = quorum::whole_millis(ttl);
        let drift = quorum::drift(whole, self.drift_factor);
        if whole <= drift {
            return Err(Error::invalid(format!(
                "TTL {ttl:?} must be larger than its clock-drift allowance {drift:?} \
                 (TTL × {} + 2 ms)",
                self.drift_factor
            )));
        }
        Ok((whole, drift))
    }
}

/// A parsed node address: what is needed to connect, and the identity used
/// to detect the same node listed twice.
#[derive(Debug, Clone)]
pub(crate) struct NodeSpec {
    pub(crate) info: redis::ConnectionInfo,
    /// `host:port/db`, with the host lower-cased; never holds a password.
    pub(crate) label: String,
    /// Certificates for a `rediss://` node (set by the builder).
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<redis::TlsCertificates>,
}

/// Parses and checks the node list: at least one node, every URL valid, no
/// node twice (the same host, port and database would vote twice).
pub(crate) fn parse_nodes(urls: &[String]) -> Result<Vec<NodeSpec>> {
    if urls.is_empty() {
        return Err(Error::invalid("no Redis nodes given"));
    }
    let mut seen = HashSet::new();
    let mut specs = Vec::with_capacity(urls.len());
    for url in urls {
        let info = redis::IntoConnectionInfo::into_connection_info(url.as_str())
            .map_err(|e| Error::invalid(format!("cannot parse node URL {}: {e}", redact(url))))?;
        let label = label(&info);
        if !seen.insert(label.clone()) {
            return Err(Error::invalid(format!(
                "node {label} is listed twice; it would vote twice"
            )));
        }
        specs.push(NodeSpec {
            info,
            label,
            #[cfg(feature = "tls")]
            tls: None,
        });
    }
    Ok(specs)
}

fn label(info: &redis::ConnectionInfo) -> String {
    let db = info.redis_settings().db();
    match info.addr() {
        redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{}:{port}/{db}", bracketed(&host.to_ascii_lowercase()))
        }
        redis::ConnectionAddr::Unix(path) => format!("unix:{}/{db}", path.display()),
        other => format!("{other}/{db}"),
    }
}

/// An IPv6 address in brackets (`[::1]`), so that the port stays apart.
fn bracketed(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// A URL with any password replaced, for error messages: the user info of
/// `redis://user:pass@host` and the `pass=` / `password=` query values of
/// `unix:///path?pass=…`.
pub(crate) fn redact(url: &str) -> String {
    let url = match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    };
    let Some((base, query)) = url.split_once('?') else {
        return url;
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if name == "pass" || name == "password" => format!("{name}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn nodes_must_be_given_parsable_and_distinct() {
        assert!(parse_nodes(&[]).unwrap_err().is_invalid_input());
        let err = parse_nodes(&urls(&["redis://:secret@host:notaport"])).unwrap_err();
        assert!(err.is_invalid_input());
        assert!(!err.to_string().contains("secret"), "{err}");
        let err = parse_nodes(&urls(&["unix:///tmp/r.sock?db=x&pass=secret"])).unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
        assert!(err.to_string().contains("pass=***"), "{err}");
        let builder = crate::Redlock::builder(["redis://:secret@h:1", "unix:///s?pass=secret"]);
        assert!(!format!("{builder:?}").contains("secret"), "{builder:?}");
        let err = parse_nodes(&urls(&[
            "redis://127.0.0.1:7001",
            "redis://127.0.0.1:7001/0",
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("listed twice"), "{err}");
        let ok = parse_nodes(&urls(&[
            "redis://127.0.0.1:7001",
            "redis://127.0.0.1:7001/1",
            "redis://user:pw@LOCALHOST:7002",
        ]))
        .unwrap();
        assert_eq!(ok[0].label, "127.0.0.1:7001/0");
        assert_eq!(ok[1].label, "127.0.0.1:7001/1");
        assert_eq!(ok[2].label, "localhost:7002/0");
        let v6 = parse_nodes(&urls(&["redis://[::1]:7003"])).unwrap();
        assert_eq!(v6[0].label, "[::1]:7003/0");
    }

    #[test]
    fn ttl_must_exceed_drift_and_stay_bounded() {
        let c = Config::default();
        assert!(c.check_ttl(Duration::ZERO).unwrap_err().is_invalid_input());
        assert!(c.check_ttl(Duration::from_millis(1)).is_err());
        assert!(c.check_ttl(Duration::from_millis(2)).is_err());
        let (ttl, drift) = c.check_ttl(Duration::from_micros(3_900)).unwrap();
        assert_eq!(ttl, Duration::from_millis(3));
        assert!(drift < ttl);
        assert!(c.check_ttl(Duration::from_millis(u64::MAX)).is_err());
        assert!(c.check_ttl(Duration::MAX).is_err());
        assert!(c.check_ttl(MAX_TTL).is_ok());
    }

    #[test]
    fn config_rejects_nonsense() {
        let bad = [
            Config {
                node_timeout: Duration::ZERO,
                ..Config::default()
            },
            Config {
                drift_factor: f64::NAN,
                ..Config::default()
            },
            Config {
                drift_factor: 1.0,
                ..Config::default()
            },
            Config {
                retry_delay_min: Duration::from_secs(1),
                ..Config::default()
            },
        ];
        for c in bad {
            assert!(c.validate().unwrap_err().is_invalid_input(), "{c:?}");
        }
        assert!(Config::default().validate().is_ok());
    }
}
