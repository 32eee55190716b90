//! A fault-injecting TCP proxy, one per Redis node.
//!
//! The client connects to the proxy; the proxy opens one upstream connection
//! per client connection and forwards bytes both ways. A [`FaultHandle`]
//! (cheap to clone, usable from any thread) switches the fault at run time:
//!
//! | [`Fault`] | what the client sees |
//! |---|---|
//! | `None` | the node as it is |
//! | `Latency { base, jitter }` | each reply `base + U(0, jitter)` later: the round trip grows by that much |
//! | `Blackhole` | nothing: requests and replies are held, not lost, and flow again on heal (a partition that TCP rides out) |
//! | `BlackholeReplies` | requests run on the node, replies are held until heal (lost acknowledgements) |
//! | `Reset` | every open connection reset (RST) now; new ones reset at once while it stands |
//! | `SlowReplies { bytes, every }` | replies trickle, `bytes` at a time every `every` |
//!
//! On top of the fault, a test can script each direction of a link step by
//! step ([`FaultHandle::hold`], [`FaultHandle::release`],
//! [`FaultHandle::delay`], by [`Direction`]): "hold the replies now", "hold
//! the requests now", "let them go now". Held bytes are kept in order, never
//! lost; [`FaultHandle::queued`] tells how many bytes wait at the proxy, so
//! a test can wait until a request has reached it before the next step. A
//! proxy sits on one link (one client's connections to one node); a test
//! that needs a second client's links faulted separately gives that client
//! its own proxies ([`Links`], from `Cluster::links`).
//!
//! [`FaultHandle::redirect`] sends new connections to another server:
//! behind one address, the server changes, as after a failover behind a
//! virtual IP.
//!
//! A connection ends as a whole when either peer closes it (Redis has no
//! half-close): what the closing side sent is still delivered, then both of
//! the proxy's sockets are closed, so a client that keeps a dead connection
//! open, or a paused node, holds no socket of the proxy. A client that
//! leaves before the node's connection is open ends it there.
//!
//! Delays are applied by timestamp, not by sleeping in the copy loop: each
//! chunk read at `t` is queued with its delivery time `max(t + delay,
//! previous delivery)` and a separate writer delivers it then. A steady
//! stream therefore gets exactly `+delay` per reply, and pipelined replies
//! are not serialised behind one sleep each.
//!
//! All proxies of the process share one runtime with a single worker thread,
//! so they work the same under a current-thread test, a multi-thread test
//! and a benchmark, and synchronous harness calls on the test thread never
//! starve them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What a proxy does to the traffic passing through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// Forward as fast as possible.
    #[default]
    None,
    /// Delay every reply by `base` plus a uniformly random `0..=jitter`.
    /// Requests are not delayed, so the round trip grows by exactly that.
    Latency {
        /// Added to every reply.
        base: Duration,
        /// The most added on top, at random.
        jitter: Duration,
    },
    /// Hold all traffic both ways; deliver it in order on heal.
    Blackhole,
    /// Deliver requests, hold replies until heal.
    BlackholeReplies,
    /// Reset every connection now and every new one while this stands.
    Reset,
    /// Deliver replies `bytes` at a time, one piece every `every`.
    SlowReplies {
        /// Bytes per piece.
        bytes: usize,
        /// Pause between pieces.
        every: Duration,
    },
}

impl Fault {
    /// A fixed added latency with no jitter.
    pub fn latency(base: Duration) -> Self {
        Fault::Latency {
            base,
            jitter: Duration::ZERO,
        }
    }

    fn holds(&self, dir: Dir) -> bool {
        match self {
            Fault::Blackhole => true,
            Fault::BlackholeReplies => dir == Dir::Reply,
            _ => false,
        }
    }

