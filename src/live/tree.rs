//! The runs in progress and just ended, as a tree, read from the state directory (and the
//! states of the children's own orchestrates) by following each run's `events.jsonl`:
//! what `orchestrate watch` shows. Each refresh reads only what was written since the last.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{nested_states, still_running, Liveness};
use crate::observe::line::{Event, EventLine, GroupInfo, Supervisor, Tail, EVENTS_FILE};
use crate::result::{Mode, Usage};
use crate::session::RunId;

/// How long an ended run stays in view.
pub(crate) const JUST_ENDED: Duration = Duration::from_secs(10 * 60);
/// The latest events kept per run, for the events pane.
pub(crate) const MAX_EVENTS_KEPT: usize = 200;
/// The most bytes read from the head of an older events file to decide whether its run
/// is worth following.
const HEAD_READ_BYTES: u64 = 64 * 1024;
/// The most bytes read from the end of an older events file to find its end line.
const END_READ_BYTES: u64 = 16 * 1024;

/// Where a run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunState {
    Running,
    /// Ended, with its status (ok, failed, timeout, cancelled, ...).
    Ended(String),
    /// Its orchestrate is gone and wrote no end.
    Gone,
}

impl RunState {
    pub(crate) fn word(&self) -> &str {
        match self {
            RunState::Running => "running",
            RunState::Ended(status) => status,
            RunState::Gone => "gone",
        }
    }
}

/// One run, as its events tell it so far.
#[derive(Debug)]
pub(crate) struct RunView {
    pub dir: PathBuf,
    pub run_id: String,
    pub agent: String,
    pub backend: String,
    pub model: Option<String>,
    pub task: String,
    pub parent_run_id: Option<String>,
    pub group: Option<GroupInfo>,
    pub supervisor: Option<Supervisor>,
    pub state: RunState,
    pub started_ms: u64,
    pub ended_ms: Option<u64>,
    pub turn: u64,
    /// The tool running now, if any.
    pub tool: Option<String>,
    pub usage: Usage,
    pub events: VecDeque<EventLine>,
    tail: Tail,
}

impl RunView {
    /// The run in `dir`, a folder named for its run id.
    fn new(dir: PathBuf) -> RunView {
        RunView {
            tail: Tail::new(dir.join(EVENTS_FILE)),
            // Its folder's name, not the id its first line claims: a nested run's lines
            // are its parent's child's writing.
            run_id: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir,
            agent: String::new(),
            backend: String::new(),
            model: None,
            task: String::new(),
            parent_run_id: None,
            group: None,
            supervisor: None,
            state: RunState::Running,
            started_ms: 0,
            ended_ms: None,
            turn: 0,
            tool: None,
            usage: Usage::default(),
            events: VecDeque::new(),
        }
    }

    fn take(&mut self, line: EventLine) {
        match &line.event {
            Event::Run(info) => {
                self.agent = info.agent.clone();
                self.backend = info.backend.clone();
                self.model = info.model.clone();
                self.task = info.task.clone();
                self.parent_run_id = info.parent_run_id.clone();
                self.group = info.group.clone();
                self.supervisor = Some(info.supervisor.clone());
                self.started_ms = line.at;
            }
            Event::Attempt { model, .. } => {
                if model.is_some() {
                    self.model = model.clone();
                }
                self.tool = None;
            }
            Event::ToolCall { name, .. } => self.tool = Some(name.clone()),
            Event::ToolEnd { .. } => self.tool = None,
            Event::TurnEnd { turn } => self.turn = *turn,
            Event::Usage { total, .. } => self.usage = *total,
            Event::End(end) => {
                self.state = RunState::Ended(end.status.clone());
                self.ended_ms = Some(line.at);
                self.usage = end.usage;
                self.tool = None;
            }
            _ => {}
        }
        if self.events.len() == MAX_EVENTS_KEPT {
            self.events.pop_front();
        }
        self.events.push_back(line);
    }

