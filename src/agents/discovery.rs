//! Which folders hold agents, in which order, and the catalog they add up to.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::builtin::builtin_agents;
use super::frontmatter::parse_detailed;
use super::{AgentDef, AgentProblem, Scope};

/// Where to look. Built by [`DiscoveryOptions::from_env`] in production; tests fill it in
/// by hand so that the real home folder is never read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiscoveryOptions {
    /// `--agents-dir`, highest precedence.
    pub agents_dir: Option<PathBuf>,
    /// Project folders are searched from here upward.
    pub cwd: PathBuf,
    /// For `~/.claude/agents` and `~/.pi/agent/agents`.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`; when `None`, `home/.config`.
    pub xdg_config_home: Option<PathBuf>,
    pub include_builtins: bool,
}

/// Project folders, in precedence order; each is looked for in the nearest ancestor.
const PROJECT_DIRS: [&str; 3] = [".orchestrate/agents", ".claude/agents", ".pi/agents"];

/// Project folders come with whatever repository was cloned; a prompt is a few KiB, so
/// anything this large is a mistake and is not worth holding in memory.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

impl DiscoveryOptions {
    /// Reads `HOME` and `XDG_CONFIG_HOME`.
    pub(crate) fn from_env(cwd: PathBuf, agents_dir: Option<PathBuf>) -> Self {
        let env_path = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = env_path("HOME").or_else(|| {
            if cfg!(windows) {
                env_path("USERPROFILE")
            } else {
                None
            }
        });
        DiscoveryOptions {
            agents_dir,
            cwd,
            home,
            // The XDG spec says a relative value is invalid and must be ignored.
            xdg_config_home: env_path("XDG_CONFIG_HOME").filter(|p| p.is_absolute()),
            include_builtins: true,
        }
    }

    /// The folders searched, highest precedence first. Project folders are listed only
    /// where one was found; the flag and user folders are listed whether or not they exist.
    pub(crate) fn search_dirs(&self) -> Vec<(PathBuf, Scope)> {
        let user = self.user_dirs();
        let mut dirs = Vec::new();
        if let Some(dir) = &self.agents_dir {
            dirs.push((absolute(dir), Scope::Flag));
        }
        let cwd = absolute(&self.cwd);
        for rel in PROJECT_DIRS {
            // When the project lies under the home folder, the walk up reaches
            // `~/.claude/agents`; that one is the user's, not the project's.
            let found = cwd
                .ancestors()
                .map(|dir| dir.join(rel))
                .filter(|dir| dir.is_dir())
                .find(|dir| !user.iter().any(|u| same_dir(u, dir)));
            if let Some(dir) = found {
                dirs.push((dir, Scope::Project));
            }
        }
        dirs.extend(user.into_iter().map(|dir| (dir, Scope::User)));

        // The same folder reached twice (say `--agents-dir .claude/agents`) is read once,
        // at its highest precedence, so its problems are not reported twice.
        let mut unique: Vec<(PathBuf, Scope)> = Vec::with_capacity(dirs.len());
        for (dir, scope) in dirs {
            if !unique.iter().any(|(seen, _)| same_dir(seen, &dir)) {
                unique.push((dir, scope));
            }
        }
        unique
    }

    fn user_dirs(&self) -> Vec<PathBuf> {
        let home = self.home.as_deref().map(absolute);
        let config = self
            .xdg_config_home
            .as_deref()
            .map(absolute)
            .or_else(|| home.as_ref().map(|h| h.join(".config")));
        let mut dirs = Vec::new();
        if let Some(config) = config {
            dirs.push(config.join("orchestrate").join("agents"));
        }
        if let Some(home) = home {
            dirs.push(home.join(".claude").join("agents"));
            dirs.push(home.join(".pi").join("agent").join("agents"));
        }
        dirs
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Every agent visible from one place, each name resolved to its highest-precedence
/// definition, plus everything that could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Catalog {
    agents: BTreeMap<String, AgentDef>,
    problems: Vec<AgentProblem>,
}

impl Catalog {
    #[cfg(test)]
    /// A catalog from definitions in precedence order: for a repeated name the first wins.
    pub(crate) fn new(
        agents: impl IntoIterator<Item = AgentDef>,
        problems: impl IntoIterator<Item = AgentProblem>,
    ) -> Self {
        let mut catalog = Catalog {
            agents: BTreeMap::new(),
            problems: problems.into_iter().collect(),
        };
        for def in agents {
            catalog.add(def);
        }
        catalog
    }

