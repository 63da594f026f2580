//! Finding a program the way `execvp` would.

use std::path::{Path, PathBuf};

/// Looks a program up like `execvp` would: a path with a slash as is, else on PATH.
pub(crate) fn find_program(program: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let as_path = Path::new(program);
    if program.is_empty() {
        return None;
    }
    if as_path.components().count() > 1 {
        return executable(as_path).then(|| as_path.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| executable(p))
}
