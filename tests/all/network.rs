//! The child's network, through a child that is a shell script probing it (standing in
//! for pi): with `network: provider` nothing leaves but through orchestrate's proxy, to the
//! provider and `allow_hosts`; DNS to an outside resolver, raw TCP and UDP to public
//! addresses and to the host's loopback get nothing through; the provider on the host's
//! loopback is bridged in, and nothing else of the host's loopback is. The defaults, the
//! fallbacks and what the result says. The real CLIs' proofs are in the contract tests.

use crate::support;

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

/// The child: probes the network, one line per probe, then answers with the lines as pi
/// would (`message_end`, `agent_end`). Each probe prints the error's own words (the
/// kernel's, through bash) or what came back.
const PROBE: &str = r#"#!/bin/bash
out=""
add() { out="$out$1: $2\n"; }
tcp() {
  local err
  if err=$( (exec 3<>"/dev/tcp/$1/$2") 2>&1 ); then echo connected; else echo "$err" | head -n1 | sed 's/.*: //'; fi
}
udp() {
  local err
  if err=$( (echo x > "/dev/udp/$1/$2") 2>&1 ); then echo sent; else echo "$err" | head -n1 | sed 's/.*: //'; fi
}
add "dns to an outside resolver" "$(udp 8.8.8.8 53)"
add "name lookup" "$(getent hosts example.com >/dev/null 2>&1 && echo resolved || echo 'not resolved')"
add "tcp to a public address" "$(tcp 1.1.1.1 443)"
add "tcp to a public ipv6 address" "$(tcp 2606:4700:4700::1111 443)"
add "tcp to the host's loopback" "$(tcp 127.0.0.1 "$PROBE_HOST_TCP_PORT")"
add "udp to the host's loopback" "$(udp 127.0.0.1 "$PROBE_HOST_UDP_PORT")"
add "http through the proxy" "$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 http://example.com/)"
add "the refusal names the policy" "$(curl -s --max-time 20 http://example.com/ | grep -q "network policy (network: provider) does not allow example.com" && echo yes || echo no)"
add "https through the proxy" "$(curl -s -o /dev/null -w '%{http_connect}' --max-time 20 https://example.com/)"
add "an allowed host" "$(curl -s -o /dev/null -w '%{http_connect}' --max-time 20 https://allowed.invalid/)"
add "the bridged provider" "$(curl -s --max-time 20 "http://127.0.0.1:$PROBE_PROVIDER_PORT/v1")"
add "around the proxy" "$(curl -s --noproxy '*' -o /dev/null --max-time 5 http://93.184.216.34/; echo "curl exit $?")"
add "user namespace" "$(readlink /proc/self/ns/user)"
# Root's way out of a network namespace: the host's /proc under the namespace's own, and
# there the network namespace of a process of the host's (the test's own), to the host's
# TCP service (which would then have a connection waiting).
(umount -l /proc && nsenter --net="/proc/$PROBE_HOST_PID/ns/net" curl -s --noproxy '*' -o /dev/null --max-time 2 "http://127.0.0.1:$PROBE_HOST_TCP_PORT/") >/dev/null 2>&1
printf '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"%s"}],"usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop"}}\n' "$out"
printf '{"type":"agent_end","messages":[]}\n'
"#;

/// A provider on the host's loopback: answers every request with `provider` and counts
/// them.
struct Provider {
    port: u16,
    served: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

fn provider() -> Provider {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nprovider",
            );
        }
    });
    Provider { port, served }
}

/// A sandbox whose pi is the probe, configured (as pi is, in `models.json`) with a
/// provider at `provider`'s port on the host's loopback.
fn probing(provider: &Provider) -> (Sandbox, PathBuf) {
    let sb = Sandbox::new();
    let script = sb.root.path().join("probe.sh");
    std::fs::write(&script, PROBE).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let pi_dir = sb.root.path().join("pi-agent");
    std::fs::create_dir_all(&pi_dir).unwrap();
    let models = json!({"providers": {"local": {
        "baseUrl": format!("http://127.0.0.1:{}/v1", provider.port),
        "api": "openai-completions", "apiKey": "k", "models": [{"id": "m"}]
    }}});
    std::fs::write(pi_dir.join("models.json"), models.to_string()).unwrap();
    let sb = sb
        .set("ORCHESTRATE_PI_BIN", script.to_str().unwrap())
        .set("PI_CODING_AGENT_DIR", pi_dir.to_str().unwrap());
    (sb, script)
}

