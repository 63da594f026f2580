//! `orchestrate watch`: the runs in progress and just ended, as a tree, live, in the
//! terminal; the selected run's latest events below; a key to stop it. Reads the state
//! directory that other orchestrate processes write (no server).

use std::io::IsTerminal;
use std::time::{Duration, Instant, SystemTime};

use ratatui::crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row as TableRow, Table, TableState};
use ratatui::{DefaultTerminal, Frame};

use super::events::{clock, describe, printable};
use super::runs::{cost, human_duration, thousands};
use crate::live::tree::{unix_ms, Node, Row, RunState, Runs};
use crate::result::{exit_status, Mode, Usage};
use crate::session::{RunId, StateDir};

/// How often the view reads the runs' events again (and waits for a key in between).
pub(crate) const REFRESH_INTERVAL: Duration = Duration::from_millis(500);
/// The fewest rows the events pane keeps (borders included), however long the tree.
const MIN_EVENTS_PANE_ROWS: u16 = 8;
/// How long a message (a stop asked for, a refusal) stays in the status line.
const MESSAGE_SHOWN_FOR: Duration = Duration::from_secs(8);

pub fn watch() -> i32 {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        eprintln!(
            "orchestrate watch: needs a terminal (stdin and stdout); without one, see `orchestrate runs` or `orchestrate show RUN_ID --follow`"
        );
        return exit_status::USAGE;
    }
    let state = match StateDir::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("orchestrate watch: {e}");
            return exit_status::USAGE;
        }
    };
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("orchestrate watch: cannot take over the terminal: {e}");
            return exit_status::FAILURE;
        }
    };
    let outcome = View::new(state).run(&mut terminal);
    ratatui::restore();
    match outcome {
        Ok(()) => exit_status::SUCCESS,
        Err(e) => {
            eprintln!("orchestrate watch: the terminal failed: {e}");
            exit_status::FAILURE
        }
    }
}

struct View {
    state: StateDir,
    runs: Runs,
    rows: Vec<Row>,
    table: TableState,
    message: Option<(String, Instant)>,
}

impl View {
    fn new(state: StateDir) -> View {
        View {
            runs: Runs::new(state.root.clone()),
            state,
            rows: Vec::new(),
            table: TableState::default(),
            message: None,
        }
    }

