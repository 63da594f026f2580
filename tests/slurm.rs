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
            "kill_9_of_orchestrate_leaves_no_job_running_after_slurms_cleanup",
            kill_9_of_orchestrate_leaves_no_job_running_after_slurms_cleanup,
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
            "the_sandbox_and_network_off_are_refused_rather_than_silently_dropped",
            the_sandbox_and_network_off_are_refused_rather_than_silently_dropped,
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
        Some(Cluster::start().unwrap_or_else(|e| panic!("{e}")))
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

impl Cluster {
    fn start() -> Result<Cluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("orchestrate-slurm-test")
            .tempdir()
            .map_err(|e| e.to_string())?;
        // Ports of its own, so that a cluster someone else runs here is not in the way.
        let base = 20_000 + (std::process::id() % 5_000) * 2;
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
        // Every orchestrate (and srun, squeue) the tests start finds the cluster here.
        std::env::set_var("SLURM_CONF", cluster.conf());
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

fn a_run_through_slurm_succeeds_with_its_usage_and_answer() {
    let sb = Sandbox::new();
    let out = sb.run("find auth", &["--runner", "slurm"]);
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
    // A local run's result has no runner.
    let local = sb.run("find auth", &[]);
    assert_eq!(local.result().get("runner"), None);
}

fn a_runtime_timeout_leaves_no_job_and_no_process() {
    let sb = Sandbox::new().scenario("silent");
    let out = sb.run("t", &["--runner", "slurm", "--timeout", "3s"]);
    let result = out.result();
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
}

fn a_child_that_ignores_sigterm_is_killed_after_the_grace() {
    let sb = Sandbox::new().scenario("ignore-term");
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

fn kill_9_of_orchestrate_leaves_no_job_running_after_slurms_cleanup() {
    let sb = Sandbox::new().scenario("silent");
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut child = sb
        .command(&[
            "run",
            "fake",
            "t",
            "--agents-dir",
            &agents,
            "--runner",
            "slurm",
        ])
        .spawn()
        .expect("spawn orchestrate");
    // The run's id is its folder's name; its job is found by name.
    let deadline = Instant::now() + Duration::from_secs(30);
    let id = loop {
        let run_id = std::fs::read_dir(sb.state.join("runs"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned());
        if let Some(run_id) = run_id {
            let out = Command::new("squeue")
                .args(["-h", &format!("--name=orchestrate-{run_id}"), "-o", "%i %T"])
                .output()
                .expect("squeue");
            let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if let Some(id) = line.strip_suffix(" RUNNING") {
                // And the agent itself runs on the node.
                if !sb.descendants().is_empty() {
                    break id.parse::<u64>().unwrap();
                }
            }
        }
        assert!(Instant::now() < deadline, "the job never ran");
        std::thread::sleep(Duration::from_millis(100));
    };
    // SAFETY: our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let killed = Instant::now();
    // orchestrate's contained srun died with it; Slurm ends the job on its own: at once
    // where srun's helper survives, else at the cluster's InactiveLimit (30 s in the test
    // cluster, enforced on its next check).
    let deadline = Instant::now() + Duration::from_secs(180);
    while !is_final(job_state(id).as_deref()) || !sb.descendants().is_empty() {
        assert!(
            Instant::now() < deadline,
            "job {id} still {:?}, processes {:?}, 180 s after orchestrate was killed",
            job_state(id),
            sb.descendants()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "job {id} ended ({:?}) and its processes were gone {:.1} s after orchestrate was killed",
        job_state(id),
        killed.elapsed().as_secs_f64()
    );
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
}

fn the_sandbox_and_network_off_are_refused_rather_than_silently_dropped() {
    let sb = Sandbox::new();
    let out = sb.run("t", &["--runner", "slurm", "--sandbox", "read-only"]);
    assert_eq!(
        (out.status, out.json()["details"]["error"]["message"].clone()),
        (
            2,
            json!("Invalid input: sandbox read-only was asked for, but orchestrate's sandbox does not reach a child that runs through the slurm runner (use --sandbox off, or --runner local)")
        )
    );
    for mode in ["off", "provider"] {
        let out = sb.run("t", &["--runner", "slurm", "--network", mode]);
        assert_eq!(
            (out.status, out.json()["details"]["error"]["message"].clone()),
            (
                2,
                json!(format!("Invalid input: network {mode} was asked for, but orchestrate cannot confine the network of a child that runs through the slurm runner (use --runner local)"))
            )
        );
    }
    // By default there is none, and the result says so.
    let sb = Sandbox::new().set("ORCHESTRATE_SANDBOX", "auto");
    let out = sb.run("t", &["--runner", "slurm"]);
    assert_eq!(
        (out.status, out.result()["warnings"].clone()),
        (
            0,
            json!(["no sandbox: the child runs through the slurm runner, on a node where orchestrate's sandbox does not reach; only its CLI's own permissions apply"])
        )
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
                "sandbox": {"mode": "off", "mechanism": "none"},
                "warnings": ["no sandbox: the child runs through the slurm runner, on a node where orchestrate's sandbox does not reach; only its CLI's own permissions apply"],
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