    fn delay(&self, dir: Dir) -> Duration {
        match (self, dir) {
            (Fault::Latency { base, jitter }, Dir::Reply) => {
                let extra = if jitter.is_zero() {
                    Duration::ZERO
                } else {
                    jitter.mul_f64(rand::random::<f64>())
                };
                *base + extra
            }
            _ => Duration::ZERO,
        }
    }

    fn trickle(&self, dir: Dir) -> Option<(usize, Duration)> {
        match (self, dir) {
            (Fault::SlowReplies { bytes, every }, Dir::Reply) => Some(((*bytes).max(1), *every)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Request,
    Reply,
}

impl Dir {
    const fn index(self) -> usize {
        match self {
            Dir::Request => 0,
            Dir::Reply => 1,
        }
    }
}

/// A direction of a link, for the scripted holds and delays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to node: commands.
    Requests,
    /// Node to client: replies.
    Replies,
    /// Both ways.
    Both,
}

impl Direction {
    fn covers(self, dir: Dir) -> bool {
        match self {
            Direction::Requests => dir == Dir::Request,
            Direction::Replies => dir == Dir::Reply,
            Direction::Both => true,
        }
    }
}

/// What a test scripted on one direction of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Script {
    /// Nothing more is delivered until released.
    held: bool,
    /// Added to every chunk read from now on.
    delay: Duration,
}

/// The state every connection of a proxy watches.
#[derive(Debug, Clone, Copy)]
struct State {
    /// Where new connections go.
    upstream: SocketAddr,
    fault: Fault,
    /// Scripted holds and delays, by `Dir::index`.
    script: [Script; 2],
    /// Bumped by every `Reset`; a connection older than the current epoch
    /// resets itself. Makes a `Reset` immediately followed by a heal still
    /// reset the connections that existed.
    epoch: u64,
    /// The proxy was dropped: every connection ends.
    closed: bool,
}

impl State {
    fn ends(&self, epoch: u64) -> bool {
        self.closed || self.epoch != epoch
    }

    fn holds(&self, dir: Dir) -> bool {
        self.fault.holds(dir) || self.script[dir.index()].held
    }

    fn delay(&self, dir: Dir) -> Duration {
        self.fault
            .delay(dir)
            .saturating_add(self.script[dir.index()].delay)
    }
}

/// Counters of a proxy, for tests of the tool itself.
#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    refused: AtomicU64,
    request_bytes: AtomicU64,
    reply_bytes: AtomicU64,
    /// Bytes read but not yet delivered, by `Dir::index`.
    queued: [AtomicU64; 2],
}

/// Switches the fault of one proxy. Cheap to clone; `Send + Sync`.
#[derive(Clone, Debug)]
pub struct FaultHandle {
    state: Arc<watch::Sender<State>>,
    counters: Arc<Counters>,
}

impl FaultHandle {
    /// Applies `fault` to every connection, open or future.
    pub fn set(&self, fault: Fault) {
        self.state.send_modify(|s| {
            if fault == Fault::Reset {
                s.epoch += 1;
            }
            s.fault = fault;
        });
    }

    /// Back to `Fault::None` with no scripted hold or delay; held traffic
    /// flows again.
    pub fn heal(&self) {
        self.state.send_modify(|s| {
            s.fault = Fault::None;
            s.script = [Script::default(); 2];
        });
    }

    /// Holds `dir` from now on: bytes not yet delivered stay at the proxy,
    /// in order, until [`release`](Self::release) (or `heal`). Independent
    /// of the fault set with [`set`](Self::set).
    pub fn hold(&self, dir: Direction) {
        self.script(dir, |s| s.held = true);
    }

    /// Lets held bytes of `dir` go now, in order (a `Blackhole` fault still
    /// holds them).
    pub fn release(&self, dir: Direction) {
        self.script(dir, |s| s.held = false);
    }

    /// Delivers every chunk of `dir` read from now on `by` later (on top of
    /// a `Latency` fault; `Duration::ZERO` ends it). Order is kept.
    pub fn delay(&self, dir: Direction, by: Duration) {
        self.script(dir, |s| s.delay = by);
    }

