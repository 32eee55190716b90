//! What the servers did while a part ran: commands processed and CPU time
//! (`INFO stats`, `INFO cpu`) read before and after, the keys each held
//! (`DBSIZE`); and the wait until every server has been up for the
//! restart quarantine (`INFO server`).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use quorumlock_testkit::block_on_eventually;

/// One data server watched over a part, on its own side connection.
pub struct Server {
    /// The quorum member it belongs to (0-based).
    pub member: usize,
    pub port: u16,
    conn: redis::Connection,
}

/// A server's counters at one moment.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// `total_commands_processed` (commands a script runs included).
    pub commands: u64,
    /// `used_cpu_user` + `used_cpu_sys`.
    pub cpu: Duration,
    /// Calls per command (`INFO commandstats`).
    pub calls: BTreeMap<String, u64>,
}

impl Reading {
    /// What happened between `earlier` and this reading.
    pub fn since(&self, earlier: &Reading) -> Reading {
        let calls = self
            .calls
            .iter()
            .map(|(c, &n)| (c.clone(), n - earlier.calls.get(c).copied().unwrap_or(0)))
            .filter(|&(_, n)| n > 0)
            .collect();
        Reading {
            commands: self.commands.saturating_sub(earlier.commands),
            cpu: self.cpu.saturating_sub(earlier.cpu),
            calls,
        }
    }

    pub fn add(&mut self, other: &Reading) {
        self.commands += other.commands;
        self.cpu += other.cpu;
        for (c, n) in &other.calls {
            *self.calls.entry(c.clone()).or_default() += n;
        }
    }
}

impl Server {
    pub fn open(member: usize, port: u16) -> Self {
        let conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .unwrap_or_else(|e| panic!("side connection to {port}: {e}"));
        Self { member, port, conn }
    }

    pub fn read(&mut self) -> Reading {
        let stats = info(&mut self.conn, "stats");
        let cpu = info(&mut self.conn, "cpu");
        // `cmdstat_set:calls=3,usec=…`
        let calls = info(&mut self.conn, "commandstats")
            .into_iter()
            .filter_map(|(k, v)| {
                let name = k.strip_prefix("cmdstat_")?.to_owned();
                let calls = v.strip_prefix("calls=")?.split(',').next()?.parse().ok()?;
                Some((name, calls))
            })
            .collect();
        let secs = |field: &str| cpu.get(field).and_then(|v| v.parse::<f64>().ok());
        Reading {
            commands: stats
                .get("total_commands_processed")
                .and_then(|v| v.parse().ok())
                .expect("INFO stats without total_commands_processed"),
            cpu: Duration::from_secs_f64(
                secs("used_cpu_user").expect("INFO cpu without used_cpu_user")
                    + secs("used_cpu_sys").expect("INFO cpu without used_cpu_sys"),
            ),
            calls,
        }
    }

    /// `DBSIZE`.
    pub fn keys(&mut self) -> u64 {
        redis::cmd("DBSIZE")
            .query(&mut self.conn)
            .unwrap_or_else(|e| panic!("DBSIZE on {}: {e}", self.port))
    }
}

/// Every server's reading, in order.
pub fn read_all(servers: &mut [Server]) -> Vec<Reading> {
    servers.iter_mut().map(Server::read).collect()
}

fn info(conn: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO")
        .arg(section)
        .query(conn)
        .unwrap_or_else(|e| panic!("INFO {section}: {e}"));
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

/// Waits until every server on `ports` reports an uptime of at least
/// `quarantine`: from then on a client with that restart quarantine
/// counts their votes.
pub fn await_uptime(ports: &[u16], quarantine: Duration) {
    let mut servers: Vec<Server> = ports.iter().map(|&p| Server::open(0, p)).collect();
    let up = block_on_eventually(quarantine + Duration::from_secs(60), || {
        let ready = servers.iter_mut().all(|s| {
            let uptime: Option<u64> = info(&mut s.conn, "server")
                .get("uptime_in_seconds")
                .and_then(|v| v.parse().ok());
            uptime.is_some_and(|u| u >= quarantine.as_secs())
        });
        if !ready {
            // Seconds away: no need to ask 100 times a second.
            std::thread::sleep(Duration::from_millis(250));
        }
        ready
    });
    assert!(up, "the servers never reached {quarantine:?} of uptime");
}
