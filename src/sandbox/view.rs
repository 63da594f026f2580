//! The child's view of the filesystem, as a list of mounts over a read-only tree (the
//! platform builds it; see `platform::View`), and the Landlock paths that match it for
//! where no mount namespace can be had.
//!
//! - Writable: the child's own place, its CLI's session folders, and in workspace-write
//!   the workspace.
//! - Private: its CLI's own folders (settings, extensions, plugins, caches): readable as
//!   they are, written to a layer thrown away after the run.
//! - Read-only inside writable places: the protected names ([`PROTECTED_DIRS`],
//!   [`PROTECTED_FILES`]) at the top of each, the repository's git folders, and the home
//!   directory's hidden entries when the workspace holds the home.
//!   A protected name that does not exist is held by an empty placeholder for the run
//!   ([`Placeholders`]), so that the child cannot create it.
//! - Hidden (empty): credentials ([`CREDENTIALS`]), other CLIs' logins, the runtime
//!   directory and the agent sockets the environment names, and orchestrate's state but
//!   for the run's own folder, which stays read-only (other runs' raw sessions, results
//!   and worktrees, the index of every run's task).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::{create_private_dir, ChildEnv, CliHome, CliNeeds, Places, SandboxMode};
use crate::platform::{MountKind, View};

/// Folders at the top of a writable place that tools run code from when the user works
/// there later (git, editors, agent CLIs): read-only, and not creatable.
pub(crate) const PROTECTED_DIRS: [&str; 12] = [
    ".git",
    ".vscode",
    ".idea",
    ".claude",
    ".codex",
    ".gemini",
    ".agents",
    ".opencode",
    ".pi",
    ".cursor",
    ".zed",
    ".continue",
];
/// Files of the same kind: project MCP servers and agent configs, git's own, and the shell
/// start-up files (which matter where the workspace is the home directory).
pub(crate) const PROTECTED_FILES: [&str; 13] = [
    ".mcp.json",
    "opencode.json",
    "opencode.jsonc",
    ".gitconfig",
    ".gitmodules",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".ripgreprc",
];

/// Credentials in a home directory, hidden from every child: keys, cloud and cluster
/// logins, registry and service tokens, database passwords, password stores, browser
/// profiles (their cookies are logins), and the places agents keep their sockets in
/// (a socket is reachable on a read-only mount: 1Password's and Bitwarden's ssh agents,
/// git's credential cache, the docker sockets of colima, Rancher Desktop and lima).
pub(crate) const CREDENTIALS: [&str; 89] = [
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".config/glab-cli",
    ".azure",
    ".oci",
    ".config/doctl",
    ".fly",
    ".wrangler",
    ".config/.wrangler",
    ".supabase",
    ".databrickscfg",
    ".huggingface/token",
    ".cache/huggingface/token",
    ".config/containers/auth.json",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings-security.xml",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".pgpass",
    ".my.cnf",
    ".s3cfg",
    ".boto",
    ".passwd-s3fs",
    ".config/rclone",
    ".config/op",
    ".1password",
    ".bitwarden-ssh-agent.sock",
    ".cache/git/credential",
    ".colima",
    ".rd",
    ".lima",
    ".password-store",
    ".local/share/keyrings",
    ".pki",
    ".authinfo",
    ".authinfo.gpg",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    // Package managers' and tools' own logins.
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".config/pip/pip.conf",
    ".pip/pip.conf",
    ".kaggle/kaggle.json",
    ".config/composer/auth.json",
    ".composer/auth.json",
    ".config/sops/age/keys.txt",
    ".config/age",
    ".nuget/NuGet/NuGet.Config",
    ".config/NuGet/NuGet.Config",
    ".config/helm/repositories.yaml",
    ".config/configstore",
    ".expo/state.json",
    ".vercel",
    ".config/netlify",
    ".netlify",
    ".heroku",
    ".config/twilio-cli",
    ".stripe",
    ".config/stripe",
    ".aptible",
    ".config/firebase",
    ".config/snyk",
    // Shells' and REPLs' histories: commands typed with passwords and keys in them.
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".rediscli_history",
    ".irb_history",
    ".lesshst",
];

/// System secrets a child of root could read (root owns them).
const SYSTEM_SECRETS: [&str; 5] = [
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/ssl/private",
];

/// Variables that name an agent's socket (or an X server's authority), hidden wherever
/// they point: `(name, how the path is written in it)`.
const SOCKET_VARS: [(&str, SocketForm); 6] = [
    ("SSH_AUTH_SOCK", SocketForm::Path),
    ("GPG_AGENT_INFO", SocketForm::PathThenColon),
    ("DBUS_SESSION_BUS_ADDRESS", SocketForm::DbusPath),
    ("DOCKER_HOST", SocketForm::UnixUrl),
    ("TMUX", SocketForm::PathThenComma),
    ("XAUTHORITY", SocketForm::Path),
];

#[derive(Clone, Copy)]
enum SocketForm {
    Path,
    PathThenColon,
    PathThenComma,
    DbusPath,
    UnixUrl,
}

