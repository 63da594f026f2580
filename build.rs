//! Links the unwinder statically on Linux with glibc, as `gcc -static-libgcc` would.
//!
//! Rust's standard library asks the linker for `-lgcc_s`, so every run of orchestrate
//! maps one more shared library and runs its constructor, which probes the CPU with
//! `cpuid`: an instruction a virtual machine traps, and which cost a trivial run about
//! 0.2 ms on the machine the benchmarks run on. rustc has no switch for a static libgcc
//! (rust-lang/rust#29527), so this puts a `libgcc_s.so` first on the library path that is
//! a linker script naming the static unwinder, `libgcc_eh.a`, instead. Nothing else
//! changes: panics unwind as before, and the binary keeps its address-space layout
//! randomization (PIE).
//!
//! Where the static unwinder cannot be found (another C toolchain, a cross build), the
//! build links `libgcc_s` as usual.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    let native = target("TARGET") == target("HOST");
    if target("CARGO_CFG_TARGET_OS") != "linux"
        || target("CARGO_CFG_TARGET_ENV") != "gnu"
        || !native
    {
        return;
    }
    let Some(archive) = static_unwinder() else {
        println!("cargo:warning=libgcc_eh.a not found: linking the shared libgcc_s");
        return;
    };
    let out = PathBuf::from(target("OUT_DIR")).join("static-unwinder");
    let script = format!("INPUT ( {} )\n", archive.display());
    let written = std::fs::create_dir_all(&out)
        .and_then(|()| std::fs::write(out.join("libgcc_s.so"), script));
    match written {
        Ok(()) => println!("cargo:rustc-link-search=native={}", out.display()),
        Err(e) => println!(
            "cargo:warning=cannot write {}: {e}; linking the shared libgcc_s",
            out.display()
        ),
    }
}

/// The C compiler's `libgcc_eh.a`, if it has one (it prints the bare name when not).
fn static_unwinder() -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let printed = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let path = PathBuf::from(String::from_utf8(printed.stdout).ok()?.trim());
    let plain = |p: &Path| {
        p.to_str()
            .is_some_and(|s| !s.contains(|c: char| c.is_whitespace() || c == ')'))
    };
    (path.is_absolute() && path.is_file() && plain(&path)).then_some(path)
}
