//! The folders of test files that the file-system experiments make, removed when dropped (at
//! the end of a run, or by a panic's unwinding) and on an interrupt (SIGINT, SIGTERM, SIGHUP),
//! whose handler removes every folder still listed and exits with 130. Without it, an
//! interrupted run would leave its files behind, on tmpfs (in memory) where there is one: a
//! gigabyte for `lodic-query`. A process killed outright (SIGKILL, an abort) still leaves them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The folders alive now.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The environment variable that names the folder in which the file-system experiments make
/// theirs (default: `/dev/shm` where it is a folder, else the system's temporary folder).
pub const DIR_ENV: &str = "REFBENCH_TMPDIR";

/// A new, empty folder for test files, removed when the value is dropped, and by the interrupt
/// handler ([`install`]) if refbench is interrupted first.
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    /// Makes the folder in [`DIR_ENV`]'s folder, else `/dev/shm`, else the temporary folder.
    /// Errors: the folder cannot be made (where `DIR_ENV` names no writable folder, say).
    pub fn new() -> std::io::Result<Scratch> {
        let b = tempfile::Builder::new().prefix("refbench-fs-").to_owned();
        let dir = match std::env::var_os(DIR_ENV) {
            Some(p) => b.tempdir_in(&p).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot make a folder in {} ({DIR_ENV}): {e}",
                        Path::new(&p).display()
                    ),
                )
            })?,
            None => {
                let shm = Path::new("/dev/shm");
                match shm.is_dir().then(|| b.tempdir_in(shm).ok()).flatten() {
                    Some(d) => d,
                    None => b.tempdir()?,
                }
            }
        };
        lock().push(dir.path().to_path_buf());
        Ok(Scratch(dir))
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mut live = lock();
        if let Some(i) = live.iter().position(|p| p == self.0.path()) {
            live.swap_remove(i);
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic while the list is held leaves it whole: each change is one push or remove.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Installs the interrupt handler (once; later calls do nothing). Returns whether it is in
/// place.
pub fn install() -> bool {
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DONE.get_or_init(|| {
        ctrlc::set_handler(|| {
            // An interrupted thread may hold the list's lock, for one push or remove: the
            // handler runs on a thread of its own (ctrlc's), so it only waits for that.
            let live = lock().clone();
            for p in &live {
                let _ = std::fs::remove_dir_all(p);
            }
            eprintln!(
                "refbench: interrupted; removed {} folder(s) of test files",
                live.len()
            );
            std::process::exit(130);
        })
        .is_ok()
    })
}