    /// Sends every new connection to `upstream` from now on; open ones
    /// stay with the server they reached.
    pub fn redirect(&self, upstream: SocketAddr) {
        self.state.send_modify(|s| s.upstream = upstream);
    }

    /// Whether `dir` is held by a scripted hold.
    pub fn is_held(&self, dir: Direction) -> bool {
        let state = self.state.borrow();
        [Dir::Request, Dir::Reply]
            .into_iter()
            .filter(|d| dir.covers(*d))
            .all(|d| state.script[d.index()].held)
    }

    /// Bytes of `dir` read by the proxy but not delivered yet (held or
    /// delayed), over every connection: a test waits for this to grow to
    /// know that a command has reached the proxy.
    pub fn queued(&self, dir: Direction) -> u64 {
        [Dir::Request, Dir::Reply]
            .into_iter()
            .filter(|d| dir.covers(*d))
            .map(|d| self.counters.queued[d.index()].load(Ordering::Relaxed))
            .sum()
    }

    fn script(&self, dir: Direction, change: impl Fn(&mut Script)) {
        self.state.send_modify(|s| {
            for d in [Dir::Request, Dir::Reply] {
                if dir.covers(d) {
                    change(&mut s.script[d.index()]);
                }
            }
        });
    }

    /// The fault in force.
    pub fn fault(&self) -> Fault {
        self.state.borrow().fault
    }

    /// Client connections accepted and forwarded so far.
    pub fn accepted(&self) -> u64 {
        self.counters.accepted.load(Ordering::Relaxed)
    }

    /// Client connections reset at accept (under `Reset`, or upstream down).
    pub fn refused(&self) -> u64 {
        self.counters.refused.load(Ordering::Relaxed)
    }

    /// Bytes delivered to the node and to the client.
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.counters.request_bytes.load(Ordering::Relaxed),
            self.counters.reply_bytes.load(Ordering::Relaxed),
        )
    }
}

/// A proxy listening on `127.0.0.1:<free port>` in front of one node. Stops
/// (and drops every connection) when dropped.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    handle: FaultHandle,
    accept: tokio::task::JoinHandle<()>,
}

/// One proxy in front of each node, in node order: one client's links to
/// the cluster, faulted apart from any other client's. Built by
/// `Cluster::links`; stops when dropped.
#[derive(Debug)]
pub struct Links {
    proxies: Vec<Proxy>,
    urls: Vec<String>,
}

impl Links {
    /// Proxies for `upstreams`, clients reaching them at `urls` (in order).
    pub fn new(proxies: Vec<Proxy>, urls: Vec<String>) -> Self {
        Self { proxies, urls }
    }

    /// The node URLs through these proxies, in node order.
    pub fn urls(&self) -> Vec<String> {
        self.urls.clone()
    }

    /// The fault switch of the link to node `i`.
    pub fn link(&self, i: usize) -> FaultHandle {
        self.proxies[i].handle()
    }

    /// Where link `i` sends new connections now: its node, unless
    /// [redirected](FaultHandle::redirect).
    pub fn upstream(&self, i: usize) -> SocketAddr {
        self.proxies[i].upstream()
    }

    /// Heals every link.
    pub fn heal(&self) {
        for p in &self.proxies {
            p.handle.heal();
        }
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fault-proxy")
            .enable_all()
            .build()
            .expect("proxy runtime")
    })
}

