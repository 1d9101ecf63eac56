//! The `meta` block names the commit the binary was built from (`build.rs`), in a plain clone
//! and in a linked worktree alike.

use std::process::Command;

#[test]
fn meta_names_the_checked_out_commit() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let Some(head) = head else {
        percpu::testing::skip("not a git checkout, or no git: the commit cannot be compared");
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_refbench"))
        .args([
            "run",
            "single-object",
            "--schemes",
            "atomic",
            "--threads",
            "1",
        ])
        .args(["--duration-ms", "5", "--reps", "1", "--format", "json"])
        .output()
        .expect("refbench runs");
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let commit = v["meta"]["git_commit"].as_str().expect("meta.git_commit");
    assert_eq!(
        commit.strip_suffix("-dirty").unwrap_or(commit),
        head,
        "meta.git_commit is not HEAD: build.rs did not rerun after a commit"
    );
}