    fn add(&mut self, def: AgentDef) {
        match self.agents.get(&def.name) {
            Some(winner) => tracing::debug!(
                agent = %def.name,
                hidden = %def.source.display(),
                by = %winner.source.display(),
                "agent definition hidden by one of higher precedence"
            ),
            None => {
                self.agents.insert(def.name.clone(), def);
            }
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&AgentDef> {
        self.agents.get(name)
    }

    /// Sorted by name.
    pub(crate) fn agents(&self) -> impl Iterator<Item = &AgentDef> {
        self.agents.values()
    }

    pub(crate) fn names_sorted(&self) -> Vec<&str> {
        self.agents.keys().map(String::as_str).collect()
    }

    /// In precedence order of the folders, then by file name.
    pub(crate) fn problems(&self) -> &[AgentProblem] {
        &self.problems
    }
}

/// Reads every scope. Never fails: what cannot be read becomes a problem in the catalog.
pub(crate) fn discover(opts: &DiscoveryOptions) -> Catalog {
    let mut catalog = Catalog::default();
    for (dir, scope) in opts.search_dirs() {
        let (defs, problems) = load_dir(&dir, scope);
        for def in defs {
            catalog.add(def);
        }
        catalog.problems.extend(problems);
    }
    if opts.include_builtins {
        for def in builtin_agents() {
            catalog.add(def);
        }
    }
    catalog
}

/// The agents of one folder (`*.md`, not recursive, by file name) and its problems.
fn load_dir(dir: &Path, scope: Scope) -> (Vec<AgentDef>, Vec<AgentProblem>) {
    let mut defs = Vec::new();
    let mut problems = Vec::new();
    let problem = |file: &Path, line, reason: String| AgentProblem {
        file: file.to_path_buf(),
        line,
        reason,
    };

    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        // Most scopes are absent on most machines; only a folder named on the command line
        // is expected to exist.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if scope == Scope::Flag {
                problems.push(problem(
                    dir,
                    None,
                    "agents folder given with --agents-dir does not exist".into(),
                ));
            }
            return (defs, problems);
        }
        Err(e) => {
            problems.push(problem(
                dir,
                None,
                format!("cannot read agents folder: {e}"),
            ));
            return (defs, problems);
        }
    };

