//! orchestrate's HTTP(S) proxy for a child with `network: provider`, and the bridges of a
//! provider on the host's loopback.
//!
//! The child's namespace has no route out: its only ways out are the listeners the
//! platform made inside it and handed here. The proxy takes `CONNECT host:port` (TLS goes
//! through it untouched: nothing is decrypted) and absolute-form plain-HTTP requests,
//! each judged on the host it names: a host the policy does not allow is refused with a
//! 403 that says so, before its name is even resolved (a lookup would itself carry data
//! out); an allowed one is resolved here, and refused all the same if it resolves to the
//! host's loopback or a link-local (metadata) address. A bridge forwards a connection to
//! the same address and port on the host's loopback.
//!
//! HTTP is hyper's (request heads read with a size limit and a timeout, plain-HTTP bodies
//! framed and streamed, CONNECT as an upgrade); after a CONNECT, bytes are copied both
//! ways with fixed buffers. Everything runs on the run's own runtime and stops when the
//! [`Serving`] handle is dropped, which the supervisor does once the child's tree is gone.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::hosts::{normalize_host, refused_address};
use super::log::NetworkLog;
use super::policy::Policy;

/// The most a request head may take, and the most hyper buffers of a plain-HTTP
/// connection.
const MAX_BUFFER_BYTES: usize = 64 * 1024;
/// Each direction of a tunnel or bridge copies through a buffer this large.
const RELAY_BUFFER_BYTES: usize = 64 * 1024;

/// The proxy's bounds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Connections a child may hold open at once, through the proxy and the bridges
    /// together. More wait in the listener's backlog until one closes.
    pub max_connections: usize,
    /// A request head must arrive within this.
    pub head_timeout: Duration,
    /// Resolving an allowed host and connecting to it.
    pub connect_timeout: Duration,
    /// A tunnel or bridge with no byte either way for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 256,
            head_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(30),
            // Long: a model may think for minutes between events, and a CLI keeps idle
            // connections for its next request while its tools run.
            idle_timeout: Duration::from_secs(10 * 60),
        }
    }
}

/// Where names are looked up: the system's resolver, or (in tests) a fixed table.
#[derive(Debug, Clone)]
pub(crate) enum Resolver {
    System,
    #[cfg(test)]
    Fixed(Vec<(String, std::net::IpAddr)>),
}

impl Resolver {
    async fn lookup(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        match self {
            Resolver::System => Ok(tokio::net::lookup_host((host, port)).await?.collect()),
            #[cfg(test)]
            Resolver::Fixed(table) => Ok(table
                .iter()
                .filter(|(name, _)| name == host)
                .map(|(_, ip)| SocketAddr::new(*ip, port))
                .collect()),
        }
    }
}

