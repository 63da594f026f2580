//! What a repository's git configuration makes git run, or read as more configuration,
//! from its working tree: the paths a writer child must not change, since the user's own
//! git runs them later, outside any sandbox.
//!
//! - `core.hooksPath`: the hooks folder, read like `.git/hooks` (all of `.husky` where
//!   husky points it at `.husky/_`); `init.templateDir`, whose hooks go into every new repository.
//! - `include.path` and `includeIf.<condition>.path`: configuration read as if it were in
//!   `.git/config` (followed, whatever its condition).
//! - The workspace scripts that its commands name: filter, diff and merge drivers,
//!   `core.fsmonitor`, `core.sshCommand`, `core.gitProxy`, editors, pagers, browsers,
//!   credential helpers, remote upload and receive packs, trailer commands, `!` aliases
//!   and submodule updates, difftool and mergetool paths.
//!   A command is a shell line; the words that look like paths (`./x`, `../x`, `/x`,
//!   `~/x`, or `dir/x` where `dir` exists) are taken as the scripts it runs.
//!
//! Reading is forgiving: a file that cannot be read or a line that does not parse names
//! nothing (git itself would refuse such a file, and run nothing from it).

use std::path::{Path, PathBuf};

/// Hook frameworks, by the word their installed hooks hold, and the configuration files
/// those hooks read from the top of the working tree: what their commands run. Protected
/// (held where missing) when one of the repository's hooks is the framework's.
const HOOK_FRAMEWORKS: &[(&str, &[&str])] = &[
    (
        "pre-commit",
        &[".pre-commit-config.yaml", ".pre-commit-config.yml"],
    ),
    (
        "lefthook",
        &[
            "lefthook.yml",
            "lefthook.yaml",
            ".lefthook.yml",
            ".lefthook.yaml",
            "lefthook-local.yml",
            "lefthook-local.yaml",
        ],
    ),
    ("overcommit", &[".overcommit.yml"]),
];

/// The most of a hook read to tell whose it is.
const MAX_HOOK_READ_BYTES: u64 = 64 * 1024;

/// How deep includes are followed (git's own limit is 10).
const MAX_INCLUDE_DEPTH: usize = 10;

/// The keys (section and name, lower case; `*` any subsection) whose value is a command.
const COMMAND_KEYS: &[(&str, &str)] = &[
    ("core", "fsmonitor"),
    ("core", "sshcommand"),
    ("core", "editor"),
    ("core", "pager"),
    ("core", "askpass"),
    ("sequence", "editor"),
    ("credential", "helper"),
    ("gpg", "program"),
    ("interactive", "difffilter"),
    ("diff.*", "command"),
    ("diff.*", "textconv"),
    ("filter.*", "clean"),
    ("filter.*", "smudge"),
    ("filter.*", "process"),
    ("merge.*", "driver"),
    ("difftool.*", "cmd"),
    ("mergetool.*", "cmd"),
    ("gpg.*", "program"),
    ("credential.*", "helper"),
    ("pager", "*"),
    ("alias", "*"),
    ("core", "gitproxy"),
    ("remote.*", "uploadpack"),
    ("remote.*", "receivepack"),
    ("uploadpack", "packobjectshook"),
    ("submodule.*", "update"),
    ("difftool.*", "path"),
    ("mergetool.*", "path"),
    ("trailer.*", "command"),
    ("trailer.*", "cmd"),
    ("sendemail", "tocmd"),
    ("sendemail", "cccmd"),
    ("sendemail", "smtpserver"),
    ("browser.*", "cmd"),
    ("browser.*", "path"),
    ("man.*", "cmd"),
    ("man.*", "path"),
];