fn socket_path(value: &str, form: SocketForm) -> Option<PathBuf> {
    let path = match form {
        SocketForm::Path => value,
        SocketForm::PathThenColon => value.split(':').next()?,
        SocketForm::PathThenComma => value.split(',').next()?,
        SocketForm::DbusPath => value
            .split(';')
            .find_map(|a| a.strip_prefix("unix:"))?
            .split(',')
            .find_map(|kv| kv.strip_prefix("path="))?,
        SocketForm::UnixUrl => value.strip_prefix("unix://")?,
    };
    Some(PathBuf::from(path)).filter(|p| p.is_absolute())
}

pub(super) struct Input<'a> {
    pub mode: SandboxMode,
    pub cli: &'a CliNeeds,
    pub env: &'a ChildEnv<'a>,
    pub home: &'a CliHome,
    pub places: &'a Places<'a>,
    /// The child's own place and its private TMPDIR.
    pub child: &'a Path,
    pub tmp: &'a Path,
}

pub(super) struct Built {
    pub view: View,
    /// Its CLI's login files that exist in its private folders (copied out at its exit,
    /// see `logins`).
    pub logins: Vec<PathBuf>,
    /// Variables for the child's environment.
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// Landlock's write rules (where no mount namespace can be had, the only ones).
    pub writable: Vec<PathBuf>,
    pub placeholders: Placeholders,
}

/// The real path, symbolic links resolved, when it exists.
fn real(p: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(p).ok()
}

pub(super) fn build(input: &Input<'_>) -> io::Result<Built> {
    let mut mounts: Vec<(PathBuf, MountKind)> = Vec::new();
    let mut writable = Vec::new();
    let places = input.places;

    // The child's own place: its TMPDIR is empty and private where it can be.
    writable.push(input.child.to_path_buf());
    mounts.push((input.child.to_path_buf(), MountKind::Writable));
    mounts.push((input.tmp.to_path_buf(), MountKind::Scratch));

    // orchestrate's records, wherever they are (a workspace may hold the state dir): the
    // child reads its own run folder (its task and system prompt files are there), which
    // is carried into the emptied state read-only, and nothing else of them. Other runs'
    // sessions are raw (what their children printed, keys and all), and the index names
    // every run's task.
    let state = real(places.state_root);
    if let Some(state) = &state {
        mounts.push((state.clone(), MountKind::Emptied));
    }

    // The CLI's home.
    for dir in &input.home.private {
        create_private_dir(dir)?;
        if let Some(dir) = real(dir) {
            // Without a mount namespace there is no private layer: the CLI must still
            // write its folders (what the warning says is lost).
            writable.push(dir.clone());
            mounts.push((dir, MountKind::Private));
        }
    }
    for dir in &input.home.kept {
        create_private_dir(dir)?;
        if let Some(dir) = real(dir) {
            writable.push(dir.clone());
            mounts.push((dir, MountKind::Writable));
        }
    }
    for file in &input.home.copied {
        if let Some(target) = real(file).filter(|p| p.is_file()) {
            mounts.push((target, MountKind::Copy));
        }
    }

    // The workspace and what stays read-only in it.
    let registry = places.state_root.join(REGISTRY_DIR);
    // What runs killed before they could clean up left behind.
    sweep(&registry);
    let mut placeholders = Placeholders::recorded_in(registry.clone());
    // Resolved once: each resolution reads every component of the path.
    let workspace_real: Vec<PathBuf> = places.workspace.iter().filter_map(|p| real(p)).collect();
    let homes = homes(input.env);
    let workspace: &[PathBuf] = if input.mode == SandboxMode::WorkspaceWrite {
        &workspace_real
    } else {
        &[]
    };
    let own_dirs: Vec<&str> = input
        .home
        .project
        .iter()
        .copied()
        .filter(|n| PROTECTED_DIRS.contains(n))
        .collect();
    let home = homes.first().map(PathBuf::as_path);
    let global_git = global_git_config(input.env, home);
    let gitdirs: Vec<PathBuf> = workspace_real
        .iter()
        .flat_map(|r| repository_dirs(r))
        .collect();
    let git = super::git_config::configuration(&global_git, &gitdirs, home);
    let mut env = Vec::new();
    let mut wanted = Vec::new();
    let mut found_empty = Vec::new();
    for root in workspace {
        writable.push(root.clone());
        mounts.push((root.clone(), MountKind::Writable));
        // (An empty one, another run's placeholder, is no configuration.)
        let configured = input.home.project.iter().any(|n| !is_empty(&root.join(n)));
        if let (false, Some((k, v))) = (configured, input.home.project_off_env) {
            env.push((k.into(), v.into()));
        }
        protect(root, &own_dirs, &mut mounts, &mut wanted, &mut found_empty);
        let named = super::git_config::named_paths(root, &global_git, &repository_dirs(root), home);
        let mut ancestors = Vec::new();
        for (path, is_dir) in named {
            if !path.starts_with(root.join(".git")) {
                ancestors.extend(protect_named(
                    root,
                    &path,
                    is_dir,
                    &mut mounts,
                    &mut wanted,
                    &mut found_empty,
                ));
            }
        }
        // The folders on the way stay writable, but each a mount of its own, which the
        // child cannot rename or remove: it cannot move the protected path away and make
        // another in its place. (Not where a cover is already asked for.)
        for dir in ancestors {
            if !mounts.iter().any(|(p, _)| *p == dir) {
                mounts.push((dir, MountKind::Writable));
            }
        }
    }
    // An empty protected name may be another run's placeholder: held by this run too, so
    // that the other's end does not remove it (and detach this run's mount over it). Its
    // run recorded it before making it, so the records read after it was found list it.
    if !found_empty.is_empty() {
        let others = recorded_paths(&registry);
        wanted.extend(found_empty.into_iter().filter(|(p, _)| others.contains(p)));
    }
    placeholders.hold_all(&wanted)?;
    env.extend(placeholders_ignored(
        input,
        workspace,
        &wanted,
        &git,
        &global_git,
    )?);
    // Read-only, the CLI still writes its own project folders where they exist, to its
    // private layer.
    if input.mode == SandboxMode::ReadOnly {
        for root in &workspace_real {
            for name in &own_dirs {
                let dir = root.join(name);
                if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                    mounts.push((dir, MountKind::Private));
                }
            }
        }
    }
    for git in places.git {
        if let Some(git) = real(git) {
            mounts.push((git, MountKind::ReadOnly));
        }
    }
    let copied_from = without_git_credentials(input.child, &git.files, &workspace_real)?;
    mounts.extend(
        copied_from
            .iter()
            .map(|(p, _)| (p.clone(), MountKind::Copy)),
    );
    // A workspace that holds the home directory: the home's hidden entries (shell and
    // tool settings, autostart, systemd units) stay read-only, but for the CLI's own.
    let cli_dirs: Vec<PathBuf> = input
        .home
        .private
        .iter()
        .chain(&input.home.kept)
        .filter_map(|p| real(p))
        .collect();
    for home in &homes {
        if workspace.iter().any(|w| home.starts_with(w)) {
            for entry in std::fs::read_dir(home).into_iter().flatten().flatten() {
                let path = entry.path();
                let hidden = entry.file_name().to_string_lossy().starts_with('.');
                if hidden && !cli_dirs.iter().any(|d| d == &path) {
                    mounts.push((path, MountKind::ReadOnly));
                }
            }
        }
    }

    // What no child reads.
    for hidden in hidden_paths(input, &homes, state.as_deref()) {
        mounts.push((hidden.clone(), MountKind::Hidden));
        if let Some(target) = real(&hidden).filter(|t| *t != hidden) {
            mounts.push((target, MountKind::Hidden));
        }
    }
    // A child that may start orchestrate runs of its own must find orchestrate's binary,
    // even where it lies in a directory the view empties (a build in /tmp).
    let own_binary = places
        .nests
        .then(|| std::env::current_exe().ok())
        .flatten()
        .and_then(|exe| exe.parent().and_then(real));
    let visible = workspace_real
        .into_iter()
        .chain(homes)
        .chain(own_binary)
        .chain(real(places.run_dir))
        .collect();
    let private: Vec<PathBuf> = input.home.private.iter().filter_map(|p| real(p)).collect();
    let logins = input
        .home
        .login
        .iter()
        .filter_map(|p| real(p))
        .filter(|p| p.is_file() && private.iter().any(|d| p.starts_with(d)))
        .collect();
    Ok(Built {
        view: View {
            mounts,
            visible,
            logins: None,
            copied_from,
        },
        logins,
        env,
        writable,
        placeholders,
    })
}

