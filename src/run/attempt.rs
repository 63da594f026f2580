//! One attempt: the child's command line, its session files, the supervised process, and
//! the verdict on how it ended, rendered into a result.

use std::borrow::Cow;
use std::ffi::OsString;
use std::fs::File;
use std::sync::Arc;

use super::ledger;
use super::progress::{Observer, Progress};
use super::render::{render, Context};
use super::resolve::ResolvedRun;
use super::schedule::Slot;
use super::sink::{DialectSink, LaneSignals};
use super::total;
use super::verdict::{check_answer, verdict, Verdict};
use super::{RunEnv, RunOutput};
use crate::backends::ask_parent::{Asker, ParentAsk};
use crate::backends::permissions::{PermissionMode, PermissionPolicy};
use crate::backends::provider::ProviderQuery;
use crate::backends::{AgentBrief, BackendError, Invocation, InvocationInput};
use crate::collector::Collector;
use crate::error::RunError;
use crate::network::{ChildNetwork, Network, NetworkLog, Policy};
use crate::observe::{Observers, RunEvent};
use crate::runner::JobSpec;
use crate::sandbox::{self, ChildEnv, Held, Places};
use crate::session::{self, RunDir};
use crate::structured::{self, Mismatch};
use crate::supervisor::{self, ChildInput, ChildSpec, Controls, OutputSinks};
use crate::worktree::{Worktree, GIT_LOCATION_VARS};

pub(super) struct Attempt<'a> {
    pub run: &'a ResolvedRun,
    pub env: &'a RunEnv,
    pub run_dir: &'a RunDir,
    /// What the proxies of the run's attempts refused (`network: provider`).
    pub network_log: &'a Arc<NetworkLog>,
    /// The run's inbox, for a child that takes messages while it runs; its ledger lists
    /// them for the run's result.
    pub mailbox: &'a crate::live::inbox::Mailbox,
    /// The run's worktree, where the child works instead of the working directory.
    pub worktree: Option<&'a Worktree>,
    /// What the child is told instead of the task: the message of a repair turn.
    pub message: Option<&'a str>,
}

/// An attempt's result, why its answer did not match the output schema if it did not, and
/// the delay its provider last asked for (as the CLI reported it, or the error says).
pub(super) struct Executed {
    pub output: RunOutput,
    pub mismatch: Option<Mismatch>,
    pub provider_delay: Option<std::time::Duration>,
}

/// Attempt 1 writes `session.jsonl` and `stderr.log`; a retry writes
/// `session.attempt-N.jsonl` and `stderr.attempt-N.log` beside them, so every attempt keeps
/// its own record.
fn attempt_file_names(n: u32) -> (String, String) {
    if n <= 1 {
        (
            session::SESSION_FILE.to_string(),
            session::STDERR_FILE.to_string(),
        )
    } else {
        (
            format!("session.attempt-{n}.jsonl"),
            format!("stderr.attempt-{n}.log"),
        )
    }
}

/// What orchestrate wrote to the stdin of a child it talks to, byte for byte, beside the
/// session: `stdin.jsonl`, and `stdin.attempt-N.jsonl` for a retry.
fn stdin_file_name(n: u32) -> String {
    if n <= 1 {
        session::STDIN_FILE.to_string()
    } else {
        format!("stdin.attempt-{n}.jsonl")
    }
}

