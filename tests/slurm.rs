//! The Slurm runner against a real single-node Slurm cluster on loopback
//! (`scripts/slurm-cluster`: munged, slurmctld and slurmd in a temporary directory, started
//! once for this binary and stopped by pid at its end). The fake agent stands in for pi;
//! the node is this machine, so the job's processes are found in `/proc` by the marker
//! every process of a test sandbox carries (`ORCHESTRATE_TEST_SANDBOX`, passed to the job
//! by `srun --export=ALL`).
//!
//! One test runs the real pi instead, against the loopback mock LLM of the contract tests
//! (tests/mock_llm/): it needs `ORCHESTRATE_CONTRACT_PI` as the pi contract tests do, and
//! is ignored, with the reason, without it (failed with `ORCHESTRATE_REQUIRE_CONTRACT=1`).
//!
//! `harness = false` (libtest-mimic): whether Slurm is installed is known only at run
//! time. Without it (or without root, which the cluster needs) every test is reported
//! `ignored (<why>)`, unless `ORCHESTRATE_REQUIRE_SLURM=1` (CI), which makes them fail.

mod mock_llm;
mod support;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use mock_llm::contract::cli::{text_item, tool_item};
use mock_llm::contract::clis::pi::PI;
use mock_llm::contract::{self, harness, scenarios};
use mock_llm::{MockUsage, Reply, Script};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

const REQUIRE_VAR: &str = "ORCHESTRATE_REQUIRE_SLURM";
const INSTALL: &str =
    "apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge";

fn main() {
    let args = Arguments::from_args();
    let tests: Vec<(&str, fn())> = vec![
        (
            "a_run_through_slurm_succeeds_with_its_usage_and_answer",
            a_run_through_slurm_succeeds_with_its_usage_and_answer,
        ),
        (
            "a_runtime_timeout_leaves_no_job_and_no_process",
            a_runtime_timeout_leaves_no_job_and_no_process,
        ),
        (
            "a_child_that_ignores_sigterm_is_killed_after_the_grace",
            a_child_that_ignores_sigterm_is_killed_after_the_grace,
        ),
        (
            "a_fan_out_of_8_tasks_runs_through_the_cluster",
            a_fan_out_of_8_tasks_runs_through_the_cluster,
        ),
        (
            "kill_9_of_orchestrate_cancels_its_job_within_seconds",
            kill_9_of_orchestrate_cancels_its_job_within_seconds,
        ),
        (
            "a_child_cannot_kill_its_jobs_watchdog",
            a_child_cannot_kill_its_jobs_watchdog,
        ),
        (
            "kill_9_of_orchestrates_process_group_cancels_its_job_within_seconds",
            kill_9_of_orchestrates_process_group_cancels_its_job_within_seconds,
        ),
        (
            "kill_9_of_orchestrate_cancels_its_queued_job_within_seconds",
            kill_9_of_orchestrate_cancels_its_queued_job_within_seconds,
        ),
        (
            "kill_9_of_a_fan_out_cancels_every_tasks_job_within_seconds",
            kill_9_of_a_fan_out_cancels_every_tasks_job_within_seconds,
        ),
        (
            "kill_9_of_one_run_leaves_another_runs_job_alone",
            kill_9_of_one_run_leaves_another_runs_job_alone,
        ),
        (
            "kill_9_of_a_background_supervisor_cancels_its_job_within_seconds",
            kill_9_of_a_background_supervisor_cancels_its_job_within_seconds,
        ),
        (
            "kill_9_of_the_mcp_server_cancels_its_job_within_seconds",
            kill_9_of_the_mcp_server_cancels_its_job_within_seconds,
        ),
        (
            "the_watchdog_holds_nothing_of_orchestrates_and_goes_with_the_run",
            the_watchdog_holds_nothing_of_orchestrates_and_goes_with_the_run,
        ),
        (
            "clusters_side_by_side_never_kill_each_others_jobs",
            clusters_side_by_side_never_kill_each_others_jobs,
        ),
        (
            "a_bad_partition_is_a_clear_failure_in_slurms_words",
            a_bad_partition_is_a_clear_failure_in_slurms_words,
        ),
        (
            "a_job_that_cannot_start_ends_at_the_queue_timeout",
            a_job_that_cannot_start_ends_at_the_queue_timeout,
        ),
        (
            "a_controller_that_is_down_is_a_clear_failure",
            a_controller_that_is_down_is_a_clear_failure,
        ),
        (
            "no_srun_on_path_is_a_clear_failure",
            no_srun_on_path_is_a_clear_failure,
        ),
        (
            "a_mode_asked_for_and_network_off_are_held_on_the_node",
            a_mode_asked_for_and_network_off_are_held_on_the_node,
        ),
        (
            "a_node_without_the_run_folder_is_a_clear_failure",
            a_node_without_the_run_folder_is_a_clear_failure,
        ),
        (
            "a_hostile_child_on_the_node_is_held_by_the_default_sandbox",
            a_hostile_child_on_the_node_is_held_by_the_default_sandbox,
        ),
    ];

    let missing = missing_prerequisite();
    let required = std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1");
    if let Some(why) = missing {
        let names = tests.iter().map(|(name, _)| *name).chain([REAL_PI_TEST]);
        let trials = names
            .map(|name| {
                let why = why.clone();
                if required {
                    Trial::test(name, move || {
                        Err(format!("{why} ({REQUIRE_VAR}=1 requires the Slurm tests)").into())
                    })
                } else {
                    Trial::ignorable_test(name, move || Ok(Completion::ignored_with(why)))
                }
            })
            .collect();
        libtest_mimic::run(&args, trials).exit();
    }

    // Only start a cluster when a test will run.
    let listing = args.list;
    let cluster = if listing {
        None
    } else {
        let cluster = Cluster::start(cluster_port(0)).unwrap_or_else(|e| panic!("{e}"));
        // Every orchestrate (and srun, squeue) the tests start finds the cluster here.
        std::env::set_var("SLURM_CONF", cluster.conf());
        Some(cluster)
    };
    let mut trials: Vec<Trial> = tests
        .into_iter()
        .map(|(name, f)| {
            Trial::test(name, move || {
                std::panic::catch_unwind(f).map_err(|e| Failed::from(panic_text(&e)))
            })
        })
        .collect();
    // Needs the real pi too: run, ignored or failed as pi's contract tests are.
    harness::install_panic_hook();
    trials.push(harness::trial_needing(
        &args,
        PI.var,
        PI.name,
        REAL_PI_TEST.to_string(),
        Box::new(the_real_pi_runs_as_a_slurm_job_against_the_mock_llm),
    ));
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(cluster) = cluster {
        cluster.stop();
    }
    conclusion.exit();
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panicked".to_string())
}