/// The paths inside `root` (a working tree) that git's configuration names there:
/// `global` (the user's and the system's files) and that of its git folders (`gitdirs`:
/// the repository's, and a worktree's own). `(path, is a folder)`. `home` expands `~/`.
/// Paths outside `root` are left out: they are not the child's to write.
pub(super) fn named_paths(
    root: &Path,
    global: &[PathBuf],
    gitdirs: &[PathBuf],
    home: Option<&Path>,
) -> Vec<(PathBuf, bool)> {
    let mut found = Found::new(root, home);
    found.hooks = gitdirs.iter().map(|d| d.join("hooks")).collect();
    found.read_all(global, gitdirs);
    let mut paths = found.paths;
    let hooks = installed_hooks(&found.hooks);
    for (word, files) in HOOK_FRAMEWORKS {
        if hooks.iter().any(|h| h.contains(word)) {
            paths.extend(files.iter().map(|f| (root.join(f), false)));
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// What git reads as configuration for the working trees whose git folders are
/// `gitdirs`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Configuration {
    /// `global`, their `config` and `config.worktree`, and the files they include,
    /// followed whatever the condition (those that exist or not).
    pub files: Vec<PathBuf>,
    /// The last `core.excludesFile` set (an absolute path, or `~/`), if any.
    pub excludes_file: Option<PathBuf>,
}

/// See [`Configuration`]; `home` expands `~/`.
pub(super) fn configuration(
    global: &[PathBuf],
    gitdirs: &[PathBuf],
    home: Option<&Path>,
) -> Configuration {
    let mut found = Found::new(Path::new("/"), home);
    found.read_all(global, gitdirs);
    Configuration {
        files: found.read,
        excludes_file: found.excludes_file,
    }
}

struct Found<'a> {
    root: &'a Path,
    home: Option<&'a Path>,
    paths: Vec<(PathBuf, bool)>,
    /// The folders git runs hooks from (inside the working tree or not).
    hooks: Vec<PathBuf>,
    /// The configuration files read, so that an include loop ends.
    read: Vec<PathBuf>,
    /// The last `core.excludesFile`.
    excludes_file: Option<PathBuf>,
}

impl<'a> Found<'a> {
    fn new(root: &'a Path, home: Option<&'a Path>) -> Found<'a> {
        Found {
            root,
            home,
            paths: Vec::new(),
            hooks: Vec::new(),
            read: Vec::new(),
            excludes_file: None,
        }
    }

    /// `global`, then each git folder's `config` and `config.worktree`, in git's order.
    fn read_all(&mut self, global: &[PathBuf], gitdirs: &[PathBuf]) {
        for file in global {
            self.read_file(file, 0);
        }
        for dir in gitdirs {
            for name in ["config", "config.worktree"] {
                self.read_file(&dir.join(name), 0);
            }
        }
    }

    fn read_file(&mut self, file: &Path, depth: usize) {
        if depth > MAX_INCLUDE_DEPTH || self.read.iter().any(|f| f == file) {
            return;
        }
        self.read.push(file.to_path_buf());
        let Ok(text) = std::fs::read_to_string(file) else {
            return;
        };
        let base = file.parent().unwrap_or(Path::new("/")).to_path_buf();
        for entry in entries(&text) {
            let key = (entry.section.as_str(), entry.name.as_str());
            if key == ("core", "excludesfile") {
                self.excludes_file = self
                    .resolve(&entry.value, Path::new("/"))
                    .filter(|_| entry.value.starts_with(['/', '~']));
            }
            if key == ("core", "hookspath") || key == ("init", "templatedir") {
                // Relative to the top of the working tree, where hooks run. (The template
                // folder's hooks are copied into every repository `git init` or `git
                // clone` makes.) husky points the hooks at `.husky/_`, whose hooks run
                // the user's own one folder up: all of that folder is hooks.
                let resolved = self.resolve(&entry.value, self.root);
                if key.0 == "core" {
                    self.hooks.extend(resolved.clone());
                }
                let hooks = resolved.map(|p| match (p.file_name(), p.parent()) {
                    (Some(n), Some(up)) if n == "_" && up != self.root => up.to_path_buf(),
                    _ => p,
                });
                self.keep(hooks, true);
            } else if entry.name == "path"
                && (entry.section == "include" || entry.section.starts_with("includeif."))
            {
                let included = self.resolve(&entry.value, &base);
                if let Some(p) = &included {
                    self.read_file(p, depth + 1);
                }
                self.keep(included, false);
            } else if is_command(&entry.section, &entry.name, &entry.value) {
                for word in words(&entry.value) {
                    let word = word.trim_start_matches('!');
                    if looks_like_path(word, self.root) {
                        self.keep(self.resolve(word, self.root), false);
                    }
                }
            }
        }
    }

    /// `value` as a path: `~/` from the home, relative ones from `base`; `.` and `..`
    /// taken lexically (what a link makes of them is for the view, which covers links).
    fn resolve(&self, value: &str, base: &Path) -> Option<PathBuf> {
        let joined = match value.strip_prefix("~/") {
            Some(rest) => self.home?.join(rest),
            None if value.starts_with('~') || value.is_empty() => return None,
            None => base.join(value),
        };
        Some(super::normalize_lexically(&joined))
    }

    fn keep(&mut self, path: Option<PathBuf>, is_dir: bool) {
        if let Some(p) = path.filter(|p| p.starts_with(self.root) && p != self.root) {
            self.paths.push((p, is_dir));
        }
    }
}

