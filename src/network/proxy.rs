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

/// Connections a child may hold open at once, through the proxy and the bridges
/// together. More wait in the listener's backlog until one closes.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// The most a request head may take, and the most hyper buffers of a plain-HTTP
/// connection.
const MAX_BUFFER_BYTES: usize = 64 * 1024;
/// Each direction of a tunnel or bridge copies through a buffer this large.
const RELAY_BUFFER_BYTES: usize = 32 * 1024;
/// A request head must arrive within this.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Resolving an allowed host and connecting to it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// A tunnel or bridge with no byte either way for this long is closed. Long: a model may
/// think for minutes between events, and a CLI keeps idle connections for its next
/// request while its tools run.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

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
}

/// Serves `listeners` (in the order of [`Policy::listeners`]: the proxy's, then each
/// bridge's; None for an optional one that could not be made) on the current runtime.
pub(crate) fn serve(
    policy: Arc<Policy>,
    log: Arc<NetworkLog>,
    listeners: Vec<Option<std::net::TcpListener>>,
) -> std::io::Result<Serving> {
    let cancel = CancellationToken::new();
    let shared = Arc::new(Shared {
        policy: policy.clone(),
        log,
        cancel: cancel.clone(),
    });
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
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
                if let Ok(upstream) = connect_any(&outside).await {
                    let _ = relay(stream, upstream, &[]).await;
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
    let service = hyper::service::service_fn(move |req| {
        let (shared, slot) = (shared.clone(), slot.clone());
        async move { Ok::<_, Infallible>(handle(req, shared, slot).await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
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
                let _ = relay(parts.io.into_inner(), upstream, &parts.read_buf).await;
            }
            Err(upgraded) => {
                let _ = relay(TokioIo::new(upgraded), upstream, &[]).await;
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
    let (mut sender, connection) =
        match hyper::client::conn::http1::Builder::new()
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
        Some(pq) => pq.as_str().parse().unwrap_or_else(|_| "/".parse().expect("a path")),
        None => "/".parse().expect("a path"),
    };
    parts.version = hyper::Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    if !parts.headers.contains_key(header::HOST) {
        if let Ok(v) = HeaderValue::from_str(authority.as_str()) {
            parts.headers.insert(header::HOST, v);
        }
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
    // The host's loopback only where a provider is bridged (a CLI that sends even its
    // loopback provider through the proxy).
    let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback {
        let bridge = policy.bridge_for(host, port).ok_or(Refusal::NotAllowed)?;
        return connect_any(&bridge.outside)
            .await
            .map_err(|e| Refusal::Unreachable(format!("{host}:{port}: {e}")));
    }
    if !policy.allows(host) {
        return Err(Refusal::NotAllowed);
    }
    let resolved = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| Refusal::Unreachable(format!("{host}: resolving timed out")))?
        .map_err(|e| Refusal::Unreachable(format!("{host}: {e}")))?;
    let mut refusal = None;
    let addrs: Vec<SocketAddr> = resolved
        .filter(|a| match refused_address(a.ip()) {
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
    connect_any(&addrs)
        .await
        .map_err(|e| Refusal::Unreachable(format!("{host}:{port}: {e}")))
}

/// The first of `addrs` that accepts a connection, within [`CONNECT_TIMEOUT`] in all.
async fn connect_any(addrs: &[SocketAddr]) -> std::io::Result<TcpStream> {
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
    tokio::time::timeout(CONNECT_TIMEOUT, attempt)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// Copies bytes both ways between `client` and `upstream` (after `early`, what the client
/// already sent) until either side ends, or neither moved for [`IDLE_TIMEOUT`].
async fn relay<C>(client: C, mut upstream: TcpStream, early: &[u8]) -> std::io::Result<()>
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
        let idle_until = start + Duration::from_millis(last.load(Ordering::Relaxed)) + IDLE_TIMEOUT;
        tokio::select! {
            r = &mut copy => return r.map(|_| ()),
            _ = tokio::time::sleep_until(idle_until) => {
                let moved = start + Duration::from_millis(last.load(Ordering::Relaxed));
                if moved + IDLE_TIMEOUT <= Instant::now() {
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
