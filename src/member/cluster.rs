//! A Redis Cluster as one member: which master serves each hash slot.
//!
//! The table is read with `CLUSTER SLOTS` (from a known master, else from
//! the seeds) when the member first sends, after a master's connection
//! broke, and is corrected slot by slot by `MOVED` replies. Each master is
//! a shard with its own restart quarantine: a replica promoted by a
//! failover (it reads as promoted since it started) does not vote before
//! the quarantine has passed since this client first read it, and a
//! master a `MOVED` sent away from is read again before it next votes
//! (`docs/members.md`).
//!
//! The redis crate's cluster client is not used: it routes keyless
//! commands (the `run_id` probe behind a vote) to any node, retries a
//! command on another node by itself, and keeps which master answered to
//! itself — what restart quarantine needs to know about every vote.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use redis::{Client, ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, Value};

use crate::keys::hash_slot::SLOTS;
use crate::member::link::{Shard, Target};
use crate::node::admission::{self, Gate};

/// One cluster member's slot table and shards.
pub(crate) struct ClusterMap {
    /// The addresses given, `host:port`, and their clients.
    seeds: Vec<(String, Client)>,
    /// The first seed's client: for subscriptions, and the settings of
    /// every server the table names.
    seed: Client,
    connect_timeout: Duration,
    gate: Arc<Gate>,
    table: Mutex<Table>,
    /// One reading of the table at a time.
    reading: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Table {
    /// The master of each slot, by index into `shards`.
    slots: Vec<Option<Arc<Shard>>>,
    /// Every server sent to so far, by `host:port`.
    shards: HashMap<String, Arc<Shard>>,
    /// The table must be read (again) before the next command.
    stale: bool,
}

impl ClusterMap {
    /// The cluster reached through `seeds` (`host:port` and client, at
    /// least one); nothing is read before the first command.
    pub(crate) fn new(
        seeds: Vec<(String, Client)>,
        connect_timeout: Duration,
        gate: Arc<Gate>,
    ) -> Result<Self, RedisError> {
        let no_seed = (
            ErrorKind::InvalidClientConfig,
            "a cluster member needs a seed address",
        );
        let seed = seeds.first().ok_or(no_seed)?.1.clone();
        Ok(Self {
            seed,
            seeds,
            connect_timeout,
            gate,
            table: Mutex::new(Table {
                stale: true,
                ..Table::default()
            }),
            reading: tokio::sync::Mutex::new(()),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The master serving `slot`, reading the table first when it is
    /// stale or has no master for it.
    pub(crate) async fn shard(&self, slot: u16) -> Result<Arc<Shard>, RedisError> {
        if let Some(shard) = self.known(slot) {
            return Ok(shard);
        }
        self.read().await?;
        self.known(slot).ok_or_else(|| {
            let detail = format!("slot {slot}: the cluster's table names no master for it");
            RedisError::from((ErrorKind::Client, "no master serves the slot", detail))
        })
    }

    /// The master serving `slot`, when the table is not stale.
    pub(crate) fn known(&self, slot: u16) -> Option<Arc<Shard>> {
        let table = self.table();
        let shard = table.slots.get(usize::from(slot)).filter(|_| !table.stale);
        shard.cloned().flatten()
    }

    /// Every master of the table (read first if stale).
    pub(crate) async fn masters(&self) -> Result<Vec<Arc<Shard>>, RedisError> {
        self.read().await?;
        Ok(self.listed())
    }

    /// Every master the table names now, once each.
    fn listed(&self) -> Vec<Arc<Shard>> {
        let table = self.table();
        let mut masters: Vec<Arc<Shard>> = Vec::new();
        for shard in table.slots.iter().flatten() {
            if !masters.iter().any(|m| Arc::ptr_eq(m, shard)) {
                masters.push(shard.clone());
            }
        }
        masters
    }

    /// The shard at `addr` (`host:port`, made on first use) that a
    /// redirection names; with `moved` (a `MOVED` reply), the master of
    /// `slot` from now on.
    pub(crate) fn redirected(&self, addr: &str, slot: u16, moved: bool) -> Arc<Shard> {
        let mut table = self.table();
        let shard = self.shard_in(&mut table, addr);
        if let Some(entry) = table.slots.get_mut(usize::from(slot)).filter(|_| moved) {
            *entry = Some(shard.clone());
        }
        shard
    }

    fn shard_in(&self, table: &mut Table, addr: &str) -> Arc<Shard> {
        if let Some(shard) = table.shards.get(addr) {
            return shard.clone();
        }
        // An address that is not `host:port` never comes from a server: it
        // stands for the first seed, whose answers redirect again (and
        // the redirections are bounded).
        let client = client_at(self.seed.get_connection_info(), addr);
        let target = Target::Server(Box::new(client.unwrap_or_else(|| self.seed.clone())));
        let shard = Shard::new(addr, target, self.connect_timeout, self.gate.clone());
        table.shards.insert(addr.to_owned(), shard.clone());
        shard
    }

    /// Read the table again before the next command.
    pub(crate) fn stale(&self) {
        self.table().stale = true;
    }

    /// The first seed's server, for subscriptions.
    pub(crate) fn seed(&self) -> Target {
        Target::Server(Box::new(self.seed.clone()))
    }

    /// When the table is stale, reads `CLUSTER SLOTS` from a master known
    /// to serve slots, else from each seed in turn, on a connection of its
    /// own (the table is not read on a connection that carries votes), and
    /// installs it. Boxed, as the connect inside it is a deep future.
    fn read(&self) -> BoxFuture<'_, Result<(), RedisError>> {
        Box::pin(async move {
            let _reading = self.reading.lock().await;
            if !self.table().stale {
                return Ok(());
            }
            // The masters known, then the seeds (reached as given: a seed
            // is no shard until the table names it a master).
            let known = self.listed().into_iter();
            let known = known.map(|shard| (shard.addr.to_string(), shard.target.clone()));
            let seeds = self.seeds.iter();
            let seeds = seeds.map(|(addr, c)| (addr.clone(), Target::Server(Box::new(c.clone()))));
            let asked: Vec<(String, Target)> = known.chain(seeds).collect();
            let slots = redis::cmd("CLUSTER").arg("SLOTS").clone();
            let unreadable =
                |what| RedisError::from((ErrorKind::Client, "unreadable CLUSTER SLOTS", what));
            let mut last = RedisError::from((ErrorKind::Client, "no seed to read the slots from"));
            for (addr, target) in asked {
                let reply = target.ask_once(&slots, self.connect_timeout).await;
                match reply.and_then(|reply| parse_slots(reply, &addr).map_err(unreadable)) {
                    Ok(ranges) => {
                        self.install(&ranges);
                        return Ok(());
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        })
    }

    fn install(&self, ranges: &[(u16, u16, String)]) {
        let mut table = self.table();
        let mut slots = vec![None; usize::from(SLOTS)];
        for &(start, end, ref master) in ranges {
            let shard = self.shard_in(&mut table, master);
            for slot in start..=end.min(SLOTS - 1) {
                slots[usize::from(slot)] = Some(shard.clone());
            }
        }
        table.slots = slots;
        table.stale = false;
    }
}

/// The client of a server at `addr` (`host:port`), reached with the
/// settings of `template` (credentials, TLS); `None` when `addr` is not
/// `host:port`.
fn client_at(template: &ConnectionInfo, addr: &str) -> Option<Client> {
    let (host, port) = addr.rsplit_once(':')?;
    let (host, port) = (host.trim_matches(['[', ']']), port.parse::<u16>().ok()?);
    let mut addr = template.addr().clone();
    if let ConnectionAddr::TcpTls {
        host: h, port: p, ..
    } = &mut addr
    {
        (*h, *p) = (host.to_owned(), port);
    } else {
        addr = ConnectionAddr::Tcp(host.to_owned(), port);
    }
    Client::open(template.clone().set_addr(addr)).ok()
}

/// The ranges of a `CLUSTER SLOTS` reply from the server at `asked`
/// (whose host stands for a master reported with an empty host): slots
/// `start..=end` and the master serving them (`host:port`).
fn parse_slots(reply: Value, asked: &str) -> Result<Vec<(u16, u16, String)>, String> {
    let Value::Array(entries) = reply else {
        return Err(format!("CLUSTER SLOTS answered {reply:?}"));
    };
    let asked_host = asked.rsplit_once(':').map_or(asked, |(h, _)| h);
    entries
        .into_iter()
        .map(|entry| {
            let Value::Array(fields) = entry else {
                return Err(format!("a CLUSTER SLOTS entry is {entry:?}"));
            };
            match &fields[..] {
                [Value::Int(start), Value::Int(end), Value::Array(master), ..] => {
                    let (host, port) = match &master[..] {
                        [host, Value::Int(port), ..] => (admission::text(host.clone()), *port),
                        _ => return Err(format!("a CLUSTER SLOTS master is {master:?}")),
                    };
                    let host = match host.as_deref() {
                        None | Some("") | Some("?") => asked_host.to_owned(),
                        Some(h) if h.contains(':') && !h.starts_with('[') => format!("[{h}]"),
                        Some(h) => h.to_owned(),
                    };
                    let slot = |n: i64| u16::try_from(n).map_err(|_| format!("slot {n}"));
                    Ok((slot(*start)?, slot(*end)?, format!("{host}:{port}")))
                }
                other => Err(format!("a CLUSTER SLOTS entry is {other:?}")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_slots_reply_reads_as_ranges_of_masters() {
        let node = |host: &str, port| Value::Array(vec![bulk(host), Value::Int(port), bulk("id")]);
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
                node("10.0.0.4", 7003),
            ]),
            Value::Array(vec![Value::Int(5461), Value::Int(16383), node("", 7001)]),
            Value::Array(vec![Value::Int(1), Value::Int(1), node("::1", 7002)]),
        ]);
        let ranges = parse_slots(reply, "127.0.0.1:7000").unwrap();
        assert_eq!(
            ranges,
            [
                (0, 5460, "10.0.0.1:7000".into()),
                (5461, 16383, "127.0.0.1:7001".into()),
                (1, 1, "[::1]:7002".into()),
            ]
        );
        assert!(parse_slots(Value::Int(1), "h:1").is_err());
        assert!(parse_slots(Value::Array(vec![Value::Array(vec![Value::Int(0)])]), "h:1").is_err());
        let bad = Value::Array(vec![Value::Array(vec![
            Value::Int(-1),
            Value::Int(2),
            node("h", 1),
        ])]);
        assert!(parse_slots(bad, "h:1").is_err());
    }
}