    fn run(&mut self, terminal: &mut DefaultTerminal) -> std::io::Result<()> {
        let mut next_refresh = Instant::now();
        loop {
            if Instant::now() >= next_refresh {
                self.refresh();
                next_refresh = Instant::now() + REFRESH_INTERVAL;
            }
            terminal.draw(|f| self.draw(f))?;
            let wait = next_refresh.saturating_duration_since(Instant::now());
            if !event::poll(wait)? {
                continue;
            }
            let TermEvent::Key(key) = event::read()? else {
                continue;
            };
            if key.kind != KeyEventKind::Press {
                continue;
            }
            match key.code {
                KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                    return Ok(())
                }
                KeyCode::Down | KeyCode::Char('j') => self.select_run(1),
                KeyCode::Up | KeyCode::Char('k') => self.select_run(-1),
                KeyCode::Char('s') => self.stop_selected(),
                _ => {}
            }
        }
    }

    fn refresh(&mut self) {
        let selected = self.selected_run_id();
        self.runs.refresh(SystemTime::now());
        self.rows = self.runs.tree();
        // The selection follows its run as the tree changes.
        let at = selected
            .and_then(|id| {
                self.rows
                    .iter()
                    .position(|r| matches!(r.node, Node::Run(i) if self.runs.runs[i].run_id == id))
            })
            .or_else(|| {
                self.rows
                    .iter()
                    .position(|r| matches!(r.node, Node::Run(_)))
            });
        self.table.select(at);
    }

    fn selected_run(&self) -> Option<usize> {
        match self.rows.get(self.table.selected()?)?.node {
            Node::Run(i) => Some(i),
            Node::Group { .. } => None,
        }
    }

    fn selected_run_id(&self) -> Option<String> {
        self.selected_run()
            .map(|i| self.runs.runs[i].run_id.clone())
    }

    /// Moves the selection to the next run up or down (past the groups' lines).
    fn select_run(&mut self, step: isize) {
        let Some(from) = self.table.selected() else {
            return;
        };
        let mut at = from as isize;
        loop {
            at += step;
            if at < 0 || at as usize >= self.rows.len() {
                return;
            }
            if matches!(self.rows[at as usize].node, Node::Run(_)) {
                self.table.select(Some(at as usize));
                return;
            }
        }
    }

    fn stop_selected(&mut self) {
        let Some(i) = self.selected_run() else {
            return;
        };
        let run = &self.runs.runs[i];
        let words = if run.state != RunState::Running {
            format!("run {} has already ended", run.run_id)
        } else {
            match RunId::parse(&run.run_id) {
                Ok(id) => match super::background::request_stop(&self.state, &id) {
                    Ok(_) => format!("asked run {} to stop", run.run_id),
                    Err(why) => why,
                },
                Err(e) => e.to_string(),
            }
        };
        self.message = Some((words, Instant::now()));
    }

    fn draw(&mut self, f: &mut Frame) {
        // The tree as tall as it is (borders and header too), leaving the events pane at
        // least MIN_EVENTS_PANE_ROWS; the events pane the rest.
        let tree_rows = (self.rows.len() as u16).saturating_add(3);
        let room = f.area().height.saturating_sub(2 + MIN_EVENTS_PANE_ROWS);
        let [head, table, events, foot] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(tree_rows.clamp(4, room.max(4))),
            Constraint::Min(MIN_EVENTS_PANE_ROWS),
            Constraint::Length(1),
        ])
        .areas(f.area());
        f.render_widget(Paragraph::new(self.counts()), head);
        let now = unix_ms(SystemTime::now());
        let rows: Vec<TableRow> = self.rows.iter().map(|r| self.table_row(r, now)).collect();
        let widths = [
            Constraint::Min(20),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(4),
            Constraint::Length(12),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(8),
        ];
        let header = TableRow::new([
            "AGENT", "RUN", "BACKEND", "STATE", "TURN", "TOOL", "ELAPSED", "TOKENS", "COST",
        ])
        .style(Style::new().add_modifier(Modifier::BOLD));
        let table_widget = Table::new(rows, widths)
            .header(header)
            .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
            .block(Block::bordered().title(" runs "));
        f.render_stateful_widget(table_widget, table, &mut self.table);
        f.render_widget(self.events_pane(events.height.saturating_sub(2)), events);
        let message = match &self.message {
            Some((m, at)) if at.elapsed() < MESSAGE_SHOWN_FOR => printable(m).into_owned(),
            _ => "↑/↓ select   s stop the selected run   q quit".into(),
        };
        f.render_widget(Paragraph::new(message), foot);
    }

    /// `N running · N ended (N failed) · tokens · cost` over the runs in view.
    fn counts(&self) -> String {
        let runs = &self.runs.runs;
        let running = runs.iter().filter(|r| r.state == RunState::Running).count();
        let ended = runs.len() - running;
        let failed = runs
            .iter()
            .filter(|r| !matches!(&r.state, RunState::Running) && r.state.word() != "ok")
            .count();
        let mut total = Usage::default();
        for r in runs {
            total.add(&r.usage);
        }
        format!(
            "orchestrate watch · {running} running · {ended} ended ({failed} not ok) · {} tokens · {}",
            thousands(total.tokens()),
            cost(total.cost)
        )
    }

    fn table_row(&self, row: &Row, now_ms: u64) -> TableRow<'static> {
        let indent = "  ".repeat(row.depth);
        match &row.node {
            Node::Group { id, mode, count } => {
                let what = match mode {
                    Mode::Chain => "chain",
                    _ => "fan-out",
                };
                TableRow::new(vec![
                    format!("{indent}{what} of {count}"),
                    printable(id).into_owned(),
                ])
                .style(Style::new().add_modifier(Modifier::DIM))
            }
            Node::Run(i) => {
                let r = &self.runs.runs[*i];
                let label = match &r.group {
                    Some(g) if row.depth > 0 => format!("{indent}{}. {}", g.index + 1, r.agent),
                    _ => format!("{indent}{}", r.agent),
                };
                TableRow::new(vec![
                    printable(&label).into_owned(),
                    r.run_id.clone(),
                    printable(&r.backend).into_owned(),
                    r.state.word().to_string(),
                    r.turn.to_string(),
                    printable(r.tool.as_deref().unwrap_or("")).into_owned(),
                    human_duration(r.elapsed(now_ms).as_millis() as u64),
                    thousands(r.usage.tokens()),
                    cost(r.usage.cost),
                ])
            }
        }
    }

    /// The selected run's latest events, as many as fit, newest last.
    fn events_pane(&self, height: u16) -> Paragraph<'static> {
        let Some(i) = self.selected_run() else {
            return Paragraph::new("").block(Block::bordered().title(" events "));
        };
        let run = &self.runs.runs[i];
        let mut lines: Vec<Line> = Vec::new();
        for e in run.events.iter().rev() {
            let (what, detail) = describe(&e.event);
            let detail = printable(&detail);
            // One screen line per event: its first line, its length said.
            let first = detail.lines().next().unwrap_or("");
            let more = if detail.lines().nth(1).is_some() {
                " …"
            } else {
                ""
            };
            lines.push(Line::from(format!(
                "{}  {what:<8} {first}{more}",
                clock(e.at)
            )));
            if lines.len() >= height as usize {
                break;
            }
        }
        lines.reverse();
        let title = format!(
            " events of {} ({} on {}) ",
            run.run_id,
            printable(&run.agent),
            printable(&run.backend)
        );
        Paragraph::new(lines).block(Block::bordered().title(title))
    }
}
