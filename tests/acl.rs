//! The ACL lines of `docs/operations.md`, as written: a user with exactly
//! one line's rights runs its primitive — take, renew, status, a `SCRIPT
//! FLUSH`, release, fenced and not — with no denial in the ACL log. Then each
//! right is removed in turn: without a right the page calls required the
//! primitive fails, on `NOPERM` replies, and an acquire that fails so is
//! misconfigured (not retried as an outage); without one it calls optional
//! the primitive still runs. So a line that lacks a right, or lists one that
//! serves nothing, fails here — as does a page that lists a line for no
//! primitive or none for one.
//!
//! The same for the rights `docs/members.md` adds for members of several
//! servers: the servers' (a Sentinel group with durable votes, a cluster
//! with a slot half-migrated) and the sentinels' own user's.

use quorumlock_testkit as support;

use std::time::Duration;

use quorumlock::{Durability, Error, NodeView, Redlock};
use support::{unique, Cluster, GroupOptions, OneAttempt, SentinelGroup, ShardedCluster};

const PASSWORD: &str = "password";

/// Rights the page calls optional: each has a fallback.
fn optional(rule: &str) -> bool {
    rule.starts_with('&')
        || [
            "resetchannels",
            "+publish",
            "+subscribe",
            "+unsubscribe",
            "+script|load",
            "+ping",
            "+config|get",
        ]
        .contains(&rule)
}

/// A right the scripts call only when two fenced permits commit their
/// tokens in one round at once (`fence_commit.lua`), a race this test does
/// not stage: without it the run here still succeeds.
const RACE_ONLY: &str = "+getbit";