/// The text of the hooks installed in `dirs` (any regular file but git's `*.sample`
/// ones; no link followed), each read up to [`MAX_HOOK_READ_BYTES`].
fn installed_hooks(dirs: &[PathBuf]) -> Vec<String> {
    use std::io::Read;
    let mut out = Vec::new();
    for entry in dirs.iter().flat_map(std::fs::read_dir).flatten().flatten() {
        if entry.file_name().to_string_lossy().ends_with(".sample")
            || !entry.file_type().is_ok_and(|t| t.is_file())
        {
            continue;
        }
        let mut text = Vec::new();
        if let Ok(f) = std::fs::File::open(entry.path()) {
            let _ = f.take(MAX_HOOK_READ_BYTES).read_to_end(&mut text);
            out.push(String::from_utf8_lossy(&text).into_owned());
        }
    }
    out
}

fn is_command(section: &str, name: &str, value: &str) -> bool {
    let general = section.split_once('.').map_or(section, |(s, _)| s);
    let listed = COMMAND_KEYS.iter().any(|&(s, n)| {
        let section_matches = match s.strip_suffix(".*") {
            Some(prefix) => general == prefix && section.contains('.'),
            None => section == s,
        };
        section_matches && (n == "*" || n == name)
    });
    // `core.fsmonitor` may be a boolean (git's own monitor).
    listed
        && match (section, name) {
            // An alias, or a submodule's update, runs a command only when it starts
            // with `!`.
            ("alias", _) => value.trim_start().starts_with('!'),
            (s, "update") if s.starts_with("submodule.") => value.trim_start().starts_with('!'),
            ("core", "fsmonitor") => !matches!(
                value.trim().to_ascii_lowercase().as_str(),
                "true" | "false" | "yes" | "no" | "on" | "off" | "1" | "0" | ""
            ),
            _ => true,
        }
}

/// Whether a word of a command names a file: `./x`, `../x`, `/x`, `~/x`, or `dir/x`
/// whose first folder exists in the working tree.
fn looks_like_path(word: &str, root: &Path) -> bool {
    if ["./", "../", "/", "~/"].iter().any(|p| word.starts_with(p)) {
        return true;
    }
    match word.split_once('/') {
        Some((first, _)) if !first.is_empty() && !first.contains(['$', '%', '=']) => {
            root.join(first).is_dir()
        }
        _ => false,
    }
}

/// The words of a shell line, quotes removed (`'…'`, `"…"`, backslash escapes); good
/// enough to find the scripts a command names, not to run it.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                word.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            c if c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')') => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// One `name = value` of a configuration file.
#[derive(Debug, PartialEq)]
struct Entry {
    /// Lower case, with its subsection: `core`, `filter.fmt`, `includeif.onbranch:main`
    /// (the subsection keeps its case).
    section: String,
    /// Lower case.
    name: String,
    value: String,
}