/// The home directories whose credentials are hidden: `$HOME`, and root's when the child
/// runs as root (which owns and so can read them).
fn homes(env: &ChildEnv<'_>) -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = env.home().and_then(|h| real(&h)).into_iter().collect();
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        if let Some(root) = real(Path::new("/root")).filter(|r| !homes.contains(r)) {
            homes.push(root);
        }
    }
    homes
}

/// What no child reads; `homes` are [`homes`], `state` is the run's state directory (its
/// real path).
fn hidden_paths(input: &Input<'_>, homes: &[PathBuf], state: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for home in homes {
        out.extend(CREDENTIALS.iter().map(|c| home.join(c)));
    }
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        out.extend(SYSTEM_SECRETS.iter().map(PathBuf::from));
        // The host's private ssh keys.
        for e in std::fs::read_dir("/etc/ssh")
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("ssh_host_") && name.ends_with("_key") {
                out.push(e.path());
            }
        }
    }
    // Every other CLI's login; not its own, which another backend of the same CLI (its
    // ACP mode) also names.
    for home in &input.cli.others {
        let own = &input.home.login;
        out.extend(
            home(input.env)
                .login
                .into_iter()
                .filter(|l| !own.contains(l)),
        );
    }
    // orchestrate's state directories where it keeps them when not told otherwise, when
    // this run keeps its own elsewhere: their runs are as private as this one's others.
    // (One that holds this run's state is covered by the sandbox this run is nested in.)
    if let Some(own) = state {
        for dir in input.places.other_states.iter().filter_map(|d| real(d)) {
            if !own.starts_with(&dir) && !dir.starts_with(own) {
                out.push(dir);
            }
        }
    }
    // The runtime directory (sockets of the user's session) where it is not under /run,
    // which is empty for the child anyway; and the agent sockets the variables name.
    if let Some(dir) = input.env.get("XDG_RUNTIME_DIR").map(PathBuf::from) {
        if dir.is_absolute() && !dir.starts_with("/run") {
            out.push(dir);
        }
    }
    for (var, form) in SOCKET_VARS {
        if let Some(path) = input
            .env
            .get(var)
            .and_then(|v| socket_path(&v.to_string_lossy(), form))
        {
            out.push(path);
        }
    }
    out.retain(|p| std::fs::symlink_metadata(p).is_ok());
    out
}