/// The proxy and bridges of one child; dropping it stops them all (every accept loop,
/// connection and tunnel).
#[derive(Debug)]
pub(crate) struct Serving {
    cancel: CancellationToken,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

struct Shared {
    policy: Arc<Policy>,
    log: Arc<NetworkLog>,
    cancel: CancellationToken,
    limits: Limits,
    resolver: Resolver,
}

/// Serves `listeners` (in the order of [`Policy::listeners`]: the proxy's, then each
/// bridge's; None for an optional one that could not be made) on the current runtime.
pub(crate) fn serve(
    policy: Arc<Policy>,
    log: Arc<NetworkLog>,
    listeners: Vec<Option<std::net::TcpListener>>,
) -> std::io::Result<Serving> {
    serve_with(policy, log, listeners, Limits::default(), Resolver::System)
}

pub(crate) fn serve_with(
    policy: Arc<Policy>,
    log: Arc<NetworkLog>,
    listeners: Vec<Option<std::net::TcpListener>>,
    limits: Limits,
    resolver: Resolver,
) -> std::io::Result<Serving> {
    let cancel = CancellationToken::new();
    let shared = Arc::new(Shared {
        policy: policy.clone(),
        log,
        cancel: cancel.clone(),
        limits,
        resolver,
    });
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut listeners = listeners.into_iter();
    let proxy = listeners
        .next()
        .flatten()
        .ok_or_else(|| std::io::Error::other("the proxy's listener is missing"))?;
    let proxy = TcpListener::from_std(proxy)?;
    {
        let shared = shared.clone();
        spawn_accepting(proxy, slots.clone(), &cancel, move |stream, slot| {
            serve_client(stream, shared.clone(), slot)
        });
    }
    for (listener, bridge) in listeners.zip(policy.bridges().iter()) {
        let Some(listener) = listener else { continue };
        let listener = TcpListener::from_std(listener)?;
        let outside: Arc<[SocketAddr]> = bridge.outside.clone().into();
        spawn_accepting(listener, slots.clone(), &cancel, move |stream, slot| {
            let outside = outside.clone();
            async move {
                if let Ok(upstream) = connect_any(&outside, limits.connect_timeout).await {
                    let _ = relay(stream, upstream, &[], limits.idle_timeout).await;
                }
                drop(slot);
            }
        });
    }
    Ok(Serving { cancel })
}

/// Accepts on `listener` until cancelled, each connection in a task of its own, given one
/// of `slots` to hold for as long as the connection lasts (a tunnel's included).
fn spawn_accepting<F, Fut>(
    listener: TcpListener,
    slots: Arc<Semaphore>,
    cancel: &CancellationToken,
    handle: F,
) where
    F: Fn(TcpStream, Slot) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let token = cancel.clone();
    tokio::spawn(cancel.clone().run_until_cancelled_owned(async move {
        loop {
            let Ok(permit): Result<OwnedSemaphorePermit, _> = slots.clone().acquire_owned().await
            else {
                return;
            };
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                // Out of descriptors, or the like: give it a moment rather than spin.
                Err(e) => {
                    tracing::debug!("the network proxy could not accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(
                token
                    .clone()
                    .run_until_cancelled_owned(handle(stream, Arc::new(permit))),
            );
        }
    }));
}

type Body = Either<Full<Bytes>, Incoming>;

/// One of the [`MAX_CONNECTIONS`], held by a connection and the tunnel it becomes.
type Slot = Arc<OwnedSemaphorePermit>;

async fn serve_client(stream: TcpStream, shared: Arc<Shared>, slot: Slot) {
    let head_timeout = shared.limits.head_timeout;
    let service = hyper::service::service_fn(move |req| {
        let (shared, slot) = (shared.clone(), slot.clone());
        async move { Ok::<_, Infallible>(handle(req, shared, slot).await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(head_timeout)
        .max_buf_size(MAX_BUFFER_BYTES)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    if let Err(e) = connection.await {
        tracing::debug!("network proxy connection: {e}");
    }
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>, slot: Slot) -> Response<Body> {
    if req.method() == Method::CONNECT {
        tunnel(req, shared, slot).await
    } else {
        forward(req, shared).await
    }
}

/// Why a request does not go out.
enum Refusal {
    /// The policy does not allow the host.
    NotAllowed,
    /// An allowed name that resolves only to addresses the proxy never connects to.
    Address(&'static str),
    /// Could not be resolved or connected to.
    Unreachable(String),
}

/// A `CONNECT host:port`: connects first (so that a failure is an HTTP answer), answers
/// 200, then copies bytes both ways once hyper hands the connection over.
async fn tunnel(req: Request<Incoming>, shared: Arc<Shared>, slot: Slot) -> Response<Body> {
    let Some(authority) = req.uri().authority().cloned() else {
        return text(StatusCode::BAD_REQUEST, "CONNECT needs host:port\n");
    };
    let (Some(host), Some(port)) = (normalize_host(authority.host()), authority.port_u16()) else {
        return text(StatusCode::BAD_REQUEST, "CONNECT needs host:port\n");
    };
    let upstream = match open(&shared, &host, port).await {
        Ok(s) => s,
        Err(refusal) => return refused(&shared, &host, refusal),
    };
    let cancel = shared.cancel.clone();
    let idle = shared.limits.idle_timeout;
    tokio::spawn(cancel.run_until_cancelled_owned(async move {
        let upgraded = match hyper::upgrade::on(req).await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!("CONNECT {host}:{port} was not upgraded: {e}");
                return;
            }
        };
        // hyper's own stream, with what the client sent after its CONNECT (a TLS hello
        // may come at once) and hyper had read already.
        match upgraded.downcast::<TokioIo<TcpStream>>() {
            Ok(parts) => {
                let _ = relay(parts.io.into_inner(), upstream, &parts.read_buf, idle).await;
            }
            Err(upgraded) => {
                let _ = relay(TokioIo::new(upgraded), upstream, &[], idle).await;
            }
        }
        drop(slot);
    }));
    Response::new(Either::Left(Full::new(Bytes::new())))
}

/// A plain-HTTP request in absolute form (`GET http://host/path`): sent on to the host in
/// origin form on a connection of its own, the answer streamed back.
async fn forward(req: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    let uri = req.uri().clone();
    match uri.scheme_str() {
        Some("http") => {}
        Some(_) => {
            return text(
                StatusCode::BAD_REQUEST,
                "only http:// requests are forwarded; https goes through CONNECT\n",
            )
        }
        None => {
            return text(
                StatusCode::BAD_REQUEST,
                "this is orchestrate's network proxy: send absolute-form requests (http://host/path) or CONNECT\n",
            )
        }
    }
    let Some(authority) = uri.authority().cloned() else {
        return text(StatusCode::BAD_REQUEST, "the request names no host\n");
    };
    let Some(host) = normalize_host(authority.host()) else {
        return text(StatusCode::BAD_REQUEST, "the request names no valid host\n");
    };
    let port = authority.port_u16().unwrap_or(80);
    let upstream = match open(&shared, &host, port).await {
        Ok(s) => s,
        Err(refusal) => return refused(&shared, &host, refusal),
    };
    let (mut sender, connection) = match hyper::client::conn::http1::Builder::new()
        .max_buf_size(MAX_BUFFER_BYTES)
        .handshake::<_, Incoming>(TokioIo::new(upstream))
        .await
    {
        Ok(pair) => pair,
        Err(e) => return text(StatusCode::BAD_GATEWAY, &format!("{host}:{port}: {e}\n")),
    };
    tokio::spawn(shared.cancel.clone().run_until_cancelled_owned(connection));
    let (mut parts, body) = req.into_parts();
    parts.uri = match uri.path_and_query() {
        Some(pq) => pq
            .as_str()
            .parse()
            .unwrap_or_else(|_| "/".parse().expect("a path")),
        None => "/".parse().expect("a path"),
    };
    parts.version = hyper::Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    // The host judged is the host named: a Host header of the child's own (another name
    // the server answers to, a CDN's other customer) is replaced, as a proxy must
    // (RFC 9112 section 3.2.2), without the userinfo the authority may carry.
    let judged = match authority.port_u16() {
        Some(p) if host.contains(':') => format!("[{host}]:{p}"),
        Some(p) => format!("{host}:{p}"),
        None if host.contains(':') => format!("[{host}]"),
        None => host.clone(),
    };
    parts.headers.remove(header::HOST);
    match HeaderValue::from_str(&judged) {
        Ok(v) => {
            parts.headers.insert(header::HOST, v);
        }
        Err(_) => return text(StatusCode::BAD_REQUEST, "the request names no valid host\n"),
    }
    match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, Either::Right(body))
        }
        Err(e) => text(StatusCode::BAD_GATEWAY, &format!("{host}:{port}: {e}\n")),
    }
}

/// Headers of one connection, never passed on (RFC 9110 section 7.6.1), and the proxy's
/// own credentials.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    for name in named {
        headers.remove(name.as_str());
    }
    for name in [
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    ] {
        headers.remove(name);
    }
}

