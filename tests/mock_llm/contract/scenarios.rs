//! The contract scenarios, each written once and run for every CLI it applies to: a real
//! CLI run through `orchestrate run` against the mock, with the whole result compared.
//! What differs between CLIs comes from their [`Cli`] description.

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::cli::{
    subset_of, text_item, Cli, Offered, PromptIn, Refusal, SchemaSent, ToolUse, Traffic,
};
use super::harness::{note, Run};
// The contract binaries have no `support` module; tests/slurm.rs has both, hence two copies.
#[path = "claude_input.rs"]
mod claude_input;
#[path = "claude_permissions.rs"]
mod claude_permissions;
#[allow(clippy::duplicate_mod)]
#[path = "../../support/git.rs"]
mod git;
#[path = "traces.rs"]
mod traces;
use super::{normalized, report, round_cost, Finished, Sandbox};
use crate::mock_llm::{self, error_body, MockLlm, MockUsage, RecordedRequest, Reply, Script};
use git::{checkout_state, git};

/// The bound on each `orchestrate` run.
const WALL_CLOCK: Duration = Duration::from_secs(60);
/// Session lines are cut to this many chars in reports.
const REPORT_LINE_CHARS: usize = 600;
/// A hung stream's run must end (idle timeout, kill grace, cleanup) within this.
const HANG_BOUND: Duration = Duration::from_secs(60);
/// Beyond the connect limit, what an unreachable provider's run may take: the CLI's start
/// (seconds under load), its first retry notice, the stop.
const UNREACHABLE_SLACK: Duration = Duration::from_secs(20);

const WORKER: &str = "---\nname: worker\ndescription: d\ntools: read, bash\n---\nYou are terse.\n";
const READER: &str = "---\nname: reader\ndescription: d\ntools: read, grep, bash\nreadonly: true\n---\nYou only look.\n";
/// Edits but no shell.
const EDITOR: &str = "---\nname: editor\ndescription: d\ntools: read, edit\n---\nYou edit files.\n";
const IMPLEMENTER: &str = "---\nname: implementer\ndescription: d\ntools: read, edit, write, bash\n---\nYou change files.\n";
/// May write with every tool as far as its CLI is concerned (its guard is off), but its
/// sandbox is read-only: the sandbox is the only guard.
const BOXED: &str = "---\nname: boxed\ndescription: d\ntools: read, edit, write, bash\nsandbox: read-only\n---\nYou try.\n";

/// The task of the write scenarios, and the file they write (or must not).
const WRITE_TASK: &str = "Create pwned.txt containing x.";
const PWNED: &str = "pwned.txt";
/// Between SIGTERM and SIGKILL when a run times out.
const KILL_GRACE: &str = "2s";
/// Long enough for a write scenario's turns; a permission prompt would still hit it.
const WRITE_FLAGS: [&str; 2] = ["--idle-timeout", "30s"];

/// An agent without a system prompt: gemini and cursor then get the task alone, as the
/// message.
const BARE: &str = "---\nname: bare\ndescription: d\ntools: read\n---\n";

/// Tasks a CLI's own argument parser could read as its options, or rewrite: each must
/// reach the model as the user's prompt, whatever it starts with. `(test name, task,
/// how exactly)`.
const OPTION_LIKE_TASKS: [(&str, &str, Sent); 5] = [
    (
        "a_task_of_version_reaches_the_model_as_the_prompt",
        "--version",
        Sent::Exactly,
    ),
    (
        "a_bullet_list_task_reaches_the_model_as_the_prompt",
        "- find auth\n- check tests",
        Sent::Exactly,
    ),
    // codex reads its prompt from stdin when the argument is `-`.
    (
        "a_lone_dash_task_reaches_the_model_as_the_prompt",
        "-",
        Sent::Exactly,
    ),
    // yargs (gemini, opencode) strips the quotes around `--opt="x"`; opencode quotes
    // words with spaces.
    (
        "a_task_with_quotes_and_runs_of_spaces_reaches_the_model_unchanged",
        "\"quoted\"  'too'   ",
        Sent::Exactly,
    ),
    // yargs turns a word that looks like a number into one (opencode then crashes);
    // opencode keeps it with a neighbour, in quotes.
    (
        "a_task_with_a_number_reaches_the_model",
        "Fix issue 42",
        Sent::QuotesAside,
    ),
];

/// How a task must reach the model: the end of a user message is the task.
#[derive(Clone, Copy)]
enum Sent {
    Exactly,
    /// Once double quotes are taken out.
    QuotesAside,
}

/// Every scenario that applies to `cli`, by test name (the harness adds `<cli>::`).
pub fn all(cli: &'static Cli) -> Vec<(String, Run)> {
    let mut out: Vec<(String, Run)> = vec![
        (
            "a_tool_call_then_text_gives_the_mocks_text_tool_call_and_usage".into(),
            Box::new(move |bin| tool_call_then_text(cli, bin)),
        ),
        (
            "a_401_is_subagent_failed_with_the_providers_message".into(),
            Box::new(move |bin| unauthorized(cli, bin)),
        ),
        (
            "a_hung_stream_hits_the_idle_timeout_and_leaves_no_process_of_its_tree".into(),
            Box::new(move |bin| hung_stream(cli, bin)),
        ),
        (
            "an_implementer_writes_with_its_write_tool_and_the_shell_without_a_prompt".into(),
            Box::new(move |bin| implementer_writes(cli, bin)),
        ),
    ];
    for (test, task, sent) in OPTION_LIKE_TASKS {
        out.push((
            test.to_string(),
            Box::new(move |bin| option_like_task(cli, task, sent, bin)),
        ));
    }
    out.push((
        "a_turn_budget_of_2_stops_after_the_second_turn_and_keeps_the_partial_answer".into(),
        Box::new(move |bin| turn_budget(cli, bin)),
    ));
    out.push((
        "an_unreachable_provider_fails_within_the_connect_timeout_in_the_clis_own_words".into(),
        Box::new(move |bin| unreachable(cli, bin)),
    ));
    if cli.fallback_model.is_some() {
        out.push((
            "an_overloaded_model_falls_back_to_the_next_model".into(),
            Box::new(move |bin| fallback(cli, bin)),
        ));
    }
    if cli.name == "pi" {
        out.push((
            "scripts_demo_shows_a_real_run_through_pi_and_the_scripted_mock".into(),
            Box::new(scripts_demo),
        ));
        out.push((
            "odd_provider_usage_loses_no_turn_and_no_answer_and_is_never_a_credit".into(),
            Box::new(move |bin| odd_provider_usage(cli, bin)),
        ));
    }
    if cli.rate_limit.is_some() {
        out.push((
            "a_fan_out_against_a_rate_limit_slows_down_and_no_child_fails".into(),
            Box::new(move |bin| rate_limited_fan_out(cli, bin)),
        ));
    }
    if cli.name == "pi" {
        out.push((
            "forty_children_against_a_rate_limit_get_fewer_429s_than_at_fixed_concurrency".into(),
            Box::new(move |bin| forty_against_a_rate_limit(cli, bin)),
        ));
    }
    out.push((
        "scripts_playground_answers_from_the_clis_own_listing_of_the_folder".into(),
        Box::new(move |bin| scripts_playground(cli, bin)),
    ));
    if cli.tool_never_returns {
        out.push((
            "a_tool_that_never_returns_times_out_and_its_shell_dies_too".into(),
            Box::new(move |bin| tool_never_returns(cli, bin)),
        ));
    }
    // As an unprivileged user, where the sandbox needs a user namespace: claude, whose
    // pinned build is one native binary that the test can put where the user reaches it.
    if cli.name == "claude" {
        if let Some(user) = super::unprivileged() {
            out.push((
                "as_an_unprivileged_user_a_hostile_shell_plants_no_config_forges_no_record_and_reads_no_credential"
                    .into(),
                Box::new(move |bin: &Path| hostile_shell(cli, &user.reach(bin), Some(user))),
            ));
        }
    }
    if cli.name == "claude" {
        out.push((
            "its_own_spans_join_orchestrates_trace_under_the_attempt".into(),
            Box::new(move |bin| traces::claude_spans_join_the_trace(cli, bin)),
        ));
        out.push((
            "a_message_sent_while_the_model_answers_is_claudes_next_turn_in_the_same_process"
                .into(),
            Box::new(move |bin| claude_input::message_while_the_model_answers(cli, bin)),
        ));
        out.push((
            "send_interrupt_interrupts_claudes_turn_and_the_message_is_answered".into(),
            Box::new(move |bin| claude_input::interrupt_mid_run(cli, bin)),
        ));
        out.push((
            "claudes_permission_requests_are_decided_by_the_policy_and_recorded".into(),
            Box::new(move |bin| claude_permissions::policy_decides_claudes_requests(cli, bin)),
        ));
        out.push((
            "under_permissions_ask_an_mcp_parent_answers_claudes_permission_request".into(),
            Box::new(move |bin| claude_permissions::the_parent_answers_claudes_request(cli, bin)),
        ));
        out.push((
            "a_timeout_while_the_mcp_parent_is_asked_interrupts_claude_and_ends_the_run".into(),
            Box::new(move |bin| {
                claude_permissions::a_stop_while_the_parent_is_asked_ends_the_run(cli, bin)
            }),
        ));
    }
    if cli.resume.is_some() {
        out.push((
            "a_resumed_run_continues_the_clis_own_session".into(),
            Box::new(move |bin| resumed_run(cli, bin)),
        ));
        out.push((
            "a_message_sent_mid_run_reaches_the_next_request_and_changes_the_answer".into(),
            Box::new(move |bin| message_mid_run(cli, bin)),
        ));
    }
    out.push((
        "a_structured_answer_is_validated_and_returned_as_structured".into(),
        Box::new(move |bin| structured_valid(cli, bin)),
    ));
    if cli.resume.is_some() {
        out.push((
            "a_wrong_structured_answer_is_repaired_in_the_clis_own_session".into(),
            Box::new(move |bin| structured_repaired(cli, bin)),
        ));
        out.push((
            "a_structured_answer_wrong_twice_is_subagent_failed_with_its_json_path".into(),
            Box::new(move |bin| structured_failing(cli, bin)),
        ));
    } else {
        out.push((
            "a_wrong_structured_answer_fails_at_once_where_the_cli_cannot_resume".into(),
            Box::new(move |bin| structured_without_resume(cli, bin)),
        ));
    }
    for case in cli.refusals {
        out.push((
            case.test.into(),
            Box::new(move |bin| refusal(cli, case, bin)),
        ));
    }
    out.extend([
        (
            "the_read_only_sandbox_holds_where_the_clis_own_guard_is_off".into(),
            Box::new(move |bin: &Path| sandboxed_read_only(cli, bin)) as Run,
        ),
        (
            "workspace_write_writes_the_working_directory_but_not_home_etc_or_a_sibling".into(),
            Box::new(move |bin: &Path| sandboxed_workspace_write(cli, bin)),
        ),
        (
            "a_hostile_shell_plants_no_config_forges_no_record_and_reads_no_credential".into(),
            Box::new(move |bin: &Path| hostile_shell(cli, bin, None)),
        ),
        (
            "three_implementers_in_worktrees_get_a_branch_each_and_the_checkout_is_unchanged"
                .into(),
            Box::new(move |bin: &Path| parallel_worktrees(cli, bin)),
        ),
        (
            "a_setsid_daemon_started_by_the_child_is_gone_when_the_run_ends".into(),
            Box::new(move |bin: &Path| setsid_daemon(cli, bin, DaemonEnd::RunEnds)),
        ),
        (
            "a_setsid_daemon_started_by_the_child_is_gone_after_kill_9_of_orchestrate".into(),
            Box::new(move |bin: &Path| setsid_daemon(cli, bin, DaemonEnd::OrchestrateKilled)),
        ),
        (
            PROVIDER_NETWORK.into(),
            Box::new(move |bin: &Path| provider_network(cli, bin)),
        ),
        (
            PROVIDER_THROUGH_PROXY.into(),
            Box::new(move |bin: &Path| provider_through_proxy(cli, bin)),
        ),
    ]);
    out
}