/// The protected names at the top of `root`: read-only where they exist (for a `.git`
/// file, the git folders it points to as well), held by a placeholder where they do not
/// (added to `wanted`: `(path, is a folder)`); those that exist and are empty, which may
/// be another run's placeholders, are added to `found_empty` the same way.
/// The child's own CLI's project folders (`own`) are private instead: it reads them as
/// they are and writes to a layer thrown away after the run.
fn protect(
    root: &Path,
    own: &[&str],
    mounts: &mut Vec<(PathBuf, MountKind)>,
    wanted: &mut Vec<(PathBuf, bool)>,
    found_empty: &mut Vec<(PathBuf, bool)>,
) {
    let names = PROTECTED_DIRS
        .iter()
        .map(|n| (n, true))
        .chain(PROTECTED_FILES.iter().map(|n| (n, false)));
    for (name, is_dir) in names {
        let path = root.join(name);
        let kind = if is_dir && own.contains(name) {
            MountKind::Private
        } else {
            MountKind::ReadOnly
        };
        let meta = std::fs::symlink_metadata(&path).ok();
        cover_or_hold(
            &path,
            meta.as_ref(),
            is_dir,
            kind,
            mounts,
            wanted,
            found_empty,
        );
        if *name == ".git" && meta.is_some_and(|m| m.is_file()) {
            for dir in git_pointer_dirs(root) {
                mounts.push((dir, MountKind::ReadOnly));
            }
        }
    }
}

/// `path` (`meta`: as it is, not following a link) covered with a `kind` mount where it
/// exists: a link itself, and read-only where it leads; one that is empty may be another
/// run's placeholder (added to `found_empty`). Where it does not exist (or cannot even be
/// looked at, which the placeholder's creation then says), it is held by a placeholder (a
/// folder where `is_dir`) under the same mount, so that the child cannot make it.
fn cover_or_hold(
    path: &Path,
    meta: Option<&std::fs::Metadata>,
    is_dir: bool,
    kind: MountKind,
    mounts: &mut Vec<(PathBuf, MountKind)>,
    wanted: &mut Vec<(PathBuf, bool)>,
    found_empty: &mut Vec<(PathBuf, bool)>,
) {
    mounts.push((path.to_path_buf(), kind));
    match meta {
        Some(m) if m.is_symlink() => {
            if let Some(target) = real(path) {
                mounts.push((target, MountKind::ReadOnly));
            }
        }
        Some(m) => {
            if m.is_dir() == is_dir && is_empty(path) {
                found_empty.push((path.to_path_buf(), is_dir));
            }
        }
        None => {
            if !wanted.iter().any(|(w, _)| w == path) {
                wanted.push((path.to_path_buf(), is_dir));
            }
        }
    }
}