fn lines(out: &support::RunOutput) -> Vec<String> {
    out.result()["output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output: {}", out.stdout))
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "a network of the child's own needs a network namespace, which the portable path does not use"
)]
fn with_a_provider_network_nothing_leaves_but_through_the_proxy_to_what_the_run_allows() {
    let provider = provider();
    let (sb, _) = probing(&provider);
    // Services of the host's own the child must not reach: TCP and UDP on its loopback.
    let host_tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    host_tcp.set_nonblocking(true).unwrap();
    let host_udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    host_udp.set_nonblocking(true).unwrap();
    let sb = sb
        .set(
            "PROBE_HOST_TCP_PORT",
            &host_tcp.local_addr().unwrap().port().to_string(),
        )
        .set(
            "PROBE_HOST_UDP_PORT",
            &host_udp.local_addr().unwrap().port().to_string(),
        )
        .set("PROBE_PROVIDER_PORT", &provider.port.to_string())
        .set("PROBE_HOST_PID", &std::process::id().to_string());
    let out = sb.run(
        "probe",
        &[
            "--network",
            "provider",
            "--allow-host",
            "allowed.invalid",
            "--model",
            "local/m",
            "--details",
            "full",
        ],
    );
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    let child_userns = lines(&out)
        .iter()
        .find_map(|l| l.strip_prefix("user namespace: ").map(str::to_string))
        .unwrap_or_default();
    assert_eq!(
        lines(&out),
        [
            "dns to an outside resolver: Network is unreachable",
            "name lookup: not resolved",
            "tcp to a public address: Network is unreachable",
            "tcp to a public ipv6 address: Network is unreachable",
            "tcp to the host's loopback: Connection refused",
            // Sent to the namespace's own loopback, where nothing listens.
            "udp to the host's loopback: sent",
            "http through the proxy: 403",
            "the refusal names the policy: yes",
            "https through the proxy: 403",
            // Allowed, so resolved by the proxy: the name does not exist.
            "an allowed host: 502",
            "the bridged provider: provider",
            "around the proxy: curl exit 7",
            // Its own (as root: root inside, with no capability over the host's).
            &format!("user namespace: {}", child_userns),
        ]
    );
    assert_ne!(
        Some(child_userns.as_str()),
        std::fs::read_link("/proc/self/ns/user")
            .ok()
            .as_ref()
            .and_then(|p| p.to_str()),
        "the child's user namespace is not the host's"
    );
    assert_eq!(
        out.result()["network"],
        json!({
            "mode": "provider",
            "allowed": ["allowed.invalid", format!("127.0.0.1:{}", provider.port)],
            "denied": [{"host": "example.com", "count": 3}]
        })
    );
    // Nothing reached the host's own services, not even through the host's /proc.
    assert!(
        matches!(host_tcp.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the host's TCP service was reached"
    );
    let mut buf = [0u8; 16];
    assert!(
        matches!(host_udp.recv(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the host's UDP service got a packet"
    );
    assert_eq!(
        provider.served.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the provider, bridged"
    );
    // The lean result keeps what was refused, not what was allowed.
    let lean = sb.run(
        "probe",
        &[
            "--network",
            "provider",
            "--allow-host",
            "allowed.invalid",
            "--model",
            "local/m",
        ],
    );
    assert_eq!(
        lean.result()["network"],
        json!({"mode": "provider", "denied": [{"host": "example.com", "count": 3}]})
    );
}

/// A hostile child inside the sandbox too (read-only, its own mount, PID and network
/// namespaces, seccomp): the same probes get nothing through but the proxy's refusal and
/// the bridged provider; the proxy's address is taken before the child starts, so the
/// child cannot listen there in its place (with or without `SO_REUSEPORT`); it cannot
/// make or join another network namespace; and the sandbox reports the network namespace
/// as one of its layers.
#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "a network of the child's own needs a network namespace, which the portable path does not use"
)]
fn inside_the_sandbox_a_provider_child_gets_only_the_proxy_and_cannot_take_its_place() {
    let provider = provider();
    let (sb, script) = probing(&provider);
    let probe = r#"#!/bin/bash
out=""
add() { out="$out$1: $2\n"; }
tcp() {
  local err
  if err=$( (exec 3<>"/dev/tcp/$1/$2") 2>&1 ); then echo connected; else echo "$err" | head -n1 | sed 's/.*: //'; fi
}
listen() {
  perl -MIO::Socket::INET -e 'my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 3128, Listen => 1, ReuseAddr => 1, ReusePort => $ARGV[0]); print $s ? "listening" : "$!"' "$1"
}
add "dns to an outside resolver" "$( (echo x > /dev/udp/8.8.8.8/53) 2>&1 | head -n1 | sed 's/.*: //')"
add "tcp to a public address" "$(tcp 1.1.1.1 443)"
add "tcp to the host's loopback" "$(tcp 127.0.0.1 "$PROBE_HOST_TCP_PORT")"
add "https through the proxy" "$(curl -s -o /dev/null -w '%{http_connect}' --max-time 20 https://example.com/)"
add "the bridged provider" "$(curl -s --max-time 20 "http://127.0.0.1:$PROBE_PROVIDER_PORT/v1")"
add "listen on the proxy's address" "$(listen 0)"
add "listen there with SO_REUSEPORT" "$(listen 1)"
add "a network namespace of its own" "$(unshare -n true 2>&1 | sed 's/.*: //')"
add "the host's network namespace" "$(nsenter --net=/proc/1/ns/net true 2>&1 | sed 's/.*: //')"
printf '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"%s"}],"usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop"}}\n' "$out"
printf '{"type":"agent_end","messages":[]}\n'
"#;
    std::fs::write(&script, probe).unwrap();
    let host_tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    host_tcp.set_nonblocking(true).unwrap();
    let sb = sb
        .set(
            "PROBE_HOST_TCP_PORT",
            &host_tcp.local_addr().unwrap().port().to_string(),
        )
        .set("PROBE_PROVIDER_PORT", &provider.port.to_string());
    let out = sb.run(
        "probe",
        &[
            "--sandbox",
            "read-only",
            "--network",
            "provider",
            "--model",
            "local/m",
            "--details",
            "full",
        ],
    );
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        lines(&out),
        [
            "dns to an outside resolver: Network is unreachable",
            "tcp to a public address: Network is unreachable",
            "tcp to the host's loopback: Connection refused",
            "https through the proxy: 403",
            "the bridged provider: provider",
            "listen on the proxy's address: Address already in use",
            "listen there with SO_REUSEPORT: Address already in use",
            "a network namespace of its own: Operation not permitted",
            // Its PID 1 is orchestrate's controller, which it may not open through /proc
            // (and `setns` is refused by seccomp besides).
            "the host's network namespace: Permission denied",
        ]
    );
    let r = out.result();
    assert_eq!(
        r["network"],
        json!({
            "mode": "provider",
            "allowed": [format!("127.0.0.1:{}", provider.port)],
            "denied": [{"host": "example.com", "count": 1}]
        })
    );
    assert_eq!(r["sandbox"]["mode"], json!("read-only"));
    let layers = r["sandbox"]["layers"].as_array().unwrap();
    for layer in ["mounts", "network-namespace", "seccomp"] {
        assert!(layers.contains(&json!(layer)), "{layer} in {layers:?}");
    }
    assert!(
        matches!(host_tcp.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the host's TCP service was reached"
    );
}

/// The agent that cannot write (the fake's `read, grep`) gets `provider` by default, one
/// that can write `on`; a lean result says nothing of a network where nothing was
/// refused.
#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "a network of the child's own needs a network namespace, which the portable path does not use"
)]
fn the_default_is_provider_for_an_agent_that_cannot_write_and_on_for_one_that_can() {
    let sb = Sandbox::new()
        .set("ORCHESTRATE_NETWORK", "auto")
        .scenario("echo-env")
        .set("FAKE_AGENT_ECHO_VAR", "HTTPS_PROXY");
    let out = sb.run("t", &["--details", "full", "--model", "anthropic/claude-x"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.result()["output"], json!("http://127.0.0.1:3128"));
    assert_eq!(
        out.result()["network"],
        json!({"mode": "provider", "allowed": ["api.anthropic.com", "platform.claude.com"]})
    );
    assert_eq!(out.result().get("warnings"), None);
    let lean = sb.run("t", &["--model", "anthropic/claude-x"]);
    assert_eq!(lean.result().get("network"), None, "{}", lean.stdout);
    std::fs::write(
        sb.agents.join("writer.md"),
        "---\nname: writer\ndescription: d\ntools: read, bash\nbackend: pi\n---\nP\n",
    )
    .unwrap();
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb.run_args(&[
        "run",
        "writer",
        "t",
        "--agents-dir",
        &agents,
        "--details",
        "full",
    ]);
    assert_eq!(out.result()["output"], json!("<unset>"));
    assert_eq!(out.result()["network"], json!({"mode": "on"}));
}

/// Where the child cannot have a network of its own, the default runs with the host's
/// and says so; `provider` or `off` asked for is refused before anything runs.
#[test]
fn a_provider_network_that_cannot_be_had_refuses_when_asked_for_and_warns_by_default() {
    let sb = Sandbox::new()
        .set("ORCHESTRATE_NETWORK", "auto")
        .set("ORCHESTRATE_CONTAINMENT", "subreaper");
    let out = sb.run("t", &["--details", "full"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.result()["network"], json!({"mode": "on"}));
    let warnings = out.result()["warnings"].clone();
    assert_eq!(
        warnings,
        json!([
            "network provider (the default for an agent that cannot write) could not be had (ORCHESTRATE_CONTAINMENT=subreaper: no namespaces): the child used the host's network",
            "no PID namespace for the child (ORCHESTRATE_CONTAINMENT=subreaper): descendants that outlive it are killed when the run ends, but would survive orchestrate itself being killed"
        ])
    );
    let out = sb.run("t", &["--network", "provider"]);
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert_eq!(
        out.json()["details"]["error"],
        json!({"code": "INVALID_INPUT", "message": "Invalid input: network provider was asked for, but the child cannot have a network of its own here: ORCHESTRATE_CONTAINMENT=subreaper: no namespaces"})
    );
}

/// Hosts to allow come from the config, the agent's file and the flag together; a bad one
/// is refused saying what and where.
#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "a network of the child's own needs a network namespace, which the portable path does not use"
)]
fn allow_hosts_of_the_config_the_agent_and_the_flag_add_up_and_a_bad_one_is_refused() {
    let sb = Sandbox::new().set("ORCHESTRATE_ALLOW_HOSTS", "pypi.org");
    std::fs::write(
        sb.agents.join("fake.md"),
        "---\nname: fake\ndescription: d\ntools: read\nbackend: pi\nallow_hosts: [\"*.github.com\"]\n---\nP\n",
    )
    .unwrap();
    let out = sb.run(
        "t",
        &[
            "--network",
            "provider",
            "--allow-host",
            "docs.rs",
            "--model",
            "nowhere/m",
            "--details",
            "full",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        out.result()["network"],
        json!({"mode": "provider", "allowed": ["pypi.org", "*.github.com", "docs.rs"]})
    );
    let out = sb.run("t", &["--allow-host", "https://docs.rs/x"]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr
            .contains("a URL, not a host; its host is docs.rs")
            || out
                .stdout
                .contains("a URL, not a host; its host is docs.rs"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    std::fs::write(
        sb.agents.join("fake.md"),
        "---\nname: fake\ndescription: d\ntools: read\nbackend: pi\nallow_hosts: [localhost]\n---\nP\n",
    )
    .unwrap();
    let out = sb.run("t", &[]);
    let message: Value = out.json()["details"]["error"]["message"].clone();
    assert!(
        message
            .as_str()
            .is_some_and(|m| m.contains("allow_hosts")
                && m.contains("reached only as the provider's base URL")),
        "{}",
        out.stdout
    );
}

/// A provider configured as `localhost` (listening on the host's 127.0.0.1 only) is
/// reached by name, and on either loopback address of the child's: the bridge on `::1`
/// (where the kernel has IPv6) forwards to whichever address the host's server has.
#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "a network of the child's own needs a network namespace, which the portable path does not use"
)]
fn a_localhost_provider_is_bridged_on_both_loopback_addresses() {
    let provider = provider();
    let sb = Sandbox::new();
    let script = sb.root.path().join("probe.sh");
    std::fs::write(
        &script,
        r#"#!/bin/bash
v4=$(curl -s --max-time 20 "http://127.0.0.1:$PROBE_PROVIDER_PORT/")
v6=$(curl -s -g --max-time 20 "http://[::1]:$PROBE_PROVIDER_PORT/" || echo "no answer")
printf '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"%s %s"}],"usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop"}}\n' "$v4" "$v6"
printf '{"type":"agent_end","messages":[]}\n'
"#,
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let pi_dir = sb.root.path().join("pi-agent");
    std::fs::create_dir_all(&pi_dir).unwrap();
    let models = json!({"providers": {"local": {
        "baseUrl": format!("http://localhost:{}/v1", provider.port),
        "api": "openai-completions", "apiKey": "k", "models": [{"id": "m"}]
    }}});
    std::fs::write(pi_dir.join("models.json"), models.to_string()).unwrap();
    let sb = sb
        .set("ORCHESTRATE_PI_BIN", script.to_str().unwrap())
        .set("PI_CODING_AGENT_DIR", pi_dir.to_str().unwrap())
        .set("PROBE_PROVIDER_PORT", &provider.port.to_string());
    let out = sb.run(
        "probe",
        &[
            "--network",
            "provider",
            "--model",
            "local/m",
            "--details",
            "full",
        ],
    );
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    // Whether this kernel gives a new network namespace an IPv6 loopback.
    let ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    assert_eq!(
        out.result()["output"],
        json!(if ipv6 {
            "provider provider"
        } else {
            "provider no answer"
        })
    );
    assert_eq!(
        out.result()["network"],
        json!({
            "mode": "provider",
            "allowed": [format!("127.0.0.1:{}", provider.port), format!("[::1]:{}", provider.port)]
        })
    );
}