    /// How long it has run (until its end, if it ended).
    pub(crate) fn elapsed(&self, now_ms: u64) -> Duration {
        let end = self.ended_ms.unwrap_or(now_ms);
        Duration::from_millis(end.saturating_sub(self.started_ms))
    }
}

/// A line of the tree: a run, or the fan-out or chain whose tasks follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Run(usize),
    Group {
        id: String,
        mode: Mode,
        count: usize,
    },
}

/// A line of the tree and how deep it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub depth: usize,
    pub node: Node,
}

/// The runs followed, and the folders already found not worth following.
#[derive(Debug)]
pub(crate) struct Runs {
    root: PathBuf,
    pub runs: Vec<RunView>,
    known: HashMap<PathBuf, usize>,
    passed: HashSet<PathBuf>,
}

impl Runs {
    pub(crate) fn new(root: PathBuf) -> Runs {
        Runs {
            root,
            runs: Vec::new(),
            known: HashMap::new(),
            passed: HashSet::new(),
        }
    }

    /// Finds new runs and reads what every followed run wrote since the last refresh.
    pub(crate) fn refresh(&mut self, now: SystemTime) {
        let mut roots = vec![self.root.clone()];
        let mut i = 0;
        while i < roots.len() {
            let more = nested_states(&roots[i]);
            self.discover(&roots[i], now);
            roots.extend(more);
            i += 1;
        }
        for run in &mut self.runs {
            while let Ok(lines) = run.tail.read() {
                if lines.is_empty() {
                    break;
                }
                lines.into_iter().for_each(|l| run.take(l));
            }
            if run.state == RunState::Running && !still_running(&run.dir, run.supervisor.as_ref()) {
                // It may have written its end since the read.
                let last = run.tail.read().unwrap_or_default();
                last.into_iter().for_each(|l| run.take(l));
                if run.state == RunState::Running && run.supervisor.is_some() {
                    run.state = RunState::Gone;
                    run.ended_ms = Some(unix_ms(now));
                }
            }
        }
        let cutoff = unix_ms(now).saturating_sub(JUST_ENDED.as_millis() as u64);
        let before = self.runs.len();
        self.runs
            .retain(|r| r.state == RunState::Running || r.ended_ms.is_some_and(|t| t >= cutoff));
        if self.runs.len() != before {
            for r in self.runs.iter() {
                self.passed.remove(&r.dir);
            }
            self.known = self
                .runs
                .iter()
                .enumerate()
                .map(|(i, r)| (r.dir.clone(), i))
                .collect();
        }
    }

