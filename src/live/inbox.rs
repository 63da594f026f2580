//! Messages into a running run (`orchestrate send`, the MCP `send` tool), with no server:
//! the sender appends the message to [`QUEUE_FILE`] in the run's folder, which is
//! orchestrate's record and read-only to the child (the sandbox gives the child only its
//! own place, `child/`, to write). A child whose CLI can take a message while it runs (pi's
//! RPC mode, an ACP agent) gets it through its dialect, which looks in the inbox while the
//! child works ([`Mailbox`]); otherwise, and for what such a child did not answer, the run
//! takes what is queued each time the child's turn ends and continues the child's session
//! with it as a new turn. When a turn ends with nothing queued, or a run cannot deliver any
//! more, the run closes its inbox ([`CLOSED_FILE`]) and a later message is refused. Both sides hold [`LOCK_FILE`] while
//! they look, so that a message is either taken by the run or refused, never left behind.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use crate::backends::{Backend, Collected, Inbox};
use crate::observe::line::{Tail, EVENTS_FILE};
pub(crate) use crate::result::{Delivery, Message};
use crate::result::{Details, Mode, RunResult, TextContent};
use crate::session::{self, RunDir, RunId, StateDir};

pub(crate) const QUEUE_FILE: &str = "inbox.jsonl";
pub(crate) const CLOSED_FILE: &str = "inbox.closed";
const LOCK_FILE: &str = "inbox.lock";
/// The longest message taken, in bytes: a correction, not a document.
pub(crate) const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// How long either side waits for the inbox's lock. The child can read the run folder,
/// and a lock needs no more than reading: a hostile child holding it must not hang
/// `send`, nor the run, which then closes its inbox without it.
const MAX_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// A message sent to a run, as queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Queued {
    /// When it was sent, in milliseconds since the Unix epoch.
    pub at: u64,
    pub text: String,
    /// `send --interrupt`: the child's current turn is cancelled for it, where its CLI can.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupt: bool,
}

impl Queued {
    pub(crate) fn delivered(self, delivery: Delivery) -> Message {
        Message {
            at: self.at,
            text: self.text,
            delivery,
        }
    }
}

/// Why a message was not queued.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    #[error("no run {0} (see `orchestrate runs`)")]
    NoRun(RunId),
    #[error("run {id} was started by the child of run {parent}: its messages go through run {parent}'s child")]
    Nested { id: RunId, parent: String },
    #[error("run {0} has ended: a message can only reach a run that is still running")]
    Ended(RunId),
    #[error("run {0} has not started yet: it waits for its place in its fan-out (an earlier step of its chain, or --concurrency); send the message once it runs")]
    NotStarted(RunId),
    #[error("run {id} runs {backend}, which cannot continue a session, so no message can reach it; {instead}")]
    CannotContinue {
        id: RunId,
        backend: String,
        instead: String,
    },
    #[error("the message is empty")]
    Empty,
    #[error("the message is {0} bytes; at most {MAX_MESSAGE_BYTES} are taken")]
    TooLong(usize),
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot queue the message in {}: {source}", path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Queues `text` for the run `id`, once it is known to be running and able to take it.
pub(crate) fn send(
    state: &StateDir,
    id: &RunId,
    text: &str,
    interrupt: bool,
) -> Result<Queued, SendError> {
    if text.trim().is_empty() {
        return Err(SendError::Empty);
    }
    if text.len() > MAX_MESSAGE_BYTES {
        return Err(SendError::TooLong(text.len()));
    }
    let dir = super::find_run_dir(state, id).ok_or_else(|| SendError::NoRun(id.clone()))?;
    if let Some(parent) = super::parent_run_dir(&dir.path) {
        // A nested run's folder is in its parent's child's place, which the child writes:
        // nothing is written through it.
        return Err(SendError::Nested {
            id: id.clone(),
            parent: parent
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
        });
    }
    let mut tail = Tail::new(dir.path.join(EVENTS_FILE));
    let mut progress = super::Progress::default();
    let mut backend = None;
    loop {
        let lines = tail.read().map_err(|source| SendError::Read {
            path: tail.path().to_path_buf(),
            source,
        })?;
        if lines.is_empty() {
            break;
        }
        for l in &lines {
            if let crate::observe::line::Event::Run(info) = &l.event {
                backend = Some(info.backend.clone());
            }
            progress.take(&l.event);
        }
    }
    if let Some(name) = &backend {
        if let Ok(b) = Backend::parse(name) {
            if !b.spec().resumes {
                return Err(SendError::CannotContinue {
                    id: id.clone(),
                    backend: name.clone(),
                    instead: instead(name),
                });
            }
        }
    }
    let ended = progress.ended || dir.result_file().exists();
    // A task of a fan-out has its folder from the fan-out's start, and its first record
    // only once it starts.
    if backend.is_none() && !ended {
        return Err(SendError::NotStarted(id.clone()));
    }
    if ended || !super::still_running(&dir.path, progress.supervisor.as_ref()) {
        return Err(SendError::Ended(id.clone()));
    }
    let queued = Queued {
        at: session::now_unix_ms(),
        text: text.to_string(),
        interrupt,
    };
    let write_err = |source| SendError::Write {
        path: dir.path.join(QUEUE_FILE),
        source,
    };
    let _lock = lock(&dir, MAX_LOCK_WAIT).map_err(write_err)?;
    if dir.path.join(CLOSED_FILE).exists() {
        return Err(SendError::Ended(id.clone()));
    }
    let mut line = serde_json::to_string(&queued).map_err(|e| write_err(io::Error::other(e)))?;
    line.push('\n');
    session::open_private(
        &dir.path.join(QUEUE_FILE),
        OpenOptions::new().append(true).create(true),
    )
    .and_then(|mut f| f.write_all(line.as_bytes()))
    .map_err(write_err)?;
    Ok(queued)
}

