//! A proxy that keeps the client's connection open across restarts of the
//! server behind it, as Envoy or twemproxy do: when the upstream connection
//! closes, the next bytes from the client go to a new upstream connection
//! (opened when the server is back). The client never sees a connection
//! loss, so only what the server says can reveal the restart.
//!
//! Requests in flight when the server dies are lost without a reply (a
//! real proxy would answer them with an error): restart the server while
//! the client is idle, and before its next request.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long a client's bytes wait for the server to come back.
const RECONNECT_WITHIN: Duration = Duration::from_secs(30);

/// The proxy; stops accepting when dropped (connections already open end
/// with their client).
#[derive(Debug)]
pub struct StickyProxy {
    addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl StickyProxy {
    /// Starts a proxy for `upstream` on `127.0.0.1:<free port>`, on the
    /// caller's tokio runtime.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the sticky proxy");
        let addr = listener.local_addr().expect("sticky proxy address");
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(client, upstream));
            }
        });
        Self { addr, accept }
    }

    /// `redis://` URL of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

impl Drop for StickyProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn connect(upstream: SocketAddr) -> Option<TcpStream> {
    let deadline = tokio::time::Instant::now() + RECONNECT_WITHIN;
    while tokio::time::Instant::now() < deadline {
        if let Ok(server) = TcpStream::connect(upstream).await {
            let _ = server.set_nodelay(true);
            return Some(server);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// Forwards one client's bytes both ways; a closed upstream is replaced
/// when the client next sends something.
async fn serve(mut client: TcpStream, upstream: SocketAddr) {
    let _ = client.set_nodelay(true);
    let mut server = connect(upstream).await;
    let (mut up, mut down) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let Some(conn) = server.as_mut() else {
            // Upstream closed: wait for the client's next request.
            match client.read(&mut up).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let Some(mut fresh) = connect(upstream).await else {
                        return;
                    };
                    if fresh.write_all(&up[..n]).await.is_err() {
                        continue;
                    }
                    server = Some(fresh);
                }
            }
            continue;
        };
        // The upstream first: a close already seen is handled before the
        // client's next request, which then goes to a new connection
        // rather than into the dead one.
        tokio::select! {
            biased;
            read = conn.read(&mut down) => match read {
                Ok(0) | Err(_) => server = None,
                Ok(n) => {
                    if client.write_all(&down[..n]).await.is_err() {
                        return;
                    }
                }
            },
            read = client.read(&mut up) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if conn.write_all(&up[..n]).await.is_err() {
                        server = None;
                    }
                }
            },
        }
    }
}