/// Why the tests cannot run here, if they cannot.
fn missing_prerequisite() -> Option<String> {
    for bin in [
        "srun",
        "squeue",
        "scancel",
        "scontrol",
        "slurmctld",
        "slurmd",
        "munged",
    ] {
        if which(bin).is_none() {
            return Some(format!("{bin} is not installed (Debian: {INSTALL})"));
        }
    }
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("the test cluster's daemons need root".to_string());
    }
    None
}

fn which(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

/// The cluster this binary runs against.
struct Cluster {
    dir: tempfile::TempDir,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-cluster")
}

/// The controller's port of this binary's cluster `n` (its slurmd's is the next one):
/// ports of its own, so that a cluster someone else runs here is not in the way.
fn cluster_port(n: u32) -> u32 {
    20_000 + (std::process::id() % 5_000) * 2 + n * 10_000
}

impl Cluster {
    fn start(base: u32) -> Result<Cluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("orchestrate-slurm-test")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let out = Command::new(script())
            .args(["start".as_ref(), dir.path().as_os_str()])
            .env("SLURM_TEST_CTLD_PORT", base.to_string())
            .env("SLURM_TEST_SLURMD_PORT", (base + 1).to_string())
            .output()
            .map_err(|e| format!("scripts/slurm-cluster start: {e}"))?;
        let cluster = Cluster { dir };
        if !out.status.success() {
            let why = format!(
                "scripts/slurm-cluster start failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            cluster.stop();
            return Err(why);
        }
        eprintln!("{}", String::from_utf8_lossy(&out.stderr).trim());
        Ok(cluster)
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("etc/slurm.conf")
    }

    fn stop(&self) {
        let status = Command::new(script())
            .args(["stop".as_ref(), self.dir.path().as_os_str()])
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!(
                "scripts/slurm-cluster stop: {status:?}; see {}",
                self.dir.path().display()
            );
        }
    }
}

/// The job's state as `squeue` shows it; None once Slurm has forgotten it.
fn job_state(id: u64) -> Option<String> {
    let out = Command::new("squeue")
        .args(["-h", "-t", "all", "-j", &id.to_string(), "-o", "%T"])
        .output()
        .expect("squeue");
    let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!state.is_empty()).then_some(state)
}

const FINAL: [&str; 6] = [
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
];

fn is_final(state: Option<&str>) -> bool {
    state.is_none_or(|s| FINAL.contains(&s))
}

/// `{kind, jobId, node, state}` of a result's runner (without the queue wait, which
/// varies), and the job id.
fn runner_of(result: &Value) -> (Value, u64) {
    let runner = &result["runner"];
    let id = runner["jobId"]
        .as_u64()
        .unwrap_or_else(|| panic!("no job id: {result}"));
    assert!(
        runner["queueWaitMs"].is_u64(),
        "queueWaitMs is a number: {runner}"
    );
    let mut shown = runner.clone();
    shown.as_object_mut().unwrap().remove("queueWaitMs");
    shown["jobId"] = json!("<id>");
    (shown, id)
}