/// What `send` answers once the message is queued.
pub(crate) fn sent(run_id: &RunId, interrupt: bool) -> RunResult {
    let when = match interrupt {
        true => "its child's current turn is cancelled for it where its CLI can (ACP, pi), else it is a new turn once that turn ends",
        false => "its child reads it in its current turn or as its next one, as its CLI can",
    };
    RunResult {
        content: vec![TextContent::text(format!(
            "Sent to run {run_id}: {when}; the run's result lists it under `messages`, with how it was delivered."
        ))],
        details: Details {
            mode: Mode::Single,
            run_id: Some(run_id.to_string()),
            results: Vec::new(),
            error: None,
            streaming: None,
            background: None,
            scheduler: Default::default(),
            tree_usage: None,
        },
    }
}

/// What can take messages where `backend` cannot.
fn instead(backend: &str) -> String {
    let preset = format!("{backend}-acp");
    match Backend::parse(&preset) {
        Ok(b) if b.spec().resumes => {
            format!("its ACP preset can: run the agent with `backend: {preset}`")
        }
        _ => "an ACP agent can: run it with `backend: acp` and its `acp_command:`".to_string(),
    }
}

/// The run's side: takes what is queued, and closes the inbox when nothing was (the
/// child's work is over) or when the run cannot deliver (`deliverable` false; what was
/// queued is returned, to be reported as not delivered). Errors reading the queue are
/// logged: a message lost that way was never acknowledged as delivered.
pub(crate) fn take(run_dir: &RunDir, deliverable: bool) -> Vec<Queued> {
    let close_if = |queued: &[Queued]| queued.is_empty() || !deliverable;
    match take_queue(run_dir, MAX_LOCK_WAIT, close_if) {
        Ok(queued) => queued,
        Err(e) => {
            tracing::warn!(
                "the messages for the run in {} could not be read: {e}",
                run_dir.path.display()
            );
            let _ = close(run_dir);
            Vec::new()
        }
    }
}

