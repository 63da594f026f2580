//! One attempt: the child's command line, its session files, the supervised process, and
//! the verdict on how it ended, rendered into a result.

use std::borrow::Cow;
use std::fs::File;

use super::progress::{DialectSink, Observer, Progress};
use super::render::{render, Context};
use super::resolve::ResolvedRun;
use super::verdict::{check_answer, verdict, Verdict};
use super::{RunEnv, RunOutput};
use crate::backends::{BackendError, Invocation, InvocationInput};
use crate::collector::Collector;
use crate::error::RunError;
use crate::session::{self, RunDir};
use crate::structured::{self, Mismatch};
use crate::supervisor::{self, ChildSpec, Controls, OutputSinks};

pub(super) struct Attempt<'a> {
    pub run: &'a ResolvedRun,
    pub env: &'a RunEnv,
    pub run_dir: &'a RunDir,
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
    pub(super) async fn execute(
        &self,
        n: u32,
        controls: &Controls,
        observer: Option<&mut Observer<'_>>,
    ) -> Executed {
        let run = self.run;
        let prepared = self.invocation().and_then(|inv| {
            let files = self.session_files(n)?;
            Ok((inv, files))
        });
        let (invocation, (session_path, mut session_file, mut stderr_file)) = match prepared {
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
            collector: Collector::new(),
            progress: observer.map(|observer| Progress::new(observer, &run.run_id)),
        };
        let outcome = supervisor::supervise(
            &self.child_spec(&invocation),
            run.limits,
            &mut sink,
            OutputSinks {
                stdout_copy: &mut session_file,
                stderr_copy: &mut stderr_file,
            },
            controls,
        )
        .await;
        let (verdict, structured) = check_answer(
            verdict(&outcome, &sink.collector),
            &sink.collector,
            run.output_schema.as_ref(),
        );
        let ctx = Context {
            run,
            program: &invocation.program,
            warnings: &invocation.warnings,
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

    fn invocation(&self) -> Result<Invocation, RunError> {
        let run = self.run;
        let backend = run.backend.backend;
        let prompt = self.prompt();
        let input = InvocationInput {
            agent: &run.agent,
            task: &prompt,
            model: run.model.as_deref(),
            run_dir: &self.run_dir.path,
            resume: run.resume.as_ref(),
            output_schema: run
                .output_schema
                .as_ref()
                .filter(|schema| backend.takes_output_schema(schema)),
        };
        backend.build(&input).map_err(|e| match e {
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

    fn child_spec(&self, invocation: &Invocation) -> ChildSpec {
        let mut env = invocation.env.clone();
        env.push((
            "ORCHESTRATE_DEPTH".into(),
            (self.env.depth + 1).to_string().into(),
        ));
        env.push(("ORCHESTRATE_RUN_ID".into(), self.run.run_id.clone().into()));
        ChildSpec {
            program: invocation.program.clone(),
            args: invocation.args.clone(),
            cwd: self.run.cwd.clone(),
            env,
        }
    }
}