/// The user's and the system's git configuration files (read for what they name in the
/// workspace).
fn global_git_config(env: &ChildEnv<'_>, home: Option<&Path>) -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("/etc/gitconfig")];
    // Read by git in place of the system's and the user's files: both are taken (the
    // child could unset the variables).
    files.extend(
        ["GIT_CONFIG_SYSTEM", "GIT_CONFIG_GLOBAL"]
            .into_iter()
            .filter_map(|k| env.get(k))
            .map(PathBuf::from)
            .filter(|p| p.is_absolute()),
    );
    let xdg = env
        .get("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home.map(|h| h.join(".config")));
    files.extend(xdg.map(|d| d.join("git/config")));
    files.extend(home.map(|h| h.join(".gitconfig")));
    files
}

/// git's configuration files that the child's git reads (the system's, the user's, those
/// of the workspace's repositories, what they include, and `.gitmodules`) and that hold
/// credentials in plain text: each with the version written into `child` without them,
/// which the child reads in its place.
fn without_git_credentials(
    child: &Path,
    files: &[PathBuf],
    workspace: &[PathBuf],
) -> io::Result<Vec<(PathBuf, PathBuf)>> {
    // A repository's `.gitmodules` names its submodules' URLs.
    let modules = workspace.iter().map(|root| root.join(".gitmodules"));
    let mut out: Vec<(PathBuf, PathBuf)> = Vec::new();
    for file in files.iter().cloned().chain(modules) {
        let Some(file) = real(&file).filter(|p| p.is_file()) else {
            continue;
        };
        if out.iter().any(|(f, _)| *f == file) {
            continue;
        }
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        let Some(clean) = super::git_credentials::redacted(&String::from_utf8_lossy(&bytes)) else {
            continue;
        };
        let copy = child.join(format!("git-config-{}", out.len()));
        write_private(&copy, clean.as_bytes())?;
        out.push((file, copy));
    }
    Ok(out)
}

/// A file of the child's own, `0600`, made anew: an earlier attempt's child could have
/// put a link in its place (which `create_new` does not follow).
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display())))
        }
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// The placeholders that are files show in `git status` as untracked (an empty folder
/// does not): the child's git ignores them, through an excludes file of its own that
/// holds the user's own rules first (`core.excludesFile`, or git's default
/// `$XDG_CONFIG_HOME/git/ignore`) and then each placeholder, anchored at the top of the
/// working tree it is in. Given as `GIT_CONFIG_COUNT` and its pair; not where the
/// environment sets that count already (a second would replace the first).
fn placeholders_ignored(
    input: &Input<'_>,
    workspace: &[PathBuf],
    wanted: &[(PathBuf, bool)],
    git: &super::git_config::Configuration,
    global_git: &[PathBuf],
) -> io::Result<Vec<(std::ffi::OsString, std::ffi::OsString)>> {
    let mut rules = String::new();
    for root in workspace.iter().filter(|r| !repository_dirs(r).is_empty()) {
        for (path, _) in wanted.iter().filter(|(_, is_dir)| !is_dir) {
            if let Ok(rel) = path.strip_prefix(root) {
                rules.push_str(&format!("/{}\n", rel.display()));
            }
        }
    }
    if rules.is_empty() || input.env.get("GIT_CONFIG_COUNT").is_some() {
        return Ok(Vec::new());
    }
    let users = git.excludes_file.clone().or_else(|| {
        global_git
            .iter()
            .find(|f| f.ends_with("git/config"))
            .map(|f| f.with_file_name("ignore"))
    });
    let mut text = users
        .and_then(|f| std::fs::read(f).ok())
        .unwrap_or_default();
    if !text.is_empty() && !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    text.extend_from_slice(rules.as_bytes());
    let file = input.child.join("git-excludes");
    write_private(&file, &text)?;
    Ok(vec![
        ("GIT_CONFIG_COUNT".into(), "1".into()),
        ("GIT_CONFIG_KEY_0".into(), "core.excludesFile".into()),
        ("GIT_CONFIG_VALUE_0".into(), file.into_os_string()),
    ])
}

/// The git folders whose configuration applies to the working tree at `root`: its
/// `.git` folder, or those a `.git` file points to.
fn repository_dirs(root: &Path) -> Vec<PathBuf> {
    let dot_git = root.join(".git");
    match std::fs::symlink_metadata(&dot_git) {
        Ok(m) if m.is_file() => git_pointer_dirs(root),
        Ok(_) => real(&dot_git).into_iter().collect(),
        Err(_) => Vec::new(),
    }
}

/// `path`, inside `root`, which git runs or reads as configuration (a folder where
/// `is_dir`): covered read-only, or held where missing, at the first part of it that is
/// not a folder ([`cover_or_hold`]: a link or a file on the way is covered itself, so that
/// it cannot be swapped for a folder of the child's). Returns the folders on the way,
/// which the child must not rename either.
fn protect_named(
    root: &Path,
    path: &Path,
    is_dir: bool,
    mounts: &mut Vec<(PathBuf, MountKind)>,
    wanted: &mut Vec<(PathBuf, bool)>,
    found_empty: &mut Vec<(PathBuf, bool)>,
) -> Vec<PathBuf> {
    let Ok(below) = path.strip_prefix(root) else {
        return Vec::new();
    };
    let mut on_the_way = Vec::new();
    let mut at = root.to_path_buf();
    for part in below.components() {
        at.push(part);
        let last = at == path;
        let meta = std::fs::symlink_metadata(&at).ok();
        if !last && meta.as_ref().is_some_and(|m| m.is_dir()) {
            on_the_way.push(at.clone());
            continue;
        }
        let kind = MountKind::ReadOnly;
        cover_or_hold(
            &at,
            meta.as_ref(),
            !last || is_dir,
            kind,
            mounts,
            wanted,
            found_empty,
        );
        break;
    }
    on_the_way
}

/// Nothing there, an empty folder or an empty file.
fn is_empty(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Err(_) => true,
        Ok(m) if m.is_dir() => dir_is_empty(path),
        Ok(m) => m.is_file() && m.len() == 0,
    }
}

/// Whether the folder at `path` (known to be one) holds nothing.
fn dir_is_empty(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none())
}

/// The git folders a `.git` file (`gitdir: …`) points to: the worktree's (or
/// submodule's) own, and the shared one its `commondir` names.
fn git_pointer_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(root.join(".git")) else {
        return Vec::new();
    };
    let Some(dir) = text.trim().strip_prefix("gitdir:").map(str::trim) else {
        return Vec::new();
    };
    let gitdir = root.join(dir);
    let mut out: Vec<PathBuf> = real(&gitdir).into_iter().collect();
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
        out.extend(real(&gitdir.join(common.trim())));
    }
    out
}