/// The answer to a refused request; a refusal of the policy's is counted.
fn refused(shared: &Shared, host: &str, refusal: Refusal) -> Response<Body> {
    match refusal {
        Refusal::NotAllowed => {
            shared.log.deny(host);
            tracing::info!("network provider: refused {host} (not allowed)");
            text(
                StatusCode::FORBIDDEN,
                &format!(
                    "orchestrate's network policy (network: provider) does not allow {host}: this child may reach only its provider's hosts and the run's allow_hosts. To allow it: --allow-host {host} (agent key allow_hosts, config allow_hosts, MCP allowHosts), or --network on.\n"
                ),
            )
        }
        Refusal::Address(why) => {
            shared.log.deny(host);
            tracing::info!("network provider: refused {host} ({why})");
            text(
                StatusCode::FORBIDDEN,
                &format!(
                    "orchestrate's network policy (network: provider) does not connect to {host}: it resolves to {why}.\n"
                ),
            )
        }
        Refusal::Unreachable(why) => text(StatusCode::BAD_GATEWAY, &format!("{why}\n")),
    }
}

fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut r = Response::new(Either::Left(Full::new(Bytes::from(body.to_string()))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A connection to `host:port` if the policy allows it.
async fn open(shared: &Shared, host: &str, port: u16) -> Result<TcpStream, Refusal> {
    let policy = &shared.policy;
    let timeout = shared.limits.connect_timeout;
    // The host's loopback only where a provider is bridged (a CLI that sends even its
    // loopback provider through the proxy).
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        let bridge = policy.bridge_for(host, port).ok_or(Refusal::NotAllowed)?;
        return connect_any(&bridge.outside, timeout)
            .await
            .map_err(|e| Refusal::Unreachable(format!("{host}:{port}: {e}")));
    }
    if !policy.allows(host) {
        return Err(Refusal::NotAllowed);
    }
    let resolved = tokio::time::timeout(timeout, shared.resolver.lookup(host, port))
        .await
        .map_err(|_| Refusal::Unreachable(format!("{host}: resolving timed out")))?
        .map_err(|e| Refusal::Unreachable(format!("{host}: {e}")))?;
    let mut refusal = None;
    let addrs: Vec<SocketAddr> = resolved
        .into_iter()
        .filter(|a| match refused_address(a.ip()) {
            // The bridged provider itself, under a name that resolves to it.
            Some(_) if policy.bridges().iter().any(|b| b.outside.contains(a)) => true,
            Some(why) => {
                refusal = Some(why);
                false
            }
            None => true,
        })
        .collect();
    if addrs.is_empty() {
        return Err(match refusal {
            Some(why) => Refusal::Address(why),
            None => Refusal::Unreachable(format!("{host}: no address")),
        });
    }
    connect_any(&addrs, timeout)
        .await
        .map_err(|e| Refusal::Unreachable(format!("{host}:{port}: {e}")))
}

/// The first of `addrs` that accepts a connection, within `timeout` in all.
async fn connect_any(addrs: &[SocketAddr], timeout: Duration) -> std::io::Result<TcpStream> {
    let attempt = async {
        let mut last = std::io::Error::other("no address");
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// Copies bytes both ways between `client` and `upstream` (after `early`, what the client
/// already sent) until either side ends, or neither moved for `idle`.
async fn relay<C>(
    client: C,
    mut upstream: TcpStream,
    early: &[u8],
    idle: Duration,
) -> std::io::Result<()>
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    if !early.is_empty() {
        upstream.write_all(early).await?;
    }
    let start = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let mut client = Watched {
        inner: client,
        start,
        last: last.clone(),
    };
    let mut upstream = Watched {
        inner: upstream,
        start,
        last: last.clone(),
    };
    let copy = tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut upstream,
        RELAY_BUFFER_BYTES,
        RELAY_BUFFER_BYTES,
    );
    tokio::pin!(copy);
    loop {
        let idle_until = start + Duration::from_millis(last.load(Ordering::Relaxed)) + idle;
        tokio::select! {
            r = &mut copy => return r.map(|_| ()),
            _ = tokio::time::sleep_until(idle_until) => {
                let moved = start + Duration::from_millis(last.load(Ordering::Relaxed));
                if moved + idle <= Instant::now() {
                    return Err(std::io::ErrorKind::TimedOut.into());
                }
            }
        }
    }
}

/// A stream that notes when it last read anything.
struct Watched<S> {
    inner: S,
    start: Instant,
    /// Milliseconds after `start`.
    last: Arc<AtomicU64>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            let at = self.start.elapsed().as_millis() as u64;
            self.last.store(at, Ordering::Relaxed);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::{HostPattern, ProviderHost};
    use pretty_assertions::assert_eq;
    use tokio::io::AsyncReadExt;

    /// A server on the host's loopback that echoes what it reads.
    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    /// A plain-HTTP server that answers each request with its request line and whether
    /// it carried proxy headers.
    async fn http_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let head = read_head(&mut s).await;
                    let first = head.lines().next().unwrap_or("").to_string();
                    let proxy_headers = head.to_ascii_lowercase().contains("proxy-");
                    let hosts: Vec<&str> = head
                        .lines()
                        .filter_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case("host").then_some(value.trim())
                        })
                        .collect();
                    let body = format!(
                        "{first}|host: {}|proxy headers: {proxy_headers}",
                        hosts.join(",")
                    );
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(reply.as_bytes()).await;
                });
            }
        });
        addr
    }

    async fn read_head(s: &mut TcpStream) -> String {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&head).into_owned()
    }

    /// A whole response with a content-length body.
    async fn read_response(s: &mut TcpStream) -> (u16, String) {
        let head = read_head(s).await;
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let len: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).await.unwrap();
        (status, String::from_utf8(body).unwrap())
    }

    struct Running {
        proxy: SocketAddr,
        serving: Serving,
        log: Arc<NetworkLog>,
    }

    /// The proxy for a child whose provider is at `provider` (on the host's loopback),
    /// which may also reach `allow`, names resolved from `names`.
    fn start(
        provider: SocketAddr,
        allow: &[&str],
        names: &[(&str, &str)],
        limits: Limits,
    ) -> Running {
        let (policy, warnings) = Policy::build(
            &[ProviderHost::url(format!("http://{provider}"), "TEST")],
            &allow
                .iter()
                .map(|h| HostPattern::parse(h).unwrap())
                .collect::<Vec<_>>(),
        );
        assert!(warnings.is_empty());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let proxy = listener.local_addr().unwrap();
        let log = Arc::new(NetworkLog::default());
        let resolver = Resolver::Fixed(
            names
                .iter()
                .map(|(n, ip)| (n.to_string(), ip.parse().unwrap()))
                .collect(),
        );
        // The bridge's listener is not needed here: these clients talk to the proxy.
        let serving = serve_with(
            Arc::new(policy),
            log.clone(),
            vec![Some(listener), None],
            limits,
            resolver,
        )
        .unwrap();
        Running {
            proxy,
            serving,
            log,
        }
    }

    async fn connect(proxy: SocketAddr, target: &str) -> (TcpStream, u16, String) {
        let mut s = TcpStream::connect(proxy).await.unwrap();
        s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let (status, body) = read_response(&mut s).await;
        (s, status, body)
    }

    #[tokio::test]
    async fn a_host_the_policy_does_not_allow_is_refused_with_a_403_naming_the_policy_and_counted()
    {
        let echo = echo_server().await;
        let p = start(echo, &["allowed.test"], &[], Limits::default());
        let (_, status, body) = connect(p.proxy, "exfil.example:443").await;
        assert_eq!(status, 403);
        assert_eq!(
            body,
            "orchestrate's network policy (network: provider) does not allow exfil.example: this child may reach only its provider's hosts and the run's allow_hosts. To allow it: --allow-host exfil.example (agent key allow_hosts, config allow_hosts, MCP allowHosts), or --network on.\n"
        );
        // The host's loopback, but not the bridged provider's port.
        let (_, status, _) = connect(p.proxy, &format!("127.0.0.1:{}", echo.port() + 1)).await;
        assert_eq!(status, 403);
        let (_, status, _) = connect(p.proxy, "EXFIL.example.:80").await;
        assert_eq!(status, 403);
        assert_eq!(
            p.log.denied(),
            [
                crate::network::DeniedHost {
                    host: "exfil.example".into(),
                    count: 2
                },
                crate::network::DeniedHost {
                    host: "127.0.0.1".into(),
                    count: 1
                },
            ]
        );
    }

    #[tokio::test]
    async fn a_tunnel_to_the_bridged_provider_carries_bytes_both_ways_until_the_proxy_stops() {
        let echo = echo_server().await;
        let p = start(echo, &[], &[], Limits::default());
        let (mut s, status, _) = connect(p.proxy, &echo.to_string()).await;
        assert_eq!(status, 200);
        let payload = vec![7u8; 300_000];
        let (mut r, mut w) = s.split();
        let (_, got) = tokio::join!(w.write_all(&payload), async {
            let mut got = vec![0u8; payload.len()];
            r.read_exact(&mut got).await.map(|_| got)
        });
        assert_eq!(got.unwrap(), payload);
        drop(p.serving);
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest)).await;
        assert!(
            matches!(n, Ok(Ok(0)) | Ok(Err(_))),
            "the tunnel ends with the proxy: {n:?}"
        );
    }

    #[tokio::test]
    async fn an_allowed_name_resolving_to_the_hosts_loopback_is_refused_unless_it_is_the_bridged_provider(
    ) {
        let echo = echo_server().await;
        let names = [
            ("rebind.allowed.test", "127.0.0.1"),
            ("meta.allowed.test", "169.254.169.254"),
        ];
        let p = start(echo, &["*.allowed.test"], &names, Limits::default());
        let (_, status, body) =
            connect(p.proxy, &format!("rebind.allowed.test:{}", echo.port() + 1)).await;
        assert_eq!(
            (status, body.as_str()),
            (403, "orchestrate's network policy (network: provider) does not connect to rebind.allowed.test: it resolves to a loopback address of the host.\n")
        );
        let (_, status, body) = connect(p.proxy, "meta.allowed.test:80").await;
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("link-local"), "{body}");
        // The provider itself, under a name.
        let (mut s, status, _) =
            connect(p.proxy, &format!("rebind.allowed.test:{}", echo.port())).await;
        assert_eq!(status, 200);
        s.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        assert_eq!(p.log.denied().len(), 2);
    }

    #[tokio::test]
    async fn plain_http_goes_out_in_origin_form_without_proxy_headers_and_each_request_is_judged_on_its_host(
    ) {
        let http = http_server().await;
        let p = start(http, &[], &[], Limits::default());
        let mut s = TcpStream::connect(p.proxy).await.unwrap();
        let request = format!(
            "GET http://{http}/v1/models?x=1 HTTP/1.1\r\nHost: {http}\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\r\n"
        );
        s.write_all(request.as_bytes()).await.unwrap();
        let (status, body) = read_response(&mut s).await;
        assert_eq!(
            (status, body.as_str()),
            (
                200,
                format!("GET /v1/models?x=1 HTTP/1.1|host: {http}|proxy headers: false").as_str()
            )
        );
        // The same connection, another host: refused on its own.
        s.write_all(b"GET http://exfil.example/leak HTTP/1.1\r\nHost: exfil.example\r\n\r\n")
            .await
            .unwrap();
        let (status, body) = read_response(&mut s).await;
        assert_eq!(status, 403);
        assert!(body.contains("does not allow exfil.example"), "{body}");
        // Not a proxy request at all.
        let mut s = TcpStream::connect(p.proxy).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let (status, _) = read_response(&mut s).await;
        assert_eq!(status, 400);
    }

    #[tokio::test]
    async fn the_connection_limit_holds_a_further_client_until_one_closes() {
        let echo = echo_server().await;
        let limits = Limits {
            max_connections: 2,
            ..Limits::default()
        };
        let p = start(echo, &[], &[], limits);
        let (first, status, _) = connect(p.proxy, &echo.to_string()).await;
        assert_eq!(status, 200);
        let (_second, status, _) = connect(p.proxy, &echo.to_string()).await;
        assert_eq!(status, 200);
        let third = tokio::spawn(async move { connect(p.proxy, &echo.to_string()).await.1 });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !third.is_finished(),
            "a third client waits while two tunnels are open"
        );
        drop(first);
        let status = tokio::time::timeout(Duration::from_secs(10), third)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status, 200);
        drop(p.serving);
    }

    #[tokio::test]
    async fn a_silent_client_is_dropped_after_the_head_timeout_and_an_oversized_head_is_refused() {
        let echo = echo_server().await;
        let limits = Limits {
            head_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let p = start(echo, &[], &[], limits);
        let mut silent = TcpStream::connect(p.proxy).await.unwrap();
        let mut buf = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(10), silent.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "closed by the proxy");
        let mut big = TcpStream::connect(p.proxy).await.unwrap();
        let header = format!("X-Fill: {}\r\n", "a".repeat(8000));
        let mut request = "GET http://exfil.example/ HTTP/1.1\r\n".to_string();
        for _ in 0..(2 * MAX_BUFFER_BYTES / header.len()) {
            request.push_str(&header);
        }
        // The proxy stops reading (and answers, or closes) long before the end.
        let _ = big.write_all(request.as_bytes()).await;
        let mut reply = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), big.read_to_end(&mut reply)).await;
        let reply = String::from_utf8_lossy(&reply);
        assert!(
            reply.is_empty() || reply.starts_with("HTTP/1.1 431"),
            "{reply}"
        );
        assert_eq!(p.log.denied(), [], "never judged");
    }

    /// A hostile child's ways around a name-based policy: a Host header naming another
    /// host than the request does (the upstream must see the host that was judged, or a
    /// server of many names, a CDN, serves the other one), an address of an allowed
    /// name, names that only look like an allowed one, an IPv6 spelling of the host's
    /// loopback, and a userinfo in front of the real host.
    #[tokio::test]
    async fn the_host_judged_is_the_host_reached_whatever_the_request_spells() {
        let http = http_server().await;
        let names = [("api.allowed.test", "203.0.113.5")];
        let p = start(http, &["*.allowed.test"], &names, Limits::default());
        let mut s = TcpStream::connect(p.proxy).await.unwrap();
        let request = format!("GET http://{http}/v1 HTTP/1.1\r\nHost: exfil.example\r\n\r\n");
        s.write_all(request.as_bytes()).await.unwrap();
        let (status, body) = read_response(&mut s).await;
        assert_eq!(
            (status, body),
            (
                200,
                format!("GET /v1 HTTP/1.1|host: {http}|proxy headers: false")
            )
        );
        for target in [
            // The address api.allowed.test resolves to: addresses are judged as written.
            "203.0.113.5:443".to_string(),
            "evil-allowed.test:443".to_string(),
            "allowed.test.exfil.example:443".to_string(),
            "allowedtest:443".to_string(),
            format!("[::ffff:127.0.0.1]:{}", http.port() + 1),
            format!("[0:0:0:0:0:0:0:1]:{}", http.port() + 1),
            format!("[::ffff:7f00:1]:{}", http.port()),
        ] {
            let (_, status, _) = connect(p.proxy, &target).await;
            assert_eq!(status, 403, "CONNECT {target}");
        }
        let mut s = TcpStream::connect(p.proxy).await.unwrap();
        s.write_all(
            b"GET http://api.allowed.test@exfil.example/ HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n",
        )
        .await
        .unwrap();
        let (status, body) = read_response(&mut s).await;
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("does not allow exfil.example"), "{body}");
        let denied: Vec<(String, u64)> = p
            .log
            .denied()
            .into_iter()
            .map(|d| (d.host, d.count))
            .collect();
        assert_eq!(
            denied,
            [
                ("203.0.113.5".to_string(), 1),
                ("evil-allowed.test".to_string(), 1),
                ("allowed.test.exfil.example".to_string(), 1),
                ("allowedtest".to_string(), 1),
                ("::ffff:127.0.0.1".to_string(), 2),
                ("::1".to_string(), 1),
                ("exfil.example".to_string(), 1),
            ]
        );
    }

    /// Variants a hostile child with a shell would try next: a CONNECT to the proxy's
    /// own listener, an allowed name in upper case with a trailing dot (allowed, and
    /// resolved as the name it is), a punycode label under an allowed domain, a Unicode
    /// one, and a request that frames its body twice (Content-Length and
    /// Transfer-Encoding) to slip a second request past the proxy inside its body.
    #[tokio::test]
    async fn spellings_of_an_allowed_host_pass_and_a_request_framed_twice_smuggles_nothing() {
        let echo = echo_server().await;
        let names = [
            ("api.allowed.test", "127.0.0.1"),
            ("xn--bcher-kva.allowed.test", "127.0.0.1"),
        ];
        let p = start(echo, &["*.allowed.test"], &names, Limits::default());
        let (_, status, _) = connect(p.proxy, &p.proxy.to_string()).await;
        assert_eq!(status, 403, "the proxy's own listener");
        for target in [
            format!("API.Allowed.TEST.:{}", echo.port()),
            format!("xn--bcher-kva.allowed.test:{}", echo.port()),
        ] {
            let (mut s, status, _) = connect(p.proxy, &target).await;
            assert_eq!(status, 200, "CONNECT {target}");
            s.write_all(b"ping").await.unwrap();
            let mut got = [0u8; 4];
            s.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"ping");
        }
        let (_, status, _) = connect(p.proxy, "bücher.exfil.example:443").await;
        assert_eq!(status, 400);

        // The upstream: an allowed host that records every head it reads.
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream_addr = upstream.local_addr().unwrap();
        let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = upstream.accept().await {
                let seen_tx = seen_tx.clone();
                tokio::spawn(async move {
                    let mut all = Vec::new();
                    let _ =
                        tokio::time::timeout(Duration::from_millis(500), s.read_to_end(&mut all))
                            .await;
                    let _ = seen_tx.send(String::from_utf8_lossy(&all).into_owned());
                    let _ = s
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                });
            }
        });
        let p = start(upstream_addr, &[], &[], Limits::default());
        for framing in [
            "Content-Length: 4\r\nTransfer-Encoding: chunked",
            "Transfer-Encoding: chunked\r\nContent-Length: 4",
        ] {
            let mut s = TcpStream::connect(p.proxy).await.unwrap();
            let smuggled = "GET http://exfil.example/leak HTTP/1.1\r\nHost: exfil.example\r\n\r\n";
            let request = format!(
                "POST http://{upstream_addr}/ HTTP/1.1\r\nHost: {upstream_addr}\r\n{framing}\r\n\r\n0\r\n\r\n{smuggled}"
            );
            s.write_all(request.as_bytes()).await.unwrap();
            let mut reply = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut reply)).await;
            let reply = String::from_utf8_lossy(&reply).into_owned();
            let got = tokio::time::timeout(Duration::from_secs(10), seen.recv())
                .await
                .ok()
                .flatten();
            if let Some(got) = got {
                let lower = got.to_ascii_lowercase();
                assert!(
                    !(lower.contains("content-length") && lower.contains("transfer-encoding")),
                    "{framing}: the upstream saw both framings: {got:?}"
                );
                assert!(!got.contains("exfil.example"), "{framing}: {got:?}");
            }
            // Refused outright, or answered once: the smuggled request is judged as its
            // own (a 403) or never read, and never answered from upstream.
            assert!(
                reply.starts_with("HTTP/1.1 400")
                    || reply.matches("HTTP/1.1 200").count() == 1
                        && (reply.contains("does not allow exfil.example")
                            || !reply.contains("exfil")),
                "{framing}: {reply:?}"
            );
        }
    }
}