/// Takes what is queued under the lock (waited for at most `wait`), and closes the inbox
/// when `close_if` says so.
fn take_queue(
    run_dir: &RunDir,
    wait: std::time::Duration,
    close_if: impl Fn(&[Queued]) -> bool,
) -> io::Result<Vec<Queued>> {
    let _lock = lock(run_dir, wait)?;
    let path = run_dir.path.join(QUEUE_FILE);
    let mut text = String::new();
    match session::open_private(&path, OpenOptions::new().read(true)) {
        Ok(mut f) => {
            f.read_to_string(&mut text)?;
            std::fs::remove_file(&path)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let queued: Vec<Queued> = text
        .lines()
        .filter_map(|l| match serde_json::from_str(l) {
            Ok(q) => Some(q),
            Err(e) => {
                tracing::warn!("a line of {} is no message: {e}", path.display());
                None
            }
        })
        .collect();
    if close_if(&queued) {
        close(run_dir)?;
    }
    Ok(queued)
}

/// The run's inbox as a child's dialect sees it while the child runs, for a CLI that can
/// take a message into its running process (see `Dialect::listen`): it takes what was sent
/// without closing the inbox (the run closes it when the child is done), and keeps the
/// ledger of what it took and how far each message got, which the attempt's result lists.
#[derive(Debug, Clone)]
pub(crate) struct Mailbox {
    run_dir: RunDir,
    ledger: std::sync::Arc<std::sync::Mutex<Vec<Entry>>>,
}

#[derive(Debug)]
struct Entry {
    queued: Queued,
    delivery: Delivery,
    stage: Stage,
}

/// How far a message taken from the inbox got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Taken, waiting for the moment its CLI can take it (its turn to end, say).
    Held,
    /// Written to the child, its answer not yet given.
    Written,
    /// The turn that carried it ended with an answer.
    Answered,
}

impl Inbox for Mailbox {
    fn collect(&self) -> Collected {
        Mailbox::collect(self)
    }
    fn write_held(&self, delivery: Delivery) -> Vec<String> {
        Mailbox::write_held(self, delivery)
    }
    fn answered(&self) {
        Mailbox::answered(self)
    }
    fn take_back(&self, texts: &[String]) {
        Mailbox::take_back(self, texts)
    }
    fn delivered_as(&self, texts: &[String], delivery: Delivery) {
        Mailbox::delivered_as(self, texts, delivery)
    }
}

impl Mailbox {
    pub(crate) fn new(run_dir: &RunDir) -> Mailbox {
        Mailbox {
            run_dir: run_dir.clone(),
            ledger: Default::default(),
        }
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.ledger
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes what was sent since the last look, as held messages; says whether one asks to
    /// interrupt the turn. With nothing sent this is one `stat`, and no lock. It never
    /// waits for the lock (it runs in the supervisor's loop): a lock held by `send` or by
    /// a hostile child leaves the message for the next look.
    pub(crate) fn collect(&self) -> Collected {
        if !self.run_dir.path.join(QUEUE_FILE).exists() {
            return Collected::default();
        }
        let queued = match take_queue(&self.run_dir, std::time::Duration::ZERO, |_| false) {
            Ok(q) => q,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Collected::default(),
            Err(e) => {
                // Left in the inbox: the run takes it after the turn, or reports it.
                tracing::warn!(
                    "the messages for the run in {} could not be read: {e}",
                    self.run_dir.path.display()
                );
                return Collected::default();
            }
        };
        let got = Collected {
            new: queued.len(),
            interrupt: queued.iter().any(|q| q.interrupt),
        };
        self.ledger().extend(queued.into_iter().map(|queued| Entry {
            queued,
            delivery: Delivery::NotDelivered,
            stage: Stage::Held,
        }));
        got
    }

    /// The held messages' texts, in order, now written to the child as `delivery` says.
    pub(crate) fn write_held(&self, delivery: Delivery) -> Vec<String> {
        let mut ledger = self.ledger();
        let mut texts = Vec::new();
        for e in ledger.iter_mut().filter(|e| e.stage == Stage::Held) {
            e.stage = Stage::Written;
            e.delivery = delivery;
            texts.push(e.queued.text.clone());
        }
        texts
    }

    /// The child gave back messages written to it and not delivered (pi's queue, cleared):
    /// they are held again.
    pub(crate) fn take_back<'t>(&self, texts: impl IntoIterator<Item = &'t String>) {
        let mut ledger = self.ledger();
        for text in texts {
            if let Some(e) = ledger
                .iter_mut()
                .find(|e| e.stage == Stage::Written && &e.queued.text == text)
            {
                e.stage = Stage::Held;
            }
        }
    }

    /// Messages written to the child reached it as `delivery` says, not as they were
    /// written for.
    pub(crate) fn delivered_as<'t>(
        &self,
        texts: impl IntoIterator<Item = &'t String>,
        delivery: Delivery,
    ) {
        let mut ledger = self.ledger();
        for text in texts {
            if let Some(e) = ledger.iter_mut().find(|e| {
                e.stage == Stage::Written && &e.queued.text == text && e.delivery != delivery
            }) {
                e.delivery = delivery;
            }
        }
    }

    /// The child answered the turn that carried what was written to it.
    pub(crate) fn answered(&self) {
        for e in self.ledger().iter_mut() {
            if e.stage == Stage::Written {
                e.stage = Stage::Answered;
            }
        }
    }

    /// The child is gone: what it took and did not answer (held, or written and never
    /// answered: it exited first) goes back to the inbox, ahead of what came since, for the
    /// run to give after the turn, or to report as not delivered.
    pub(crate) fn return_unanswered(&self) {
        let mut ledger = self.ledger();
        let (answered, unanswered): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut *ledger)
            .into_iter()
            .partition(|e| e.stage == Stage::Answered);
        *ledger = answered;
        if unanswered.is_empty() {
            return;
        }
        let returned = (|| -> io::Result<()> {
            let _lock = lock(&self.run_dir, MAX_LOCK_WAIT)?;
            let path = self.run_dir.path.join(QUEUE_FILE);
            let mut text = String::new();
            for e in &unanswered {
                let mut q = e.queued.clone();
                q.interrupt = false;
                text.push_str(&serde_json::to_string(&q).map_err(io::Error::other)?);
                text.push('\n');
            }
            match std::fs::read_to_string(&path) {
                Ok(newer) => text.push_str(&newer),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let tmp = self.run_dir.path.join(format!("{QUEUE_FILE}.returned"));
            session::open_private(
                &tmp,
                OpenOptions::new().write(true).create(true).truncate(true),
            )
            .and_then(|mut f| f.write_all(text.as_bytes()))?;
            std::fs::rename(&tmp, &path)
        })();
        if let Err(e) = returned {
            // Not lost from the result: listed as the child left them.
            tracing::warn!(
                "the messages the child did not answer could not go back to {}: {e}",
                self.run_dir.path.display()
            );
            ledger.extend(unanswered);
        }
    }

    /// What the child was sent, in order, and how: a message written whose turn never
    /// answered `failed`, one still held `notDelivered`.
    pub(crate) fn messages(&self) -> Vec<Message> {
        self.ledger()
            .iter()
            .map(|e| {
                let delivery = match e.stage {
                    Stage::Held => Delivery::NotDelivered,
                    Stage::Written => Delivery::Failed,
                    Stage::Answered => e.delivery,
                };
                e.queued.clone().delivered(delivery)
            })
            .collect()
    }
}