impl Proxy {
    /// Starts a proxy for `upstream`. Needs no runtime of the caller.
    pub fn start(upstream: SocketAddr) -> Self {
        let std_listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind a proxy port on loopback");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("proxy addr");
        let (tx, rx) = watch::channel(State {
            upstream,
            fault: Fault::None,
            script: [Script::default(); 2],
            epoch: 0,
            closed: false,
        });
        let handle = FaultHandle {
            state: Arc::new(tx),
            counters: Arc::default(),
        };
        let counters = handle.counters.clone();
        let accept = runtime().spawn(async move {
            let listener = TcpListener::from_std(std_listener).expect("tokio listener");
            accept_loop(listener, rx, counters).await;
        });
        Self {
            addr,
            handle,
            accept,
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The node behind it (where new connections go).
    pub fn upstream(&self) -> SocketAddr {
        self.handle.state.borrow().upstream
    }

    /// The fault switch.
    pub fn handle(&self) -> FaultHandle {
        self.handle.clone()
    }

    /// Shorthand for `handle().set(fault)`.
    pub fn set(&self, fault: Fault) {
        self.handle.set(fault);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.handle.state.send_modify(|s| s.closed = true);
    }
}

async fn accept_loop(listener: TcpListener, rx: watch::Receiver<State>, counters: Arc<Counters>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let state = *rx.borrow();
        if state.closed {
            return;
        }
        if state.fault == Fault::Reset {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            reset(&client);
            continue;
        }
        tokio::spawn(serve(
            client,
            state.upstream,
            state.epoch,
            rx.clone(),
            counters.clone(),
        ));
    }
}

/// One client connection: opens the node's, then forwards both ways until
/// the connection is over, and drops every socket of it then.
///
/// Redis has no half-close: a side that closes is gone. So when the client
/// leaves, its requests still go to the node (held ones on release, as
/// over a real network), then the node's connection is closed too; when the
/// node closes, the replies it sent still reach the client, then the
/// client's connection is closed too. Neither half waits for the other
/// peer to close as well: a client that keeps a dead connection open, or a
/// paused node, no longer keeps the proxy's sockets open.
async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    epoch: u64,
    rx: watch::Receiver<State>,
    counters: Arc<Counters>,
) {
    let _ = client.set_nodelay(true);
    let (mut client_rd, client_wr) = client.into_split();
    // What the client sends while the node's connection is being opened
    // (slow when the node is paused and its backlog full) is kept for it; a
    // client that leaves meanwhile ends the connection, and nothing of it
    // reaches the node.
    let mut early = Vec::new();
    let connect = TcpStream::connect(upstream);
    tokio::pin!(connect);
    let mut buf = [0u8; 4096];
    let server = loop {
        tokio::select! {
            r = &mut connect => break r,
            r = client_rd.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => early.extend_from_slice(&buf[..n]),
            },
        }
    };
    let Ok(server) = server else {
        // The node is down: the client sees its connection reset, as close
        // to "refused" as an accepted socket gets.
        counters.refused.fetch_add(1, Ordering::Relaxed);
        reset(client_wr.as_ref());
        return;
    };
    counters.accepted.fetch_add(1, Ordering::Relaxed);
    let _ = server.set_nodelay(true);
    let (server_rd, server_wr) = server.into_split();
    let up = pipe(
        client_rd,
        server_wr,
        Dir::Request,
        early,
        epoch,
        rx.clone(),
        counters.clone(),
    );
    let down = pipe(
        server_rd,
        client_wr,
        Dir::Reply,
        Vec::new(),
        epoch,
        rx,
        counters,
    );
    tokio::pin!(up, down);
    // Returning drops the other direction, and with it the last halves of
    // both sockets.
    tokio::select! {
        end = &mut up => if end != End::SourceGone {
            // The node cannot take requests, or a reset: the replies still
            // come (or the reset ends them).
            down.await;
        },
        end = &mut down => if end != End::SourceGone {
            // The client cannot take replies, or a reset: what it sent
            // still goes to the node (or the reset ends it).
            up.await;
        },
    }
}

fn reset(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}

/// Waits until the state says this connection must end.
async fn ended(rx: &mut watch::Receiver<State>, epoch: u64) {
    loop {
        if rx.borrow_and_update().ends(epoch) {
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Uncounts a chunk from `Counters::queued` once it is delivered or dropped.
struct Pending<'a>(&'a AtomicU64, u64);

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::Relaxed);
    }
}