impl Attempt<'_> {
    /// Runs attempt `n` (1-based, over every model) with `model`; in a fan-out, in `slot`,
    /// its place in its lane, which hears how the provider answers as the child goes.
    pub(super) async fn execute(
        &self,
        n: u32,
        model: Option<&str>,
        controls: &Controls,
        observer: Option<&mut Observer<'_>>,
        slot: Option<&Slot>,
        observers: &mut Observers,
    ) -> Executed {
        let run = self.run;
        let prepared = self.invocation(model).and_then(|inv| {
            let files = self.session_files(n, inv.talks())?;
            let (spec, held) = self.child_spec(&inv, n, model, observers)?;
            Ok((inv, files, spec, held))
        });
        let (
            invocation,
            (session_path, mut session_file, mut stderr_file, mut stdin_file),
            mut spec,
            held,
        ) = match prepared {
            Ok(p) => p,
            // The run folder exists and is recorded: the refusal keeps the run's id.
            Err(e) => {
                return Executed {
                    output: RunOutput::from_result(e.to_result(Some(&run.run_id))),
                    mismatch: None,
                    provider_delay: None,
                }
            }
        };
        let mut dialect = invocation.dialect();
        let mut listens = false;
        if let Some(input) = &spec.stdin {
            dialect.attach(input.clone());
            listens = dialect.listen(Box::new(self.mailbox.clone()));
        }
        let mut sink = DialectSink {
            dialect,
            // What a result can show: the kept head of the answer, and no less than the
            // content it may carry.
            collector: Collector::with_text_limit(
                crate::collector::DEFAULT_KEPT_TEXT_BYTES.max(run.truncate.max_bytes),
            )
            .with_budgets(run.budgets),
            progress: observer.map(|observer| Progress::new(observer, &run.run_id)),
            recognized: false,
            total: self.env.total.clone().map(|(total, task)| (total, task, n)),
            lane: slot.map(|slot| LaneSignals::new(slot, run.backend.backend)),
            observers,
            listens,
        };
        // A child that may start orchestrate runs of its own: what they report spending
        // counts as this task's, while it runs.
        let watch = match (&self.env.total, self.nests()) {
            (Some((total, task)), true) => Some(ledger::Watch::start(
                self.ledger_dir(),
                total.clone(),
                *task,
            )),
            _ => None,
        };
        let outcome = supervisor::supervise(
            &mut spec,
            run.limits,
            &mut sink,
            OutputSinks {
                stdout_copy: &mut session_file,
                stderr_copy: &mut stderr_file,
                stdin_copy: stdin_file
                    .as_mut()
                    .map(|f| f as &mut (dyn std::io::Write + Send)),
            },
            controls,
        )
        .await;
        drop(watch);
        if listens {
            self.mailbox.return_unanswered();
        }
        // Stopped because the fan-out's tasks together spent its budget: that budget is
        // the reason, as this run's own would be.
        if let (Ok(o), Some((total, _))) = (&outcome, &self.env.total) {
            if o.stop() == Some(crate::supervisor::StopReason::Budget) {
                sink.note_limit(total.limit_reached());
            }
        }
        sink.observers.flush();
        if let Some(reason) = outcome.as_ref().ok().and_then(|o| o.stop()) {
            sink.observers.emit(&RunEvent::Stopped(reason));
        }
        // The child's tree is gone: what the sandbox held for it is let go.
        drop(held);
        let (verdict, structured) = check_answer(
            verdict(&outcome, &sink.collector),
            &sink.collector,
            run.output_schema.as_ref(),
        );
        let ctx = Context {
            run,
            dialect: invocation.dialect,
            program: &invocation.program,
            warnings: &invocation.warnings,
            network: spec.network.as_ref(),
            model,
            session_file: session_path,
            structured,
        };
        let output = render(&verdict, &outcome, &sink.collector, &ctx);
        let mismatch = match verdict {
            Verdict::NotMatchingSchema(m) => Some(m),
            _ => None,
        };
        let provider_delay = sink.collector.retry_delay().or_else(|| {
            output
                .result
                .details
                .results
                .first()
                .and_then(|r| r.error.as_deref())
                .and_then(super::retry::asked_delay)
        });
        Executed {
            output,
            mismatch,
            provider_delay,
        }
    }

    /// Whether the child may start orchestrate runs of its own.
    fn nests(&self) -> bool {
        self.env.nests()
    }

    fn ledger_dir(&self) -> std::path::PathBuf {
        ledger::dir(&self.run_dir.path)
    }

    /// What the child is told: a repair turn's message, or the task, followed by the
    /// request for a JSON answer when there is an output schema that the CLI does not
    /// take through an option of its own.
    fn prompt(&self) -> Cow<'_, str> {
        let run = self.run;
        match (self.message, &run.output_schema) {
            (Some(message), _) => Cow::Borrowed(message),
            (None, Some(schema)) if !run.backend.backend.takes_output_schema(schema) => {
                Cow::Owned(structured::task_prompt(&run.task, schema))
            }
            (None, _) => Cow::Borrowed(&run.task),
        }
    }

    fn invocation(&self, model: Option<&str>) -> Result<Invocation, RunError> {
        let run = self.run;
        let backend = run.backend.backend;
        let prompt = self.prompt();
        let (cwd, workspace) = self.workspace();
        let (parent, unasked) = match (&self.env.parent, run.permissions) {
            (ParentAsk::Reachable(parent), PermissionMode::Ask) => (
                Some(Asker {
                    parent: parent.clone(),
                    agent: run.agent.name.clone(),
                }),
                None,
            ),
            (ParentAsk::Unreachable(why), PermissionMode::Ask) => {
                (None, Some(PermissionMode::unasked_warning(why)))
            }
            _ => (None, None),
        };
        let policy = PermissionPolicy::new(
            run.permissions,
            &run.agent.permissions(),
            run.sandbox.mode,
            &cwd,
            &workspace,
            parent,
        );
        let agent = AgentBrief {
            acp_command: run.acp_command.clone(),
            ..run.agent.brief()
        };
        let input = InvocationInput {
            agent: &agent,
            task: &prompt,
            model,
            run_dir: &self.run_dir.path,
            resume: run.resume.as_ref(),
            max_cost: run.budgets.max_cost,
            outer_sandbox: run.sandbox.confines(),
            output_schema: run
                .output_schema
                .as_ref()
                .filter(|schema| backend.takes_output_schema(schema)),
            permissions: &policy,
            stdin_pipe: run.runner.kind.here() || !run.sandbox.confines(),
        };
        let built = backend.build(&input).map(|mut inv| {
            let unenforced = inv.dialect.budget_warnings(&run.budgets);
            inv.warnings.extend(unenforced);
            let asks = inv.talk.as_ref().is_some_and(|t| t.asks_permissions());
            match (unasked, asks) {
                (Some(w), true) => inv.warnings.push(w),
                (_, false) if run.permissions != PermissionMode::Policy => {
                    inv.warnings.push(format!(
                    "{backend} asks orchestrate for no permissions: permissions {} changes nothing",
                    run.permissions
                ))
                }
                _ => {}
            }
            inv
        });
        built.map_err(|e| match e {
            BackendError::PromptFile { path, source } => RunError::Io {
                action: "write the prompt file",
                path,
                source,
            },
            // A misconfigured agent is bad input.
            e => RunError::invalid(format!("agent {}: {e}", run.agent.name)),
        })
    }

    /// Where the child works, and what of it it may write: its worktree, or the working
    /// directory.
    fn workspace(&self) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
        match self.worktree {
            Some(wt) => (wt.cwd.clone(), vec![wt.path.clone()]),
            None => (self.run.cwd.clone(), vec![self.run.cwd.clone()]),
        }
    }

    fn session_files(
        &self,
        n: u32,
        talks: bool,
    ) -> Result<(String, File, File, Option<File>), RunError> {
        let (session_name, stderr_name) = attempt_file_names(n);
        let create = |name: &str| {
            self.run_dir
                .create_file(name)
                .map_err(|source| RunError::Io {
                    action: "create the session files",
                    path: self.run_dir.path.join(name),
                    source,
                })
        };
        let session = create(&session_name)?;
        let stderr = create(&stderr_name)?;
        let stdin = match talks {
            true => Some(create(&stdin_file_name(n))?),
            false => None,
        };
        let path = self.run_dir.path.join(&session_name);
        Ok((path.to_string_lossy().into_owned(), session, stderr, stdin))
    }

    /// The child's command, environment and confinement (the sandbox's directories are
    /// created here, and its private TMPDIR), the runner it runs through (which may put an
    /// engine's command in front of the child's), and what the sandbox holds until the
    /// child's tree is gone.
    fn child_spec(
        &self,
        invocation: &Invocation,
        n: u32,
        model: Option<&str>,
        observers: &mut Observers,
    ) -> Result<(ChildSpec, Held), RunError> {
        let run = self.run;
        let mut env = invocation.env.clone();
        observers.child_env(n, &mut env);
        env.push((
            "ORCHESTRATE_DEPTH".into(),
            (self.env.depth + 1).to_string().into(),
        ));
        env.push(("ORCHESTRATE_RUN_ID".into(), run.run_id.clone().into()));
        let (tree_env, tree_remove) = self.tree_channel()?;
        env.extend(tree_env);
        let (cwd, workspace) = self.workspace();
        let (git, mut env_remove): (_, Vec<OsString>) = match self.worktree {
            // git variables naming a repository would send the child's git to the
            // parent's.
            Some(wt) => (
                wt.git_dirs(),
                GIT_LOCATION_VARS.iter().map(Into::into).collect(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        env_remove.extend(tree_remove);
        // A child allowed to start runs of its own keeps their state in its own place.
        let nests = self.nests();
        let other_states = crate::session::StateDir::defaults();
        let places = Places {
            state_root: &self.env.state.root,
            other_states: &other_states,
            run_dir: &self.run_dir.path,
            workspace: &workspace,
            git: &git,
            nests,
        };
        let runner = run.runner.start(&JobSpec {
            run_id: &run.run_id,
            attempt: n,
            cwd: &cwd,
            time_limit: run.limits.runtime_timeout + run.limits.kill_grace,
            queue_timeout: run.limits.queue_timeout,
            args: &run.runner.args,
        });
        if !run.runner.kind.here() && run.sandbox.confines() {
            // The child runs elsewhere: orchestrate's own process there builds its sandbox
            // from a plan in the run folder, and says which layers held.
            let launch = self.node_sandbox(invocation, &places, &cwd, n)?;
            env_remove.push(sandbox::OUTER_VAR.into());
            return Ok((
                ChildSpec {
                    program: launch.program,
                    args: launch.args,
                    cwd,
                    env,
                    env_remove,
                    confinement: Default::default(),
                    runner,
                    layers_reported: true,
                    stdin: invocation.talks().then(ChildInput::new),
                    network: None,
                },
                Held::default(),
            ));
        }
        let mut prepared = sandbox::confinement(
            &run.sandbox,
            &run.backend.backend.sandbox_needs(),
            &ChildEnv { overrides: &env },
            &places,
        )
        .map_err(|source| RunError::Io {
            action: "prepare the sandbox",
            path: self.run_dir.path.clone(),
            source,
        })?;
        env.extend(prepared.env);
        env_remove.extend(prepared.env_remove);
        let network = self.child_network(&env, model, &cwd, &mut prepared.confinement);
        if let Some(net) = &network {
            env.extend(net.env());
        }
        Ok((
            ChildSpec {
                program: invocation.program.clone(),
                args: invocation.args.clone(),
                cwd,
                env,
                env_remove,
                confinement: prepared.confinement,
                runner,
                stdin: invocation.talks().then(ChildInput::new),
                network,
                layers_reported: false,
            },
            prepared.held,
        ))
    }

    /// The tree's channel for a child that may start orchestrate runs of its own: what is
    /// left of the budget, and the ledger folder (created here) where they report what
    /// they spend. A child that may not nest gets none of it (and whatever this process
    /// inherited is removed, so that it is never passed on a level too far).
    #[allow(clippy::type_complexity)]
    fn tree_channel(&self) -> Result<(Vec<(OsString, OsString)>, Vec<OsString>), RunError> {
        let unset = || total::TREE_VARS.iter().map(OsString::from).collect();
        let Some((total, task)) = self.env.total.as_ref().filter(|_| self.nests()) else {
            return Ok((Vec::new(), unset()));
        };
        let dir = self.ledger_dir();
        ledger::create_dir(&dir).map_err(|source| RunError::Io {
            action: "create the ledger folder",
            path: dir.clone(),
            source,
        })?;
        let left = total.allowance(*task);
        let mut vars = vec![(OsString::from(total::TREE_LEDGER_VAR), dir.into_os_string())];
        vars.extend(left.cost.map(|usd| {
            (
                OsString::from(total::TREE_MAX_COST_VAR),
                OsString::from(usd.to_string()),
            )
        }));
        vars.extend(left.tokens.map(|n| {
            (
                OsString::from(total::TREE_MAX_TOKENS_VAR),
                OsString::from(n.to_string()),
            )
        }));
        // What this process inherited and does not pass on is removed.
        let remove = total::TREE_VARS
            .iter()
            .filter(|v| !vars.iter().any(|(k, _)| k == *v))
            .map(OsString::from)
            .collect();
        Ok((vars, remove))
    }

    /// The child's network: `off` and `provider` give it a namespace of its own; with
    /// `provider`, listeners for the proxy (and bridged loopback providers) in it, and
    /// the policy the proxy serves them with.
    fn child_network(
        &self,
        env: &[(std::ffi::OsString, std::ffi::OsString)],
        model: Option<&str>,
        cwd: &std::path::Path,
        confinement: &mut crate::platform::Confinement,
    ) -> Option<ChildNetwork> {
        let plan = &self.run.network;
        match plan.mode {
            Network::On => None,
            Network::Off => {
                confinement.no_network = true;
                None
            }
            Network::Provider => {
                let backend = self.run.backend.backend;
                let provider = (backend.spec().provider_hosts)(&ProviderQuery {
                    env: &ChildEnv { overrides: env },
                    model,
                    cwd,
                });
                let (policy, warnings) = Policy::build(&provider, &plan.allow_hosts);
                confinement.no_network = true;
                confinement.network_optional = !plan.requested;
                confinement.listen = policy.listeners();
                Some(ChildNetwork {
                    policy: Arc::new(policy),
                    log: self.network_log.clone(),
                    warnings,
                })
            }
        }
    }

    /// `orchestrate sandbox-exec PLAN` in front of the agent's command, with the plan
    /// written into the run folder.
    fn node_sandbox(
        &self,
        invocation: &Invocation,
        places: &Places<'_>,
        cwd: &std::path::Path,
        n: u32,
    ) -> Result<crate::runner::Launch, RunError> {
        use sandbox::remote::{self, NodePlan};
        use std::io::Write;
        let run = self.run;
        if invocation.talks() {
            // sandbox-exec relays the child's output, not its input.
            return Err(RunError::invalid(format!(
                "{} talks to its child through its stdin, which the sandbox on a node does not carry yet (use --sandbox off with a cluster runner, or --runner local)",
                run.backend.backend.name()
            )));
        }
        let plan = NodePlan::new(
            &run.sandbox,
            run.network.mode,
            run.backend.backend.name(),
            places,
            &invocation.program,
            &invocation.args,
            cwd,
        )
        .map_err(|e| RunError::invalid(e.to_string()))?;
        let name = remote::plan_file_name(n);
        let path = self.run_dir.path.join(&name);
        self.run_dir
            .create_file(&name)
            .and_then(|mut f| {
                f.write_all(&plan.to_json())?;
                f.sync_all()
            })
            .map_err(|source| RunError::Io {
                action: "write the node's sandbox plan",
                path: path.clone(),
                source,
            })?;
        let exe = std::env::current_exe().map_err(|source| RunError::Io {
            action: "find orchestrate's own binary for the node",
            path: "/proc/self/exe".into(),
            source,
        })?;
        Ok(crate::runner::Launch {
            program: exe.into_os_string(),
            args: vec![remote::COMMAND.into(), path.into_os_string()],
        })
    }
}
