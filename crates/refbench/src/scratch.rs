//! The folders of test files that the file-system experiments make (and the one the C loop of
//! `ceiling` is built in), removed when dropped (at
//! the end of a run, or by a panic's unwinding) and on an interrupt (SIGINT, SIGTERM, SIGHUP),
//! whose handler removes every folder still listed and exits with 130. Without it, an
//! interrupted run would leave its files behind, on tmpfs (in memory) where there is one: a
//! gigabyte for `lodic-query`. A process killed outright (SIGKILL, an abort) still leaves them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The folders alive now.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The files being written now beside results ([`Partial`]): the interrupt handler removes
/// them with the folders. Taken after [`LIVE`] where both are (the handler), never before.
static PARTIAL: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A file being written whole beside the file it will be renamed over
/// ([`crate::output::write_whole`]: the results, the plots, the reports): listed for the
/// interrupt handler from [`Partial::create`] to the drop, so that an interrupt while it is
/// written removes it. Without it, an interrupt while `--out`'s results or `report`'s REPORT.md
/// were written left a hidden `.NAME.refbench-PID` in the results' folder, and another one with
/// every run so cut.
pub struct Partial(PathBuf);

impl Partial {
    /// Makes (or truncates) `path` for writing and lists it, both under the list's lock, which
    /// the interrupt handler holds from the moment it starts until the process exits: no file
    /// is made after the handler removed those listed.
    pub fn create(path: &Path) -> std::io::Result<(Partial, std::fs::File)> {
        let mut listed = partial();
        let f = std::fs::File::create(path)?;
        listed.push(path.to_path_buf());
        Ok((Partial(path.to_path_buf()), f))
    }
}

impl Drop for Partial {
    /// Unlists the file (renamed over its destination or removed by then).
    fn drop(&mut self) {
        let mut p = partial();
        if let Some(i) = p.iter().position(|x| *x == self.0) {
            p.swap_remove(i);
        }
    }
}

fn partial() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // As `lock`: each change is one push or remove.
    PARTIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The environment variable that names the folder in which the file-system experiments make
/// theirs (default: `/dev/shm` where it is a folder, else the system's temporary folder).
pub const DIR_ENV: &str = "REFBENCH_TMPDIR";

/// The parent folder [`DIR_ENV`]'s value names, if any: an empty value names none (it would
/// name the working folder), as an empty `TMPDIR` names none.
fn chosen_parent(v: Option<std::ffi::OsString>) -> Option<std::ffi::OsString> {
    v.filter(|p| !p.is_empty())
}

/// A new, empty folder for test files, removed when the value is dropped, and by the interrupt
/// handler ([`install`]) if refbench is interrupted first.
///
/// The folder is made, listed, emptied and unlisted, and its files made ([`Scratch::create`]),
/// each under the list's lock, which the handler holds from the moment it starts until the
/// process exits: so every folder it has not removed is in its list, and no file appears in a
/// folder after it began removing it.
pub struct Scratch(Option<tempfile::TempDir>);

impl Scratch {
    /// Makes the folder in [`DIR_ENV`]'s folder, else `/dev/shm`, else the temporary folder
    /// (an empty `DIR_ENV` counts as unset, as an empty `TMPDIR` does: it would otherwise name
    /// the working folder).
    /// Errors: the folder cannot be made (where `DIR_ENV` names no writable folder, say).
    pub fn new() -> std::io::Result<Scratch> {
        let mut live = lock();
        let b = tempfile::Builder::new().prefix("refbench-fs-").to_owned();
        let dir = match chosen_parent(std::env::var_os(DIR_ENV)) {
            Some(p) => b.tempdir_in(&p).map_err(|e| {
                // `e` names the folder it tried to make inside `p`; where `p` itself is
                // missing or no folder, its own error says why without a second path.
                let why = match std::fs::metadata(&p) {
                    Err(m) => m.to_string(),
                    Ok(m) if !m.is_dir() => "not a folder".to_string(),
                    Ok(_) => e.to_string(),
                };
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot make a folder in {} ({DIR_ENV}): {why}",
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
        live.push(dir.path().to_path_buf());
        Ok(Scratch(Some(dir)))
    }

    /// A new, empty folder named `prefix` and a random tail for a program refbench builds and
    /// runs (the C loop), in the system's temporary folder (not `/dev/shm`, which systems may
    /// mount without the right to run programs); removed as [`Scratch::new`]'s are.
    /// Errors: the folder cannot be made.
    pub fn for_program(prefix: &str) -> std::io::Result<Scratch> {
        let mut live = lock();
        let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
        live.push(dir.path().to_path_buf());
        Ok(Scratch(Some(dir)))
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.0.as_ref().expect("the folder until the drop").path()
    }

    /// Creates (or truncates) the file `name` in the folder, for writing.
    pub fn create(&self, name: &str) -> std::io::Result<std::fs::File> {
        let _live = lock();
        std::fs::File::create(self.path().join(name))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mut live = lock();
        if let Some(dir) = self.0.take() {
            if let Some(i) = live.iter().position(|p| p == dir.path()) {
                live.swap_remove(i);
            }
            let _ = dir.close();
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
            // Another thread may hold the list's lock, for one folder or file made or removed:
            // the handler runs on a thread of its own (ctrlc's), so it only waits for that.
            // It keeps the lock until the process exits, so that no file or folder is made
            // behind it.
            let live = lock();
            for p in live.iter() {
                let _ = std::fs::remove_dir_all(p);
            }
            // Kept until the exit too: a file listed after this would not be removed. A write
            // that completes meanwhile renames its file first (then it is not there to remove)
            // or finds it removed (then its rename fails, and the earlier file stays).
            let partial = partial();
            for p in partial.iter() {
                let _ = std::fs::remove_file(p);
            }
            // What it removed, where it removed anything: a run that made no test files (a
            // counting experiment, `report`) was said to have removed "0 folder(s)" of them.
            let mut removed = String::new();
            if !live.is_empty() {
                removed += &format!("; removed {} folder(s) of test files", live.len());
            }
            if !partial.is_empty() {
                removed += &format!("; removed {} partly written file(s)", partial.len());
            }
            crate::say!("refbench: interrupted{removed}");
            std::process::exit(130);
        })
        .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_tmpdir_variable_names_no_folder() {
        assert_eq!(chosen_parent(None), None);
        assert_eq!(chosen_parent(Some("".into())), None);
        assert_eq!(
            chosen_parent(Some("/var/tmp".into())),
            Some("/var/tmp".into())
        );
    }
}
