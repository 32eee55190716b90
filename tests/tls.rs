//! TLS (feature `tls`): real `redis-server` nodes serving TLS with a CA and
//! certificates generated here; the client connects with `rediss://`,
//! trusting that CA through `Builder::tls_root_ca`. A client trusting
//! another CA, or the system roots, is refused per node; with
//! `tls-auth-clients yes` the client certificate is required; and the fault
//! proxy works on TLS traffic too. A Sentinel group and a Redis Cluster
//! serving TLS are members (`rediss+sentinel://`, `rediss+cluster://`)
//! trusting that CA too.

use quorumlock_testkit as support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use quorumlock::{Durability, NodeFailureKind, Retry};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use support::{
    unique, Cluster, Fault, GroupOptions, NodeOptions, OneAttempt, SentinelGroup, ShardedCluster,
};

const TTL: Duration = Duration::from_secs(10);

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
}

/// A certificate and its key, both PEM.
struct Leaf {
    cert: String,
    key: String,
}

fn leaf(issuer: &CertifiedIssuer<'static, KeyPair>, usages: &[ExtendedKeyUsagePurpose]) -> Leaf {
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, "quorumlock test");
    params.extended_key_usages = usages.to_vec();
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, issuer).expect("sign");
    Leaf {
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}

/// The test PKI: a CA, a server and a client certificate from it, and an
/// unrelated CA.
struct Pki {
    dir: tempfile::TempDir,
    ca: String,
    other_ca: String,
    client: Leaf,
}

impl Pki {
    fn new() -> Self {
        let ca = ca("quorumlock test CA");
        // The servers' certificate is their client certificate too: on a
        // cluster's bus, and to a Sentinel group's servers.
        let server = leaf(
            &ca,
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        );
        let client = leaf(&ca, &[ExtendedKeyUsagePurpose::ClientAuth]);
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text);
        write("ca.crt", &ca.pem()).expect("write");
        write("server.crt", &server.cert).expect("write");
        write("server.key", &server.key).expect("write");
        Self {
            ca: ca.pem(),
            other_ca: self::ca("someone else's CA").pem(),
            client,
            dir,
        }
    }

    fn path(&self, name: &str) -> String {
        let p: PathBuf = Path::new(self.dir.path()).join(name);
        p.to_string_lossy().into_owned()
    }

    fn node_options(&self, auth_clients: bool) -> NodeOptions {
        NodeOptions {
            tls_args: Some(vec![
                "--tls-cert-file".into(),
                self.path("server.crt"),
                "--tls-key-file".into(),
                self.path("server.key"),
                "--tls-ca-cert-file".into(),
                self.path("ca.crt"),
                "--tls-auth-clients".into(),
                if auth_clients { "yes" } else { "no" }.into(),
            ]),
            ..NodeOptions::default()
        }
    }
}

fn builder(urls: &[String]) -> quorumlock::Builder {
    quorumlock::Builder::new(urls.to_vec())
        .node_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(2))
        .one_attempt()
}

async fn refused_over_tls(builder: quorumlock::Builder) -> String {
    let redlock = builder.build().await.expect("build");
    let err = redlock
        .try_acquire(unique("tls"), TTL)
        .await
        .expect_err("the server's certificate is not trusted");
    assert!(err.is_unavailable(), "{err}");
    assert!(
        err.node_failures()
            .iter()
            .all(|f| matches!(f.kind, NodeFailureKind::Connection(_))),
        "{err}"
    );
    err.to_string()
}