    fn discover(&mut self, root: &Path, now: SystemTime) {
        let Ok(entries) = std::fs::read_dir(root.join("runs")) else {
            return;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            if self.known.contains_key(&dir) || self.passed.contains(&dir) {
                continue;
            }
            let named = entry
                .file_name()
                .to_str()
                .is_some_and(|n| RunId::parse(n).is_ok());
            let events = dir.join(EVENTS_FILE);
            let meta = match named.then(|| std::fs::metadata(&events)) {
                // A run just starting (its folder comes before its events): looked at
                // again at the next refresh.
                Some(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Some(meta) => meta.ok(),
                None => None,
            };
            if !meta.is_some_and(|m| worth_following(&events, &m, now)) {
                self.passed.insert(dir);
                continue;
            }
            self.known.insert(dir.clone(), self.runs.len());
            self.runs.push(RunView::new(dir));
        }
    }

    /// The tree: each fan-out or chain above its tasks (in their order), each nested run
    /// under the run whose child started it, the rest by start.
    pub(crate) fn tree(&self) -> Vec<Row> {
        // A run that says it was started by another's child: found by id among the runs of
        // the state directory. A nested run sits under the run whose folder holds it, which
        // is where its records are, whatever they claim.
        let by_id: HashMap<&str, usize> = self
            .runs
            .iter()
            .enumerate()
            .filter(|(_, r)| super::parent_run_dir(&r.dir).is_none())
            .map(|(i, r)| (r.run_id.as_str(), i))
            .collect();
        // Children of a run (or of the top, None): single runs and groups, by start.
        let mut singles: BTreeMap<Option<usize>, Vec<usize>> = BTreeMap::new();
        let mut groups: BTreeMap<Option<usize>, BTreeMap<String, Vec<usize>>> = BTreeMap::new();
        for (i, r) in self.runs.iter().enumerate() {
            if r.supervisor.is_none() {
                // No first line yet.
                continue;
            }
            let parent = match super::parent_run_dir(&r.dir) {
                Some(holder) => self.known.get(&holder).copied(),
                None => r
                    .parent_run_id
                    .as_deref()
                    .and_then(|p| by_id.get(p).copied()),
            };
            match &r.group {
                Some(g) => groups
                    .entry(parent)
                    .or_default()
                    .entry(g.id.clone())
                    .or_default()
                    .push(i),
                None => singles.entry(parent).or_default().push(i),
            }
        }
        let mut rows = Vec::new();
        self.rows_under(None, 0, &singles, &groups, &mut rows);
        rows
    }

    fn rows_under(
        &self,
        parent: Option<usize>,
        depth: usize,
        singles: &BTreeMap<Option<usize>, Vec<usize>>,
        groups: &BTreeMap<Option<usize>, BTreeMap<String, Vec<usize>>>,
        rows: &mut Vec<Row>,
    ) {
        // (start, what): a group starts with its first task.
        let mut items: Vec<(u64, Result<usize, &String>)> = Vec::new();
        for &i in singles.get(&parent).into_iter().flatten() {
            items.push((self.runs[i].started_ms, Ok(i)));
        }
        for (id, tasks) in groups.get(&parent).into_iter().flatten() {
            let start = tasks.iter().map(|&i| self.runs[i].started_ms).min();
            items.push((start.unwrap_or(0), Err(id)));
        }
        items.sort_by_key(|(start, _)| *start);
        for (_, item) in items {
            match item {
                Ok(i) => {
                    rows.push(Row {
                        depth,
                        node: Node::Run(i),
                    });
                    self.rows_under(Some(i), depth + 1, singles, groups, rows);
                }
                Err(id) => {
                    let mut tasks = groups[&parent][id].clone();
                    tasks.sort_by_key(|&i| self.runs[i].group.as_ref().map_or(0, |g| g.index));
                    let g = self.runs[tasks[0]].group.as_ref().expect("a group's task");
                    rows.push(Row {
                        depth,
                        node: Node::Group {
                            id: id.clone(),
                            mode: g.mode,
                            count: g.count,
                        },
                    });
                    for i in tasks {
                        rows.push(Row {
                            depth: depth + 1,
                            node: Node::Run(i),
                        });
                        self.rows_under(Some(i), depth + 2, singles, groups, rows);
                    }
                }
            }
        }
    }
}

/// Whether a run folder's events (`meta`: their file's metadata) are worth following:
/// written lately, or of a run whose orchestrate still runs and that has not ended (a
/// long quiet run).
fn worth_following(events: &Path, meta: &std::fs::Metadata, now: SystemTime) -> bool {
    let recent = meta
        .modified()
        .ok()
        .and_then(|m| now.duration_since(m).ok())
        .is_none_or(|age| age < JUST_ENDED);
    if recent {
        return true;
    }
    let Some(first) = read_first_line(events) else {
        return false;
    };
    let alive = matches!(&first.event, Event::Run(info) if Liveness::of(&info.supervisor) == Liveness::Alive);
    alive && !has_ended(events, meta.len())
}

pub(super) fn read_first_line(path: &Path) -> Option<EventLine> {
    use std::io::Read;
    let mut head = Vec::new();
    crate::session::open_record(path)
        .ok()?
        .take(HEAD_READ_BYTES)
        .read_to_end(&mut head)
        .ok()?;
    let end = memchr::memchr(b'\n', &head)?;
    std::str::from_utf8(&head[..end])
        .ok()
        .and_then(EventLine::parse)
}

pub(super) fn has_ended(path: &Path, len: u64) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = crate::session::open_record(path) else {
        return false;
    };
    let from = len.saturating_sub(END_READ_BYTES);
    let mut tail = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut tail).is_err() {
        return false;
    }
    tail.split(|b| *b == b'\n')
        .rev()
        .find(|l| !l.is_empty())
        .and_then(|l| std::str::from_utf8(l).ok())
        .and_then(EventLine::parse)
        .is_some_and(|l| matches!(l.event, Event::End(_)))
}