    let mut files: Vec<(OsString, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                problems.push(problem(
                    dir,
                    None,
                    format!("cannot list agents folder: {e}"),
                ));
                continue;
            }
        };
        let file_name = entry.file_name();
        let path = entry.path();
        // Dot files are editor lock files and backups, never agents.
        let hidden = file_name.as_encoded_bytes().starts_with(b".");
        let markdown = path
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("md"));
        if hidden || !markdown {
            continue;
        }
        // Follows symlinks, so a linked agent file counts and a linked folder does not.
        match fs::metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() > MAX_FILE_BYTES => problems.push(problem(
                &path,
                None,
                format!(
                    "agent file is {} bytes, more than the {MAX_FILE_BYTES} allowed",
                    meta.len()
                ),
            )),
            Ok(meta) if meta.is_file() => files.push((file_name, path)),
            Ok(_) => {}
            Err(e) => problems.push(problem(&path, None, format!("cannot read agent file: {e}"))),
        }
    }
    files.sort();

    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for (_, path) in files {
        let text = match fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => {
                    problems.push(problem(&path, None, "not valid UTF-8 text".into()));
                    continue;
                }
            },
            Err(e) => {
                problems.push(problem(&path, None, format!("cannot read agent file: {e}")));
                continue;
            }
        };
        match parse_detailed(&text, &path, scope) {
            Ok(parsed) => {
                let name = &parsed.def.name;
                if let Some(first) = seen.get(name) {
                    problems.push(problem(
                        &path,
                        parsed.name_line,
                        format!(
                            "duplicate agent name {name}, already defined in {}",
                            first.display()
                        ),
                    ));
                } else {
                    seen.insert(name.clone(), path.clone());
                    defs.push(parsed.def);
                }
            }
            Err(p) => problems.push(p),
        }
    }
    (defs, problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::AgentSource;
    use pretty_assertions::assert_eq;
    use tempfile::TempDir;

    /// A sandbox with a home, an XDG config folder and a nested project, none of them
    /// under one another unless a test says so.
    struct Sandbox {
        _tmp: TempDir,
        root: PathBuf,
    }

    impl Sandbox {
        fn new() -> Self {
            let tmp = tempfile::tempdir().unwrap();
            // Canonical, so paths compare equal to what discovery reports on systems where
            // the temp folder is behind a symlink.
            let root = fs::canonicalize(tmp.path()).unwrap();
            for d in ["home", "xdg", "flag", "work/proj/sub/deeper"] {
                fs::create_dir_all(root.join(d)).unwrap();
            }
            Sandbox { _tmp: tmp, root }
        }

        fn p(&self, rel: &str) -> PathBuf {
            self.root.join(rel)
        }

        fn write(&self, rel: &str, text: &str) -> PathBuf {
            let path = self.p(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, text).unwrap();
            path
        }

        fn opts(&self, cwd: &str) -> DiscoveryOptions {
            DiscoveryOptions {
                agents_dir: Some(self.p("flag")),
                cwd: self.p(cwd),
                home: Some(self.p("home")),
                xdg_config_home: Some(self.p("xdg")),
                include_builtins: false,
            }
        }
    }

    fn agent(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\nPrompt of {description}.\n")
    }

    fn source_of(catalog: &Catalog, name: &str) -> Option<(String, Scope)> {
        catalog
            .get(name)
            .map(|d| (d.description.clone(), d.source.scope()))
    }

    #[test]
    fn precedence_between_every_scope() {
        let sb = Sandbox::new();
        let layers = [
            ("flag/explorer.md", "flag", Scope::Flag),
            (
                "work/proj/.orchestrate/agents/e.md",
                "orchestrate",
                Scope::Project,
            ),
            (
                "work/proj/.claude/agents/e.md",
                "claude-project",
                Scope::Project,
            ),
            ("work/proj/.pi/agents/e.md", "pi-project", Scope::Project),
            ("xdg/orchestrate/agents/e.md", "xdg", Scope::User),
            ("home/.claude/agents/e.md", "claude-user", Scope::User),
            ("home/.pi/agent/agents/e.md", "pi-user", Scope::User),
        ];
        let mut paths = Vec::new();
        for (rel, label, _) in layers {
            paths.push(sb.write(rel, &agent("explorer", label)));
        }
        let mut opts = sb.opts("work/proj/sub");
        opts.include_builtins = true;

        for (i, (_, label, scope)) in layers.iter().enumerate() {
            let catalog = discover(&opts);
            assert_eq!(catalog.problems(), &[] as &[AgentProblem]);
            let def = catalog.get("explorer").unwrap();
            assert_eq!(
                (def.description.as_str(), def.source.scope()),
                (*label, *scope)
            );
            assert_eq!(
                def.source,
                AgentSource::File {
                    path: paths[i].clone(),
                    scope: *scope
                }
            );
            fs::remove_file(&paths[i]).unwrap();
        }
        let catalog = discover(&opts);
        assert_eq!(
            catalog.get("explorer").unwrap().source,
            AgentSource::Builtin
        );
        opts.include_builtins = false;
        assert_eq!(discover(&opts).get("explorer"), None);
    }

    #[test]
    fn names_from_every_scope_merge_sorted() {
        let sb = Sandbox::new();
        sb.write("flag/zeta.md", &agent("zeta", "z"));
        sb.write("work/proj/.pi/agents/alpha.md", &agent("alpha", "a"));
        sb.write("home/.claude/agents/mid.md", &agent("mid", "m"));
        let catalog = discover(&sb.opts("work/proj"));
        assert_eq!(catalog.names_sorted(), vec!["alpha", "mid", "zeta"]);
        let names: Vec<_> = catalog.agents().map(|d| d.name.as_str()).collect();
        assert_eq!(names, vec!["alpha", "mid", "zeta"]);
    }

    #[test]
    fn nearest_ancestor_is_searched_per_folder_kind() {
        let sb = Sandbox::new();
        // Two levels above the cwd.
        sb.write("work/proj/.claude/agents/far.md", &agent("far", "two up"));
        // A nearer .claude/agents wins over the farther one for the same kind...
        sb.write(
            "work/proj/sub/.claude/agents/near.md",
            &agent("near", "one up"),
        );
        // ...and then the farther one is not read at all.
        let catalog = discover(&sb.opts("work/proj/sub/deeper"));
        assert_eq!(catalog.names_sorted(), vec!["near"]);

        fs::remove_dir_all(sb.p("work/proj/sub/.claude")).unwrap();
        let catalog = discover(&sb.opts("work/proj/sub/deeper"));
        assert_eq!(
            source_of(&catalog, "far"),
            Some(("two up".into(), Scope::Project))
        );
        // The cwd itself counts as an ancestor.
        let catalog = discover(&sb.opts("work/proj"));
        assert_eq!(catalog.names_sorted(), vec!["far"]);
    }

    #[test]
    fn home_claude_folder_reached_from_a_project_under_home_is_user_scope() {
        let sb = Sandbox::new();
        let path = sb.write("home/.claude/agents/mine.md", &agent("mine", "m"));
        fs::create_dir_all(sb.p("home/code/app")).unwrap();
        let catalog = discover(&sb.opts("home/code/app"));
        assert_eq!(
            catalog.get("mine").unwrap().source,
            AgentSource::File {
                path,
                scope: Scope::User
            }
        );
        assert_eq!(catalog.problems(), &[] as &[AgentProblem]);
    }

    #[test]
    fn a_folder_reached_twice_is_read_once() {
        let sb = Sandbox::new();
        sb.write("work/proj/.claude/agents/bad.md", "no front matter\n");
        let mut opts = sb.opts("work/proj");
        opts.agents_dir = Some(sb.p("work/proj/.claude/agents"));
        let catalog = discover(&opts);
        assert_eq!(catalog.problems().len(), 1, "{:?}", catalog.problems());
    }

    #[test]
    fn xdg_defaults_to_home_config() {
        let sb = Sandbox::new();
        sb.write("home/.config/orchestrate/agents/cfg.md", &agent("cfg", "c"));
        let mut opts = sb.opts("work");
        opts.xdg_config_home = None;
        assert_eq!(
            source_of(&discover(&opts), "cfg"),
            Some(("c".into(), Scope::User))
        );
        // With XDG set, home/.config is not consulted.
        opts.xdg_config_home = Some(sb.p("xdg"));
        assert_eq!(discover(&opts).get("cfg"), None);
    }

    #[test]
    fn broken_file_beside_good_ones() {
        let sb = Sandbox::new();
        sb.write("flag/a-good.md", &agent("good-a", "a"));
        let broken = sb.write(
            "flag/b-broken.md",
            "---\nname: broken\ndescription: d\ntools: [read, grep\nmodel: m\n---\nbody\n",
        );
        sb.write("flag/c-good.md", &agent("good-c", "c"));
        sb.write("flag/notes.txt", "not an agent");
        sb.write("flag/.#lock.md", "editor lock file");
        fs::create_dir_all(sb.p("flag/sub.md")).unwrap();
        sb.write("flag/nested/deep.md", &agent("deep", "not read"));

        let catalog = discover(&sb.opts("work"));
        assert_eq!(catalog.names_sorted(), vec!["good-a", "good-c"]);
        let problems = catalog.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!((&problems[0].file, problems[0].line), (&broken, Some(5)));
        assert!(problems[0]
            .reason
            .starts_with("invalid YAML in front matter"));
    }

    #[test]
    fn missing_front_matter_and_bad_values_are_reported_with_their_files() {
        let sb = Sandbox::new();
        let plain = sb.write("home/.pi/agent/agents/plain.md", "# Just notes\n");
        let slow = sb.write(
            "home/.pi/agent/agents/slow.md",
            "---\nname: slow\ntimeout: soon\n---\nb\n",
        );
        sb.write("home/.pi/agent/agents/ok.md", &agent("ok", "fine"));
        let catalog = discover(&sb.opts("work"));
        assert_eq!(catalog.names_sorted(), vec!["ok"]);
        let got: Vec<_> = catalog
            .problems()
            .iter()
            .map(|p| {
                (
                    p.file.clone(),
                    p.line,
                    p.reason.split(':').next().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (plain, Some(1), "missing front matter".to_string()),
                (slow, Some(3), "invalid `timeout`".to_string()),
            ]
        );
    }

    #[test]
    fn duplicate_names_in_one_folder_first_file_wins() {
        let sb = Sandbox::new();
        let first = sb.write("flag/a.md", &agent("twin", "first"));
        let second = sb.write(
            "flag/b.md",
            "---\ndescription: second\nname: twin\n---\nb\n",
        );
        let catalog = discover(&sb.opts("work"));
        assert_eq!(
            source_of(&catalog, "twin"),
            Some(("first".into(), Scope::Flag))
        );
        assert_eq!(
            catalog.problems(),
            &[AgentProblem {
                file: second,
                line: Some(3),
                reason: format!(
                    "duplicate agent name twin, already defined in {}",
                    first.display()
                ),
            }]
        );
    }

    #[test]
    fn same_name_in_different_folders_is_not_a_problem() {
        let sb = Sandbox::new();
        sb.write("flag/x.md", &agent("x", "flag"));
        sb.write("xdg/orchestrate/agents/x.md", &agent("x", "user"));
        let catalog = discover(&sb.opts("work"));
        assert_eq!(catalog.problems(), &[] as &[AgentProblem]);
        assert_eq!(source_of(&catalog, "x"), Some(("flag".into(), Scope::Flag)));
    }

    #[test]
    fn disabled_agents_stay_listed() {
        let sb = Sandbox::new();
        sb.write("flag/off.md", "---\nname: off\nenabled: false\n---\nb\n");
        let catalog = discover(&sb.opts("work"));
        assert!(!catalog.get("off").unwrap().enabled);
    }

    #[test]
    fn missing_folders_are_fine_except_an_explicit_agents_dir() {
        let sb = Sandbox::new();
        let mut opts = sb.opts("work");
        opts.home = Some(sb.p("nowhere"));
        opts.xdg_config_home = None;
        opts.agents_dir = None;
        assert_eq!(discover(&opts), Catalog::default());

        opts.agents_dir = Some(sb.p("typo"));
        let catalog = discover(&opts);
        assert_eq!(
            catalog.problems(),
            &[AgentProblem {
                file: sb.p("typo"),
                line: None,
                reason: "agents folder given with --agents-dir does not exist".into(),
            }]
        );
    }

    #[test]
    fn a_file_where_a_folder_should_be_is_a_problem_not_a_crash() {
        let sb = Sandbox::new();
        sb.write("home/.claude/agents", "a file, not a folder");
        sb.write("flag/ok.md", &agent("ok", "ok"));
        let catalog = discover(&sb.opts("work"));
        assert_eq!(catalog.names_sorted(), vec!["ok"]);
        assert_eq!(catalog.problems().len(), 1);
        assert_eq!(catalog.problems()[0].file, sb.p("home/.claude/agents"));
        assert!(catalog.problems()[0]
            .reason
            .starts_with("cannot read agents folder"));
    }

    #[cfg(unix)]
    #[test]
    fn unreadable_and_non_utf8_files_are_problems() {
        use std::os::unix::fs::PermissionsExt;
        let sb = Sandbox::new();
        let binary = sb.p("flag/bin.md");
        fs::write(&binary, [0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0xfe, 0x0a]).unwrap();
        let locked = sb.write("flag/locked.md", &agent("locked", "l"));
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
        sb.write("flag/ok.md", &agent("ok", "ok"));

        let catalog = discover(&sb.opts("work"));
        let problems: Vec<_> = catalog.problems().iter().map(|p| p.file.clone()).collect();
        // Root can read anything; only the UTF-8 problem is certain then.
        if fs::read(&locked).is_err() {
            assert_eq!(problems, vec![binary.clone(), locked.clone()]);
            assert_eq!(catalog.names_sorted(), vec!["ok"]);
        } else {
            assert_eq!(problems, vec![binary.clone()]);
        }
        assert_eq!(catalog.problems()[0].reason, "not valid UTF-8 text");
    }

    #[test]
    fn oversized_file_is_a_problem() {
        let sb = Sandbox::new();
        let big = sb.write(
            "flag/big.md",
            &format!(
                "---\nname: big\n---\n{}",
                "x".repeat(MAX_FILE_BYTES as usize)
            ),
        );
        let catalog = discover(&sb.opts("work"));
        assert_eq!(catalog.get("big"), None);
        assert_eq!(catalog.problems().len(), 1);
        assert_eq!(catalog.problems()[0].file, big);
    }

    #[test]
    fn from_env_turns_builtins_on() {
        let opts = DiscoveryOptions::from_env(PathBuf::from("/x"), Some(PathBuf::from("/a")));
        assert!(opts.include_builtins);
        assert_eq!(opts.cwd, PathBuf::from("/x"));
        assert_eq!(opts.agents_dir, Some(PathBuf::from("/a")));
        assert!(opts
            .xdg_config_home
            .as_ref()
            .is_none_or(|p| p.is_absolute()));
    }

    #[test]
    fn search_dirs_order() {
        let sb = Sandbox::new();
        for d in [
            "work/proj/.pi/agents",
            "work/.orchestrate/agents",
            "work/proj/sub/.claude/agents",
        ] {
            fs::create_dir_all(sb.p(d)).unwrap();
        }
        assert_eq!(
            sb.opts("work/proj/sub/deeper").search_dirs(),
            vec![
                (sb.p("flag"), Scope::Flag),
                (sb.p("work/.orchestrate/agents"), Scope::Project),
                (sb.p("work/proj/sub/.claude/agents"), Scope::Project),
                (sb.p("work/proj/.pi/agents"), Scope::Project),
                (sb.p("xdg/orchestrate/agents"), Scope::User),
                (sb.p("home/.claude/agents"), Scope::User),
                (sb.p("home/.pi/agent/agents"), Scope::User),
            ]
        );
    }

    #[test]
    fn catalog_new_keeps_the_first_of_a_name() {
        let def = |d: &str| AgentDef {
            name: "a".into(),
            description: d.into(),
            tools: vec![],
            readonly: false,
            settings: Default::default(),
            command: None,
            dialect: None,
            enabled: true,
            system_prompt: String::new(),
            source: AgentSource::Builtin,
        };
        let catalog = Catalog::new([def("first"), def("second")], []);
        assert_eq!(catalog.get("a").unwrap().description, "first");
    }
}