/// The entries of a git configuration file, in order.
fn entries(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut rest = line.trim_start();
        if let Some(header) = rest.strip_prefix('[') {
            let Some((inside, after)) = header.split_once(']') else {
                continue;
            };
            section = section_name(inside);
            // `[core] hooksPath = x` on one line.
            rest = after.trim_start();
        }
        if rest.is_empty() || rest.starts_with(['#', ';']) || section.is_empty() {
            continue;
        }
        let (name, raw) = match rest.split_once('=') {
            Some((n, v)) => (n.trim(), v.to_string()),
            None => (rest.trim(), String::new()),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        let mut raw = raw;
        // A line ending in a backslash goes on on the next.
        while raw.trim_end().ends_with('\\') && !raw.trim_end().ends_with("\\\\") {
            let trimmed = raw.trim_end();
            raw = trimmed[..trimmed.len() - 1].to_string();
            match lines.next() {
                Some(next) => raw.push_str(next),
                None => break,
            }
        }
        out.push(Entry {
            section: section.clone(),
            name: name.to_ascii_lowercase(),
            value: value(&raw),
        });
    }
    out
}

/// `core`, `filter "fmt"` or the old `filter.fmt`: the section lower case, a quoted
/// subsection as written.
fn section_name(inside: &str) -> String {
    let inside = inside.trim();
    match inside.split_once(|c: char| c.is_whitespace()) {
        Some((name, sub)) => {
            let sub = sub.trim();
            let sub = sub
                .strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .unwrap_or(sub)
                .replace("\\\"", "\"")
                .replace("\\\\", "\\");
            format!("{}.{sub}", name.to_ascii_lowercase())
        }
        None => match inside.split_once('.') {
            Some((name, sub)) => {
                format!("{}.{}", name.to_ascii_lowercase(), sub.to_ascii_lowercase())
            }
            None => inside.to_ascii_lowercase(),
        },
    }
}