/// Empty placeholders that hold protected names that did not exist, so that the child
/// cannot create them: each is created for the run and removed once no run needs it.
///
/// Runs in one workspace share them: each holds a shared lock on every placeholder it
/// relies on for as long as its child lives, and a placeholder goes only when its
/// remover gets the exclusive lock (no run holds it) and it is still empty. A run that
/// finds one made by another takes its lock and checks it is still the same file.
///
/// Each run lists the placeholders it relies on in a record of its own in orchestrate's
/// state (`placeholders/<pid>-<time>`), written before it makes any and locked for as
/// long as it lives, so that those a run could not remove (orchestrate killed with
/// SIGKILL) are removed by the next sandboxed run ([`sweep`]) once no run holds them, if
/// still empty. One record per run, not per placeholder: each file made and removed
/// costs a little on some disks.
///
/// A placeholder let go is kept, empty, in a pool in orchestrate's state
/// ([`POOL_DIR`]) and the next run moves it into place instead of making a new one: a
/// rename allocates no inode, and the two dozen inodes a sandboxed writer's run made and
/// removed cost it milliseconds on an ext4 without a journal (which searches for an inode
/// not recently freed). A workspace on another filesystem than the state gets new ones.
#[derive(Debug, Default)]
pub(crate) struct Placeholders {
    held: Vec<std::sync::Arc<Held>>,
    registry: Option<PathBuf>,
    /// This run's record and its descriptor (holding the lock).
    record: Option<(PathBuf, File)>,
    pool: Pool,
}

/// A placeholder this process holds, shared by all its runs that rely on it (a fan-out
/// of writers in one workspace holds one descriptor per name, not one per task); let go
/// when the last of them ends.
#[derive(Debug)]
struct Held {
    path: PathBuf,
    file: File,
    /// The pool it goes to, and whether that was full.
    pool: (Option<PathBuf>, bool),
}

/// The placeholders this process holds, by path.
static HELD: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<PathBuf, std::sync::Weak<Held>>>,
> = std::sync::LazyLock::new(Default::default);

fn held_table(
) -> std::sync::MutexGuard<'static, std::collections::HashMap<PathBuf, std::sync::Weak<Held>>> {
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for Held {
    fn drop(&mut self) {
        let (dir, full) = self.pool.clone();
        let mut pool = Pool {
            dir,
            full,
            ..Pool::default()
        };
        release(&self.path, &self.file, &mut pool);
        let mut table = held_table();
        if table.get(&self.path).is_some_and(|w| w.strong_count() == 0) {
            table.remove(&self.path);
        }
    }
}

/// The folder of the placeholder records in a state directory.
pub(crate) const REGISTRY_DIR: &str = "placeholders";
/// The folder of the empty placeholders kept for the next runs, beside the records.
pub(crate) const POOL_DIR: &str = "placeholder-pool";
/// At most this many placeholders are kept; more are removed.
const POOL_MAX_ENTRIES: usize = 512;

/// Empty placeholders kept between runs (see [`Placeholders`]).
#[derive(Debug, Default)]
struct Pool {
    dir: Option<PathBuf>,
    /// Its entries as this run found them: `d-…` folders, `f-…` files.
    entries: Vec<std::ffi::OsString>,
    /// Whether it was full when this run looked.
    full: bool,
    /// A name for the next one this run puts back.
    next: u32,
}

impl Pool {
    fn at(dir: PathBuf) -> Pool {
        Pool {
            dir: Some(dir),
            ..Pool::default()
        }
    }

    fn look(&mut self) {
        let Some(dir) = &self.dir else {
            return;
        };
        if create_private_dir(dir).is_err() {
            self.dir = None;
            return;
        }
        self.entries = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        self.full = self.entries.len() >= POOL_MAX_ENTRIES;
    }

    /// Moves a kept placeholder of the kind to `path` (where nothing is); false when none
    /// could be (none left, `path` taken, another filesystem).
    fn take(&mut self, path: &Path, is_dir: bool) -> bool {
        let Some(dir) = &self.dir else {
            return false;
        };
        let prefix: &[u8] = if is_dir { b"d-" } else { b"f-" };
        while let Some(i) = self
            .entries
            .iter()
            .position(|n| n.as_encoded_bytes().starts_with(prefix))
        {
            let name = self.entries.swap_remove(i);
            let entry = dir.join(&name);
            // Only ever an empty one: a kill -9 between a placeholder's move into the pool
            // and its check can leave something written there.
            if !std::fs::symlink_metadata(&entry).is_ok_and(|m| reusable(&m, &entry, is_dir)) {
                continue;
            }
            match rename_no_replace(&entry, path) {
                Ok(()) => return true,
                // Taken by another run meanwhile.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                    self.dir = None;
                    return false;
                }
                Err(_) => return false,
            }
        }
        false
    }

    /// Where a placeholder let go goes: a new name in the pool, or None (no pool, or full).
    fn place(&mut self, is_dir: bool) -> Option<PathBuf> {
        let dir = self.dir.as_ref().filter(|_| !self.full)?;
        self.next += 1;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let kind = if is_dir { 'd' } else { 'f' };
        Some(dir.join(format!(
            "{kind}-{}-{nanos:x}-{}",
            std::process::id(),
            self.next
        )))
    }
}