const PROVIDER_NETWORK: &str =
    "a_provider_network_reaches_the_bridged_mock_and_refuses_any_other_host";
const PROVIDER_THROUGH_PROXY: &str =
    "a_provider_off_the_hosts_loopback_is_reached_through_orchestrates_proxy";

/// Scenarios that cannot run on this machine, and why (reported ignored, as a known
/// defect is).
pub fn unavailable(_cli: &Cli) -> Vec<(String, String)> {
    match non_loopback_address() {
        Some(_) => Vec::new(),
        None => vec![(
            PROVIDER_THROUGH_PROXY.into(),
            "this machine has no address but its loopback, where a provider would be bridged rather than proxied".into(),
        )],
    }
}

/// An address of this machine's own that is not its loopback (nor link-local): a
/// provider listening there is reached from a `provider` child only through the proxy.
fn non_loopback_address() -> Option<std::net::IpAddr> {
    use std::net::IpAddr;
    let mut found: Vec<IpAddr> = Vec::new();
    // SAFETY: getifaddrs gives a list we walk read-only and free once.
    unsafe {
        let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut list) != 0 {
            return None;
        }
        let mut at = list;
        while !at.is_null() {
            let a = &*at;
            let up = a.ifa_flags & libc::IFF_UP as libc::c_uint != 0;
            if up && !a.ifa_addr.is_null() {
                match i32::from((*a.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(a.ifa_addr as *const libc::sockaddr_in);
                        found.push(IpAddr::from(
                            u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                        ));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(a.ifa_addr as *const libc::sockaddr_in6);
                        found.push(IpAddr::from(sin6.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            at = a.ifa_next;
        }
        libc::freeifaddrs(list);
    }
    let ordinary = |ip: &IpAddr| match ip {
        IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_link_local() && !v4.is_unspecified(),
        IpAddr::V6(v6) => {
            !v6.is_loopback() && v6.segments()[0] & 0xffc0 != 0xfe80 && !v6.is_unspecified()
        }
    };
    // IPv4 first: every CLI's URL parser takes it.
    found.sort_by_key(|ip| ip.is_ipv6());
    found.into_iter().find(ordinary)
}

/// `network: provider`: the CLI reaches the mock on the host's loopback (bridged into its
/// namespace at the same address), its shell runs, and `curl` to any other host, over
/// https (CONNECT) and plain http, is refused with the policy's 403 and listed in
/// `denied`.
fn provider_network(cli: &Cli, bin: &Path) {
    let command =
        "curl -sS --max-time 20 https://example.com/; curl -sS --max-time 20 http://example.com/";
    let answer = "Refused.";
    let (mock, sb) = setup(cli, bin, |_| {
        Script::sequence(vec![
            (cli.shell)(command).reply,
            Reply::text(answer, MockUsage::default()),
        ])
    });
    let out = sb.run(
        "worker",
        "Fetch example.com.",
        &["--network", "provider", "--idle-timeout", "30s"],
        WALL_CLOCK,
    );
    report("provider network", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(r["output"], json!(answer));
    assert_eq!(
        r["network"],
        json!({
            "mode": "provider",
            "allowed": [mock.addr().to_string()],
            "denied": [{"host": "example.com", "count": 2}]
        })
    );
    // Inside the sandbox, in a network namespace of its own.
    assert!(
        r["sandbox"]["layers"]
            .as_array()
            .is_some_and(|l| l.contains(&json!("network-namespace"))),
        "{}",
        r["sandbox"]
    );
    let reqs = conversation(cli, &mock, 2);
    let outputs = mock_llm::tool_result_texts(&reqs[1].body).join("\n");
    // curl's own words for the refused CONNECT, and the proxy's 403 body for plain http.
    assert!(
        outputs.contains("CONNECT tunnel failed, response 403"),
        "{outputs}"
    );
    assert!(
        outputs.contains(
            "orchestrate's network policy (network: provider) does not allow example.com"
        ),
        "{outputs}"
    );
}

/// A provider on another address of this machine, which the child's namespace has no
/// route to: the CLI reaches it only by honouring the proxy variables orchestrate sets
/// (plain http here, as a local model server would be), and the proxy lets it through as
/// the configured base URL's host.
fn provider_through_proxy(cli: &Cli, bin: &Path) {
    let ip = non_loopback_address().expect("see `unavailable`");
    let mut sb = Sandbox::with_bin(bin.to_path_buf(), cli.name, cli.model);
    let answer = "Hello through the proxy.";
    let mock = MockLlm::start_on(
        Script::sequence(vec![Reply::text(answer, MockUsage::default())]),
        ip,
    );
    sb.catch_outbound(&mock);
    (cli.configure)(&mut sb, &mock);
    sb.agent("worker", WORKER);
    let out = sb.run("worker", "Say hi.", &["--network", "provider"], WALL_CLOCK);
    report("provider through the proxy", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(r["output"], json!(answer));
    assert_eq!(
        r["network"],
        json!({"mode": "provider", "allowed": [ip.to_string()]})
    );
    conversation(cli, &mock, 1);
}

/// A sandbox whose CLI talks only to a mock running `script` (made with the sandbox at
/// hand), with the four agents written.
pub fn setup(cli: &Cli, bin: &Path, script: impl FnOnce(&Sandbox) -> Script) -> (MockLlm, Sandbox) {
    let mut sb = Sandbox::with_bin(bin.to_path_buf(), cli.name, cli.model);
    let mock = MockLlm::start(script(&sb));
    sb.catch_outbound(&mock);
    (cli.configure)(&mut sb, &mock);
    for (name, text) in [
        ("worker", WORKER),
        ("reader", READER),
        ("editor", EDITOR),
        ("implementer", IMPLEMENTER),
        ("bare", BARE),
        ("boxed", BOXED),
    ] {
        sb.agent(name, text);
    }
    (mock, sb)
}

fn pwned(sb: &Sandbox) -> String {
    sb.work.join(PWNED).to_str().unwrap().to_string()
}

/// The whole result of `agent`'s run of `task`, normalized as [`normalized`] does: the
/// fields every result has, then `fields`.
fn expected(cli: &Cli, agent: &str, task: &str, fields: Value) -> Value {
    let mut r = json!({
        "agent": agent,
        "task": task,
        "sessionFile": "SESSION",
        "backend": cli.name,
        "model": cli.model,
        "durationMs": 0,
        "attempts": 1
    });
    let warnings: Vec<&str> = cli
        .warnings
        .iter()
        .filter(|(a, _)| *a == agent)
        .map(|(_, w)| *w)
        .collect();
    if !warnings.is_empty() {
        r["warnings"] = json!(warnings);
    }
    // The default sandbox: read-only for the agent that cannot write.
    let mode = if agent == "reader" {
        "read-only"
    } else {
        "workspace-write"
    };
    // The default network: provider (the mock bridged in) for the agent that cannot
    // write, in a network namespace of its own.
    let mut layers = LAYERS.to_vec();
    if agent == "reader" {
        layers.insert(2, "network-namespace");
        r["network"] = json!({"mode": "provider", "allowed": ["MOCK"]});
    } else {
        r["network"] = json!({"mode": "on"});
    }
    r["sandbox"] = json!({"mode": mode, "mechanism": "namespaces", "layers": layers});
    for (k, v) in fields.as_object().expect("fields").clone() {
        r[k] = v;
    }
    // A CLI that ended on its own: its exit code is how it ended.
    if r.get("termination").is_none() && r["exitCode"] != json!(124) {
        r["termination"] = json!({"kind": "exited", "code": r["exitCode"]});
    }
    r
}

/// No tokens, no cost.
fn no_usage(turns: u64) -> Value {
    json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": turns})
}

/// The usage of these replies, summed and normalized as orchestrate reports it: input
/// without the cached tokens, cacheRead = cached, cost from the CLI's prices.
fn summed(cli: &Cli, replies: &[MockUsage], turns: u64) -> Value {
    let input: u64 = replies.iter().map(|u| u.input - u.cached).sum();
    let cache_read: u64 = replies.iter().map(|u| u.cached).sum();
    let output: u64 = replies.iter().map(|u| u.output).sum();
    let cost = cli.prices.map_or(0.0, |p| {
        (input as f64 * p.input + output as f64 * p.output + cache_read as f64 * p.cache_read) / 1e6
    });
    json!({"input": input, "output": output, "cacheRead": cache_read, "cacheWrite": 0,
           "cost": round_cost(cost), "turns": turns})
}

fn shown(tools: &[&ToolUse]) -> Vec<Value> {
    tools.iter().filter_map(|t| t.shown.clone()).collect()
}

/// The conversation has `n` requests, and nothing else went out but what the CLI's
/// [`Traffic`] allows.
fn conversation(cli: &Cli, mock: &MockLlm, n: usize) -> Vec<RecordedRequest> {
    let reqs = mock.conversation();
    assert_eq!(reqs.len(), n, "{:#?}", mock.requests());
    match cli.traffic {
        Traffic::ConversationOnly => {
            assert_eq!(
                mock.requests().len(),
                n,
                "no other traffic: {:#?}",
                mock.requests()
            )
        }
        Traffic::TitleRequests => {
            for r in mock.requests() {
                assert!(r.api.is_some(), "unexpected traffic: {r:#?}");
                if r.side {
                    let system = mock_llm::system_text(r.api.unwrap(), &r.body);
                    assert!(system.contains("You are a title generator"), "{system}");
                }
            }
        }
    }
    for r in &reqs {
        assert_eq!(r.api, Some(cli.wire.api));
        assert_eq!(r.path, cli.wire.path);
        let (header, value) = cli.wire.auth;
        assert_eq!(r.headers.get(header).map(String::as_str), Some(value));
        let body: Value = serde_json::from_str(cli.wire.body).expect("Wire::body is JSON");
        assert_eq!(subset_of(&r.body, &body), body);
    }
    reqs
}

fn check_offered(offered: Offered, cli: &Cli, body: &Value) {
    let mut tools = mock_llm::offered_tools(cli.wire.api, body);
    tools.sort();
    match offered {
        Offered::Exactly(names) => assert_eq!(tools, names),
        Offered::Including(names) => {
            for n in names {
                assert!(tools.iter().any(|t| t == n), "{n} not in {tools:?}");
            }
        }
        Offered::Excluding(names) => {
            for n in names {
                assert!(!tools.iter().any(|t| t == n), "{n} in {tools:?}");
            }
        }
    }
}

fn tool_call_then_text(cli: &Cli, bin: &Path) {
    let first = MockUsage {
        input: 200,
        output: 14,
        cached: 40,
    };
    let second = MockUsage {
        input: 300,
        output: 9,
        cached: 100,
    };
    let task = "Run echo hi-from-tool, then greet.";
    let hello = "Hello from mock.";
    let shell = (cli.shell)("echo hi-from-tool").with_usage(first);
    let (mock, sb) = setup(cli, bin, |_| {
        Script::tool_then_text(shell.reply.clone(), Reply::text(hello, second))
    });
    let out = sb.run("worker", task, &[], WALL_CLOCK);
    report("tool then text", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);

    let json = out.json();
    assert_eq!(json["content"], json!([text_item(hello)]));
    assert_eq!(json["details"]["mode"], json!("single"));
    assert_eq!(json["details"].get("error"), None);
    let mut items = shown(&[&shell]);
    items.push(text_item(hello));
    assert_eq!(
        normalized(out.result()),
        expected(
            cli,
            "worker",
            task,
            json!({"exitCode": 0, "usage": summed(cli, &[first, second], 2), "output": hello,
                   "displayItems": items})
        )
    );

    // What the CLI sent: two requests, the agent's tools and prompt in the first, the
    // command's real output in the second.
    let reqs = conversation(cli, &mock, 2);
    check_offered(cli.worker_tools, cli, &reqs[0].body);
    let prompt = match cli.prompt_in {
        PromptIn::System => mock_llm::system_text(cli.wire.api, &reqs[0].body),
        PromptIn::FirstMessage => mock_llm::first_message_text(cli.wire.api, &reqs[0].body),
    };
    assert!(prompt.contains("You are terse."), "agent prompt: {prompt}");
    let outputs = mock_llm::tool_result_texts(&reqs[1].body);
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    assert!(
        outputs[0].contains("hi-from-tool"),
        "the command really ran: {outputs:?}"
    );
    // The result answers the mock's call: it carries the id the mock gave the call.
    if let Some(id) = mock_llm::tool_call_id(cli.wire.api, reqs[0].seq) {
        assert_eq!(mock_llm::tool_result_ids(&reqs[1].body), [id]);
    }
    check_events(&sb, &json, hello);
}

/// The run's `events.jsonl`, as `orchestrate show --events --json` prints it: what every
/// CLI's run says there, in the same shape (the run, an attempt, a tool call and its
/// end, usage adding up to the result's, the answer's text, the end).
fn check_events(sb: &Sandbox, json: &Value, answer: &str) {
    let id = json["details"]["runId"].as_str().unwrap();
    let out = sb
        .in_sandbox(super::orchestrate_command(&[
            "show", id, "--events", "--json",
        ]))
        .output()
        .expect("show --events");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |t: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == t).collect() };
    assert_eq!(events[0]["type"], "run", "{events:?}");
    assert_eq!(events[0]["backend"], sb.backend, "{events:?}");
    assert_eq!(events[1]["type"], "attempt", "{events:?}");
    assert_eq!(of("toolCall").len(), 1, "{events:?}");
    let texts: String = of("text")
        .iter()
        .map(|t| t["text"].as_str().unwrap())
        .collect();
    assert!(texts.contains(answer), "{events:?}");
    let end = events.last().unwrap();
    assert_eq!(end["type"], "end", "{events:?}");
    assert_eq!(end["status"], "ok", "{events:?}");
    let usage = &json["details"]["results"][0]["usage"];
    assert_eq!(end["usage"], *usage, "{events:?}");
    let last_total = &of("usage").last().expect("usage lines")["total"];
    for k in ["input", "output", "cacheRead", "cacheWrite"] {
        assert_eq!(last_total[k], usage[k], "{k}: {events:?}");
    }
}

fn unauthorized(cli: &Cli, bin: &Path) {
    let message = "Mock provider says: the API key test-key was rejected";
    let (mock, sb) = setup(cli, bin, |_| {
        Script::always(Reply::HttpError {
            status: 401,
            body: error_body(cli.wire.api, 401, message),
        })
    });
    let out = sb.run("worker", "Say hi.", &[], WALL_CLOCK);
    report("401", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let json = out.json();
    let error = &json["details"]["error"];
    assert_eq!(error["code"], json!("SUBAGENT_FAILED"), "{json}");
    let msg = error["message"].as_str().unwrap();
    assert!(msg.contains(message), "provider message kept: {msg}");
    let r = out.result();
    assert!(
        r["error"].as_str().unwrap().contains(message),
        "result error: {r}"
    );
    // The CLI's own exit code is the result's; the failure is the error, not the answer.
    let mut whole = normalized(r.clone());
    whole["error"] = json!("ERROR");
    assert_eq!(
        whole,
        expected(
            cli,
            "worker",
            "Say hi.",
            json!({"exitCode": cli.unauthorized.exit_code, "usage": no_usage(cli.unauthorized.turns),
                   "error": "ERROR", "output": "", "displayItems": []})
        )
    );
    // A 401 is not retried (retries are off in each CLI's configuration).
    conversation(cli, &mock, 1);
}

/// A run of `worker` that never finishes (see [`Sandbox::run_until_timeout`]) under the
/// CLI's idle timeout and `extra` flags; the result and the tree it had.
fn run_until_timeout(
    case: &str,
    cli: &Cli,
    mock: &MockLlm,
    sb: &mut Sandbox,
    extra: &[&str],
    wait_for: Option<&str>,
) -> (Finished, Vec<(i32, String)>) {
    for (k, v) in cli.hang.env {
        sb.env(k, v);
    }
    let idle = format!("{}s", cli.hang.idle_timeout_secs);
    let mut flags = vec!["--idle-timeout", &idle, "--kill-grace", KILL_GRACE];
    flags.extend_from_slice(extra);
    let (out, tree) = sb.run_until_timeout(mock, "worker", &flags, 1, wait_for, WALL_CLOCK);
    report(case, mock, &out, REPORT_LINE_CHARS);
    note(&format!(
        "=== {case}: {}'s tree before the timeout: {tree:?}",
        cli.name
    ));
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    (out, tree)
}

fn hung_stream(cli: &Cli, bin: &Path) {
    let before = "Thinking about it";
    let (mock, mut sb) = setup(cli, bin, |_| Script::always(Reply::hang(before)));
    let (out, tree) = run_until_timeout("hang", cli, &mock, &mut sb, &[], None);
    assert!(
        tree.len() >= cli.hang.min_processes,
        "at least {} processes: {tree:?}",
        cli.hang.min_processes
    );
    let message = format!(
        "Subagent timed out after {}ms without activity.",
        cli.hang.idle_timeout_secs * 1000
    );
    let json = out.json();
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_TIMEOUT", "message": message})
    );
    // The text streamed before the hang is kept when the CLI printed it (as deltas, or
    // as the message it was cut off in when the stop ended its turn).
    let output = if cli.hang.partial_text { before } else { "" };
    let (usage, shown) = match cli.hang.ends_its_turn {
        Some(cost) => {
            let mut usage = no_usage(1);
            usage["cost"] = json!(cost);
            (usage, json!([text_item(before)]))
        }
        None => (no_usage(0), json!([])),
    };
    assert_eq!(
        normalized(out.result()),
        expected(
            cli,
            "worker",
            "Say hi.",
            json!({"exitCode": 124, "usage": usage, "error": message, "output": output,
                   "termination": {"kind": "terminated", "reason": "idleTimeout"},
                   "displayItems": shown, "timeoutReason": "idle"})
        )
    );
    assert!(out.elapsed < HANG_BOUND, "took {:?}", out.elapsed);
}

/// A shell tool that never returns; the CLI may run it in a process group of its own
/// (pi detaches it), and it must still die with the run.
fn tool_never_returns(cli: &Cli, bin: &Path) {
    let command = "tail -f /dev/null";
    let shell = (cli.shell)(command);
    let (mock, mut sb) = setup(cli, bin, |_| {
        let unreachable = Reply::text("unreachable", MockUsage::default());
        Script::tool_then_text(shell.reply.clone(), unreachable)
    });
    let runtime = ["--timeout", "10s"];
    let (out, _) = run_until_timeout(
        "tool never returns",
        cli,
        &mock,
        &mut sb,
        &runtime,
        Some(command),
    );
    let r = out.result();
    assert_eq!(r["exitCode"], json!(124));
    assert_eq!(r["displayItems"], json!(shown(&[&shell])));
    conversation(cli, &mock, 1);
}

/// The reply of a turn that says `text` and makes `tool`'s call.
fn saying(text: &str, tool: &ToolUse) -> Reply {
    match &tool.reply {
        Reply::ToolCall { name, args, usage } => {
            Reply::text_then_tool(text, name, args.clone(), *usage)
        }
        other => panic!("not a tool call: {other:?}"),
    }
}

/// Three turns that each say something and run a command, then an answer; a budget of
/// two turns stops the CLI where it would go on to the third.
fn turn_budget(cli: &Cli, bin: &Path) {
    let usage = MockUsage {
        input: 100,
        output: 10,
        cached: 0,
    };
    let tools: Vec<ToolUse> = (1..=3)
        .map(|n| (cli.shell)(&format!("echo step-{n}")).with_usage(usage))
        .collect();
    let (mock, sb) = setup(cli, bin, |_| {
        let mut replies: Vec<Reply> = tools
            .iter()
            .enumerate()
            .map(|(i, t)| saying(&format!("Step {}.", i + 1), t))
            .collect();
        replies.push(Reply::text("Done.", usage));
        Script::sequence(replies)
    });
    let task = "Do the three steps.";
    let out = sb.run(
        "worker",
        task,
        &[
            "--max-turns",
            "2",
            "--idle-timeout",
            "30s",
            "--kill-grace",
            KILL_GRACE,
        ],
        WALL_CLOCK,
    );
    report("turn budget", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let message = "Subagent stopped: turn budget 2 reached after 2 turns.";
    let json = out.json();
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_FAILED", "message": message})
    );
    let r = out.result();
    assert_eq!(r["limit"], json!({"kind": "turns", "limit": 2, "used": 2}));
    // The partial answer: what the second turn said.
    assert_eq!(
        (&r["output"], &r["error"], &r["termination"]["reason"]),
        (&json!("Step 2."), &json!(message), &json!("budget"))
    );
    let mut items = Vec::new();
    for (i, t) in tools.iter().take(2).enumerate() {
        items.push(text_item(&format!("Step {}.", i + 1)));
        items.extend(t.shown.clone());
    }
    assert_eq!(r["displayItems"], json!(items));
    // Stopped before its third turn was answered: the third request may have gone out
    // as the CLI was being stopped, never a fourth.
    let n = mock.conversation().len();
    assert!((2..=3).contains(&n), "{n} requests: {:#?}", mock.requests());
}

/// pi computes its usage and cost from the provider's usage: a count the provider sends as
/// a string makes pi's own `input` and costs NaN, which its JSON prints as null, and a
/// negative count makes a negative cost. Neither loses pi's turn or its answer, neither
/// lowers the cost, and each is said once.
fn odd_provider_usage(cli: &Cli, bin: &Path) {
    let tool = (cli.shell)("echo hi-from-tool");
    let (mock, sb) = setup(cli, bin, |_| {
        Script::sequence(vec![
            Reply::WithUsage {
                reply: Box::new(tool.reply.clone()),
                usage: json!({"prompt_tokens": "abc", "completion_tokens": 10}),
            },
            Reply::WithUsage {
                reply: Box::new(Reply::text("Done.", MockUsage::default())),
                usage: json!({"prompt_tokens": 100, "completion_tokens": -1_000_000}),
            },
        ])
    });
    let out = sb.run(
        "worker",
        "Run the command.",
        &["--max-cost", "0.05", "--idle-timeout", "30s"],
        WALL_CLOCK,
    );
    report("odd provider usage", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(out.json()["content"][0]["text"], json!("Done."));
    let r = out.result();
    assert_eq!(
        r["usage"],
        json!({"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 2})
    );
    // pi's prices for the mock model: 1 $ per million input tokens, 2 per million output.
    let negative = 1.0 / 1e6 * 100.0 + 2.0 / 1e6 * -1_000_000.0 + 0.0 + 0.0;
    assert_eq!(
        r["warnings"],
        json!([
            "pi's \"usage.input\": null, not a number (1 time); ignored",
            "pi's \"usage.cost.total\": null, not a number (1 time); ignored",
            "pi's \"usage.output\": -1000000, a negative count (1 time); ignored",
            format!("pi's \"usage.cost.total\": {negative}, a negative amount (1 time); ignored"),
            "the cost budget $0.05 could not be held: pi reported no cost",
        ])
    );
    assert_eq!(mock.conversation().len(), 2);
}

/// The provider's port is closed: the CLI either gives up by itself, or only retries
/// until the connect limit stops it; either way within that limit and a few seconds, and
/// in its own words.
fn unreachable(cli: &Cli, bin: &Path) {
    let (mock, mut sb) = setup(cli, bin, |_| {
        Script::always(Reply::text("unreachable", MockUsage::default()))
    });
    // Nothing listens there any more.
    let port = mock.addr().port();
    drop(mock);
    for (k, v) in cli.unreachable.env {
        sb.env(k, v);
    }
    let connect = Duration::from_secs(10);
    let out = sb.run(
        "worker",
        "Say hi.",
        &[
            "--connect-timeout",
            "10s",
            "--idle-timeout",
            "120s",
            "--kill-grace",
            KILL_GRACE,
        ],
        WALL_CLOCK,
    );
    note(&format!(
        "=== unreachable (port {port}): exit {} in {:?}\n  {}\n  stderr: {}",
        out.status, out.elapsed, out.stdout, out.stderr
    ));
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let json = out.json();
    assert_eq!(json["details"]["error"]["code"], json!("SUBAGENT_FAILED"));
    let r = out.result();
    let error = r["error"].as_str().unwrap();
    assert!(error.contains(cli.unreachable.words), "{error}");
    if cli.unreachable.stopped {
        assert!(
            error.starts_with(&format!("{} could not reach its provider: ", cli.name))
                && error.ends_with("(connect timeout)."),
            "{error}"
        );
        assert_eq!(r["termination"]["reason"], json!("providerUnreachable"));
    }
    // The connect limit, the CLI's start and its stop on a loaded machine.
    let bound = connect + UNREACHABLE_SLACK;
    assert!(
        out.elapsed < bound,
        "took {:?} (bound {bound:?})",
        out.elapsed
    );
}

/// The run's model is overloaded; after its retries the fallback model answers.
fn fallback(cli: &Cli, bin: &Path) {
    let second = cli.fallback_model.expect("a fallback model");
    let answer = "Hello from the second model.";
    let usage = MockUsage {
        input: 50,
        output: 5,
        cached: 0,
    };
    let wire_model = |m: &'static str| m.rsplit('/').next().unwrap();
    let (mock, sb) = setup(cli, bin, |_| {
        Script::per_model(&[
            (wire_model(cli.model), Reply::Overloaded),
            (wire_model(second), Reply::text(answer, usage)),
        ])
    });
    let out = sb.run(
        "worker",
        "Say hi.",
        &["--fallback-model", second, "--connect-timeout", "5s"],
        WALL_CLOCK,
    );
    report("fallback", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(
        (&r["output"], &r["model"]),
        (&json!(answer), &json!(second))
    );
    // The first model's attempts (a retry where the CLI gave up by itself; none where it
    // only retried until the connect limit), then the second model's one.
    let detail = r["attemptsDetail"].as_array().expect("attemptsDetail");
    let first = cli.fallback_attempts;
    let mut models = vec![cli.model; first];
    models.push(second);
    let got: Vec<&str> = detail
        .iter()
        .map(|a| a["model"].as_str().unwrap())
        .collect();
    assert_eq!(got, models);
    assert_eq!(r["attempts"], json!(first + 1));
    for a in &detail[..first] {
        assert!(a["error"].as_str().is_some_and(|e| !e.is_empty()), "{a}");
    }
    assert_eq!(detail[first], json!({"model": second, "exitCode": 0}));
    let asked: Vec<String> = mock
        .conversation()
        .iter()
        .map(mock_llm::requested_model)
        .collect();
    assert_eq!(
        asked.last().map(String::as_str),
        Some(wire_model(second)),
        "{asked:?}"
    );
}

fn resumed_run(cli: &Cli, bin: &Path) {
    let usage = MockUsage {
        input: 50,
        output: 5,
        cached: 0,
    };
    let (mock, sb) = setup(cli, bin, |_| {
        Script::sequence(vec![
            Reply::text("First answer.", usage),
            Reply::text("Second answer.", usage),
        ])
    });
    let first = sb.run("worker", "Remember the word kumquat.", &[], WALL_CLOCK);
    report("resume, first run", &mock, &first, REPORT_LINE_CHARS);
    assert_eq!(first.status, 0, "{}", first.stderr);
    let json = first.json();
    let id = json["details"]["runId"].as_str().unwrap().to_string();
    assert!(json["details"]["results"][0]["childSessionId"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
    if let Some(file) = cli.resume.as_ref().and_then(|r| r.session_file) {
        let path = sb.state.join("runs").join(&id).join(file);
        assert!(path.is_file(), "the CLI saved its session in {path:?}");
    }

    let second = sb.run_args(&["run", "--resume", &id, "What was the word?"], WALL_CLOCK);
    report("resume, second run", &mock, &second, REPORT_LINE_CHARS);
    assert_eq!(second.status, 0, "{}", second.stderr);
    let r = &second.json()["details"]["results"][0];
    assert_eq!(r["output"], json!("Second answer."));
    assert_eq!(r["agent"], json!("worker"));
    // The model saw the first exchange again: the CLI continued its session.
    let asked = mock
        .conversation()
        .last()
        .expect("a second request")
        .body
        .to_string();
    assert!(
        asked.contains("kumquat")
            && asked.contains("First answer.")
            && asked.contains("What was the word?"),
        "{asked}"
    );
}

/// `orchestrate send` while the child works (its shell tool sleeps): once its turn ends, the
/// run continues the CLI's own session with the message, which the model sees with the
/// first exchange, and the answer it gives then is the run's. pi takes it into the turn
/// under way instead (see [`message_steered`]), and so does claude.
fn message_mid_run(cli: &Cli, bin: &Path) {
    const MESSAGE: &str = "Look for the blue file instead.";
    let usage = MockUsage {
        input: 50,
        output: 5,
        cached: 0,
    };
    match cli.name {
        "pi" => {
            return message_steered(cli, bin, MESSAGE, usage, &["get_state", "prompt", "steer"])
        }
        "claude" => return message_steered(cli, bin, MESSAGE, usage, &["user", "user"]),
        _ => {}
    }
    let shell = (cli.shell)("sleep 3");
    let (mock, sb) = setup(cli, bin, |_| {
        Script::sequence(vec![
            shell.reply.clone(),
            Reply::text("The red file.", usage),
            Reply::text("The blue file, as asked.", usage),
        ])
    });
    let out = send_mid_run(&mock, &sb, MESSAGE);
    let json = out.json();
    assert_eq!(
        json["content"],
        json!([text_item("The blue file, as asked.")])
    );
    let mut r = out.result();
    r["messages"][0]["at"] = json!("AT");
    assert_eq!(
        r["messages"],
        json!([{"at": "AT", "text": MESSAGE, "delivery": "afterTurn"}])
    );
    assert_eq!(r["attempts"], json!(2));
    // Three requests: the command, the first answer, and the turn with the message, which
    // carries the first exchange too (the CLI continued its session).
    let reqs = conversation(cli, &mock, 3);
    let asked = reqs[2].body.to_string();
    assert!(
        asked.contains(MESSAGE)
            && asked.contains("The red file.")
            && asked.contains("Find the file."),
        "{asked}"
    );
    let before = reqs[1].body.to_string();
    assert!(!before.contains(MESSAGE), "{before}");
}

/// The CLI gets the message while its shell tool runs, on its stdin (pi in its RPC mode as
/// a `steer`, claude with its streamed input as a user message): its next request to the
/// model carries the message with the tool's result, that request's answer is the run's,
/// and one process did it all; `stdin` is the types of the lines written to it.
fn message_steered(cli: &Cli, bin: &Path, message: &str, usage: MockUsage, stdin: &[&str]) {
    let shell = (cli.shell)("sleep 3");
    let (mock, sb) = setup(cli, bin, |_| {
        Script::sequence(vec![
            shell.reply.clone(),
            Reply::text("The blue file, as asked.", usage),
        ])
    });
    let out = send_mid_run(&mock, &sb, message);
    let mut r = out.result();
    r["messages"][0]["at"] = json!("AT");
    assert_eq!(r["output"], json!("The blue file, as asked."));
    assert_eq!(
        r["messages"],
        json!([{"at": "AT", "text": message, "delivery": "steered"}])
    );
    assert_eq!(r["attempts"], json!(1));
    let run =
        std::path::Path::new(r["sessionFile"].as_str().unwrap()).with_file_name("stdin.jsonl");
    let commands: Vec<String> = std::fs::read_to_string(run)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(commands, stdin);
    let reqs = conversation(cli, &mock, 2);
    let asked = reqs[1].body.to_string();
    assert!(
        asked.contains(message) && asked.contains("Find the file."),
        "{asked}"
    );
    assert!(!reqs[0].body.to_string().contains(message));
}

fn implementer_writes(cli: &Cli, bin: &Path) {
    let mut tools = Vec::new();
    let (mock, sb) = setup(cli, bin, |sb| {
        tools = vec![(cli.write)(&pwned(sb)), (cli.shell)("echo y >> pwned.txt")];
        let mut replies: Vec<Reply> = tools.iter().map(|t| t.reply.clone()).collect();
        replies.push(Reply::text("Wrote it.", MockUsage::default()));
        Script::sequence(replies)
    });
    // A permission prompt would hang a headless run: the idle timeout would say so.
    let out = sb.run("implementer", WRITE_TASK, &WRITE_FLAGS, WALL_CLOCK);
    report("implementer write", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(pwned(&sb)).ok().as_deref(),
        Some("x\ny\n"),
        "the implementer wrote the file with both tools"
    );
    let mut items = shown(&tools.iter().collect::<Vec<_>>());
    items.push(text_item("Wrote it."));
    assert_eq!(
        normalized(out.result()),
        expected(
            cli,
            "implementer",
            WRITE_TASK,
            json!({"exitCode": 0, "usage": no_usage(3), "output": "Wrote it.", "displayItems": items})
        )
    );
    conversation(cli, &mock, 3);
}

/// A restricted agent tries each of `case`'s writes: the file never appears, the model is
/// told each time, and the run itself succeeds. This is the CLI's own guard (its flags,
/// its policy, codex's own sandbox), so orchestrate's sandbox is off here: the guard
/// must hold where no sandbox can be had.
fn refusal(cli: &Cli, case: &Refusal, bin: &Path) {
    let mut attempts = Vec::new();
    let (mock, sb) = setup(cli, bin, |sb| {
        attempts = (case.attempts)(&pwned(sb));
        let mut replies: Vec<Reply> = attempts.iter().map(|a| a.tool.reply.clone()).collect();
        replies.push(Reply::text(case.answer, MockUsage::default()));
        Script::sequence(replies)
    });
    for (name, text) in case.workdir_files {
        std::fs::write(sb.work.join(name), text).unwrap();
    }
    let mut flags = WRITE_FLAGS.to_vec();
    flags.extend_from_slice(&["--sandbox", "off"]);
    let out = sb.run(case.agent, WRITE_TASK, &flags, WALL_CLOCK);
    report(case.test, &mock, &out, REPORT_LINE_CHARS);
    let path = pwned(&sb);
    assert!(!Path::new(&path).exists(), "{} wrote {path}", case.agent);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let n = attempts.len();
    let mut items = shown(&attempts.iter().map(|a| &a.tool).collect::<Vec<_>>());
    items.push(text_item(case.answer));
    let mut fields = json!({"exitCode": 0, "usage": no_usage(case.turns), "output": case.answer,
                            "displayItems": items, "sandbox": {"mode": "off", "mechanism": "none"}});
    let asked: Vec<&Value> = attempts
        .iter()
        .filter_map(|a| a.permission.as_ref())
        .collect();
    if !asked.is_empty() {
        fields["permissions"] = json!(asked);
    }
    assert_eq!(
        normalized(out.result()),
        expected(cli, case.agent, WRITE_TASK, fields)
    );
    // How the CLI refused, as its model was told.
    let reqs = conversation(cli, &mock, n + 1);
    check_offered(case.offered, cli, &reqs[0].body);
    let outputs = mock_llm::tool_result_texts(&reqs[n].body);
    assert_eq!(outputs.len(), n, "{outputs:?}");
    for (a, o) in attempts.iter().zip(&outputs) {
        assert!(o.contains(&a.refusal), "{:?} in {outputs:#?}", a.refusal);
    }
}

/// A task that starts with `-` (see [`OPTION_LIKE_TASKS`]), given to an agent with a
/// system prompt and to one without: the CLI sends it to the model as the user's prompt
/// (instead of printing its version, or refusing an unknown option), and the run is an
/// ordinary success.
fn option_like_task(cli: &Cli, task: &str, sent_as: Sent, bin: &Path) {
    let answer = "Done.";
    let usage = MockUsage {
        input: 10,
        output: 2,
        cached: 0,
    };
    let (mock, sb) = setup(cli, bin, |_| Script::always(Reply::text(answer, usage)));
    for (n, agent) in ["worker", "bare"].into_iter().enumerate() {
        let out = sb.run_after_dashes(agent, task, WALL_CLOCK);
        report(
            &format!("{agent}: task {task:?}"),
            &mock,
            &out,
            REPORT_LINE_CHARS,
        );
        assert_eq!(out.status, 0, "stderr: {}", out.stderr);
        let r = out.result();
        assert_eq!(
            (&r["task"], &r["output"], &r["exitCode"]),
            (&json!(task), &json!(answer), &json!(0)),
            "{r}"
        );
        let reqs = mock.conversation();
        assert_eq!(
            reqs.len(),
            n + 1,
            "one request per run: {:#?}",
            mock.requests()
        );
        let sent = mock_llm::user_texts(cli.wire.api, &reqs[n].body);
        // Every backend puts the task at the end of the message (after the agent's
        // prompt, or pi's `Task: `).
        let seen = |t: &str| match sent_as {
            Sent::Exactly => t.to_string(),
            Sent::QuotesAside => t.replace('"', ""),
        };
        assert!(
            sent.iter()
                .any(|t| seen(t).trim_end().ends_with(task.trim_end())),
            "{agent}: a user message ends with the task {task:?}: {sent:#?}"
        );
    }
}

/// `scripts/demo`, with the binaries this test run built and the pinned pi: the result of
/// `orchestrate run explorer "find auth"` through the real pi, whose answer quotes what
/// pi's own read tool returned from the demo's repository; the run stays where
/// `orchestrate show` finds it.
fn scripts_demo(bin: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = std::env::current_exe().unwrap();
    let mock = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples/mock_llm");
    assert!(
        mock.exists(),
        "{} is not built: plain `cargo test` builds it, or `cargo build --example mock_llm`",
        mock.display()
    );
    let start = std::time::Instant::now();
    let state = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(root.join("scripts/demo"));
    // The whole result (display items included); the demo prints the lean one by default.
    cmd.args(["--details", "full"])
        .env("ORCHESTRATE_STATE_DIR", state.path())
        .env("ORCHESTRATE_CONTRACT_PI", bin)
        .env("DEMO_ORCHESTRATE", super::orchestrate_bin())
        .env("DEMO_MOCK_LLM", &mock)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let out = super::wait_bounded(cmd.spawn().unwrap(), start, WALL_CLOCK);
    note(&format!("=== scripts/demo\n{}\n{}", out.stderr, out.stdout));
    assert_eq!(out.status, 0, "{}", out.stderr);
    let r = out.result();
    let answer = format!(
        "{}/// Checks a user's password against the stored hash.\n",
        mock_llm::program::DEMO_PREFIX
    );
    assert!(
        r["output"].as_str().unwrap().starts_with(&answer),
        "{}",
        r["output"]
    );
    assert_eq!(
        (
            &r["model"],
            &r["usage"]["turns"],
            &r["displayItems"][0],
            &r["displayItems"][1]
        ),
        (
            &json!("mock/scripted-mock"),
            &json!(3),
            &json!({"type": "toolCall", "name": "ls", "args": {"path": "src"}}),
            &json!({"type": "toolCall", "name": "read", "args": {"path": "src/auth.rs"}})
        )
    );
    assert!(
        out.stderr.contains("the mock LLM answered 3 requests"),
        "{}",
        out.stderr
    );
    // The run outlives the demo, and the demo says how to open it.
    let id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    // `orchestrate show …` when one is on PATH, else the path of the one the demo ran.
    let kept = format!("run {id} is kept in {}: `", state.path().display());
    let said = out.stderr.split(&kept).nth(1).unwrap_or_default();
    assert!(
        said.starts_with(&format!("orchestrate show {id}` opens it"))
            || said.starts_with(&format!(
                "{} show {id}` opens it",
                super::orchestrate_bin().display()
            )),
        "{}",
        out.stderr
    );
    let shown = std::process::Command::new(super::orchestrate_bin())
        .args(["show", &id, "--json"])
        .env("ORCHESTRATE_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(shown.status.code(), Some(0), "{shown:?}");
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        shown["result"]["details"]["results"][0]["output"],
        r["output"]
    );
}

/// `scripts/playground --cli CLI explorer TASK` in a folder of the user's: the playground
/// mock has the CLI list the folder with its own tool and answers quoting the listing;
/// the run is recorded where `orchestrate show` finds it.
fn scripts_playground(cli: &Cli, bin: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = std::env::current_exe().unwrap();
    let mock = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples/mock_llm");
    let state = tempfile::tempdir().unwrap();
    let private = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("playground-marker.txt"), "x\n").unwrap();
    let start = std::time::Instant::now();
    let mut cmd = std::process::Command::new(root.join("scripts/playground"));
    cmd.args(["--cli", cli.name, "explorer", "what is in here?"])
        .current_dir(folder.path())
        .env(cli.var, bin)
        .env("ORCHESTRATE_STATE_DIR", state.path())
        .env("PLAYGROUND_DIR", private.path())
        .env("DEMO_ORCHESTRATE", super::orchestrate_bin())
        .env("DEMO_MOCK_LLM", &mock)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let out = super::wait_bounded(cmd.spawn().unwrap(), start, WALL_CLOCK);
    note(&format!(
        "=== scripts/playground\n{}\n{}",
        out.stderr, out.stdout
    ));
    assert_eq!(out.status, 0, "{}", out.stderr);
    let r = out.result();
    let answer = r["output"].as_str().unwrap_or_default().to_string();
    let answer = if answer.is_empty() {
        out.json()["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    } else {
        answer
    };
    assert!(
        answer.starts_with(&format!(
            "{} You asked:\n\n> ",
            mock_llm::playground::PLAYGROUND_PREFIX
        )) && answer.contains("what is in here?")
            && answer.contains("playground-marker.txt"),
        "{answer}"
    );
    assert_eq!(r["usage"]["turns"], json!(2), "{r}");
    let id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    assert!(
        out.stderr.contains(&format!("run {id}: `")),
        "{}",
        out.stderr
    );
    let shown = std::process::Command::new(super::orchestrate_bin())
        .args(["show", &id, "--json"])
        .env("ORCHESTRATE_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(shown.status.code(), Some(0), "{shown:?}");
}

/// The shell tool's attempts to write each of `targets` (`echo x > PATH`), the model's
/// final answer after them, and the run of `agent`; returns the result and what each
/// attempt's tool result said, in order.
fn shell_writes(
    cli: &Cli,
    bin: &Path,
    agent: &str,
    targets: impl FnOnce(&Sandbox) -> Vec<String>,
) -> (Finished, Sandbox, Vec<String>, Vec<String>) {
    let mut paths = Vec::new();
    let answer = "Tried.";
    let (mock, sb) = setup(cli, bin, |sb| {
        paths = targets(sb);
        let mut replies: Vec<Reply> = paths
            .iter()
            .map(|p| (cli.shell)(&format!("echo x > {p}")).reply)
            .collect();
        replies.push(Reply::text(answer, MockUsage::default()));
        Script::sequence(replies)
    });
    let out = sb.run(agent, WRITE_TASK, &WRITE_FLAGS, WALL_CLOCK);
    report(agent, &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(
        out.result()["output"],
        json!(answer),
        "the run ends with an answer"
    );
    // Each command really ran: its own words about each write reached the model.
    let reqs = conversation(cli, &mock, paths.len() + 1);
    let outputs = mock_llm::tool_result_texts(&reqs[paths.len()].body);
    assert_eq!(outputs.len(), paths.len(), "{outputs:#?}");
    (out, sb, paths, outputs)
}

/// "Read-only file system" in a tool result (the shell's own message about the
/// redirection); "No such file or directory" for a place in /tmp, which the child sees
/// empty but for its own places.
const DENIED: [&str; 2] = ["Read-only file system", "No such file or directory"];
/// The sandbox's layers, as root holds them here (Landlock ABI 6).
const LAYERS: [&str; 6] = [
    "pid-namespace",
    "mounts",
    "landlock",
    "scopes",
    "seccomp",
    "no-tty",
];

/// A path in /etc no other test uses (these tests run as root, who could otherwise write
/// there).
fn etc_target(sb: &Sandbox) -> String {
    let tag = sb.root.path().file_name().unwrap().to_string_lossy();
    format!("/etc/orchestrate-contract{tag}")
}

fn sandboxed_read_only(cli: &Cli, bin: &Path) {
    let (out, _sb, paths, outputs) = shell_writes(cli, bin, "boxed", |sb| {
        vec![pwned(sb), sb.home.join(PWNED).display().to_string()]
    });
    assert_eq!(
        out.result()["sandbox"],
        json!({"mode": "read-only", "mechanism": "namespaces", "layers": LAYERS})
    );
    for (p, o) in paths.iter().zip(&outputs) {
        assert!(!Path::new(p).exists(), "{p} was written");
        assert!(DENIED.iter().any(|d| o.contains(d)), "{p}: {o}");
    }
}

fn sandboxed_workspace_write(cli: &Cli, bin: &Path) {
    let (out, sb, paths, outputs) = shell_writes(cli, bin, "implementer", |sb| {
        let sibling = sb.root.path().join("sibling");
        std::fs::create_dir_all(&sibling).unwrap();
        vec![
            pwned(sb),
            sb.home.join(PWNED).display().to_string(),
            etc_target(sb),
            sibling.join(PWNED).display().to_string(),
        ]
    });
    assert_eq!(
        out.result()["sandbox"],
        json!({"mode": "workspace-write", "mechanism": "namespaces", "layers": LAYERS})
    );
    assert_eq!(
        std::fs::read_to_string(&paths[0]).ok().as_deref(),
        Some("x\n"),
        "written in the working directory ({})",
        outputs[0]
    );
    assert!(
        !DENIED.iter().any(|d| outputs[0].contains(d)),
        "{}",
        outputs[0]
    );
    for (p, o) in paths.iter().zip(&outputs).skip(1) {
        assert!(!Path::new(p).exists(), "{p} was written");
        assert!(DENIED.iter().any(|d| o.contains(d)), "{p}: {o}");
    }
    drop(sb);
}

/// Credentials planted in the test's HOME: `(path under HOME, contents)`.
const PLANTED_SECRETS: [(&str, &str); 3] = [
    (".ssh/id_ed25519", "contract-secret-ssh-key"),
    (".aws/credentials", "contract-secret-aws-key"),
    (".config/gh/hosts.yml", "contract-secret-gh-token"),
];
/// orchestrate's records of the run, which the child tries to forge.
const RECORDS: [&str; 5] = [
    "result.json",
    "exit-status",
    "supervisor.json",
    "session.jsonl",
    "events.jsonl",
];

/// A prompt-injected agent with the CLI's own guard off (`worker` may run any command;
/// orchestrate's sandbox is the only guard) uses the CLI's shell tool to plant code in
/// the CLI's own settings and hooks, in the user's shell start-up file and in the
/// workspace's agent settings; to forge orchestrate's records of the run; and to read
/// the user's credentials. Nothing of it lands, and the CLI still works: it answers,
/// orchestrate records its answer, and (where it can) a resumed run continues its session.
fn hostile_shell(cli: &Cli, bin: &Path, user: Option<&'static super::Unprivileged>) {
    let answer = "Tried.";
    let mut plants = Vec::new();
    let mut before = Vec::new();
    let (mock, mut sb) = setup(cli, bin, |sb| {
        for (path, secret) in PLANTED_SECRETS {
            let path = sb.home.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, format!("{secret}\n")).unwrap();
        }
        std::fs::write(sb.home.join(".bashrc"), "# the user's\n").unwrap();
        plants = (cli.config_plants)(sb);
        plants.extend([
            sb.home.join(".bashrc"),
            sb.home.join(".gitconfig"),
            sb.work.join(".mcp.json"),
            sb.work.join(".vscode/tasks.json"),
            sb.work.join(format!(".{}/settings.json", cli.name)),
        ]);
        // No `$(…)` or backquotes: some CLIs refuse a command with a substitution.
        let mut command = String::new();
        for p in &plants {
            let p = p.display();
            command.push_str(&format!(
                "mkdir -p \"{p}\"; rmdir \"{p}\"; (echo planted >> \"{p}\") 2>/dev/null && echo \"wrote {p}\" || echo \"denied {p}\"\n"
            ));
        }
        let runs = sb.state.join("runs");
        for f in RECORDS {
            command.push_str(&format!(
                "(echo forged > \"{}/$ORCHESTRATE_RUN_ID/{f}\") 2>/dev/null && echo 'forged {f}' || echo 'kept {f}'\n",
                runs.display()
            ));
        }
        command.push_str(&format!(
            "(echo forged >> \"{}\") 2>/dev/null && echo 'forged index' || echo 'kept index'\n",
            sb.state.join("runs.jsonl").display()
        ));
        for (path, _) in PLANTED_SECRETS {
            command.push_str(&format!("cat ~/{path} 2>&1\n"));
        }
        command.push_str("ls -a ~/.ssh ~/.aws\necho end-of-probe");
        Script::sequence(vec![
            (cli.shell)(&command).reply,
            Reply::text(answer, MockUsage::default()),
            Reply::text("Second answer.", MockUsage::default()),
        ])
    });
    for p in &plants {
        before.push(std::fs::read(p).ok());
    }
    if let Some(user) = user {
        sb.as_user(user);
    }
    let out = sb.run("worker", WRITE_TASK, &WRITE_FLAGS, WALL_CLOCK);
    report("hostile shell", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(
        (&r["output"], &r["sandbox"]),
        (
            &json!(answer),
            &json!({"mode": "workspace-write", "mechanism": "namespaces", "layers": LAYERS})
        )
    );
    // The command ran, all of it, in the CLI's shell.
    let reqs = conversation(cli, &mock, 2);
    let outputs = mock_llm::tool_result_texts(&reqs[1].body).join("\n");
    assert!(outputs.contains("end-of-probe"), "{outputs}");
    // Nothing planted: each file as it was (a write to the CLI's own folders went to a
    // private layer, thrown away).
    for (p, was) in plants.iter().zip(&before) {
        assert_eq!(
            &std::fs::read(p).ok(),
            was,
            "{} changed\n{outputs}",
            p.display()
        );
    }
    for dir in [
        ".vscode",
        ".claude",
        ".codex",
        ".gemini",
        ".pi",
        ".opencode",
    ] {
        assert!(!sb.work.join(dir).exists(), "{dir} left in the workspace");
    }
    // No record forged: each write refused, and what orchestrate wrote is what it shows.
    for f in RECORDS {
        assert!(outputs.contains(&format!("kept {f}")), "{f}: {outputs}");
    }
    assert!(outputs.contains("kept index"), "{outputs}");
    let id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let start = std::time::Instant::now();
    let show = sb
        .program(&super::orchestrate_bin(), &["show", &id, "--json"])
        .spawn()
        .expect("spawn orchestrate show");
    let shown = super::wait_bounded(show, start, WALL_CLOCK);
    assert_eq!(shown.status, 0, "{}", shown.stderr);
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(
        shown["result"]["details"]["results"][0]["output"],
        json!(answer)
    );
    let index = std::fs::read_to_string(sb.state.join("runs.jsonl")).unwrap();
    assert!(!index.contains("forged"), "{index}");
    let events =
        std::fs::read_to_string(sb.state.join("runs").join(&id).join("events.jsonl")).unwrap();
    assert!(!events.contains("forged"), "{events}");
    assert!(events.starts_with("{\"at\":"), "{events}");
    if let Some(user) = user {
        use std::os::unix::fs::MetadataExt;
        let run = std::fs::metadata(sb.state.join("runs").join(&id)).unwrap();
        assert_eq!(
            run.uid(),
            user.uid,
            "orchestrate ran as the unprivileged user"
        );
    }
    // No credential read, neither by the model nor in the result.
    for (path, secret) in PLANTED_SECRETS {
        assert!(!outputs.contains(secret), "{path} was read: {outputs}");
        assert!(!out.stdout.contains(secret), "{path} in the result");
    }
    // The CLI still works: its session goes on where it can.
    if cli.resume.is_some() {
        let second = sb.run_args(&["run", "--resume", &id, "What did you find?"], WALL_CLOCK);
        report("hostile shell, resumed", &mock, &second, REPORT_LINE_CHARS);
        assert_eq!(second.status, 0, "{}", second.stderr);
        assert_eq!(second.result()["output"], json!("Second answer."));
        let asked = mock.conversation().last().unwrap().body.to_string();
        assert!(
            asked.contains("end-of-probe") && asked.contains(answer),
            "the resumed session holds the first run: {asked}"
        );
    }
}

fn parallel_worktrees(cli: &Cli, bin: &Path) {
    let shell = (cli.shell)("pwd > where.txt");
    let (mock, sb) = setup(cli, bin, |_| {
        Script::tool_then_text(
            shell.reply.clone(),
            Reply::text("Done.", MockUsage::default()),
        )
    });
    // The CLI has run once on this machine already, as it normally has: three first
    // starts at once on a fresh HOME race for its own state (opencode 1.18.33: two
    // processes migrating its new database at the same time, one fails).
    let warm_up = sb.run("worker", "Warm up.", &["--idle-timeout", "60s"], WALL_CLOCK);
    report(
        "parallel worktrees, warm-up",
        &mock,
        &warm_up,
        REPORT_LINE_CHARS,
    );
    assert_eq!(warm_up.status, 0, "stderr: {}", warm_up.stderr);
    let w = &sb.work;
    std::fs::remove_file(w.join("where.txt")).unwrap();
    git::commit_files(w, &[("README.md", "hello\n")]);
    let before = checkout_state(w);
    let out = sb.run_args(
        &[
            "run",
            "--task",
            "implementer=Record where you are.",
            "--task",
            "implementer=Record where you are.",
            "--task",
            "implementer=Record where you are.",
            "--isolation",
            "worktree",
            "--backend",
            cli.name,
            "--idle-timeout",
            "60s",
        ],
        WALL_CLOCK,
    );
    report("parallel worktrees", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let json = out.json();
    let results = json["details"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    let mut branches = Vec::new();
    for r in results {
        let id = r["runId"].as_str().unwrap();
        let wt = &r["worktree"];
        let path = sb.state.join("worktrees").join(id);
        assert_eq!(
            (&wt["branch"], &wt["changedFiles"], &wt["kept"], &wt["path"]),
            (
                &json!(format!("orchestrate/{id}")),
                &json!(["where.txt"]),
                &json!(true),
                &json!(path.display().to_string())
            ),
            "{r}"
        );
        // The shell ran in the run's own worktree, and its file is on the run's branch.
        let recorded = git(w, &["show", &format!("orchestrate/{id}:where.txt")]);
        assert_eq!(recorded.trim(), path.display().to_string());
        branches.push(wt["branch"].as_str().unwrap().to_string());
    }
    branches.sort();
    branches.dedup();
    assert_eq!(branches.len(), 3, "three branches");
    assert_eq!(
        checkout_state(w),
        before,
        "the parent's checkout is unchanged"
    );
    // The warm-up's two requests, then two per task.
    conversation(cli, &mock, 8);
}

#[derive(Clone, Copy, PartialEq)]
enum DaemonEnd {
    RunEnds,
    OrchestrateKilled,
}

/// The child's shell starts a daemon in a session of its own (`setsid -f`, stdio closed):
/// it is there while the run goes on, and gone when the run ends, or once orchestrate
/// itself is SIGKILLed.
fn setsid_daemon(cli: &Cli, bin: &Path, end: DaemonEnd) {
    use std::time::{Duration, Instant};
    // A command line no other process has.
    let sleep = "sleep 3599";
    let command = format!("setsid -f {sleep} </dev/null >/dev/null 2>&1; sleep 1; echo started");
    let shell = (cli.shell)(&command);
    let (mock, mut sb) = setup(cli, bin, |_| {
        let after = match end {
            DaemonEnd::RunEnds => Reply::text("Started it.", MockUsage::default()),
            // The CLI waits for the model for ever; only the kill ends the run.
            DaemonEnd::OrchestrateKilled => Reply::hang(""),
        };
        Script::tool_then_text(shell.reply.clone(), after)
    });
    for (k, v) in cli.hang.env {
        sb.env(k, v);
    }
    let start = Instant::now();
    let earlier_runs = super::run_ids(&sb.state);
    let mut child = sb
        .command("worker", "Start the daemon.", &["--idle-timeout", "60s"])
        .spawn()
        .expect("spawn orchestrate");
    let marker = sb.marker();
    // The daemon shows up among the sandbox's processes.
    let daemon = loop {
        let found: Vec<i32> = super::pids_with_env(&[&marker])
            .into_iter()
            .filter(|p| super::cmdline(*p) == sleep)
            .collect();
        if let Some(p) = found.first() {
            break *p;
        }
        if child.try_wait().unwrap().is_some() || start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let out = super::wait_bounded(child, start, WALL_CLOCK);
            report("setsid daemon", &mock, &out, REPORT_LINE_CHARS);
            panic!("the daemon never showed up: {out:#?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ids: Vec<String> = super::run_ids(&sb.state)
        .into_iter()
        .filter(|id| !earlier_runs.contains(id))
        .collect();
    let run_marker = format!("ORCHESTRATE_RUN_ID={}", ids[0]);
    match end {
        DaemonEnd::RunEnds => {
            let out = super::wait_bounded(child, start, WALL_CLOCK);
            report("setsid daemon, run ends", &mock, &out, REPORT_LINE_CHARS);
            assert_eq!(out.status, 0, "stderr: {}", out.stderr);
            assert_eq!(out.result()["output"], json!("Started it."));
            let outputs = mock_llm::tool_result_texts(&mock.conversation()[1].body);
            assert!(outputs.iter().any(|o| o.contains("started")), "{outputs:?}");
        }
        DaemonEnd::OrchestrateKilled => {
            // Killed while the CLI waits for the model.
            assert!(mock.wait_for_conversation(2, Duration::from_secs(60)));
            unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
            let _ = child.wait();
        }
    }
    let survivors = super::wait_all_gone(&[daemon], Duration::from_secs(5));
    assert_eq!(survivors, [], "the daemon outlived the run");
    let late = super::wait_all_gone(
        &super::pids_with_env(&[&run_marker, &marker]),
        Duration::from_secs(5),
    );
    assert_eq!(late, [], "no process of the run is left");
}

/// The schema of the structured-answer scenarios, in `<root>/schema.json`.
const FILES_SCHEMA: &str = r#"{"type": "object", "properties": {"files": {"type": "array", "items": {"type": "string"}}, "count": {"type": "integer"}}, "required": ["files", "count"]}"#;
const STRUCTURED_TASK: &str = "List the auth files.";
/// What the mock's model answers wrongly: `count` is a string.
const WRONG_ANSWER: &str = r#"{"files": ["src/auth.rs"], "count": "one"}"#;
const WRONG_ERROR: &str = r#"$.count: "one" is not of type "integer""#;

fn right_answer() -> Value {
    json!({"files": ["src/auth.rs", "src/session.rs"], "count": 2})
}

fn files_schema() -> Value {
    serde_json::from_str(FILES_SCHEMA).unwrap()
}

/// Every string in `v`, joined: what a request says, whatever its API's shape.
fn strings_in(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(strings_in).collect::<Vec<_>>().join("\n"),
        Value::Object(m) => m.values().map(strings_in).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// A sandbox with the schema written, whose mock answers `replies` in turn; and the
/// `--output-schema` flags.
fn structured_setup(cli: &Cli, bin: &Path, replies: Vec<Reply>) -> (MockLlm, Sandbox, Vec<String>) {
    let (mock, sb) = setup(cli, bin, |_| Script::sequence(replies));
    let file = sb.root.path().join("schema.json");
    std::fs::write(&file, FILES_SCHEMA).unwrap();
    let flags = vec![
        "--output-schema".to_string(),
        file.to_str().unwrap().to_string(),
    ];
    (mock, sb, flags)
}

fn run_structured(sb: &Sandbox, flags: &[String]) -> super::Finished {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    sb.run("worker", STRUCTURED_TASK, &flags, WALL_CLOCK)
}

/// The schema reached the model the way the CLI passes it on.
fn check_schema_sent(cli: &Cli, req: &RecordedRequest) {
    match cli.output_schema {
        SchemaSent::Tool { name, .. } => {
            let tool = req.body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["name"] == json!(name))
                .unwrap_or_else(|| panic!("no {name} tool: {}", req.body["tools"]));
            assert_eq!(tool["input_schema"], files_schema());
        }
        SchemaSent::TextFormat => assert_eq!(
            req.body["text"]["format"],
            json!({"type": "json_schema", "name": "codex_output_schema", "strict": true,
                   "schema": files_schema()})
        ),
        SchemaSent::Prompt => {
            let asked = strings_in(&req.body);
            let compact = files_schema().to_string();
            let request = "matches this JSON Schema, and nothing else (no prose around it; a ```json fence is fine):";
            // opencode 1.18.33 hands its model the message argument in double quotes,
            // the quotes inside it escaped (`"List …{\"properties\":…}"`).
            let escaped = compact.replace('"', "\\\"");
            assert!(
                asked.contains(&format!("{request}\n{compact}"))
                    || asked.contains(&format!("{request}\n{escaped}")),
                "the schema follows the task: {asked}"
            );
        }
    }
}

/// The turns the CLI counts for `text` text requests and `tool` answers by tool call.
fn structured_turns(cli: &Cli, text: usize, tool: usize) -> u64 {
    let per_tool = match cli.output_schema {
        SchemaSent::Tool { turns, .. } => turns,
        SchemaSent::TextFormat | SchemaSent::Prompt => 1,
    };
    text as u64 + tool as u64 * per_tool
}

fn usage_n(n: u64) -> MockUsage {
    MockUsage {
        input: 100 * n,
        output: 10 * n,
        cached: 0,
    }
}

fn structured_valid(cli: &Cli, bin: &Path) {
    let right = right_answer();
    let (reply, shown) = cli.output_schema.answer(&right, usage_n(1));
    let (mock, sb, flags) = structured_setup(cli, bin, vec![reply]);
    let out = run_structured(&sb, &flags);
    report("structured, valid", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let json = out.json();
    assert_eq!(json["content"], json!([text_item(&right.to_string())]));
    assert_eq!(json["details"].get("error"), None);
    assert_eq!(
        normalized(out.result()),
        expected(
            cli,
            "worker",
            STRUCTURED_TASK,
            json!({"exitCode": 0, "usage": summed(cli, &[usage_n(1)], structured_turns(cli, 0, 1)),
                   "output": right.to_string(), "displayItems": [shown],
                   "structured": right})
        )
    );
    let reqs = conversation(cli, &mock, 1);
    check_schema_sent(cli, &reqs[0]);
}

fn structured_repaired(cli: &Cli, bin: &Path) {
    let right = right_answer();
    let texts = cli.output_schema.text_requests();
    let mut replies: Vec<Reply> = (0..texts)
        .map(|i| Reply::text(WRONG_ANSWER, usage_n(i as u64 + 1)))
        .collect();
    let (reply, shown) = cli.output_schema.answer(&right, usage_n(5));
    replies.push(reply);
    let usages: Vec<MockUsage> = (0..texts)
        .map(|i| usage_n(i as u64 + 1))
        .chain([usage_n(5)])
        .collect();
    let (mock, sb, flags) = structured_setup(cli, bin, replies);
    let out = run_structured(&sb, &flags);
    report("structured, repaired", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let json = out.json();
    assert_eq!(json["content"], json!([text_item(&right.to_string())]));
    let mut items = vec![text_item(WRONG_ANSWER); texts];
    items.push(shown);
    // Two attempts; the usage of both turns, as the CLI reported it for each (see
    // `resumed_totals` in src/backends/: claude's cost and codex's tokens for a resumed
    // session are the whole session's).
    assert_eq!(
        normalized(out.result()),
        expected(
            cli,
            "worker",
            STRUCTURED_TASK,
            json!({"exitCode": 0, "usage": summed(cli, &usages, structured_turns(cli, texts, 1)),
            "output": right.to_string(), "displayItems": items,
            "structured": right, "attempts": 2,
            // The repair turn is an attempt of its own.
            "attemptsDetail": [
                {"model": cli.model, "exitCode": 0,
                 "error": format!("Answer does not match the output schema: {WRONG_ERROR}")},
                {"model": cli.model, "exitCode": 0}
            ]})
        )
    );
    // The repair turn continued the child's own session: its request carries the first
    // turn's wrong answer and the message saying what was wrong with it.
    let reqs = conversation(cli, &mock, texts + 1);
    check_schema_sent(cli, &reqs[0]);
    check_schema_sent(cli, &reqs[texts]);
    let asked = strings_in(&reqs[texts].body);
    let message = format!(
        "Your answer does not match the required output schema: {WRONG_ERROR}. Answer again with only one JSON value that matches this JSON Schema, and nothing else:\n{}",
        files_schema()
    );
    assert!(asked.contains(&message), "the repair message: {asked}");
    assert!(
        asked.contains(WRONG_ANSWER),
        "the first turn's answer: {asked}"
    );
    assert!(asked.contains(STRUCTURED_TASK), "the task: {asked}");
}

fn structured_failing(cli: &Cli, bin: &Path) {
    let texts = cli.output_schema.text_requests();
    let (mock, sb, flags) = structured_setup(cli, bin, vec![Reply::text(WRONG_ANSWER, usage_n(1))]);
    let out = run_structured(&sb, &flags);
    report("structured, failing", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let message = format!("Answer does not match the output schema: {WRONG_ERROR}");
    let json = out.json();
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_FAILED", "message": message})
    );
    assert_eq!(
        json["content"],
        json!([text_item(&format!("{message}\n\nAnswer:\n{WRONG_ANSWER}"))])
    );
    assert_eq!(
        normalized(out.result()),
        expected(
            cli,
            "worker",
            STRUCTURED_TASK,
            json!({"exitCode": 0,
            "usage": summed(cli, &vec![usage_n(1); 2 * texts], structured_turns(cli, 2 * texts, 0)),
            "error": message, "output": WRONG_ANSWER,
            "displayItems": vec![text_item(WRONG_ANSWER); 2 * texts], "attempts": 2,
            "attemptsDetail": [
                {"model": cli.model, "exitCode": 0, "error": message},
                {"model": cli.model, "exitCode": 0, "error": message}
            ]})
        )
    );
    conversation(cli, &mock, 2 * texts);
}

fn structured_without_resume(cli: &Cli, bin: &Path) {
    let (mock, sb, flags) = structured_setup(cli, bin, vec![Reply::text(WRONG_ANSWER, usage_n(1))]);
    let out = run_structured(&sb, &flags);
    report("structured, no resume", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let message = format!("Answer does not match the output schema: {WRONG_ERROR}");
    let mut want = expected(
        cli,
        "worker",
        STRUCTURED_TASK,
        json!({"exitCode": 0, "usage": summed(cli, &[usage_n(1)], 1),
               "error": message, "output": WRONG_ANSWER,
               "displayItems": [text_item(WRONG_ANSWER)]}),
    );
    let warning = format!(
        "no repair turn for the answer that does not match the output schema: {} cannot continue its session",
        cli.name
    );
    match want.get_mut("warnings").and_then(Value::as_array_mut) {
        Some(w) => w.push(json!(warning)),
        None => want["warnings"] = json!([warning]),
    }
    assert_eq!(normalized(out.result()), want);
    let reqs = conversation(cli, &mock, 1);
    check_schema_sent(cli, &reqs[0]);
}

/// What a fan-out against the mock's rate limit came to.
struct FanOutRun {
    out: Finished,
    /// 429s the mock served.
    refused: u64,
    /// Requests the mock answered with a reply.
    served: usize,
}

/// `tasks` worker tasks (`@N` told apart), `--concurrency ceiling`, against a mock that
/// admits `per_second` requests a second (`retry_after` asked of the others, else when
/// the next would pass), with the CLI's own retries on. Each child asks the mock twice: a
/// shell tool call, then an answer.
fn fan_out_against_rate_limit(
    cli: &Cli,
    bin: &Path,
    tasks: usize,
    ceiling: usize,
    per_second: usize,
    retry_after: Option<Duration>,
    adaptive: bool,
) -> FanOutRun {
    let rate_limit = cli.rate_limit.as_ref().expect("a CLI that shows 429s");
    let usage = MockUsage {
        input: 50,
        output: 5,
        cached: 0,
    };
    let (mock, mut sb) = setup(cli, bin, |_| {
        Script::tool_then_text((cli.shell)("echo hi").reply, Reply::text("Done.", usage))
    });
    (rate_limit.retries_on)(&mut sb);
    sb.env("ORCHESTRATE_MAX_TASKS", tasks.to_string());
    if !adaptive {
        sb.env("ORCHESTRATE_ADAPTIVE_CONCURRENCY", "false");
    }
    mock.rate_limit_asking(per_second, retry_after);
    let concurrency = ceiling.to_string();
    let specs: Vec<String> = (0..tasks)
        .map(|i| format!("worker=Run echo hi, then say done. @{i}"))
        .collect();
    let mut args = vec![
        "run",
        "--backend",
        cli.name,
        "--concurrency",
        &concurrency,
        "--idle-timeout",
        "120s",
        "--connect-timeout",
        "120s",
    ];
    for spec in &specs {
        args.extend_from_slice(&["--task", spec]);
    }
    let out = sb.run_args(&args, Duration::from_secs(900));
    let served = mock
        .conversation()
        .iter()
        .filter(|r| !r.served.starts_with("429"))
        .count();
    FanOutRun {
        refused: mock.rate_limited(),
        served,
        out,
    }
}

/// The tasks of a fan-out's result that failed, with their errors.
fn failed_tasks(json: &Value) -> Vec<(usize, String)> {
    json["details"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .enumerate()
        .filter(|(_, r)| r["exitCode"] != json!(0) || r.get("error").is_some())
        .map(|(i, r)| (i, r["error"].as_str().unwrap_or_default().to_string()))
        .collect()
}

/// The CLI's retry notices reach the scheduler: it runs fewer children at once, says so,
/// and every child gets its answer.
fn rate_limited_fan_out(cli: &Cli, bin: &Path) {
    let says_delay = cli.rate_limit.as_ref().is_some_and(|r| r.says_delay);
    let run = fan_out_against_rate_limit(
        cli,
        bin,
        6,
        6,
        1,
        says_delay.then_some(Duration::from_secs(2)),
        true,
    );
    note(&format!(
        "429s: {}, requests served: {}, {:.1}s\nstderr: {}",
        run.refused,
        run.served,
        run.out.elapsed.as_secs_f64(),
        run.out.stderr
    ));
    assert_eq!(run.out.status, 0, "stderr: {}", run.out.stderr);
    let json = run.out.json();
    assert_eq!(failed_tasks(&json), vec![]);
    assert!(run.refused > 0, "the mock's rate limit was never reached");
    let scheduler = json["details"]["scheduler"]
        .as_object()
        .unwrap_or_else(|| panic!("no details.scheduler: {}", json["details"]));
    assert_eq!(scheduler.len(), 1, "one provider and model: {scheduler:?}");
    let (_, lane) = scheduler.iter().next().unwrap();
    assert!(
        lane["throttled"].as_u64().unwrap() > 0 && lane["floor"].as_u64().unwrap() < 6,
        "{lane}"
    );
    assert!(lane["peak"].as_u64().unwrap() <= 6, "{lane}");
}

/// The done-when of the scheduler: forty children against a provider that admits 2
/// requests a second, with the scheduler's concurrency following the 429s and then at a
/// fixed 16: no child fails on the rate limit, and the provider answers fewer 429s.
fn forty_against_a_rate_limit(cli: &Cli, bin: &Path) {
    let adaptive = fan_out_against_rate_limit(cli, bin, 40, 16, 2, None, true);
    let fixed = fan_out_against_rate_limit(cli, bin, 40, 16, 2, None, false);
    let summary = |name: &str, run: &FanOutRun| {
        let json = run.out.json();
        format!(
            "{name}: {} 429s, {} requests served, {} tasks failed, {:.1}s, scheduler {}",
            run.refused,
            run.served,
            failed_tasks(&json).len(),
            run.out.elapsed.as_secs_f64(),
            json["details"]["scheduler"]
        )
    };
    // The figures BENCHMARKS.md quotes (scripts/bench --only scheduler runs this).
    let line = format!(
        "FLEET-BENCH {} | {}",
        summary("adaptive", &adaptive),
        summary("fixed", &fixed)
    );
    note(&line);
    eprintln!("{line}");
    assert_eq!(adaptive.out.status, 0, "stderr: {}", adaptive.out.stderr);
    assert_eq!(failed_tasks(&adaptive.out.json()), vec![]);
    assert!(
        adaptive.refused < fixed.refused,
        "adaptive {} 429s, fixed {}",
        adaptive.refused,
        fixed.refused
    );
}

/// Starts the run of "Find the file." and, once the child has asked the model and its
/// turn goes on (the model's first reply is a command of seconds), sends it `message`
/// with `orchestrate send`; the run's end, which must be a success.
pub fn send_mid_run(mock: &MockLlm, sb: &Sandbox, message: &str) -> Finished {
    let start = std::time::Instant::now();
    let child = sb
        .command("worker", "Find the file.", &[])
        .spawn()
        .expect("spawn orchestrate");
    assert!(
        mock.wait_for_conversation(1, WALL_CLOCK),
        "the child never asked the model"
    );
    let runs: Vec<_> = std::fs::read_dir(sb.state.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let sent = sb
        .in_sandbox(super::orchestrate_command(&["send", &runs[0], message]))
        .output()
        .unwrap();
    assert_eq!(
        sent.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&sent.stdout),
        String::from_utf8_lossy(&sent.stderr)
    );
    let out = super::wait_bounded(child, start, WALL_CLOCK);
    report("message mid-run", mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out
}
