//! Records the compiler and the git commit for the `meta` block of every result.
//!
//! Reruns only when the commit or the sources can have changed: the files git keeps HEAD, the
//! branch it names and the index in (found with `git rev-parse --git-path`, so that a linked
//! worktree, whose `.git` is a file, is followed too), and the workspace's sources (for the
//! `-dirty` mark). `git status` runs with `--no-optional-locks`: a plain `git status` refreshes
//! and rewrites the index, which would make every next build rerun this script and recompile
//! refbench for nothing.
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The file git keeps `name` in (`HEAD`, `index`, `refs/heads/main`, ...), made absolute.
fn git_path(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(run("git", &["rev-parse", "--git-path", name])?);
    Some(if p.is_absolute() {
        p
    } else {
        std::env::current_dir().ok()?.join(p)
    })
}

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = run(&rustc, &["--version"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=REFBENCH_RUSTC={version}");
    let commit =
        run("git", &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = run(
        "git",
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
        ],
    )
    .map(|s| !s.is_empty())
    .unwrap_or(false);
    println!(
        "cargo:rustc-env=REFBENCH_GIT={}{}",
        commit,
        if dirty { "-dirty" } else { "" }
    );
    println!("cargo:rerun-if-changed=build.rs");
    let branch = run("git", &["symbolic-ref", "-q", "HEAD"]);
    let watched = ["HEAD", "index", "packed-refs"]
        .into_iter()
        .chain(branch.as_deref())
        .filter_map(git_path);
    for p in watched.filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    // The sources whose edits make the tree dirty (an edit there recompiles refbench anyway,
    // since it depends on every crate).
    for p in ["../../crates", "../../Cargo.toml", "../../Cargo.lock"] {
        if Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