pub(crate) fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn write_run(root: &Path, id: &str, lines: &[String]) -> PathBuf {
        let dir = root.join("runs").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(EVENTS_FILE), lines.join("\n") + "\n").unwrap();
        dir
    }

    fn run_line(
        at: u64,
        id: &str,
        agent: &str,
        parent: Option<&str>,
        group: Option<(&str, usize)>,
    ) -> String {
        let mut v = serde_json::json!({
            "at": at, "type": "run", "runId": id, "agent": agent, "backend": "pi",
            "task": "t", "cwd": "/w", "depth": 0,
            // This process: alive.
            "supervisor": {"pid": std::process::id(), "startedAtMs": 1,
                           "startTime": crate::platform::process_start_time(std::process::id())},
        });
        if let Some(p) = parent {
            v["parentRunId"] = p.into();
        }
        if let Some((g, index)) = group {
            v["group"] =
                serde_json::json!({"id": g, "mode": "parallel", "index": index, "count": 2});
        }
        v.to_string()
    }

    #[test]
    fn fanout_tasks_sit_under_their_group_and_nested_runs_under_their_parent() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let now = unix_ms(SystemTime::now());
        write_run(
            root,
            "aaaa0001",
            &[run_line(now - 50, "aaaa0001", "solo", None, None)],
        );
        write_run(
            root,
            "bbbb0002",
            &[
                run_line(now - 40, "bbbb0002", "second", None, Some(("ffff0000", 1))),
                format!(
                    r#"{{"at":{},"type":"toolCall","name":"read","args":{{}}}}"#,
                    now - 30
                ),
                format!(
                    r#"{{"at":{},"type":"usage","total":{{"input":1000,"output":20,"cost":0.5,"turns":1}}}}"#,
                    now - 20
                ),
            ],
        );
        write_run(
            root,
            "cccc0003",
            &[
                run_line(now - 45, "cccc0003", "first", None, Some(("ffff0000", 0))),
                format!(
                    r#"{{"at":{},"type":"end","status":"cancelled","exitCode":130,"usage":{{}},"durationMs":5}}"#,
                    now - 10
                ),
            ],
        );
        // A run that the first task's child started, in that child's own state.
        let nested_root = root.join("runs/cccc0003/child/state");
        write_run(
            &nested_root,
            "dddd0004",
            &[run_line(
                now - 35,
                "dddd0004",
                "inner",
                Some("cccc0003"),
                None,
            )],
        );
        let mut runs = Runs::new(root.to_path_buf());
        runs.refresh(SystemTime::now());
        let label = |row: &Row| match &row.node {
            Node::Run(i) => {
                let r = &runs.runs[*i];
                format!(
                    "{}{} {} {} {:?} {}",
                    "  ".repeat(row.depth),
                    r.agent,
                    r.state.word(),
                    r.tool.as_deref().unwrap_or("-"),
                    r.usage.tokens(),
                    super::super::parent_run_dir(&r.dir).is_some()
                )
            }
            Node::Group { id, count, .. } => format!("{}{id} x{count}", "  ".repeat(row.depth)),
        };
        let tree: Vec<String> = runs.tree().iter().map(label).collect();
        assert_eq!(
            tree,
            [
                "solo running - 0 false",
                "ffff0000 x2",
                "  first cancelled - 0 false",
                "    inner gone - 0 true",
                "  second running read 1020 false",
            ]
        );
    }

    /// A nested run's folder is in its parent's child's place, which the child writes: its
    /// first line may claim any id, parent, group or supervisor.
    #[test]
    fn a_nested_run_sits_under_the_run_that_holds_it_whatever_its_record_claims() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let now = unix_ms(SystemTime::now());
        write_run(
            root,
            "aaaa0001",
            &[run_line(
                now - 50,
                "aaaa0001",
                "task0",
                None,
                Some(("ffff0000", 0)),
            )],
        );
        write_run(
            root,
            "bbbb0002",
            &[
                run_line(now - 45, "bbbb0002", "solo", None, None),
                format!(
                    r#"{{"at":{},"type":"end","status":"ok","exitCode":0,"usage":{{}},"durationMs":5}}"#,
                    now - 10
                ),
            ],
        );
        // Claims an id with an escape sequence, a task of the top fan-out, and a live
        // supervisor (this process), though the run holding it has ended.
        write_run(
            &root.join("runs/bbbb0002/child/state"),
            "dddd0004",
            &[run_line(
                now - 40,
                "\u{1b}[2Jforged",
                "inner",
                None,
                Some(("ffff0000", 1)),
            )],
        );
        let mut runs = Runs::new(root.to_path_buf());
        runs.refresh(SystemTime::now());
        let label = |row: &Row| match &row.node {
            Node::Run(i) => {
                let r = &runs.runs[*i];
                format!(
                    "{}{} {} {}",
                    "  ".repeat(row.depth),
                    r.run_id,
                    r.agent,
                    r.state.word()
                )
            }
            Node::Group { id, count, .. } => format!("{}{id} x{count}", "  ".repeat(row.depth)),
        };
        let tree: Vec<String> = runs.tree().iter().map(label).collect();
        assert_eq!(
            tree,
            [
                "ffff0000 x2",
                "  aaaa0001 task0 running",
                "bbbb0002 solo ok",
                "  ffff0000 x2",
                "    dddd0004 inner gone",
            ]
        );
    }

    #[test]
    fn an_old_run_that_ended_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let old = unix_ms(SystemTime::now()) - 3_600_000;
        let d = write_run(
            dir.path(),
            "aaaa0001",
            &[
                run_line(old, "aaaa0001", "a", None, None),
                format!(
                    r#"{{"at":{},"type":"end","status":"ok","exitCode":0,"usage":{{}},"durationMs":5}}"#,
                    old + 5
                ),
            ],
        );
        let later = SystemTime::now() + Duration::from_secs(3600);
        let events = d.join(EVENTS_FILE);
        assert!(!worth_following(
            &events,
            &std::fs::metadata(&events).unwrap(),
            later
        ));
        // Not ended and its orchestrate (this process) alive: followed however old.
        let d = write_run(
            dir.path(),
            "bbbb0002",
            &[run_line(old, "bbbb0002", "b", None, None)],
        );
        let events = d.join(EVENTS_FILE);
        assert!(worth_following(
            &events,
            &std::fs::metadata(&events).unwrap(),
            later
        ));
    }

    #[test]
    fn a_run_folder_seen_before_its_events_exist_is_followed_once_they_do() {
        // A run makes its folder, then its events file: a refresh between the two must
        // not pass the run over for good (a fan-out's task missing from the tree).
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("runs").join("aaaa0001")).unwrap();
        let mut runs = Runs::new(root.to_path_buf());
        runs.refresh(SystemTime::now());
        assert_eq!(runs.runs.len(), 0);
        let now = unix_ms(SystemTime::now());
        write_run(
            root,
            "aaaa0001",
            &[run_line(now, "aaaa0001", "late", None, None)],
        );
        runs.refresh(SystemTime::now());
        let found: Vec<&Path> = runs.runs.iter().map(|r| r.dir.as_path()).collect();
        assert_eq!(found, [root.join("runs").join("aaaa0001").as_path()]);
    }
}