/// A value as git reads it: quotes removed, `\"`, `\\`, `\n`, `\t` unescaped, a comment
/// outside quotes dropped, surrounding blanks trimmed.
fn value(raw: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = raw.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('b') => {
                    out.pop();
                }
                Some(c) => out.push(c),
                None => {}
            },
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn entries_read_sections_subsections_quotes_comments_and_continuations() {
        let text = "[core]\n\thooksPath = \".husky/_\" ; husky\n\
                    [filter \"Fmt\"] clean = ./fmt.sh %f\n\
                    [diff.Tool]\n\ttextconv = a \\\n  b\n\
                    # comment\n[alias]\n\tst = status\n";
        assert_eq!(
            entries(text),
            [
                Entry {
                    section: "core".into(),
                    name: "hookspath".into(),
                    value: ".husky/_".into()
                },
                Entry {
                    section: "filter.Fmt".into(),
                    name: "clean".into(),
                    value: "./fmt.sh %f".into()
                },
                Entry {
                    section: "diff.tool".into(),
                    name: "textconv".into(),
                    value: "a   b".into()
                },
                Entry {
                    section: "alias".into(),
                    name: "st".into(),
                    value: "status".into()
                },
            ]
        );
    }

    #[test]
    fn the_paths_named_are_hooks_includes_followed_and_command_scripts_inside_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("work");
        let git = root.join(".git");
        std::fs::create_dir_all(git.join("x")).unwrap();
        std::fs::create_dir_all(root.join("tools")).unwrap();
        std::fs::write(
            git.join("config"),
            "[core]\n\thooksPath = .husky/_\n\tfsmonitor = true\n\
             [include]\n\tpath = ../shared.gitconfig\n\tpath = /etc/outside.gitconfig\n\
             [alias]\n\tfmt = !tools/fmt.sh --all\n\tst = status\n\
             [merge \"ours\"]\n\tdriver = 'sh ../escape.sh' %O\n\
             [init]\n\ttemplateDir = tmpl\n[submodule \"m\"]\n\tupdate = !./up.sh\n\
             [submodule \"n\"]\n\tupdate = checkout\n[remote \"o\"]\n\tuploadpack = ./up2.sh\n",
        )
        .unwrap();
        std::fs::write(
            root.join("shared.gitconfig"),
            "[includeIf \"onbranch:main\"]\n\tpath = cfg/more.gitconfig\n\
             [filter \"fmt\"]\n\tclean = \"./scripts/clean.sh\" %f\n\
             [core]\n\tsshCommand = ~/bin/ssh\n[include]\n\tpath = ../work/shared.gitconfig\n",
        )
        .unwrap();
        let home = root.join("home");
        let global = dir.path().join("global.gitconfig");
        std::fs::write(&global, "[core]\n\teditor = ~/edit.sh\n").unwrap();
        let found = named_paths(&root, &[global], &[git], Some(&home));
        assert_eq!(
            found,
            [
                (root.join(".husky"), true),
                (root.join("cfg/more.gitconfig"), false),
                (root.join("home/bin/ssh"), false),
                (root.join("home/edit.sh"), false),
                (root.join("scripts/clean.sh"), false),
                (root.join("shared.gitconfig"), false),
                (root.join("tmpl"), true),
                (root.join("tools/fmt.sh"), false),
                (root.join("up.sh"), false),
                (root.join("up2.sh"), false),
            ]
        );
    }

    #[test]
    fn the_configuration_files_are_the_global_ones_the_repositorys_and_their_includes() {
        let dir = tempfile::tempdir().unwrap();
        let (git, home) = (dir.path().join("repo/.git"), dir.path().join("home"));
        std::fs::create_dir_all(&git).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let global = home.join(".gitconfig");
        std::fs::write(&global, "[include]\n\tpath = ~/.gitconfig-secrets\n").unwrap();
        std::fs::write(
            home.join(".gitconfig-secrets"),
            "[include]\n\tpath = .gitconfig\n",
        )
        .unwrap();
        std::fs::write(
            git.join("config"),
            "[includeIf \"gitdir:~/\"]\n\tpath = local.inc\n",
        )
        .unwrap();
        std::fs::write(git.join("local.inc"), "[core]\n\texcludesFile = ~/ignore\n").unwrap();
        assert_eq!(
            configuration(
                std::slice::from_ref(&global),
                std::slice::from_ref(&git),
                Some(&home)
            ),
            Configuration {
                files: vec![
                    global.clone(),
                    home.join(".gitconfig-secrets"),
                    git.join("config"),
                    git.join("local.inc"),
                    git.join("config.worktree"),
                ],
                excludes_file: Some(home.join("ignore")),
            }
        );
    }

    /// A hook framework's files are named where one of its hooks is installed, and only
    /// its own; git's sample hooks install nothing.
    #[test]
    fn a_hook_frameworks_files_are_named_where_its_hook_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("work");
        let git = root.join(".git");
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        std::fs::write(git.join("hooks/pre-commit.sample"), "lefthook pre-commit").unwrap();
        assert_eq!(
            named_paths(&root, &[], std::slice::from_ref(&git), None),
            []
        );
        std::fs::write(git.join("hooks/pre-commit"), "exec pre-commit hook-impl").unwrap();
        assert_eq!(
            named_paths(&root, &[], &[git], None),
            [
                (root.join(".pre-commit-config.yaml"), false),
                (root.join(".pre-commit-config.yml"), false),
            ]
        );
    }

    #[test]
    fn words_unquote_and_split_on_blanks_and_shell_operators() {
        assert_eq!(
            words(r#"sh -c "a \"b\" c"; './x y' z\ w|q"#),
            ["sh", "-c", "a \"b\" c", "./x y", "z w", "q"]
        );
    }
}