fn node() -> String {
    let out = Command::new("hostname")
        .arg("-s")
        .output()
        .expect("hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The stops hold with the sandbox off and with the default one, which puts orchestrate's
/// `sandbox-exec` and the sandbox's controller between the job's step and the agent.
const SANDBOXES: [&str; 2] = ["off", "auto"];

fn a_run_through_slurm_succeeds_with_its_usage_and_answer() {
    let sb = Sandbox::new();
    // The full record: a lean success leaves out its clean exit.
    let out = sb.run("find auth", &["--runner", "slurm", "--details", "full"]);
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    let result = out.result();
    let (runner, id) = runner_of(&result);
    assert_eq!(
        (
            out.json()["content"][0]["text"].clone(),
            result["usage"].clone(),
            result["termination"].clone(),
            result["sandbox"].clone(),
            runner
        ),
        (
            json!("Hello from pi."),
            json!({"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": 0.00012, "turns": 1}),
            json!({"kind": "exited", "code": 0}),
            json!({"mode": "off", "mechanism": "none"}),
            json!({"kind": "slurm", "jobId": "<id>", "node": node(), "state": "COMPLETED"})
        )
    );
    // The job ran under the run's name, with the run's environment, in its directory.
    let argv = sb.argv_json();
    assert_eq!(
        (argv["runId"].clone(), argv["cwd"].clone()),
        (
            out.json()["details"]["runId"].clone(),
            json!(sb.work.to_str().unwrap())
        )
    );
    assert!(is_final(job_state(id).as_deref()));
    // The job's watchdog went with the run.
    assert_eq!(watchdogs(&sb), Vec::<i32>::new());
    // A local run's result has no runner.
    let local = sb.run("find auth", &[]);
    assert_eq!(local.result().get("runner"), None);
}

fn a_runtime_timeout_leaves_no_job_and_no_process() {
    for sandbox in SANDBOXES {
        a_runtime_timeout_leaves_no_job_and_no_process_with(sandbox);
    }
}

fn a_runtime_timeout_leaves_no_job_and_no_process_with(sandbox: &str) {
    let sb = Sandbox::new()
        .scenario("silent")
        .set("ORCHESTRATE_SANDBOX", sandbox);
    let out = sb.run("t", &["--runner", "slurm", "--timeout", "3s"]);
    let result = out.result();
    let mode = if sandbox == "off" { "off" } else { "read-only" };
    assert_eq!(result["sandbox"]["mode"], json!(mode), "{}", out.stdout);
    let (runner, id) = runner_of(&result);
    assert_eq!(
        (
            out.status,
            out.error_code(),
            result["timeoutReason"].clone(),
            result["termination"].clone(),
            runner
        ),
        (
            124,
            "SUBAGENT_TIMEOUT".to_string(),
            json!("runtime"),
            // The fake exits on SIGTERM: scancel --signal=TERM reached it within the grace.
            json!({"kind": "terminated", "reason": "runtimeTimeout"}),
            json!({"kind": "slurm", "jobId": "<id>", "node": node(), "state": "FAILED"})
        )
    );
    // The run ended only once Slurm had: nothing of the job is left (`run` also checked
    // that no process carrying the sandbox's marker is alive).
    assert!(is_final(job_state(id).as_deref()), "{:?}", job_state(id));
    assert_eq!(sb.descendants(), Vec::<i32>::new());
    assert_eq!(watchdogs(&sb), Vec::<i32>::new());
}

fn a_child_that_ignores_sigterm_is_killed_after_the_grace() {
    for sandbox in SANDBOXES {
        a_child_that_ignores_sigterm_is_killed_after_the_grace_with(sandbox);
    }
}

fn a_child_that_ignores_sigterm_is_killed_after_the_grace_with(sandbox: &str) {
    let sb = Sandbox::new()
        .scenario("ignore-term")
        .set("ORCHESTRATE_SANDBOX", sandbox);
    let out = sb.run(
        "t",
        &["--runner", "slurm", "--timeout", "2s", "--kill-grace", "1s"],
    );
    let result = out.result();
    let (_, id) = runner_of(&result);
    assert_eq!(
        (out.status, result["termination"].clone()),
        (
            124,
            json!({"kind": "killed", "reason": "runtimeTimeout", "kill": "escalated"})
        )
    );
    assert!(is_final(job_state(id).as_deref()), "{:?}", job_state(id));
    assert_eq!(sb.descendants(), Vec::<i32>::new());
    // Bounded, with room for a loaded machine: the runtime limit, the grace, and Slurm
    // reporting the killed step.
    assert!(out.elapsed < Duration::from_secs(30), "{:?}", out.elapsed);
}

fn a_fan_out_of_8_tasks_runs_through_the_cluster() {
    let sb = Sandbox::new();
    let agents = sb.agents.to_str().unwrap().to_string();
    let tasks: Vec<String> = (1..=8).map(|i| format!("fake=task {i}")).collect();
    let mut args = vec![
        "run",
        "--agents-dir",
        &agents,
        "--runner",
        "slurm",
        "--concurrency",
        "8",
    ];
    for t in &tasks {
        args.extend(["--task", t.as_str()]);
    }
    let out = sb.run_args(&args);
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    let results = out.json()["details"]["results"].as_array().unwrap().clone();
    let mut ids: Vec<u64> = results.iter().map(|r| runner_of(r).1).collect();
    let shapes: Vec<Value> = results
        .iter()
        .map(|r| json!([r["exitCode"], runner_of(r).0]))
        .collect();
    assert_eq!(
        shapes,
        vec![
            json!([0, {"kind": "slurm", "jobId": "<id>", "node": node(), "state": "COMPLETED"}]);
            8
        ]
    );
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 8, "one job per task: {ids:?}");
}

/// The bound on a job's end after whatever supervised it was SIGKILLed: the watchdog's
/// `scancel` and Slurm's stop of the step, with room for a loaded machine (the bench
/// measures the real figure; without the watchdog it is the cluster's `InactiveLimit`,
/// about a minute here).
const ORPHANED_JOB_LIMIT: Duration = Duration::from_secs(15);

/// The agent's processes (the fake, on the node) of this sandbox's runs: its descendants
/// but srun and the runner's watchdog.
fn agent_processes(sb: &Sandbox) -> Vec<i32> {
    sb.descendants()
        .into_iter()
        .filter(|p| {
            support::cmdline(*p)
                .split(' ')
                .next()
                .is_some_and(|argv0| argv0.ends_with("fake_agent"))
        })
        .collect()
}

/// Processes of this sandbox running orchestrate's runner watchdog.
fn watchdogs(sb: &Sandbox) -> Vec<i32> {
    support::processes_with_env(&sb.marker(), "ORCHESTRATE_TEST_SANDBOX=")
        .into_iter()
        .filter(|p| support::cmdline(*p).contains(WATCHDOG_COMMAND))
        .collect()
}

/// The hidden subcommand the watchdog runs as.
const WATCHDOG_COMMAND: &str = "runner-watchdog";

/// The run id of the only run of `sb` (its folder's name), once there is one.
fn only_run_id(sb: &Sandbox) -> Option<String> {
    std::fs::read_dir(sb.state.join("runs"))
        .ok()?
        .flatten()
        .next()
        .map(|e| e.file_name().to_string_lossy().into_owned())
}

/// Waits until the job of run `run_id` is in state `state` (and, for a running one, the
/// agent runs on the node); returns its id.
fn wait_for_job(sb: &Sandbox, run_id: impl Fn() -> Option<String>, state: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(run_id) = run_id() {
            let out = Command::new("squeue")
                .args(["-h", &format!("--name=orchestrate-{run_id}"), "-o", "%i %T"])
                .output()
                .expect("squeue");
            let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if let Some(id) = line.strip_suffix(&format!(" {state}")) {
                if state != "RUNNING" || !agent_processes(sb).is_empty() {
                    return id.parse::<u64>().unwrap();
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "the job never was {state}: {:?}",
            run_id()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILLs `target` (after checking it is a process of this sandbox: `-pgid` for its
/// whole group), then waits until Slurm lists job `id` as finished and nothing of the run
/// is left on the node or here (the watchdog included). Returns how long that took.
fn kill_9_and_wait_for_the_end(sb: &Sandbox, target: i32, id: u64) -> Duration {
    assert!(
        support::carries(target.abs(), &sb.marker()),
        "{target} is not ours"
    );
    // SAFETY: a pid (or group) of this sandbox's own, checked above.
    unsafe { libc::kill(target, libc::SIGKILL) };
    let killed = Instant::now();
    loop {
        let (state, agents, watchdogs) = (job_state(id), agent_processes(sb), watchdogs(sb));
        if is_final(state.as_deref()) && agents.is_empty() && watchdogs.is_empty() {
            break;
        }
        assert!(
            killed.elapsed() < ORPHANED_JOB_LIMIT,
            "job {id} still {state:?}, agent processes {agents:?}, watchdogs {watchdogs:?}, {ORPHANED_JOB_LIMIT:?} after its supervisor was killed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = killed.elapsed();
    eprintln!(
        "job {id} ended ({:?}) and its processes were gone {:.1} s after its supervisor was killed",
        job_state(id),
        took.as_secs_f64()
    );
    took
}

/// `orchestrate run fake t --runner slurm EXTRA…`, started and not waited for.
fn spawn_run(sb: &Sandbox, extra: &[&str]) -> std::process::Child {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec![
        "run",
        "fake",
        "t",
        "--agents-dir",
        &agents,
        "--runner",
        "slurm",
    ];
    args.extend_from_slice(extra);
    sb.command(&args).spawn().expect("spawn orchestrate")
}

fn kill_9_of_orchestrate_cancels_its_job_within_seconds() {
    for sandbox in SANDBOXES {
        kill_9_of_orchestrate_cancels_its_job_within_seconds_with(sandbox);
    }
}

fn kill_9_of_orchestrate_cancels_its_job_within_seconds_with(sandbox: &str) {
    let sb = Sandbox::new()
        .scenario("silent")
        .set("ORCHESTRATE_SANDBOX", sandbox);
    let mut child = spawn_run(&sb, &[]);
    let id = wait_for_job(&sb, || only_run_id(&sb), "RUNNING");
    kill_9_and_wait_for_the_end(&sb, child.id() as i32, id);
    child.wait().unwrap();
    assert_eq!(job_state(id).as_deref().unwrap_or("CANCELLED"), "CANCELLED");
}

/// A hostile child on the node SIGKILLs every watchdog of this sandbox it can see (a
/// process carrying the sandbox's marker, so that nothing else is touched), then sleeps:
/// the sandbox keeps the watchdog out of its reach, so a kill -9 of orchestrate still
/// cancels the job. (With the sandbox off nothing keeps it out: that mode is not tried.)
fn a_child_cannot_kill_its_jobs_watchdog() {
    let sb = Sandbox::new();
    let script = format!(
        // The command's name is put together at run time, so that the script's own
        // command line (and its tools') never holds it.
        r#"w=runner-; w="${{w}}watchdog"
for d in /proc/[0-9]*; do
  case "$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)" in
    *" $w "*) if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF '{marker}'; then
        kill -9 "${{d#/proc/}}" && echo "killed ${{d#/proc/}}"
      fi ;;
  esac
done
exec sleep 317"#,
        marker = sb.marker()
    );
    let sb = sb
        .scenario("shell")
        .set("FAKE_AGENT_SHELL", &script)
        .set("ORCHESTRATE_SANDBOX", "auto");
    let mut child = spawn_run(&sb, &[]);
    let id = wait_for_job(&sb, || only_run_id(&sb), "RUNNING");
    // The child has had its go once it sleeps.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !support::processes_with_env(&sb.marker(), "ORCHESTRATE_RUN_ID=")
        .into_iter()
        .any(|p| support::cmdline(p) == "sleep 317")
    {
        assert!(
            Instant::now() < deadline,
            "the child's script never got to its sleep"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = watchdogs(&sb).len();
    if left != 1 {
        // SAFETY: the orchestrate this test started, not yet waited for.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
    }
    assert_eq!(left, 1, "the child killed its watchdog");
    kill_9_and_wait_for_the_end(&sb, child.id() as i32, id);
    child.wait().unwrap();
    assert_eq!(job_state(id).as_deref().unwrap_or("CANCELLED"), "CANCELLED");
}

/// What a parent's shell tool does when its own timeout passes: SIGKILL to the whole
/// process group orchestrate runs in.
fn kill_9_of_orchestrates_process_group_cancels_its_job_within_seconds() {
    let sb = Sandbox::new().scenario("silent");
    let mut child = spawn_run(&sb, &[]);
    let id = wait_for_job(&sb, || only_run_id(&sb), "RUNNING");
    // `Sandbox::command` starts orchestrate as the leader of a group of its own.
    kill_9_and_wait_for_the_end(&sb, -(child.id() as i32), id);
    child.wait().unwrap();
}

/// A job still waiting in the queue is cancelled too (by its name: Slurm has not been
/// seen to give it an id before orchestrate died, or has).
fn kill_9_of_orchestrate_cancels_its_queued_job_within_seconds() {
    let sb = Sandbox::new().scenario("silent");
    with_runner(&sb, "short", &["--partition=short"]);
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut child = sb
        .command(&[
            "run",
            "fake",
            "t",
            "--agents-dir",
            &agents,
            "--runner",
            "short",
            "--timeout",
            "5m",
        ])
        .spawn()
        .expect("spawn orchestrate");
    let id = wait_for_job(&sb, || only_run_id(&sb), "PENDING");
    kill_9_and_wait_for_the_end(&sb, child.id() as i32, id);
    child.wait().unwrap();
}

/// A fan-out's tasks each run as a job of their own, each with its watchdog: all of them
/// are cancelled.
fn kill_9_of_a_fan_out_cancels_every_tasks_job_within_seconds() {
    let sb = Sandbox::new().scenario("silent");
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec![
        "run",
        "--agents-dir",
        &agents,
        "--runner",
        "slurm",
        "--concurrency",
        "4",
    ];
    for _ in 0..4 {
        args.extend(["--task", "fake=t"]);
    }
    let mut child = sb.command(&args).spawn().expect("spawn orchestrate");
    let deadline = Instant::now() + Duration::from_secs(30);
    let ids: Vec<u64> = loop {
        let ids: Vec<u64> = std::fs::read_dir(sb.state.join("runs"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        let run_id = e.file_name().to_string_lossy().into_owned();
                        let out = Command::new("squeue")
                            .args([
                                "-h",
                                &format!("--name=orchestrate-{run_id}"),
                                "-t",
                                "RUNNING",
                                "-o",
                                "%i",
                            ])
                            .output()
                            .ok()?;
                        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
                    })
                    .collect()
            })
            .unwrap_or_default();
        if ids.len() == 4 && agent_processes(&sb).len() == 4 {
            break ids;
        }
        assert!(Instant::now() < deadline, "the 4 jobs never ran: {ids:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(watchdogs(&sb).len(), 4, "one watchdog per job");
    kill_9_and_wait_for_the_end(&sb, child.id() as i32, ids[0]);
    child.wait().unwrap();
    let states: Vec<Option<String>> = ids.iter().map(|id| job_state(*id)).collect();
    assert!(
        states.iter().all(|s| is_final(s.as_deref())),
        "{ids:?}: {states:?}"
    );
}

/// Only the killed run's job is cancelled: another run's job, started alike at the same
/// time, runs on and ends as it would have.
fn kill_9_of_one_run_leaves_another_runs_job_alone() {
    let victim = Sandbox::new().scenario("silent");
    let other = Sandbox::new().scenario("silent");
    let mut killed = spawn_run(&victim, &[]);
    let survivor = spawn_run(&other, &["--timeout", "12s"]);
    let id = wait_for_job(&victim, || only_run_id(&victim), "RUNNING");
    let other_id = wait_for_job(&other, || only_run_id(&other), "RUNNING");
    kill_9_and_wait_for_the_end(&victim, killed.id() as i32, id);
    killed.wait().unwrap();
    assert_eq!(job_state(other_id).as_deref(), Some("RUNNING"));
    // It ends at its own runtime limit, as a run nobody killed.
    let out = other.finish(survivor);
    let result = out.result();
    assert_eq!(
        (
            out.status,
            result["timeoutReason"].clone(),
            result["termination"].clone(),
            result["runner"]["jobId"].clone()
        ),
        (
            124,
            json!("runtime"),
            json!({"kind": "terminated", "reason": "runtimeTimeout"}),
            json!(other_id)
        ),
        "{}",
        out.stdout
    );
}

fn kill_9_of_a_background_supervisor_cancels_its_job_within_seconds() {
    let sb = Sandbox::new().scenario("silent");
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb
        .command(&[
            "run",
            "fake",
            "t",
            "--agents-dir",
            &agents,
            "--runner",
            "slurm",
            "--background",
        ])
        .output()
        .expect("orchestrate run --background");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let run_id = v["details"]["runId"].as_str().unwrap().to_string();
    let supervisor = v["details"]["background"]["supervisorPid"]
        .as_u64()
        .unwrap_or_else(|| panic!("no supervisor pid: {v}")) as i32;
    let id = wait_for_job(&sb, || Some(run_id.clone()), "RUNNING");
    kill_9_and_wait_for_the_end(&sb, supervisor, id);
}

fn kill_9_of_the_mcp_server_cancels_its_job_within_seconds() {
    use std::io::Write;
    let sb = Sandbox::new().scenario("silent");
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut server = sb
        .command(&["mcp", "--agents-dir", &agents])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn orchestrate mcp");
    let mut stdin = server.stdin.take().unwrap();
    for message in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "subagent", "arguments": {"agent": "fake", "task": "t", "runner": "slurm"}}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let id = wait_for_job(&sb, || only_run_id(&sb), "RUNNING");
    kill_9_and_wait_for_the_end(&sb, server.id() as i32, id);
    server.wait().unwrap();
    drop(stdin);
}

/// The session id of a process (`/proc/<pid>/stat`'s sixth field).
fn session_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = stat.rsplit_once(')').unwrap().1;
    after_name
        .split_whitespace()
        .nth(3)
        .unwrap()
        .parse()
        .unwrap()
}

/// The inodes of the pipes a process holds open.
fn pipes_of(pid: i32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            target
                .strip_prefix("pipe:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

fn inode_of(fd: i32) -> u64 {
    // SAFETY: fstat of a descriptor this test holds, into a zeroed struct.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::fstat(fd, &mut stat) }, 0);
    stat.st_ino
}

/// The watchdog outlives orchestrate only for its purpose: in a session of its own, it
/// holds none of orchestrate's descriptors (not its output, which a parent reads to its
/// end, nor one orchestrate inherited without close-on-exec), and it is gone when the run
/// is.
fn the_watchdog_holds_nothing_of_orchestrates_and_goes_with_the_run() {
    use std::os::fd::AsRawFd;
    let sb = Sandbox::new().scenario("silent");
    // A pipe whose ends every process started from here inherits.
    let mut inherited = [0; 2];
    // SAFETY: a plain system call into a two-element array.
    assert_eq!(unsafe { libc::pipe(inherited.as_mut_ptr()) }, 0);
    let child = spawn_run(&sb, &["--timeout", "4s"]);
    // SAFETY: our own descriptors, not used after this.
    unsafe { libc::close(inherited[1]) };
    let id = wait_for_job(&sb, || only_run_id(&sb), "RUNNING");
    let found = watchdogs(&sb);
    assert_eq!(found.len(), 1, "one watchdog per job: {found:?}");
    let watchdog = found[0];
    let orchestrate = child.id() as i32;
    assert_eq!(
        (
            session_of(watchdog) == watchdog,
            session_of(orchestrate) == watchdog
        ),
        (true, false)
    );
    let theirs = [
        inode_of(child.stdout.as_ref().unwrap().as_raw_fd()),
        inode_of(child.stderr.as_ref().unwrap().as_raw_fd()),
        inode_of(inherited[0]),
    ];
    let held: Vec<u64> = pipes_of(watchdog)
        .into_iter()
        .filter(|p| theirs.contains(p))
        .collect();
    assert_eq!(
        held,
        Vec::<u64>::new(),
        "the watchdog holds orchestrate's pipes"
    );
    let out = sb.finish(child);
    // SAFETY: our own descriptor.
    unsafe { libc::close(inherited[0]) };
    assert_eq!(out.status, 124, "{}", out.stdout);
    assert!(is_final(job_state(id).as_deref()), "{:?}", job_state(id));
    assert_eq!(watchdogs(&sb), Vec::<i32>::new());
}

/// Two clusters started side by side on this machine (as two test binaries, or a test and
/// the bench, do) share proctrack/cgroup's per-job cgroups, named by node and job id: the
/// end of one's job N would SIGKILL whatever the other's job N runs (srun then exits 137
/// with no timeout recorded). `scripts/slurm-cluster` numbers each cluster's jobs apart.
fn clusters_side_by_side_never_kill_each_others_jobs() {
    // Stopped however the test ends: a second cluster that fails to start (or a failed
    // srun) must not leave the first one's daemons running.
    struct StopOnDrop(Vec<Cluster>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            for cluster in &self.0 {
                cluster.stop();
            }
        }
    }
    let mut clusters = StopOnDrop(Vec::new());
    for n in [1, 2] {
        let cluster = Cluster::start(cluster_port(n)).unwrap_or_else(|e| panic!("{e}"));
        clusters.0.push(cluster);
    }
    let clusters = &clusters.0;
    let srun = |cluster: &Cluster, argv: &[&str]| {
        let mut cmd = Command::new("srun");
        cmd.arg("--quiet")
            .args(argv)
            .env("SLURM_CONF", cluster.conf())
            .stdin(std::process::Stdio::null())
            .process_group(0);
        cmd
    };
    // Each cluster's first job after its readiness check, at the same time.
    let mut long = srun(&clusters[0], &["sleep", "4"]).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let short = srun(&clusters[1], &["true"]).status().unwrap();
    let long = long.wait().unwrap();
    assert_eq!((short.code(), long.code()), (Some(0), Some(0)));
}

/// A project config with a named runner.
fn with_runner(sb: &Sandbox, name: &str, args: &[&str]) {
    let dir = sb.work.join(".orchestrate");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[runners.{name}]\nkind = \"slurm\"\nargs = {}\n",
            json!(args)
        ),
    )
    .unwrap();
}

fn a_bad_partition_is_a_clear_failure_in_slurms_words() {
    let sb = Sandbox::new();
    with_runner(&sb, "nowhere", &["--partition=nope"]);
    let out = sb.run("t", &["--runner", "nowhere"]);
    let result = out.result();
    assert_eq!(
        (
            out.status,
            out.error_code(),
            result["error"].clone(),
            result["runner"].clone()
        ),
        (
            1,
            "SUBAGENT_FAILED".to_string(),
            json!("Subagent could not run on Slurm: Slurm did not run the job: srun: error: invalid partition specified: nope; srun: error: Unable to allocate resources: Invalid partition name specified"),
            json!({"kind": "slurm", "name": "nowhere", "queueWaitMs": result["runner"]["queueWaitMs"]})
        )
    );
}

fn a_job_that_cannot_start_ends_at_the_queue_timeout() {
    // The `short` partition allows 1 minute; a 5-minute job waits there for ever
    // (PartitionTimeLimit).
    let sb = Sandbox::new().scenario("silent");
    with_runner(&sb, "short", &["--partition=short"]);
    let out = sb.run(
        "t",
        &[
            "--runner",
            "short",
            "--timeout",
            "5m",
            "--queue-timeout",
            "2s",
        ],
    );
    let result = out.result();
    let (runner, id) = runner_of(&result);
    // Slurm names the reason it first finds: the partition's time limit, or its
    // configuration as a whole.
    let error = result["error"].as_str().unwrap_or_default().to_string();
    let reason = ["PartitionTimeLimit", "PartitionConfig"]
        .into_iter()
        .find(|r| error.contains(r))
        .unwrap_or("PartitionTimeLimit");
    assert_eq!(
        (
            out.status,
            out.error_code(),
            error,
            result["timeoutReason"].clone(),
            runner
        ),
        (
            124,
            "SUBAGENT_TIMEOUT".to_string(),
            format!("Subagent's job waited in Slurm's queue for 2000ms without starting (queue timeout; Slurm's reason: {reason}); it was cancelled."),
            json!("queue"),
            json!({"kind": "slurm", "name": "short", "jobId": "<id>", "state": "CANCELLED"})
        )
    );
    assert!(result["runner"]["queueWaitMs"].as_u64().unwrap() >= 2000);
    assert!(is_final(job_state(id).as_deref()));
}

fn a_controller_that_is_down_is_a_clear_failure() {
    // A configuration naming a port where no controller listens: as a controller that
    // is down looks to a client.
    let conf = std::fs::read_to_string(std::env::var("SLURM_CONF").unwrap()).unwrap();
    let sb = Sandbox::new();
    let down = sb.root.path().join("down.conf");
    let conf: String = conf
        .lines()
        .map(|l| {
            if l.starts_with("SlurmctldPort=") {
                "SlurmctldPort=9".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&down, conf).unwrap();
    let sb = sb.set("SLURM_CONF", down.to_str().unwrap());
    let out = sb.run("t", &["--runner", "slurm"]);
    let result = out.result();
    let error = result["error"].as_str().unwrap_or_default().to_string();
    assert_eq!(
        (out.status, out.error_code(), result["exitCode"].clone()),
        (1, "SUBAGENT_FAILED".to_string(), json!(1)),
        "{}",
        out.stdout
    );
    assert!(
        error.starts_with("Subagent could not run on Slurm: Slurm's controller did not answer: Slurmctld(primary) at ")
            && error.ends_with(" is DOWN"),
        "{error}"
    );
    assert!(out.elapsed < Duration::from_secs(30), "{:?}", out.elapsed);
    assert_eq!(watchdogs(&sb), Vec::<i32>::new());
}

fn no_srun_on_path_is_a_clear_failure() {
    let sb = Sandbox::new().set("PATH", "/nonexistent-bin");
    let out = sb.run("t", &["--runner", "slurm"]);
    let result = out.result();
    assert_eq!(
        (out.status, out.error_code(), result["exitCode"].clone(), result["error"].clone()),
        (
            1,
            "SUBAGENT_FAILED".to_string(),
            json!(127),
            json!("Subagent could not run on Slurm: srun is not on PATH: install Slurm's client commands (Debian: slurm-client) where orchestrate runs, or use --runner local")
        )
    );
    assert_eq!(watchdogs(&sb), Vec::<i32>::new());
}

/// A mode asked for is held on the node, as here: workspace-write writes the workspace
/// and nothing else; `network off` is the node's own network namespace (the test's
/// listener on 127.0.0.1 is out of reach, while it is reachable without it).
fn a_mode_asked_for_and_network_off_are_held_on_the_node() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.work.join(".git")).unwrap();
    std::fs::write(sb.work.join(".git/config"), "[core]\n").unwrap();
    let script = format!(
        "(echo x > '{work}/made') 2>/dev/null && echo 'wrote workspace' || echo 'denied workspace'\n\
         (echo x > '{home}/made') 2>/dev/null && echo 'wrote home' || echo 'denied home'\n\
         (mkdir -p '{work}/.vscode' && echo '{{}}' > '{work}/.vscode/tasks.json') 2>/dev/null && echo 'wrote .vscode' || echo 'denied .vscode'\n\
         (echo '[core] hooksPath = /tmp' >> '{work}/.git/config') 2>/dev/null && echo 'wrote .git' || echo 'denied .git'\n",
        work = sb.work.display(),
        home = sb.home.display()
    );
    let sb = sb.scenario("hostile").set("FAKE_AGENT_SCRIPT", &script);
    let out = sb.run(
        "t",
        &[
            "--runner",
            "slurm",
            "--sandbox",
            "workspace-write",
            "--details",
            "full",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stdout);
    let result = out.result();
    assert_eq!(
        (result["output"].clone(), result["sandbox"]["mode"].clone()),
        (
            json!("wrote workspace\ndenied home\ndenied .vscode\ndenied .git"),
            json!("workspace-write")
        )
    );
    assert!(sb.work.join("made").exists() && !sb.home.join("made").exists());
    // The placeholder of the missing protected name went with the run, on the node.
    assert!(!sb.work.join(".vscode").exists());
    // The proxy of `network: provider` runs where orchestrate does: refused for the node.
    let out = sb.run("t", &["--runner", "slurm", "--network", "provider"]);
    assert_eq!(
        (out.status, out.json()["details"]["error"]["message"].clone()),
        (
            2,
            json!("Invalid input: network provider was asked for, but orchestrate cannot confine the network of a child that runs through the slurm runner (use --runner local)")
        )
    );
    assert_eq!(
        std::fs::read_to_string(sb.work.join(".git/config")).unwrap(),
        "[core]\n"
    );

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let sb = Sandbox::new()
        .scenario("connect-probe")
        .set("FAKE_AGENT_CONNECT_PORT", &port);
    let answers = |extra: &[&str]| {
        let mut args = vec!["--runner", "slurm", "--details", "full"];
        args.extend_from_slice(extra);
        let out = sb.run("t", &args);
        assert_eq!(out.status, 0, "{}", out.stdout);
        let result = out.result();
        (
            result["output"].clone(),
            result["sandbox"].clone(),
            result["network"]["mode"].clone(),
        )
    };
    assert_eq!(
        answers(&[]),
        (
            json!("connected"),
            json!({"mode": "off", "mechanism": "none"}),
            json!("on")
        )
    );
    let (said, sandbox, network) = answers(&["--network", "off", "--sandbox", "read-only"]);
    assert_eq!(
        (said, network, sandbox["mode"].clone()),
        (
            json!("not connected: connection refused"),
            json!("off"),
            json!("read-only")
        )
    );
    assert!(
        sandbox["layers"]
            .as_array()
            .unwrap()
            .contains(&json!("network-namespace")),
        "{sandbox}"
    );
}

/// The attacks of tests/hostile.rs that matter most, by a child on the node with the
/// default sandbox (read-only: the fake agent has no tool that writes): writes outside its
/// place (the workspace, the home), a plant in its CLI's configuration, a read of the
/// user's ssh key, forgeries of the run's records. Each is denied, the child's own place
/// stays writable, and the result names the same layers as the same run here.
fn a_hostile_child_on_the_node_is_held_by_the_default_sandbox() {
    let sb = Sandbox::new();
    let existing = sb.home.join(".pi/agent/settings.json");
    let planted = sb.home.join(".pi/agent/extensions/evil.ts");
    let key = sb.home.join(".ssh/id_ed25519");
    for (path, text) in [(&existing, "{}\n"), (&key, "orchestrate-slurm-secret\n")] {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let targets = [
        ("workspace", sb.work.join("outside").display().to_string()),
        ("home", sb.home.join("outside").display().to_string()),
        ("settings", existing.display().to_string()),
        ("extension", planted.display().to_string()),
        ("result", "$d/result.json".to_string()),
        ("exit-status", "$d/exit-status".to_string()),
        ("plan", "$d/sandbox-exec.json".to_string()),
        ("index", "$HOSTILE_STATE/runs.jsonl".to_string()),
    ];
    let mut script = format!(
        "d=\"$HOSTILE_STATE/runs/$ORCHESTRATE_RUN_ID\"\nmkdir -p '{}' 2>/dev/null\n",
        planted.parent().unwrap().display()
    );
    for (name, path) in &targets {
        script.push_str(&format!(
            "(echo planted >> \"{path}\") 2>/dev/null && echo 'wrote {name}' || echo 'denied {name}'\n"
        ));
    }
    script.push_str(
        "cat ~/.ssh/id_ed25519 2>/dev/null; ls -a ~/.ssh 2>&1 | tr '\\n' ' '; echo\n\
         (echo mine > \"$TMPDIR/mine\") && echo 'wrote tmp'\n",
    );
    let state = sb.state.display().to_string();
    let sb = sb
        .scenario("hostile")
        .set("ORCHESTRATE_SANDBOX", "auto")
        .set("HOSTILE_STATE", &state)
        .set("FAKE_AGENT_SCRIPT", &script)
        // A report of its own, on stderr: too late to be taken for the node's.
        .set("FAKE_AGENT_STDERR", FORGED_REPORT);
    let out = sb.run("probe", &["--runner", "slurm", "--details", "full"]);
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    let result = out.result();
    let said: Vec<String> = result["output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output: {}", out.stdout))
        .lines()
        .map(str::to_string)
        .collect();
    // pi's own folder is a private layer: what the child writes there is gone with the
    // run (checked on disk below).
    let mut want: Vec<String> = targets
        .iter()
        .map(|(name, _)| match *name {
            "settings" | "extension" => format!("wrote {name}"),
            _ => format!("denied {name}"),
        })
        .collect();
    want.extend([". .. ".to_string(), "wrote tmp".to_string()]);
    assert_eq!(said, want, "{}", out.stdout);
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "{}\n");
    assert!(!planted.exists() && !sb.work.join("outside").exists());
    let index = std::fs::read_to_string(sb.state.join("runs.jsonl")).unwrap();
    assert!(!index.contains("planted"), "{index}");
    let id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let shown = sb.run_args(&["show", &id, "--json"]);
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(
        shown["result"]["details"]["results"][0]["output"],
        result["output"]
    );

    // The node's layers are the ones the same run gets here, and nothing is missing.
    let local = sb.run("probe", &["--details", "full"]);
    assert_eq!(local.status, 0, "{}", local.stdout);
    assert_eq!(local.result()["output"], result["output"]);
    let (_, job) = runner_of(&result);
    assert_eq!(
        (result["sandbox"].clone(), result.get("warnings").cloned()),
        (local.result()["sandbox"].clone(), None),
        "{}",
        out.stdout
    );
    assert_eq!(result["sandbox"]["mode"], json!("read-only"));
    assert!(is_final(job_state(job).as_deref()));
    // The node's report was taken off the child's stderr; the forgery is the child's.
    let log = std::fs::read_to_string(sb.state.join("runs").join(&id).join("stderr.log")).unwrap();
    assert_eq!(log, format!("{FORGED_REPORT}\n"));
}

/// What a child would write to pass for the node's report of the layers that held.
const FORGED_REPORT: &str = r#"orchestrate-sandbox: {"held":["seccomp"],"missing":[]}"#;

/// `sandbox-exec` on a node where the run folder is not (no shared filesystem), or whose
/// plan is malformed: a clear error, and no child.
fn a_node_without_the_run_folder_is_a_clear_failure() {
    let sb = Sandbox::new();
    let missing = sb.root.path().join("state/runs/ab12cd34/sandbox-exec.json");
    let out = sb
        .command(&["sandbox-exec", missing.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(126), "{err}");
    assert!(
        err.starts_with("orchestrate sandbox-exec on ")
            && err.contains(&format!(
                "cannot read the sandbox plan {} here (the run folder must be on a filesystem the node shares, at the same path): No such file or directory",
                missing.display()
            )),
        "{err}"
    );
    let bad = sb.root.path().join("bad.json");
    std::fs::write(&bad, "{\"mode\": \"read-only\"}").unwrap();
    let out = sb
        .command(&["sandbox-exec", bad.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(126), "{err}");
    assert!(
        err.contains(&format!(
            "the sandbox plan {} is malformed: missing field",
            bad.display()
        )),
        "{err}"
    );
}

const REAL_PI_TEST: &str = "the_real_pi_runs_as_a_slurm_job_against_the_mock_llm";

/// The bound on the real pi's run through Slurm (node's start, the job's start, two
/// model turns), with room for a loaded machine.
const REAL_PI_RUN_LIMIT: Duration = Duration::from_secs(120);
/// How long the processes of a finished run may take to be gone.
const SURVIVOR_LIMIT: Duration = Duration::from_secs(10);

/// The real pi as the job, pointed at the mock as in pi's contract tests: its bash tool
/// reports the job it runs in, then it answers. The node is this machine, so pi reaches
/// the mock on 127.0.0.1 and its processes show in `/proc`.
fn the_real_pi_runs_as_a_slurm_job_against_the_mock_llm(bin: &Path) {
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
    let answer = "Hello from pi on Slurm.";
    let task = "Say where you run.";
    // The marker too: the check for survivors below looks for it in `/proc`.
    let args = json!({"command": "echo job=$SLURM_JOB_ID node=$SLURMD_NODENAME marker=$ORCHESTRATE_CONTRACT_SANDBOX"});
    let (mock, sb) = scenarios::setup(&PI, bin, |_| {
        Script::tool_then_text(
            Reply::tool("bash", args.clone(), first),
            Reply::text(answer, second),
        )
    });
    let out = sb.run("worker", task, &["--runner", "slurm"], REAL_PI_RUN_LIMIT);
    contract::report("real pi through slurm", &mock, &out, 600);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);

    let mut result = out.result();
    let (runner, id) = runner_of(&result);
    result["runner"] = runner;
    // The default sandbox of an agent that writes, built on the node (its layers are the
    // kernel's: Landlock's scopes need Linux 6.12).
    let sandbox = result["sandbox"].clone();
    let layers: Vec<&str> = sandbox["layers"]
        .as_array()
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for layer in ["pid-namespace", "mounts", "landlock", "seccomp", "no-tty"] {
        assert!(layers.contains(&layer), "{layer} did not hold: {sandbox}");
    }
    result["sandbox"]["layers"] = json!("LAYERS");
    // pi's prices are 1 and 2 $ per million input and output tokens; cached tokens
    // are free and not input.
    let (input, cache_read, output) = (200 - 40 + 300 - 100, 40 + 100, 14 + 9);
    let cost = contract::round_cost((input as f64 + 2.0 * output as f64) / 1e6);
    assert_eq!(
        (out.json()["content"].clone(), contract::normalized(result)),
        (
            json!([text_item(answer)]),
            json!({
                "agent": "worker",
                "task": task,
                "backend": "pi",
                "model": PI.model,
                "sessionFile": "SESSION",
                "durationMs": 0,
                "attempts": 1,
                "exitCode": 0,
                "termination": {"kind": "exited", "code": 0},
                "usage": {"input": input, "output": output, "cacheRead": cache_read,
                          "cacheWrite": 0, "cost": cost, "turns": 2},
                "output": answer,
                "displayItems": [tool_item("bash", &args), text_item(answer)],
                "sandbox": {"mode": "workspace-write", "mechanism": "namespaces", "layers": "LAYERS"},
                "network": {"mode": "on"},
                "runner": {"kind": "slurm", "jobId": "<id>", "node": node(), "state": "COMPLETED"}
            })
        )
    );

    // pi ran as the job: the mock got both of its turns, and its shell ran inside job
    // `id` on the node, carrying the sandbox's marker.
    let reqs = mock.conversation();
    assert_eq!(reqs.len(), 2, "{:#?}", mock.requests());
    assert_eq!(
        mock_llm::tool_result_texts(&reqs[1].body)
            .iter()
            .map(|t| t.trim().to_string())
            .collect::<Vec<_>>(),
        [format!(
            "job={id} node={} marker={}",
            node(),
            sb.root.path().display()
        )]
    );

    // pi wrote its own session on the node, in the child's place of the run folder.
    let run_id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let session = sb
        .state
        .join("runs")
        .join(&run_id)
        .join("child/pi-session.jsonl");
    let written = std::fs::read_to_string(&session)
        .unwrap_or_else(|e| panic!("pi's session {}: {e}", session.display()));
    assert!(written.contains(answer), "{written}");

    // Nothing of the run is left, and Slurm is done with the job.
    let marker = sb.marker();
    let deadline = Instant::now() + SURVIVOR_LIMIT;
    loop {
        let left = contract::pids_with_env(&[&marker]);
        if left.is_empty() {
            break;
        }
        let described: Vec<(i32, String)> =
            left.iter().map(|p| (*p, contract::cmdline(*p))).collect();
        assert!(
            Instant::now() < deadline,
            "processes of the run still alive {SURVIVOR_LIMIT:?} after it ended: {described:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(is_final(job_state(id).as_deref()), "{:?}", job_state(id));
}