#[tokio::test]
async fn rediss_with_the_test_ca_works_and_other_cas_are_refused() {
    let pki = Pki::new();
    let mut cluster = Cluster::local_custom(3, &pki.node_options(false));
    let urls = cluster.urls();
    assert!(urls.iter().all(|u| u.starts_with("rediss://")), "{urls:?}");

    let redlock = builder(&urls)
        .tls_root_ca(pki.ca.as_bytes())
        .build()
        .await
        .expect("build");
    let name = unique("tls");
    let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
    assert!(
        cluster.held_on(&name, 3, Duration::from_secs(2)).await,
        "set over TLS"
    );
    lock.extend(TTL).await.expect("extend");
    lock.release().await.expect("release");
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await
    );

    let text = refused_over_tls(builder(&urls).tls_root_ca(pki.other_ca.as_bytes())).await;
    assert!(text.to_lowercase().contains("certificate"), "{text}");
    refused_over_tls(builder(&urls)).await;

    // The fault proxy relays TLS unchanged: a slow node still votes, a
    // blackholed one does not block the quorum.
    let proxied = cluster.proxied();
    let redlock = builder(&proxied)
        .tls_root_ca(pki.ca.as_bytes())
        .build()
        .await
        .expect("build");
    cluster
        .proxy(0)
        .set(Fault::latency(Duration::from_millis(20)));
    cluster.proxy(2).set(Fault::Blackhole);
    let lock = redlock
        .try_acquire(&name, TTL)
        .await
        .expect("acquire through proxies");
    lock.release().await.expect("release");
    cluster.heal_proxies();
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(5))
            .await
    );
}

#[tokio::test]
async fn mutual_tls_needs_the_client_certificate() {
    let pki = Pki::new();
    let cluster = Cluster::local_custom(3, &pki.node_options(true));
    let urls = cluster.urls();
    refused_over_tls(builder(&urls).tls_root_ca(pki.ca.as_bytes())).await;

    let redlock = builder(&urls)
        .tls_root_ca(pki.ca.as_bytes())
        .tls_client_auth(pki.client.cert.as_bytes(), pki.client.key.as_bytes())
        .build()
        .await
        .expect("build");
    let name = unique("mtls");
    let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
    assert!(cluster.held_on(&name, 3, Duration::from_secs(2)).await);
    lock.release().await.expect("release");
}

/// Locks through the member at `url` (a Sentinel group or a cluster
/// serving TLS, client certificates required) with the test CA and the
/// client certificate, and is refused with the system's roots.
async fn member_over_tls(url: String, pki: &Pki) {
    // A group waits for its replica; the cluster has none.
    let replicas = url
        .starts_with("rediss+sentinel://")
        .then_some(Durability::Replicas(1));
    let member = |url: &str| {
        builder(&[url.to_owned()])
            .durable_votes(replicas)
            .node_timeout(Duration::from_millis(500))
    };
    let redlock = member(&url)
        .tls_root_ca(pki.ca.as_bytes())
        .tls_client_auth(pki.client.cert.as_bytes(), pki.client.key.as_bytes())
        .build()
        .await
        .expect("build");
    let name = unique("tls");
    // The group's replica may still be syncing.
    let lock = redlock
        .lock(&name, TTL)
        .retry(Retry::Until(Duration::from_secs(10)))
        .acquire()
        .await
        .expect("acquire");
    lock.extend(TTL).await.expect("extend");
    lock.release().await.expect("release");
    let fenced = redlock
        .lock(&name, TTL)
        .fenced()
        .acquire()
        .await
        .expect("fenced acquire");
    fenced.release().await.expect("fenced release");

    let redlock = member(&url).build().await.expect("build");
    let err = redlock
        .try_acquire(unique("tls"), TTL)
        .await
        .expect_err("the servers' certificates are not trusted");
    assert!(err.is_unavailable(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_group_over_tls_takes_the_builders_certificates() {
    let pki = Pki::new();
    let options = GroupOptions {
        sentinels: 1,
        tls_args: pki.node_options(true).tls_args,
        ..GroupOptions::default()
    };
    let group = tokio::task::block_in_place(|| SentinelGroup::start(&unique("tls"), &options));
    let url = group.url();
    assert!(url.starts_with("rediss+sentinel://"), "{url}");
    member_over_tls(url, &pki).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls_takes_the_builders_certificates() {
    let pki = Pki::new();
    let cluster =
        tokio::task::block_in_place(|| ShardedCluster::start_with(2, 0, &pki.node_options(true)));
    let url = cluster.url();
    assert!(url.starts_with("rediss+cluster://"), "{url}");
    member_over_tls(url, &pki).await;
}
