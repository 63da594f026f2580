//! One attempt: the child's command line, its session files, the supervised process, and
//! the verdict on how it ended, rendered into a result.

use std::borrow::Cow;
use std::fs::File;

use super::progress::{Observer, Progress};
use super::render::{render, Context};
use super::resolve::ResolvedRun;
use super::sink::DialectSink;
use super::verdict::{check_answer, verdict, Verdict};
use super::{RunEnv, RunOutput};
use crate::backends::{BackendError, Invocation, InvocationInput};
use crate::collector::Collector;
use crate::error::RunError;
use crate::observe::{Observers, RunEvent};
use crate::runner::JobSpec;
use crate::sandbox::{self, ChildEnv, Held, Places};
use crate::session::{self, RunDir};
use crate::structured::{self, Mismatch};
use crate::supervisor::{self, ChildSpec, Controls, OutputSinks};
use crate::worktree::{Worktree, GIT_LOCATION_VARS};

pub(super) struct Attempt<'a> {
    pub run: &'a ResolvedRun,
    pub env: &'a RunEnv,
    pub run_dir: &'a RunDir,
    /// The run's worktree, where the child works instead of the working directory.
    pub worktree: Option<&'a Worktree>,
    /// What the child is told instead of the task: the message of a repair turn.
    pub message: Option<&'a str>,
}

/// An attempt's result, and why its answer did not match the output schema, if it did not.
pub(super) struct Executed {
    pub output: RunOutput,
    pub mismatch: Option<Mismatch>,
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

impl Attempt<'_> {
    /// Runs attempt `n` (1-based, over every model) with `model`.
    pub(super) async fn execute(
        &self,
        n: u32,
        model: Option<&str>,
        controls: &Controls,
        observer: Option<&mut Observer<'_>>,
        observers: &mut Observers,
    ) -> Executed {
        let run = self.run;
        let prepared = self.invocation(model).and_then(|inv| {
            let files = self.session_files(n)?;
            let (spec, held) = self.child_spec(&inv, n, observers)?;
            Ok((inv, files, spec, held))
        });
        let (invocation, (session_path, mut session_file, mut stderr_file), mut spec, held) =
            match prepared {
                Ok(p) => p,
                // The run folder exists and is recorded: the refusal keeps the run's id.
                Err(e) => {
                    return Executed {
                        output: RunOutput::from_result(e.to_result(Some(&run.run_id))),
                        mismatch: None,
                    }
                }
            };
        let mut sink = DialectSink {
            dialect: invocation.dialect.parser(),
            // What a result can show: the kept head of the answer, and no less than the
            // content it may carry.
            collector: Collector::with_text_limit(
                crate::collector::DEFAULT_KEPT_TEXT_BYTES.max(run.truncate.max_bytes),
            )
            .with_budgets(run.budgets),
            progress: observer.map(|observer| Progress::new(observer, &run.run_id)),
            recognized: false,
            total: self.env.total.clone(),
            observers,
        };
        let outcome = supervisor::supervise(
            &mut spec,
            run.limits,
            &mut sink,
            OutputSinks {
                stdout_copy: &mut session_file,
                stderr_copy: &mut stderr_file,
            },
            controls,
        )
        .await;
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
        // The child's tree is gone: the placeholders of protected paths go (when no other
        // run holds them), a login its CLI refreshed is written back, and its TMPDIR (an
        // ordinary folder where no mount namespace made it a tmpfs) goes.
        drop(held);
        if spec.confinement.view.is_some() {
            let _ = std::fs::remove_dir_all(self.run_dir.child_dir().join(sandbox::PRIVATE_TMP));
        }
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
            model,
            session_file: session_path,
            structured,
        };
        let output = render(&verdict, &outcome, &sink.collector, &ctx);
        let mismatch = match verdict {
            Verdict::NotMatchingSchema(m) => Some(m),
            _ => None,
        };
        Executed { output, mismatch }
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
        let agent = run.agent.brief();
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
        };
        let built = backend.build(&input).map(|mut inv| {
            let unenforced = inv.dialect.budget_warnings(&run.budgets);
            inv.warnings.extend(unenforced);
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

    fn session_files(&self, n: u32) -> Result<(String, File, File), RunError> {
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
        let path = self.run_dir.path.join(&session_name);
        Ok((path.to_string_lossy().into_owned(), session, stderr))
    }

    /// The child's command, environment and confinement (the sandbox's directories are
    /// created here, and its private TMPDIR), the runner it runs through (which may put an
    /// engine's command in front of the child's), and what the sandbox holds until the
    /// child's tree is gone.
    fn child_spec(
        &self,
        invocation: &Invocation,
        n: u32,
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
        let (cwd, workspace, git, mut env_remove): (_, _, _, Vec<std::ffi::OsString>) =
            match self.worktree {
                // git variables naming a repository would send the child's git to the
                // parent's.
                Some(wt) => (
                    wt.cwd.clone(),
                    vec![wt.path.clone()],
                    wt.git_dirs(),
                    GIT_LOCATION_VARS.iter().map(Into::into).collect(),
                ),
                None => (
                    run.cwd.clone(),
                    vec![run.cwd.clone()],
                    Vec::new(),
                    Vec::new(),
                ),
            };
        // A child allowed to start runs of its own keeps their state in its own place.
        let nests = self.env.depth + 1 < self.env.config.max_depth.value;
        let places = Places {
            state_root: &self.env.state.root,
            run_dir: &self.run_dir.path,
            workspace: &workspace,
            git: &git,
            nests,
        };
        let prepared = sandbox::confinement(
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
        let runner = run.runner.start(&JobSpec {
            run_id: &run.run_id,
            attempt: n,
            cwd: &cwd,
            time_limit: run.limits.runtime_timeout + run.limits.kill_grace,
            queue_timeout: run.limits.queue_timeout,
            args: &run.runner.args,
        });
        Ok((
            ChildSpec {
                program: invocation.program.clone(),
                args: invocation.args.clone(),
                cwd,
                env,
                env_remove,
                confinement: prepared.confinement,
                runner,
            },
            prepared.held,
        ))
    }
}