fn close(run_dir: &RunDir) -> io::Result<()> {
    session::create_private_file(&run_dir.path.join(CLOSED_FILE)).map(drop)
}

/// Closes a run's inbox for good before its child starts, when its CLI cannot continue a
/// session; returns what was queued already (a background run that had not started).
pub(crate) fn refuse_all(run_dir: &RunDir) -> Vec<Queued> {
    take(run_dir, false)
}

/// The inbox's lock, waited for at most `wait`.
fn lock(run_dir: &RunDir, wait: std::time::Duration) -> io::Result<Flock<File>> {
    let path = run_dir.path.join(LOCK_FILE);
    let mut f = session::open_private(
        &path,
        OpenOptions::new().read(true).write(true).create(true),
    )?;
    let started = std::time::Instant::now();
    loop {
        match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => return Ok(locked),
            Err((back, nix::errno::Errno::EWOULDBLOCK)) if started.elapsed() < wait => {
                f = back;
                std::thread::sleep(LOCK_RETRY);
            }
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "{} is held by another process for over {}s",
                        path.display(),
                        wait.as_secs()
                    ),
                ))
            }
            Err((_, e)) => return Err(io::Error::from(e)),
        }
    }
}

/// Queues `text` straight into the inbox of `run_dir` (as `send` does, without looking for
/// the run), for the tests of the dialects that take messages.
#[cfg(test)]
pub(crate) fn queue_for_test(run_dir: &RunDir, text: &str, interrupt: bool) {
    let q = Queued {
        at: session::now_unix_ms(),
        text: text.to_string(),
        interrupt,
    };
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(run_dir.path.join(QUEUE_FILE))
        .unwrap();
    writeln!(f, "{}", serde_json::to_string(&q).unwrap()).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn what_is_queued_is_taken_once_and_an_empty_take_closes() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir {
            path: dir.path().to_path_buf(),
        };
        let q = |t: &str| Queued {
            at: 1,
            text: t.into(),
            interrupt: false,
        };
        let mut f = File::create(dir.path().join(QUEUE_FILE)).unwrap();
        writeln!(f, "{}", serde_json::to_string(&q("one")).unwrap()).unwrap();
        writeln!(f, "garbage").unwrap();
        writeln!(f, "{}", serde_json::to_string(&q("two")).unwrap()).unwrap();
        assert_eq!(take(&run, true), vec![q("one"), q("two")]);
        assert!(!dir.path().join(CLOSED_FILE).exists(), "still open");
        assert_eq!(take(&run, true), vec![]);
        assert!(dir.path().join(CLOSED_FILE).exists(), "closed");
    }

    #[test]
    fn an_undeliverable_take_closes_and_returns_what_was_queued() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir {
            path: dir.path().to_path_buf(),
        };
        let q = Queued {
            at: 7,
            text: "late".into(),
            interrupt: false,
        };
        std::fs::write(
            dir.path().join(QUEUE_FILE),
            format!("{}\n", serde_json::to_string(&q).unwrap()),
        )
        .unwrap();
        assert_eq!(refuse_all(&run), vec![q]);
        assert!(dir.path().join(CLOSED_FILE).exists());
    }

    #[test]
    fn a_cli_that_cannot_continue_is_pointed_at_its_acp_preset() {
        assert_eq!(
            instead("gemini"),
            "its ACP preset can: run the agent with `backend: gemini-acp`"
        );
        assert_eq!(
            instead("cursor"),
            "an ACP agent can: run it with `backend: acp` and its `acp_command:`"
        );
    }
}