/// Whether `m`, the metadata of `path`, is a placeholder to hand out again: empty, of the
/// kind wanted, with no other name (a child without a mount namespace could link it into
/// its workspace, and write there into another workspace's placeholder later) and no
/// permission beyond what it was made with.
fn reusable(m: &std::fs::Metadata, path: &Path, is_dir: bool) -> bool {
    let empty = if is_dir {
        m.is_dir() && dir_is_empty(path)
    } else {
        m.is_file() && m.len() == 0
    };
    empty && reusable_when_empty(m, is_dir)
}

/// [`reusable`] for a placeholder already found empty (`m` its metadata).
fn reusable_when_empty(m: &std::fs::Metadata, is_dir: bool) -> bool {
    use std::os::unix::fs::MetadataExt;
    (is_dir || m.nlink() == 1) && m.mode() & 0o7022 == 0
}

/// `rename(from, to)` that fails rather than replace what is at `to`.
fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let (from, to) = (
        std::ffi::CString::new(from.as_os_str().as_bytes()).map_err(io::Error::other)?,
        std::ffi::CString::new(to.as_os_str().as_bytes()).map_err(io::Error::other)?,
    );
    // SAFETY: two valid C strings.
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    } == 0;
    if done {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Placeholders {
    /// Placeholders recorded in `registry` (orchestrate's state `placeholders/`).
    pub(super) fn recorded_in(registry: PathBuf) -> Placeholders {
        Placeholders {
            held: Vec::new(),
            pool: Pool::at(pool_dir(&registry)),
            registry: Some(registry),
            record: None,
        }
    }

    /// Holds a placeholder at each of `wanted` (`(path, is a folder)`), recorded first.
    pub(super) fn hold_all(&mut self, wanted: &[(PathBuf, bool)]) -> io::Result<()> {
        if wanted.is_empty() {
            return Ok(());
        }
        self.record(wanted)?;
        self.pool.look();
        for (path, is_dir) in wanted {
            self.hold(path, *is_dir)?;
        }
        Ok(())
    }

    /// Writes this run's record: made under a temporary name, locked, then named, so
    /// that a sweep only ever finds records whose run holds the lock while it lives.
    fn record(&mut self, wanted: &[(PathBuf, bool)]) -> io::Result<()> {
        use std::io::Write;
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::OpenOptionsExt;
        let Some(registry) = &self.registry else {
            return Ok(());
        };
        create_private_dir(registry)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("{}-{nanos:x}", std::process::id());
        let (tmp, path) = (registry.join(format!(".{name}")), registry.join(&name));
        let fail = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", tmp.display()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(fail)?;
        // SAFETY: flock on our own descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(fail(io::Error::last_os_error()));
        }
        let mut list = Vec::new();
        for (p, _) in wanted {
            list.extend_from_slice(p.as_os_str().as_bytes());
            list.push(0);
        }
        file.write_all(&list).map_err(fail)?;
        std::fs::rename(&tmp, &path).map_err(fail)?;
        self.record = Some((path, file));
        Ok(())
    }

    fn hold(&mut self, path: &Path, is_dir: bool) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        // Held already by another run of this process: its lock keeps it in place.
        if let Some(held) = held_table().get(path).and_then(std::sync::Weak::upgrade) {
            self.held.push(held);
            return Ok(());
        }
        for _ in 0..8 {
            let made = if self.pool.take(path, is_dir) {
                Ok(())
            } else if is_dir {
                std::fs::create_dir(path)
            } else {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(path)
                    .map(|_| ())
            };
            match made {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("placeholder {}: {e}", path.display()),
                    ))
                }
            }
            let file = open_no_follow(path)?;
            // SAFETY: flock on our own descriptor.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) } != 0 {
                return Err(io::Error::last_os_error());
            }
            let (held, now) = (file.metadata()?, std::fs::symlink_metadata(path));
            if now.is_ok_and(|n| n.ino() == held.ino() && n.dev() == held.dev()) {
                let held = std::sync::Arc::new(Held {
                    path: path.to_path_buf(),
                    file,
                    pool: (self.pool.dir.clone(), self.pool.full),
                });
                held_table().insert(path.to_path_buf(), std::sync::Arc::downgrade(&held));
                self.held.push(held);
                return Ok(());
            }
            // Removed by the last run that used it between our look and our lock.
        }
        Err(io::Error::other(format!(
            "placeholder {}: it keeps changing",
            path.display()
        )))
    }

    /// The paths held, for tests and messages.
    #[allow(dead_code)]
    pub(crate) fn paths(&self) -> Vec<&Path> {
        self.held.iter().map(|h| h.path.as_path()).collect()
    }
}

/// Opens a placeholder (a file or a folder) without following a symbolic link there.
fn open_no_follow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("placeholder {}: {e}", path.display())))
}