/// Every `ACL SETUSER` line of `page` (under `docs/`), split into its
/// rules (the user name first).
fn documented(page: &str) -> Vec<Vec<String>> {
    let path = format!("{}/docs/{page}", env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(&path).expect(&path);
    page.lines()
        .filter_map(|line| line.strip_prefix("ACL SETUSER "))
        .map(|rules| rules.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// Where a primitive's run stopped, and how.
struct Failed {
    step: &'static str,
    text: String,
    /// Some node refused with `NOPERM`.
    noperm: bool,
    misconfigured: bool,
}

fn at(step: &'static str) -> impl FnOnce(Error) -> Failed {
    move |error| Failed {
        step,
        text: error.to_string(),
        noperm: error
            .node_failures()
            .iter()
            .any(|f| f.kind.is_redis_error("NOPERM")),
        misconfigured: error.is_misconfigured() && !error.is_unavailable(),
    }
}

/// A status read that some node failed.
fn unread(status: &quorumlock::Status, step: &'static str) -> Result<(), Failed> {
    let failed: Vec<_> = status
        .nodes
        .iter()
        .filter_map(|(_, view)| match view {
            NodeView::Failed(f) => Some(f),
            _ => None,
        })
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(Failed {
        step,
        text: format!("{status}"),
        noperm: failed.iter().any(|f| f.kind.is_redis_error("NOPERM")),
        misconfigured: false,
    })
}

/// The primitive a user's line serves, run once end to end; `flush`
/// empties the servers' script caches (`SCRIPT FLUSH`).
async fn run(user: &str, redlock: &Redlock, flush: &dyn Fn()) -> Result<(), Failed> {
    let ttl = Duration::from_secs(5);
    match user {
        "locker" => {
            let name = unique("lock:acl");
            let lock = redlock
                .try_acquire(&name, ttl)
                .await
                .map_err(at("acquire"))?;
            lock.extend(ttl * 2).await.map_err(at("extend"))?;
            let status = redlock.status(&name).await;
            unread(&status, "status")?;
            flush();
            lock.release().await.map_err(at("release"))?;
            let fenced = redlock
                .lock(&name, ttl)
                .fenced()
                .acquire()
                .await
                .map_err(at("fenced acquire"))?;
            fenced.extend(ttl * 2).await.map_err(at("fenced extend"))?;
            fenced.release().await.map_err(at("fenced release"))?;
            // One hash tag: a cluster member takes them in one slot.
            let tag = unique("acl");
            let (a, b) = (format!("lock:{{{tag}}}:a"), format!("lock:{{{tag}}}:b"));
            let both = redlock
                .lock_all([&a, &b], ttl)
                .acquire()
                .await
                .map_err(at("acquire two"))?;
            both.release().await.map_err(at("release two"))?;
        }
        "permits" => {
            let name = unique("acl");
            let permit = redlock
                .semaphore(&name, 3, ttl)
                .take(2)
                .fenced()
                .acquire()
                .await
                .map_err(at("take 2 fenced"))?;
            permit.extend(ttl * 2).await.map_err(at("extend"))?;
            let status = redlock
                .semaphore_status(&name, 3)
                .await
                .map_err(at("status"))?;
            for slot in &status.slots {
                unread(slot, "status")?;
            }
            flush();
            permit.release().await.map_err(at("release"))?;
            let one = redlock
                .semaphore(&name, 3, ttl)
                .acquire()
                .await
                .map_err(at("take 1"))?;
            one.release().await.map_err(at("release 1"))?;
        }
        "elector" => {
            let name = unique("acl");
            let mut leadership = redlock
                .campaign(&name, ttl)
                .value("a")
                .lead()
                .await
                .map_err(at("lead"))?;
            leadership.proclaim("b").await.map_err(at("proclaim"))?;
            let leader = redlock.leader(&name).await.map_err(at("leader"))?;
            assert_eq!(leader.map(|l| l.value), Some(b"b".to_vec()));
            leadership.extend(ttl * 2).await.map_err(at("extend"))?;
            flush();
            leadership.resign().await.map_err(at("resign"))?;
        }
        "rwlock" => {
            let name = unique("doc:acl");
            let reader = redlock
                .read(&name, ttl)
                .acquire()
                .await
                .map_err(at("acquire read"))?;
            reader.extend(ttl * 2).await.map_err(at("extend read"))?;
            let status = redlock.rwlock_status(&name).await.map_err(at("status"))?;
            unread(&status.writer, "status")?;
            flush();
            reader.release().await.map_err(at("release read"))?;
            let writer = redlock
                .write(&name, ttl)
                .fenced()
                .acquire()
                .await
                .map_err(at("acquire write"))?;
            writer.extend(ttl * 2).await.map_err(at("extend write"))?;
            flush();
            writer.release().await.map_err(at("release write"))?;
        }
        other => panic!("docs/operations.md has an ACL line for {other:?}, which no test runs"),
    }
    Ok(())
}

/// Sets `rules` (a user name first) on every node, from a clean user.
fn set_user(cluster: &Cluster, rules: &[String]) {
    set_user_on(
        &mut (0..cluster.len())
            .map(|i| cluster.conn(i))
            .collect::<Vec<_>>(),
        rules,
    );
}

/// Sets `rules` (a user name first) on the servers of `conns`, from a
/// clean user, and empties their ACL logs.
fn set_user_on(conns: &mut [redis::Connection], rules: &[String]) {
    for conn in conns {
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&rules[0])
            .arg("reset")
            .arg(&rules[1..])
            .query(conn)
            .expect("ACL SETUSER");
        let _: () = redis::cmd("ACL")
            .arg("LOG")
            .arg("RESET")
            .query(conn)
            .expect("ACL LOG RESET");
    }
}

/// What the servers of `conns` denied since their logs were emptied.
fn denied(conns: &mut [redis::Connection]) -> Vec<redis::Value> {
    let mut all = Vec::new();
    for conn in conns {
        let log: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(conn).expect("ACL LOG");
        all.extend(log);
    }
    all
}

async fn client(cluster: &Cluster, user: &str) -> Redlock {
    // With restart quarantine, as the page advises: its uptime reads need
    // `+info`.
    quorumlock::Builder::new(cluster.urls_as(user, PASSWORD))
        .node_timeout(Duration::from_secs(2))
        .one_attempt()
        .restart_quarantine(Some(Duration::from_millis(500)))
        .build()
        .await
        .expect("build")
}

#[tokio::test]
async fn each_documented_acl_line_is_enough_and_each_required_right_is_needed() {
    let cluster = Cluster::local(3);
    // Restart quarantine reads each node's uptime in whole seconds.
    for i in 0..cluster.len() {
        cluster.wait_uptime(i, Duration::from_secs(1)).await;
    }
    let flush = || (0..cluster.len()).for_each(|i| cluster.flush_scripts(i));
    let lines = documented("operations.md");
    let users: Vec<&str> = lines.iter().map(|l| l[0].as_str()).collect();
    assert_eq!(
        users,
        ["locker", "permits", "elector", "rwlock"],
        "the page's ACL lines"
    );
    for line in &lines {
        let user = line[0].as_str();
        assert!(line.contains(&format!(">{PASSWORD}")), "{user}: {line:?}");

        set_user(&cluster, line);
        let redlock = client(&cluster, user).await;
        if let Err(Failed { step, text, .. }) = run(user, &redlock, &flush).await {
            panic!("{user}: the documented line fails at {step}: {text}");
        }
        for i in 0..cluster.len() {
            let denied: Vec<redis::Value> = cluster.exec(i, redis::cmd("ACL").arg("LOG"));
            assert!(denied.is_empty(), "{user}: node {i} denied: {denied:?}");
        }

        // One right less.
        let rights = line
            .iter()
            .skip(1)
            .filter(|r| !matches!(r.as_str(), "on" | "-@all") && !r.starts_with('>'));
        for right in rights {
            let less: Vec<String> = line.iter().filter(|r| *r != right).cloned().collect();
            set_user(&cluster, &less);
            let redlock = client(&cluster, user).await;
            let outcome = run(user, &redlock, &flush).await;
            support::report(&format!(
                "{user} without {right}: {}",
                match &outcome {
                    Ok(()) => "runs".to_owned(),
                    Err(f) => format!("fails at {}: {}", f.step, f.text),
                }
            ));
            match outcome {
                Ok(()) => assert!(
                    optional(right) || right == RACE_ONLY,
                    "{user}: runs without {right}, which the page calls required"
                ),
                Err(Failed {
                    step,
                    text,
                    noperm,
                    misconfigured,
                }) => {
                    assert!(
                        !optional(right),
                        "{user}: fails without {right}, which the page calls optional: \
                         at {step}: {text}"
                    );
                    assert!(noperm, "{user} without {right}: at {step}: {text}");
                    // A fenced permit's commit refused by the ACL on some
                    // nodes may meet a plain no on another (a round already
                    // committed there): the attempt then reads as contended,
                    // with the NOPERM among its failures (asserted above).
                    let acquiring =
                        step.starts_with("acquire") || step.starts_with("take") || step == "lead";
                    if acquiring && step != "take 2 fenced" {
                        assert!(misconfigured, "{user} without {right}: {text}");
                    }
                }
            }
        }
    }
}

/// A Sentinel group (one replica, one sentinel) and a cluster of two
/// shards, each a member of its own client logged in as `locker`.
struct Members {
    group: SentinelGroup,
    shards: ShardedCluster,
}

impl Members {
    fn servers(&self) -> Vec<redis::Connection> {
        let group = self
            .group
            .data_ports()
            .into_iter()
            .map(|p| self.group.conn(p));
        let shards = self.shards.ports().into_iter().map(|p| self.shards.conn(p));
        group.chain(shards).collect()
    }

    /// Side connections to the sentinels, as a user `admin` of all
    /// rights (created first: `default` is the user under test there).
    fn sentinels(&self) -> Vec<redis::Connection> {
        let urls = self.group.sentinel_urls();
        let open = |url: &String| {
            let admin = url.replacen("redis://", "redis://admin:admin@", 1);
            if let Ok(conn) = redis::Client::open(admin.as_str())?.get_connection() {
                return Ok(conn);
            }
            let mut conn = redis::Client::open(url.as_str())?.get_connection()?;
            redis::cmd("ACL")
                .arg(&["SETUSER", "admin", "on", ">admin", "+@all", "~*", "&*"])
                .query::<()>(&mut conn)?;
            redis::Client::open(admin.as_str())?.get_connection()
        };
        urls.iter().map(|u| open(u).expect("sentinel")).collect()
    }

    fn flush(&self) {
        for mut conn in self.servers() {
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query(&mut conn)
                .expect("SCRIPT FLUSH");
        }
    }

    /// The group's client (durable votes: `WAIT 1`) and the cluster's.
    async fn clients(&self) -> [(&'static str, Redlock); 2] {
        let url = |url: String, kind: &str| {
            url.replacen(
                &format!("redis+{kind}://"),
                &format!("redis+{kind}://locker:{PASSWORD}@"),
                1,
            )
        };
        let builder = |url: String| {
            quorumlock::Builder::new([url])
                .node_timeout(Duration::from_secs(2))
                .one_attempt()
        };
        let group = builder(url(self.group.url(), "sentinel"))
            .durable_votes(Some(Durability::Replicas(1)))
            .build()
            .await
            .expect("build");
        let cluster = builder(url(self.shards.url(), "cluster"))
            .restart_quarantine(Some(Duration::from_millis(1)))
            .build()
            .await
            .expect("build");
        [("sentinel group", group), ("cluster", cluster)]
    }

    /// The `locker` primitive on each member, and on the cluster a lock
    /// whose slot is half-migrated (`ASK`, then `ASKING`): the first
    /// failure, named after the member.
    async fn run(&self) -> Result<(), (&'static str, Failed)> {
        let flush = || self.flush();
        for (member, redlock) in self.clients().await {
            let outcome = tokio::time::timeout(Duration::from_secs(60), async {
                run("locker", &redlock, &flush).await?;
                if member == "cluster" {
                    self.asked(&redlock).await?;
                }
                Ok(())
            })
            .await
            .unwrap_or_else(|_| panic!("{member}: the run hangs"));
            outcome.map_err(|f| (member, f))?;
        }
        Ok(())
    }

    /// Takes and releases a lock whose slot is being moved, none of its
    /// keys moved yet: the source sends it on with `ASK`.
    async fn asked(&self, redlock: &Redlock) -> Result<(), Failed> {
        let name = unique("lock:ask");
        let slot = self.shards.slot_of(name.as_bytes());
        let from = self.shards.master_of(slot);
        let masters = self.shards.masters().into_iter();
        let to = masters
            .into_iter()
            .find(|&m| m != from)
            .expect("two masters");
        let migration = tokio::task::block_in_place(|| self.shards.begin_migration(slot, to));
        let outcome = async {
            let lock = redlock
                .try_acquire(&name, Duration::from_secs(5))
                .await
                .map_err(at("acquire asked"))?;
            lock.release().await.map_err(at("release asked"))
        }
        .await;
        tokio::task::block_in_place(|| self.shards.finish_migration(migration));
        outcome
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_of_several_servers_need_the_rights_members_md_adds() {
    let (group, shards) = std::thread::scope(|s| {
        let options = GroupOptions {
            sentinels: 1,
            ..GroupOptions::default()
        };
        let group = s.spawn(move || SentinelGroup::start(&unique("acl"), &options));
        let shards = s.spawn(|| ShardedCluster::start(2, 0));
        (
            group.join().expect("group"),
            shards.join().expect("cluster"),
        )
    });
    let members = Members { group, shards };
    let locker = documented("operations.md").swap_remove(0);
    assert_eq!(locker[0], "locker");
    let page = documented("members.md");
    let added = |user: &str| -> Vec<String> {
        let lines = page.iter().filter(|l| l[0] == user);
        lines.flat_map(|l| l[1..].to_vec()).collect()
    };
    // The servers' user: `locker`'s line plus what the page adds; the
    // sentinels' `default` user: the page's line, whole.
    let servers = added("locker");
    let sentinel_user: Vec<String> = std::iter::once("default".to_owned())
        .chain(added("default"))
        .collect();
    let sentinels: Vec<String> = sentinel_user[1..]
        .iter()
        .filter(|r| !matches!(r.as_str(), "on" | "nopass" | "-@all"))
        .cloned()
        .collect();
    assert!(!servers.is_empty() && !sentinels.is_empty(), "{page:?}");
    let with = |extra: &[String]| -> Vec<String> { locker.iter().chain(extra).cloned().collect() };

    set_user_on(&mut members.servers(), &with(&servers));
    set_user_on(&mut members.sentinels(), &sentinel_user);
    if let Err((member, Failed { step, text, .. })) = members.run().await {
        panic!("{member}: the documented rights fail at {step}: {text}");
    }
    let denials = denied(&mut members.servers());
    assert!(denials.is_empty(), "servers denied: {denials:?}");
    let denials = denied(&mut members.sentinels());
    assert!(denials.is_empty(), "sentinels denied: {denials:?}");

    // One right less, on the servers, then on the sentinels.
    let cases = servers
        .iter()
        .map(|r| (r, true))
        .chain(sentinels.iter().map(|r| (r, false)));
    for (right, on_servers) in cases {
        let less = |rights: &[String]| -> Vec<String> {
            rights.iter().filter(|r| *r != right).cloned().collect()
        };
        if on_servers {
            set_user_on(&mut members.servers(), &with(&less(&servers)));
        } else {
            let mut user = sentinel_user.clone();
            user.retain(|r| r != right);
            set_user_on(&mut members.sentinels(), &user);
        }
        let outcome = members.run().await;
        support::report(&format!(
            "members without {right}: {}",
            match &outcome {
                Ok(()) => "run".to_owned(),
                Err((member, f)) => format!("{member} fails at {}: {}", f.step, f.text),
            }
        ));
        // The page's one optional right: `INFO replication` stands in
        // for a server's `ROLE` (a sentinel's is required).
        let optional = on_servers && right == "+role";
        match outcome {
            Ok(()) => assert!(optional, "members run without {right}"),
            Err((member, f)) => {
                assert!(
                    !optional,
                    "{member} fails without {right}: at {}: {}",
                    f.step, f.text
                );
                assert!(
                    f.misconfigured || !f.step.starts_with("acquire"),
                    "{member} without {right}: {}",
                    f.text
                );
                assert!(
                    f.text.contains("NOPERM") || f.noperm,
                    "{member} without {right}: {}",
                    f.text
                );
            }
        }
        set_user_on(&mut members.servers(), &with(&servers));
        set_user_on(&mut members.sentinels(), &sentinel_user);
    }
}