/// Why one direction of a connection stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The side it reads from closed (or failed); what was read is delivered.
    SourceGone,
    /// The side it writes to failed.
    SinkGone,
    /// The proxy reset the connection or stopped.
    Reset,
}

/// Copies one direction: a reader queues timestamped chunks (`first`, read
/// before the pipe started, goes first), a writer delivers each at its time
/// (later while held).
async fn pipe(
    mut rd: OwnedReadHalf,
    mut wr: OwnedWriteHalf,
    dir: Dir,
    first: Vec<u8>,
    epoch: u64,
    rx: watch::Receiver<State>,
    counters: Arc<Counters>,
) -> End {
    let (tx, mut queue) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let mut reader_rx = rx.clone();
    let reader_counters = counters.clone();
    let reader = async move {
        let queued = &reader_counters.queued[dir.index()];
        let mut buf = vec![0u8; 64 * 1024];
        let mut last = Instant::now();
        let mut pending = (!first.is_empty()).then_some(first);
        let end = loop {
            let chunk = match pending.take() {
                Some(chunk) => chunk,
                None => tokio::select! {
                    r = rd.read(&mut buf) => match r {
                        Ok(0) | Err(_) => break End::SourceGone,
                        Ok(n) => buf[..n].to_vec(),
                    },
                    () = ended(&mut reader_rx, epoch) => break End::Reset,
                },
            };
            let n = chunk.len() as u64;
            let delay = reader_rx.borrow().delay(dir);
            let at = (Instant::now() + delay).max(last);
            last = at;
            queued.fetch_add(n, Ordering::Relaxed);
            if tx.send((at, chunk)).is_err() {
                queued.fetch_sub(n, Ordering::Relaxed);
                break End::SinkGone;
            }
        };
        // Keep the read half until the writer is done: dropping both halves
        // closes the socket.
        (rd, end)
    };
    let mut writer_rx = rx;
    let writer = async move {
        'chunks: while let Some((at, data)) = queue.recv().await {
            let _pending = Pending(&counters.queued[dir.index()], data.len() as u64);
            let trickle = loop {
                let state = *writer_rx.borrow_and_update();
                if state.ends(epoch) {
                    break 'chunks;
                }
                if state.holds(dir) {
                    if writer_rx.changed().await.is_err() {
                        break 'chunks;
                    }
                    continue;
                }
                if Instant::now() < at {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        r = writer_rx.changed() => if r.is_err() { break 'chunks },
                    }
                    continue;
                }
                break state.fault.trickle(dir);
            };
            let ok = match trickle {
                None => wr.write_all(&data).await.is_ok(),
                Some((bytes, every)) => {
                    let mut ok = true;
                    for piece in data.chunks(bytes) {
                        if wr.write_all(piece).await.is_err() {
                            ok = false;
                            break;
                        }
                        tokio::time::sleep(every).await;
                    }
                    ok
                }
            };
            if !ok {
                break;
            }
            let counter = match dir {
                Dir::Request => &counters.request_bytes,
                Dir::Reply => &counters.reply_bytes,
            };
            counter.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        // Whatever was never delivered no longer waits.
        queue.close();
        while let Ok((_, data)) = queue.try_recv() {
            counters.queued[dir.index()].fetch_sub(data.len() as u64, Ordering::Relaxed);
        }
        let state = *writer_rx.borrow();
        if state.ends(epoch) {
            // Reset: zero linger turns the close into an RST; forget skips the
            // FIN a dropped write half would send first.
            reset(wr.as_ref());
            wr.forget();
            true
        } else {
            let _ = wr.shutdown().await;
            false
        }
    };
    // The read half's socket is the other pipe's write half, which resets
    // it; here it only has to live until the writer is done.
    let ((_rd, end), reset) = tokio::join!(reader, writer);
    if reset {
        End::Reset
    } else {
        end
    }
}