/// Removes the placeholder at `path`, whose descriptor `held` has the exclusive lock, if
/// it is still the placeholder and still empty: it is first moved aside (into the pool,
/// where there is room), then kept or removed only if what was moved is the placeholder
/// itself and empty, else moved back: whoever writes the name meanwhile writes a new
/// file, never into one about to go.
fn remove_placeholder(path: &Path, held: &File, pool: &mut Pool) {
    use std::os::unix::fs::MetadataExt;
    let Ok(ours) = held.metadata() else {
        return;
    };
    let is_dir = ours.is_dir();
    let kept = pool
        .place(is_dir)
        .and_then(|to| match rename_no_replace(path, &to) {
            Ok(()) => Some((to, true)),
            Err(e) => {
                if e.raw_os_error() == Some(libc::EXDEV) {
                    pool.dir = None;
                }
                None
            }
        });
    let aside = match kept {
        Some(kept) => kept,
        None if is_dir => {
            // (Fails when anything was put in it.)
            let _ = std::fs::remove_dir(path);
            return;
        }
        None => {
            let Some(name) = path.file_name() else {
                return;
            };
            let mut aside_name = std::ffi::OsString::from(".");
            aside_name.push(name);
            aside_name.push(format!(".orchestrate-removing-{}", std::process::id()));
            let aside = path.with_file_name(aside_name);
            if rename_no_replace(path, &aside).is_err() {
                return;
            }
            (aside, false)
        }
    };
    let (aside, in_pool) = aside;
    let moved = std::fs::symlink_metadata(&aside);
    // Looked at once: 24 placeholders are let go at the end of every run in a workspace.
    let still_ours = moved.as_ref().is_ok_and(|m| {
        m.ino() == ours.ino()
            && m.dev() == ours.dev()
            && if is_dir {
                m.is_dir() && dir_is_empty(&aside)
            } else {
                m.is_file() && m.len() == 0
            }
    });
    if still_ours {
        let keep = moved.is_ok_and(|m| m.uid() == ours.uid() && reusable_when_empty(&m, is_dir));
        if !in_pool {
            let _ = std::fs::remove_file(&aside);
        } else if !keep {
            let _ = if is_dir {
                std::fs::remove_dir(&aside)
            } else {
                std::fs::remove_file(&aside)
            };
        }
        return;
    }
    if rename_no_replace(&aside, path).is_ok() {
        return;
    }
    // The name was taken again meanwhile: what was written is kept beside it, and never
    // stays in the pool, which only ever hands out empty placeholders.
    let mut kept = aside;
    if in_pool {
        let mut beside = std::ffi::OsString::from(".");
        beside.push(path.file_name().unwrap_or_default());
        beside.push(format!(".orchestrate-kept-{}", std::process::id()));
        let beside = path.with_file_name(beside);
        let mut out_of_use = std::ffi::OsString::from("kept-");
        out_of_use.push(kept.file_name().unwrap_or_default());
        let out_of_use = kept.with_file_name(out_of_use);
        if rename_no_replace(&kept, &beside).is_ok() {
            kept = beside;
        } else if rename_no_replace(&kept, &out_of_use).is_ok() {
            kept = out_of_use;
        }
    }
    tracing::warn!(
        "{} was written while orchestrate removed its placeholder there; it is kept as {}",
        path.display(),
        kept.display()
    );
}

/// Removes `path`'s placeholder if no run holds it (the last one out removes it).
fn release(path: &Path, file: &File, pool: &mut Pool) {
    // SAFETY: flock on our own descriptor.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        remove_placeholder(path, file, pool);
    }
}

/// The pool of kept placeholders beside the records in `registry`.
fn pool_dir(registry: &Path) -> PathBuf {
    registry.with_file_name(POOL_DIR)
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        // The last run of this process to hold one lets it go.
        self.held.clear();
        if let Some((record, _lock)) = self.record.take() {
            let _ = std::fs::remove_file(record);
        }
    }
}

/// The placeholders that the runs recorded in `registry` hold (a record under its
/// temporary name lists nothing made yet).
fn recorded_paths(registry: &Path) -> std::collections::HashSet<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    std::fs::read_dir(registry)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| !e.file_name().as_bytes().starts_with(b"."))
        .flat_map(|e| record_paths(&e.path()))
        .collect()
}

/// The placeholders a run's record lists (absolute paths, each ended by a NUL).
fn record_paths(record: &Path) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let list = std::fs::read(record).unwrap_or_default();
    list.split(|b| *b == 0)
        .map(|p| Path::new(std::ffi::OsStr::from_bytes(p)))
        .filter(|p| p.is_absolute())
        .map(Path::to_path_buf)
        .collect()
}

/// Removes the placeholders that runs recorded in `registry` and left behind (their
/// orchestrate was killed before it could remove them): each that no run holds and that
/// is still empty. Cheap when there are none (one failed `read_dir`, or an empty one).
pub(crate) fn sweep(registry: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(entries) = std::fs::read_dir(registry) else {
        return;
    };
    let mut pool = Pool::at(pool_dir(registry));
    let mut looked = false;
    for entry in entries.flatten() {
        if !looked {
            pool.look();
            looked = true;
        }
        let record = entry.path();
        let Ok(file) = File::open(&record) else {
            continue;
        };
        // SAFETY: flock on our own descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            // Its run is alive.
            continue;
        }
        // A record still under its temporary name lists nothing made yet.
        if !entry.file_name().as_bytes().starts_with(b".") {
            for path in record_paths(&record) {
                if let Ok(placeholder) = open_no_follow(&path) {
                    release(&path, &placeholder, &mut pool);
                }
            }
        }
        let _ = std::fs::remove_file(&record);
    }
}
