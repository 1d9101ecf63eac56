//! The C API (`paygo.h`, in the package `paygo-c`: `crates/paygo-c/include/paygo.h`): the
//! paper's user-level interface (§5) over one process-wide domain, with per-thread anchor
//! information.
//!
//! * Objects embed a `paygo_obj_t` (a [`CObj`]: a magic word and a [`Header`]);
//!   `paygo_obj_init` writes the magic (the constant [`MAGIC`] xor the object's address, so a
//!   copied or uninitialised object is not mistaken for one), and every call checks it;
//!   `paygo_obj_init` itself refuses memory that holds a live object (`PAYGO_ELIVE`), and
//!   `paygo_obj_destroy` clears the magic, so a destroyed object can be initialised again.
//! * `paygo_ref(obj)` takes a reference and records its anchor in the calling thread's anchor
//!   information: a map from object address to the anchors the thread holds (a thread may hold
//!   several references to one object, taken on different CPUs). `paygo_unref(obj)` gives back
//!   one of them, preferring one taken on the current CPU (home path).
//! * When a thread exits, the anchors it still holds are given back and counted
//!   ([`paygo_leftovers_released`]), as the paper's task exit does. The anchor information
//!   lives in a `pthread` key whose destructor gives them back, so references taken during
//!   thread teardown (in thread-local destructors, or in other keys' destructors that run
//!   before ours) are given back too; a `paygo_ref` after our destructor ran is refused with
//!   `PAYGO_ESHUTDOWN`. The library's unloading deletes the key (`delete_key`), so a thread
//!   that exits after `dlclose` does not call the destructor, which went with the library.
//! * Misuse returns a negative `paygo_error` and changes nothing. No Rust panic crosses the
//!   boundary: every entry point catches one and returns `PAYGO_EINTERNAL`.
//! * State changes are single compare-and-swaps: of two threads that reinit or destroy one
//!   object, one succeeds.

use crate::arc::{
    default_domain_if_made, init_default_domain, try_default_domain, DefaultDomainError,
};
use crate::get::GetError;
use crate::header::{DEAD, DESTROYED, RECLAIMING};
use crate::{Anchor, Config, Domain, Header, ReclaimError};
use core::cell::{Cell, RefCell};
use core::pin::Pin;
use percpu::cancel::NoCancel;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

// The codes: `PAYGO_EINVAL`, `PAYGO_ENOMEM` and `PAYGO_EBUSY` equal `-EINVAL`, `-ENOMEM` and
// `-EBUSY`, errno's codes of the same meaning; the library's own codes are -2000 and below,
// never an errno (Linux's end at 133) nor one of `pagecache.h`'s
// own (-1000 to -1999), as libpagecache exports both interfaces.

/// Success.
pub const PAYGO_OK: i32 = 0;
/// A null or misaligned pointer (an object, or `paygo_stats`' out), or an invalid configuration.
pub const PAYGO_EINVAL: i32 = -22;
/// The pointer is not an initialised paygo object (its magic word is wrong).
pub const PAYGO_ENOTOBJ: i32 = -2000;
/// The calling thread holds no reference to the object (unref without a matching ref).
pub const PAYGO_ENOREF: i32 = -2001;
/// The object has been reclaimed (dead): no reference can be taken or given back.
pub const PAYGO_EDEAD: i32 = -2002;
/// try-reclaim or destroy: the object is referenced, or another thread is reclaiming it;
/// obj_init: another thread is reclaiming the object.
pub const PAYGO_EBUSY: i32 = -16;
/// reinit: the object is live (only a reclaimed object can be made live again); obj_init: the
/// object is initialised and live (only a reclaimed or destroyed one can be initialised again).
pub const PAYGO_ELIVE: i32 = -2003;
/// The domain was already set up (explicitly, or implicitly by a first call).
pub const PAYGO_EALREADY: i32 = -2004;
/// The calling thread is exiting (its anchor information is gone), or `libpaygo.so` was
/// unloaded (its pthread key deleted).
pub const PAYGO_ESHUTDOWN: i32 = -2005;
/// domain_init, or the first call that makes the default domain: its tables could not be
/// allocated; ref: the anchor information, or the room on an overflow list for the entry it
/// had to evict, could not be; try-reclaim or destroy: the kernel had no memory for the
/// reclaim's asymmetric fence (`membarrier(2)` answered `ENOMEM` 100 times; nothing changed).
pub const PAYGO_ENOMEM: i32 = -12;
/// An internal error (a Rust panic, caught at the boundary): a bug, or a try-reclaim or
/// destroy whose asymmetric fence the kernel refused otherwise than for want of memory
/// (`membarrier(2)` answered `EPERM`, from a seccomp filter, 100 times); nothing was changed.
pub const PAYGO_EINTERNAL: i32 = -2006;

/// Runs an entry point's body, turning a panic into `err`. The panic's payload is dropped
/// where a panic of its own drop is caught too (and its payload leaked): dropped in the entry
/// point, a payload whose drop panics would unwind out of the `extern "C"` function, which
/// aborts the process.
fn boundary<R>(err: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        if let Err(again) = catch_unwind(AssertUnwindSafe(|| drop(payload))) {
            core::mem::forget(again);
        }
        err
    })
}

/// The magic value (xor the object's address) of an initialised object.
pub const MAGIC: u64 = 0x5041_5947_4f4f_424a; // "PAYGOOBJ"

/// The C object header, `paygo_obj_t` (48 bytes, 8-aligned, opaque to C).
#[repr(C)]
pub struct CObj {
    magic: AtomicU64,
    hdr: Header,
}

const _: () = assert!(core::mem::size_of::<CObj>() <= 48);
const _: () = assert!(core::mem::align_of::<CObj>() <= 8);

/// Statistics (`paygo_stats_t`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CStats {
    /// UNREFs that took the anchor path.
    pub anchor_puts: u64,
    /// UNREFs that found their entry evicted (overflow list).
    pub overflow_puts: u64,
    /// Entries evicted to overflow lists.
    pub evictions: u64,
    /// REFs that claimed a free slot.
    pub claims: u64,
    /// Successful try-reclaims, and destroys of live objects.
    pub reclaims: u64,
    /// References released at thread exit.
    pub leftovers_released: u64,
    /// Bytes of the per-CPU tables.
    pub table_bytes: u64,
    /// Bytes held by overflow lists now.
    pub overflow_bytes: u64,
}

static LEFTOVERS: AtomicU64 = AtomicU64::new(0);

/// The process-wide domain, made with the default configuration by the first call that
/// needs it: `PAYGO_ENOMEM` if its tables cannot be allocated (nothing is made then, and a
/// later call tries again).
#[inline]
fn domain() -> Result<&'static Domain, i32> {
    match default_domain_if_made() {
        Some(d) => Ok(d),
        None => make_domain(),
    }
}

/// [`domain`]'s first call: makes the default domain with the thread's cancellation disabled
/// (`NoCancel`), since sizing it reads sysfs (`percpu::possible_cpus`: `open`, `read` and
/// `close`, cancellation points).
#[cold]
#[inline(never)]
fn make_domain() -> Result<&'static Domain, i32> {
    let _no_cancel = NoCancel::new();
    try_default_domain().map_err(|e| match e {
        crate::ConfigError::OutOfMemory { .. } => PAYGO_ENOMEM,
        // The default configuration is valid.
        crate::ConfigError::SlotsPerCpu(_) | crate::ConfigError::Window(_) => PAYGO_EINTERNAL,
    })
}

/// A thread's anchor information: object address -> anchors held.
#[derive(Default)]
struct AnchorInfo {
    held: RefCell<HashMap<usize, Held>>,
}

/// The anchors a thread holds on one object, by the CPU whose table counted each: an UNREF
/// finds one of its current CPU's among a few groups (one per CPU the thread took references
/// on), however many references the thread holds, also after a migration.
#[derive(Default)]
struct Held {
    /// (CPU, anchors counted there): no group is empty, and a `Held` without groups is not
    /// kept.
    groups: Vec<(usize, Vec<Anchor>)>,
    /// Room that [`Held::reserve`] made for the first anchor of a new group.
    spare: Vec<Anchor>,
}

impl Held {
    /// Takes one anchor, counted on `cpu` if any is, else of the group that came last; `None`
    /// where none is held.
    fn take(&mut self, cpu: usize) -> Option<Anchor> {
        let groups = &mut self.groups;
        let k = groups
            .iter()
            .position(|g| g.0 == cpu)
            .or_else(|| groups.len().checked_sub(1))?;
        let a = groups[k].1.pop();
        if groups[k].1.is_empty() {
            groups.swap_remove(k);
        }
        a
    }

    /// Room for one more anchor of `cpu` (in its group, or a new group and its first room),
    /// without aborting where memory is short.
    fn reserve(&mut self, cpu: usize) -> Result<(), i32> {
        let room = match self.groups.iter_mut().find(|g| g.0 == cpu) {
            Some(g) => g.1.try_reserve(1),
            None => self
                .groups
                .try_reserve(1)
                .and_then(|()| self.spare.try_reserve(1)),
        };
        room.map_err(|_| PAYGO_ENOMEM)
    }

    /// Adds `a`, for which [`Held::reserve`] made room on the CPU it was then on: allocates
    /// only where `a` was counted on another CPU (the thread migrated in between) whose
    /// group has no room, and fails only there, with `a` handed back.
    fn push(&mut self, a: Anchor) -> Result<(), Anchor> {
        let cpu = a.cpu();
        match self.groups.iter_mut().find(|g| g.0 == cpu) {
            Some(g) => {
                if g.1.try_reserve(1).is_err() {
                    return Err(a);
                }
                g.1.push(a)
            }
            None => {
                let mut v = core::mem::take(&mut self.spare);
                if v.try_reserve(1).is_err() || self.groups.try_reserve(1).is_err() {
                    self.spare = v;
                    return Err(a);
                }
                v.push(a);
                self.groups.push((cpu, v));
            }
        }
        Ok(())
    }

    fn into_anchors(self) -> impl Iterator<Item = Anchor> {
        self.groups.into_iter().flat_map(|g| g.1)
    }
}

impl AnchorInfo {
    /// Gives back every anchor held (the thread is exiting).
    fn release_all(&self) {
        let held = core::mem::take(&mut *self.held.borrow_mut());
        // Anchors are only taken in the domain, so a thread that holds any finds it made.
        let Some(d) = default_domain_if_made() else {
            return;
        };
        for (addr, anchors) in held {
            let obj = addr as *const CObj;
            // SAFETY: the thread holds references to the object, so (by the API's contract)
            // its memory is still there; the magic check catches one destroyed meanwhile.
            // Acquire: pairs with the Release store of the magic in `paygo_obj_init`.
            let ok = unsafe { (*obj).magic.load(Ordering::Acquire) } == MAGIC ^ addr as u64;
            if !ok {
                continue;
            }
            // SAFETY: as above; the header does not move while it is referenced.
            let hdr = unsafe { Pin::new_unchecked(&(*obj).hdr) };
            interruption_point();
            for a in anchors.into_anchors() {
                d.put(hdr, a);
                LEFTOVERS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

std::thread_local! {
    /// Set once the thread's anchor information was released at its exit: later calls are
    /// refused. A const thread-local without destructor, so it can be read at any point of
    /// the thread's teardown.
    static RELEASED: Cell<bool> = const { Cell::new(false) };

    /// How many calls of the thread are using its anchor information, or may hold a lock of
    /// the domain (READ-ALL, try-reclaim and destroy hold the object's stripe lock), now: more
    /// than one where a signal handler's call interrupted another, which is then refused (see
    /// [`Using::interrupts`]): a REF or UNREF, and a READ-ALL, try-reclaim or destroy, which
    /// would wait for the stripe lock the interrupted call may hold. Const, without
    /// destructor, as `RELEASED`.
    static USING: Cell<u32> = const { Cell::new(0) };
}

/// A call's use of its thread's anchor information (or of the domain's locks), counted in
/// `USING` while it lives.
struct Using;

impl Using {
    fn enter() -> Using {
        USING.with(|u| u.set(u.get() + 1));
        // SeqCst compiler fence: the count is up before the anchor information is looked up,
        // as a signal handler of this thread that reads it (`free_info_if_empty`) sees; pairs
        // with the fence of `drop`, before which the information's use ends. Within one
        // thread a compiler fence is enough.
        compiler_fence(Ordering::SeqCst);
        Using
    }

    /// Whether this use interrupted another call of the thread that uses its anchor
    /// information or the domain's locks (this one runs in a signal handler): such a call is
    /// refused, since the interrupted one may be anywhere between reading the key's value and
    /// setting it (or freeing the information), and would then lose what this one records,
    /// or may hold a lock (an object's stripe lock, or its flag while it reclaims it) that
    /// this one would wait for for ever.
    fn interrupts(&self) -> bool {
        USING.with(|u| u.get()) > 1
    }
}

/// Whether a REF or an UNREF interrupted another call of its thread that uses its anchor
/// information or the domain's locks (it runs in a signal handler; see [`Using::interrupts`]),
/// the thread's references not yet released at its exit: such a call is refused
/// (`PAYGO_EINTERNAL`) before it looks at the domain or the key, as `paygo.h` says it changes
/// nothing, where a REF would make the default domain (allocating its tables in the handler,
/// and fixing its size) or the library's key. A call that interrupted the release at exit goes
/// on, to be refused with `PAYGO_ESHUTDOWN` (changing nothing: the domain and the key are made
/// by then, as the thread held references).
fn interrupts_a_call() -> bool {
    USING.with(|u| u.get()) > 0 && !RELEASED.try_with(|r| r.get()).unwrap_or(true)
}

impl Drop for Using {
    fn drop(&mut self) {
        // SeqCst compiler fence: the anchor information's use ends before the count comes
        // down (pairs with the fence of `enter`).
        compiler_fence(Ordering::SeqCst);
        USING.with(|u| u.set(u.get() - 1));
    }
}

/// Where a signal handler's call may interrupt a call of the same thread between two of its
/// steps: a unit test runs its stand-in for the handler there (`tests::INTERRUPT`); nothing
/// otherwise.
#[inline(always)]
pub(crate) fn interruption_point() {
    // `try_with`: also at the release of the thread's exit, after its thread-locals with
    // destructors (as `INTERRUPT`) are gone.
    #[cfg(test)]
    if let Some(handler) = tests::INTERRUPT.try_with(Cell::take).ok().flatten() {
        handler();
    }
}

/// The `pthread` key holding each thread's `AnchorInfo` (a `Box` pointer), made by the first
/// call that needs it (see [`key`]). glibc runs key destructors after the thread-local
/// destructors, and again while a destructor sets a key, so a reference taken in either is
/// still released.
static KEY: OnceLock<libc::pthread_key_t> = OnceLock::new();

/// Set when [`KEY`] has been deleted (see [`delete_key`]): calls no longer use it, since its
/// number may be handed to another key.
static KEY_DELETED: AtomicBool = AtomicBool::new(false);

/// [`KEY`], made if needed: `PAYGO_ENOMEM` if it cannot be made now (the process has
/// `PTHREAD_KEYS_MAX` keys, or no memory), and the next call tries again; `PAYGO_ESHUTDOWN`
/// once it has been deleted.
fn key() -> Result<libc::pthread_key_t, i32> {
    match made_key()? {
        Some(k) => Ok(k),
        None => make_key(),
    }
}

/// [`KEY`] if it has been made (`None` if not yet), or `PAYGO_ESHUTDOWN` once it has been
/// deleted.
fn made_key() -> Result<Option<libc::pthread_key_t>, i32> {
    // Relaxed: the deletion runs while the library is unloaded, when no call may run (the
    // unload contract, paygo.h), or at process exit. A call that races the exit's deletion
    // and misses the flag finds its thread's value gone (glibc checks the key's sequence
    // number) and its pthread_setspecific refused (PAYGO_ENOMEM), unless a key made during
    // the exit took the number in between: no call of this library makes one then.
    if KEY_DELETED.load(Ordering::Relaxed) {
        return Err(PAYGO_ESHUTDOWN);
    }
    Ok(KEY.get().copied())
}

/// Makes a key and publishes it as [`KEY`]; of threads that make one at once, the first to
/// publish wins and the others delete theirs, so every thread uses one key. A failure is not
/// remembered: `pthread_key_create` fails with `EAGAIN` while the process holds
/// `PTHREAD_KEYS_MAX` keys, which it may give back.
#[cold]
#[inline(never)]
fn make_key() -> Result<libc::pthread_key_t, i32> {
    let mut k: libc::pthread_key_t = 0;
    // SAFETY: `k` is writable; the destructor is a valid extern "C" function.
    if unsafe { libc::pthread_key_create(&mut k, Some(release_at_exit)) } != 0 {
        return Err(PAYGO_ENOMEM);
    }
    // `OnceLock::set` publishes with Release and `get` reads with Acquire (its own pairing):
    // what `pthread_key_create` wrote in glibc's key table happens before another thread's
    // use of the number it reads from `KEY`.
    match KEY.set(k) {
        Ok(()) => Ok(k),
        Err(mine) => {
            // SAFETY: `mine` was made above and never published, so no thread has a value for
            // it and no one else deletes it.
            unsafe { libc::pthread_key_delete(mine) };
            // `set` failed because the cell is initialised (it waits for an initialisation in
            // progress): `get` is `Some`.
            KEY.get().copied().ok_or(PAYGO_EINTERNAL)
        }
    }
}

/// Deletes [`KEY`], so that no thread that exits later calls its destructor: run by the
/// dynamic loader when it unloads the library (`dlclose` runs the functions of the library's
/// `.fini_array` before unmapping it), where a thread exiting after the unload would call
/// [`release_at_exit`] in unmapped memory. After `pthread_key_delete` glibc calls no
/// destructor for the key's values (a thread's value no longer matches the key's sequence
/// number); what threads still held is not released, and their anchor information is not
/// freed (the domain goes with the library).
///
/// Not where the library is linked into the main program (`libpaygo.a`): the program's
/// `.fini_array` runs only at process exit, which unmaps nothing while it runs, and there the
/// deletion made every later `paygo_ref` and `paygo_unref` fail with `PAYGO_ESHUTDOWN`: those
/// of the program's own ELF destructors (run after the library's) and of threads still
/// running. Also run at the exit of a process that loaded `libpaygo.so`, where it has that
/// effect on calls made after it (paygo.h says so).
extern "C" fn delete_key() {
    if in_main_program() {
        return;
    }
    if let Some(&k) = KEY.get() {
        // Relaxed: see `key`.
        KEY_DELETED.store(true, Ordering::Relaxed);
        // SAFETY: `k` is the key `make_key` published, deleted only here (once: the loader
        // runs the function once per load of the library, and each load has its own statics).
        unsafe { libc::pthread_key_delete(k) };
    }
}

/// Whether this code is part of the main program (linked from `libpaygo.a`, into a
/// dynamically or a statically linked program), not of a shared library: [`delete_key`] lies
/// in a loadable segment of the first object that `dl_iterate_phdr` visits, which is the main
/// program. (`dladdr` would not do: it finds no object at all in a statically linked program,
/// which would take the library for a shared one and delete the key at exit.) `false` where that object cannot be read (the key is then
/// deleted, which is always safe).
fn in_main_program() -> bool {
    /// `dl_iterate_phdr`'s callback, for the first object only (it returns 1, which ends the
    /// walk): whether the address in `*data` lies in one of the object's `PT_LOAD` segments,
    /// into `*data` (non-zero: yes).
    ///
    /// # Safety
    /// `info` is `dl_iterate_phdr`'s description of an object; `data` points to a `usize`.
    // `u64::from` of the ELF class's fields: u64 on a 64-bit target, u32 on a 32-bit one.
    #[allow(clippy::useless_conversion)]
    unsafe extern "C" fn in_first(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut core::ffi::c_void,
    ) -> libc::c_int {
        let at = data.cast::<usize>();
        // SAFETY: `data` is the `usize` that `in_main_program` passed, which this thread alone
        // uses during the walk.
        let addr = unsafe { at.read() } as u64;
        // SAFETY: `dl_iterate_phdr` passes a valid description of a loaded object.
        let info = unsafe { &*info };
        let mut inside = false;
        if !info.dlpi_phdr.is_null() {
            // SAFETY: the object's program headers, `dlpi_phnum` of them, mapped with it.
            let headers =
                unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
            inside = headers.iter().any(|h| {
                h.p_type == libc::PT_LOAD
                    && addr
                        .wrapping_sub(u64::from(info.dlpi_addr).wrapping_add(u64::from(h.p_vaddr)))
                        < u64::from(h.p_memsz)
            });
        }
        // SAFETY: as above.
        unsafe { at.write(usize::from(inside)) };
        1
    }
    let mut data = delete_key as *const () as usize;
    // SAFETY: the callback reads `data` and writes it back, and never unwinds. The walk's lock
    // (glibc's `dl_load_write_lock`, recursive) is not held by the loader while it runs
    // `.fini_array` functions (at `dlclose`, at the exit), so the walk does not wait there.
    let walked =
        unsafe { libc::dl_iterate_phdr(Some(in_first), core::ptr::addr_of_mut!(data).cast()) };
    // The callback's 1 ends the walk and is its result; 0: no object was visited.
    walked == 1 && data == 1
}

/// [`delete_key`] among the library's ELF destructors.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".fini_array"]
static DELETE_KEY_AT_UNLOAD: extern "C" fn() = delete_key;

/// Frees the calling thread's anchor information if it holds no reference and is not in use
/// (by a call this one interrupted), and clears the thread's value of the key: its exit then
/// runs no code of the library. A later REF makes it again. Runs under the caller's `using`,
/// so that a call from a signal handler that interrupts it is refused (see
/// [`Using::interrupts`]) and records nothing in the information it is about to free.
fn free_info_if_empty(using: &Using) {
    if KEY_DELETED.load(Ordering::Relaxed) {
        return;
    }
    if using.interrupts() {
        return;
    }
    let Some(&k) = KEY.get() else {
        return;
    };
    // SAFETY: `k` is a valid key.
    let p = unsafe { libc::pthread_getspecific(k) } as *mut AnchorInfo;
    if p.is_null() {
        return;
    }
    {
        // SAFETY: the thread's own pointer, live until its key destructor runs (or this
        // function frees it), neither of which can happen during this call.
        let info = unsafe { &*p };
        // Not borrowed: no other call of the thread uses it (`using` is the only use).
        match info.held.try_borrow() {
            Ok(held) if held.is_empty() => {}
            _ => return,
        }
    }
    interruption_point();
    // SAFETY: `k` is a valid key; clearing a value the thread has set allocates nothing.
    if unsafe { libc::pthread_setspecific(k, core::ptr::null()) } != 0 {
        return;
    }
    // SAFETY: a `Box<AnchorInfo>` pointer set by `with_info`, no longer the key's value and
    // used by no other call (checked above; one that interrupts this one from now on is
    // refused before it reads the key's value): ours to free.
    drop(unsafe { Box::from_raw(p) });
}

/// The key's destructor: gives back what the exiting thread still holds.
extern "C" fn release_at_exit(p: *mut core::ffi::c_void) {
    let _ = RELEASED.try_with(|r| r.set(true));
    // Counted as a use: a signal handler's call that interrupts the release (whose put may
    // hold the object's stripe lock) is refused.
    let _using = Using::enter();
    boundary((), || {
        // SAFETY: the key's values are only ever `Box<AnchorInfo>` pointers set by
        // `with_info`; glibc hands each to us once, at the thread's exit.
        let info = unsafe { Box::from_raw(p as *mut AnchorInfo) };
        info.release_all();
    })
}

/// A new, empty `AnchorInfo` on the heap (to be freed as a `Box`), or `None` if the
/// allocation fails: `Box::new` would abort the process, which no call of the C API may do.
/// Made with the thread's cancellation disabled (`NoCancel`): the map's hasher takes the
/// thread's random keys, which std reads, at the thread's first hasher, with `getrandom(2)`,
/// a cancellation point of glibc (a pending `pthread_cancel` acted on there would unwind the
/// thread into the boundary's `catch_unwind`, and glibc would abort the process).
fn new_info() -> Option<*mut AnchorInfo> {
    let _no_cancel = NoCancel::new();
    let layout = core::alloc::Layout::new::<AnchorInfo>();
    // SAFETY: `AnchorInfo` is not zero-sized (a RefCell of a HashMap).
    let p = unsafe { std::alloc::alloc(layout) } as *mut AnchorInfo;
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a fresh allocation of `AnchorInfo`'s layout, as `Box` makes one, so
    // `Box::from_raw` may free it.
    unsafe { p.write(AnchorInfo::default()) };
    Some(p)
}

/// The anchor information's map, borrowed for one call: `PAYGO_EINTERNAL` if it is borrowed
/// already (a call that interrupted another of the same thread is refused before it gets
/// here, see [`Using::interrupts`]; this is the second line of that defence).
fn held(i: &AnchorInfo) -> Result<core::cell::RefMut<'_, HashMap<usize, Held>>, i32> {
    i.held.try_borrow_mut().map_err(|_| PAYGO_EINTERNAL)
}

/// Runs `f` on the calling thread's anchor information (made on first use).
fn with_info<R>(f: impl FnOnce(&AnchorInfo) -> R) -> Result<R, i32> {
    if RELEASED.try_with(|r| r.get()).unwrap_or(true) {
        return Err(PAYGO_ESHUTDOWN);
    }
    let k = key()?;
    let using = Using::enter();
    if using.interrupts() {
        return Err(PAYGO_EINTERNAL);
    }
    // SAFETY: `k` is a valid key.
    let mut p = unsafe { libc::pthread_getspecific(k) } as *mut AnchorInfo;
    if p.is_null() {
        p = new_info().ok_or(PAYGO_ENOMEM)?;
        interruption_point();
        // SAFETY: `k` is a valid key and `p` a valid pointer.
        if unsafe { libc::pthread_setspecific(k, p as *const core::ffi::c_void) } != 0 {
            // SAFETY: not published: still ours.
            drop(unsafe { Box::from_raw(p) });
            return Err(PAYGO_ENOMEM);
        }
    }
    // SAFETY: the pointer is this thread's own, live until its key destructor runs, which
    // cannot happen during this call, or `paygo_prepare_unload` frees it, which it does not
    // while `using` counts this call.
    Ok(f(unsafe { &*p }))
}

/// Runs `f` on the calling thread's anchor information if the thread has some (`None` if not:
/// then it holds no reference), making nothing.
fn with_info_if_made<R>(f: impl FnOnce(&AnchorInfo) -> R) -> Result<Option<R>, i32> {
    if RELEASED.try_with(|r| r.get()).unwrap_or(true) {
        return Err(PAYGO_ESHUTDOWN);
    }
    let Some(k) = made_key()? else {
        return Ok(None);
    };
    let using = Using::enter();
    if using.interrupts() {
        return Err(PAYGO_EINTERNAL);
    }
    // SAFETY: `k` is a valid key.
    let p = unsafe { libc::pthread_getspecific(k) } as *const AnchorInfo;
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the pointer is this thread's own, live until its key destructor runs, which
    // cannot happen during this call, or `paygo_prepare_unload` frees it, which it does not
    // while `using` counts this call.
    Ok(Some(f(unsafe { &*p })))
}

/// Checks the pointer and the magic; the pinned header.
///
/// # Safety
/// `obj` is null or points to readable memory of at least `sizeof(paygo_obj_t)` bytes.
unsafe fn check<'a>(obj: *const CObj) -> Result<Pin<&'a Header>, i32> {
    if obj.is_null() || !obj.is_aligned() {
        return Err(PAYGO_EINVAL);
    }
    // SAFETY: the caller guarantees readable memory, aligned (checked); the magic is read
    // atomically. Acquire: pairs with the Release store of the magic in `paygo_obj_init` (the
    // header it publishes is seen initialised).
    let m = unsafe { (*obj).magic.load(Ordering::Acquire) };
    if m != MAGIC ^ obj as u64 {
        return Err(PAYGO_ENOTOBJ);
    }
    // SAFETY: an initialised object; C objects do not move while initialised (documented).
    Ok(unsafe { Pin::new_unchecked(&(*obj).hdr) })
}

/// `code`, or `PAYGO_ENOTOBJ` if the object is destroyed: for a call refused by the object's
/// state, which may be the destroyed state where a `paygo_obj_destroy` finished after
/// [`check`] read the magic (the state never leaves it but by `paygo_obj_init`).
fn unless_destroyed(hdr: Pin<&Header>, code: i32) -> i32 {
    // Relaxed: only the state's value is needed; the call was refused by it already.
    if hdr.state(Ordering::Relaxed) == DESTROYED {
        PAYGO_ENOTOBJ
    } else {
        code
    }
}

/// [`check`]'s pinned header of `obj` and the process-wide [`domain`], or the code of the
/// first of the two that fails.
///
/// # Safety
/// As [`check`].
unsafe fn object<'a>(obj: *const CObj) -> Result<(Pin<&'a Header>, &'static Domain), i32> {
    // SAFETY: forwarded contract.
    let hdr = unsafe { check(obj) }?;
    Ok((hdr, domain()?))
}

/// [`Domain::try_reclaim_detailed`] with the thread's cancellation disabled (`NoCancel`): the
/// reclaim's asymmetric fence (`membarrier(2)` on the rseq path) fails where the kernel answers
/// `ENOMEM` 100 times (short of memory for its CPU mask): [`ReclaimError::NoMemory`], the object
/// live again (nothing decided), `PAYGO_ENOMEM`. Where the kernel refuses it otherwise (`EPERM`
/// from a seccomp filter) it panics, likewise with the object live again, and the panic's
/// message is written to stderr (`write`, a cancellation point: a pending `pthread_cancel`
/// acted on there would unwind the thread into the boundary's `catch_unwind`, and glibc would
/// abort the process). The panic then reaches the boundary: `PAYGO_EINTERNAL`, nothing
/// changed.
fn reclaim(d: &Domain, hdr: Pin<&Header>) -> Result<(), ReclaimError> {
    let _no_cancel = NoCancel::new();
    d.try_reclaim_detailed(hdr)
}

/// Sets up the process-wide domain. `slots_per_cpu` a power of two no larger than
/// [`crate::MAX_SLOTS_PER_CPU`], `1 <= window <= slots_per_cpu`; `PAYGO_EINVAL` otherwise
/// (whether or not the domain exists), `PAYGO_EALREADY` if the domain exists (also where
/// another thread made it while this call sized its tables), `PAYGO_ENOMEM` if the tables
/// cannot be allocated.
#[no_mangle]
pub extern "C" fn paygo_domain_init(slots_per_cpu: usize, window: usize) -> i32 {
    boundary(PAYGO_EINTERNAL, || {
        // Sizing the tables reads sysfs (cancellation points): see `NoCancel`.
        let _no_cancel = NoCancel::new();
        let cfg = Config {
            slots_per_cpu,
            window,
        };
        // A size refused is refused first, whether or not the domain exists.
        match init_default_domain(cfg) {
            Ok(_) => PAYGO_OK,
            Err(DefaultDomainError::Made(_)) => PAYGO_EALREADY,
            Err(DefaultDomainError::Config(crate::ConfigError::OutOfMemory { .. })) => PAYGO_ENOMEM,
            Err(DefaultDomainError::Config(_)) => PAYGO_EINVAL,
        }
    })
}

/// Initialises an object header (live, no reference). Memory that already holds this
/// address's magic (an initialised object) is accepted only if the object is dead (reclaimed:
/// its memory may be reused) or destroyed; an object that is live is refused with
/// `PAYGO_ELIVE`, one being reclaimed with `PAYGO_EBUSY`, and nothing changes: a re-init
/// would forget its references (a later try-reclaim would succeed while one is held, and its
/// unref get `PAYGO_EDEAD`). Fresh memory matches the magic ([`MAGIC`] xor the address) by
/// chance only if its 8 bytes equal that value; memory of an object freed live (never
/// reclaimed nor destroyed, against the contract) still holds it, and is refused.
///
/// # Safety
/// `obj` is null or points to readable and writable memory for a `paygo_obj_t` on which no
/// other call is in progress.
#[no_mangle]
pub unsafe extern "C" fn paygo_obj_init(obj: *mut CObj) -> i32 {
    if obj.is_null() || !obj.is_aligned() {
        return PAYGO_EINVAL;
    }
    boundary(PAYGO_EINTERNAL, || {
        // Fresh memory holds no value in the magic word: Valgrind's Memcheck would report the
        // comparison below inside the library (see `memcheck`). Its bytes are read as they
        // are: a value that is not this address's magic only lets the init go on.
        // (The magic is `CObj`'s first field: `repr(C)`.)
        memcheck::mark_defined(obj.cast::<u8>(), core::mem::size_of::<AtomicU64>());
        // SAFETY: the caller gives us readable memory, aligned (checked); the magic is read
        // atomically. Acquire: pairs with the Release store of the magic in a previous init.
        let m = unsafe { (*obj).magic.load(Ordering::Acquire) };
        if m == MAGIC ^ obj as u64 {
            // SAFETY: the magic says a previous init wrote the header beside it, and the
            // memory is still readable (the caller's contract).
            let hdr = unsafe { &(*obj).hdr };
            // Acquire: pairs with the Release store of DEAD by a reclaim's decision, as in
            // `paygo_obj_destroy`: the holders' accesses come before the new header.
            match hdr.state(Ordering::Acquire) {
                DEAD | DESTROYED => {}
                RECLAIMING => return PAYGO_EBUSY,
                _ => return PAYGO_ELIVE,
            }
        }
        // SAFETY: the caller gives us the memory; no other call uses it; an object there is
        // dead or destroyed (checked above), so no reference to it is held.
        unsafe {
            core::ptr::write(
                obj,
                CObj {
                    magic: AtomicU64::new(0),
                    hdr: Header::new(),
                },
            );
            // Release: pairs with the Acquire magic load in check().
            (*obj).magic.store(MAGIC ^ obj as u64, Ordering::Release);
        }
        PAYGO_OK
    })
}

/// Ends an object's life: reclaims it if live (`PAYGO_EBUSY` if referenced or being reclaimed,
/// and nothing changes), then moves it from dead to destroyed with one compare-and-swap and
/// clears the magic. Of two concurrent destroys one succeeds and the other gets
/// `PAYGO_ENOTOBJ` (or `PAYGO_EBUSY`); a reinit between the reclaim and that compare-and-swap
/// makes the destroy `PAYGO_EBUSY` (the object is live again, and may be referenced), and a
/// destroyed object takes no reinit, reference or reclaim. `PAYGO_ENOMEM` if the kernel had no
/// memory for the reclaim's asymmetric fence, `PAYGO_EINTERNAL` if it refused it otherwise
/// (see `reclaim`; nothing changed either way).
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_obj_destroy(obj: *mut CObj) -> i32 {
    boundary(PAYGO_EINTERNAL, || {
        // Counted as a use: a signal handler's call that interrupts it is refused, and so is
        // this call where it interrupted one (it would wait for a lock that one holds).
        let using = Using::enter();
        if using.interrupts() {
            return PAYGO_EINTERNAL;
        }
        // SAFETY: forwarded contract.
        let (hdr, d) = match unsafe { object(obj) } {
            Ok(o) => o,
            Err(e) => return e,
        };
        // The reclaim's asymmetric fence fails or panics where the kernel keeps refusing it:
        // see `reclaim`.
        match reclaim(d, hdr) {
            Ok(()) | Err(ReclaimError::Dead) => {}
            Err(ReclaimError::Referenced) => return PAYGO_EBUSY,
            Err(ReclaimError::NoMemory) => return PAYGO_ENOMEM,
            // Being reclaimed, or destroyed by a destroy that won after `check`.
            Err(ReclaimError::InProgress) => return unless_destroyed(hdr, PAYGO_EBUSY),
        }
        // Dead -> destroyed, one compare-and-swap: a reinit since the reclaim (after which a
        // reference may be held) makes it fail, and no reinit succeeds after it. Acquire:
        // pairs with the Release store of DEAD by the reclaim's decision (another thread's if
        // the object was dead already): the holders' accesses come before the caller's free.
        match hdr.cas_state(DEAD, DESTROYED, Ordering::Acquire) {
            Ok(()) => {}
            Err(DESTROYED) => return PAYGO_ENOTOBJ,
            Err(_) => return PAYGO_EBUSY,
        }
        // SAFETY: `check` read the magic through this pointer, and the compare-and-swap above
        // wrote the header beside it: the memory is the object's, which `paygo_obj_init` wrote
        // (readable and writable, as the store below needs).
        let magic = unsafe { &(*obj).magic };
        // Relaxed: the compare-and-swap above decided the destroy (only its winner gets here);
        // a call that still reads the old magic finds the object destroyed.
        magic.store(0, Ordering::Relaxed);
        PAYGO_OK
    })
}

/// REF: takes a reference (waits out a concurrent try-reclaim, as the paper's REF retries)
/// and records its anchor in the calling thread's anchor information. `PAYGO_ENOMEM`, having
/// taken nothing, if that information cannot be made or grow (or the `pthread` key that holds
/// it cannot be made: a later call tries again), or if the REF must evict an entry and its
/// overflow list's room cannot be allocated.
///
/// # Safety
/// `obj` is null or points to readable memory of a `paygo_obj_t`.
#[no_mangle]
pub unsafe extern "C" fn paygo_ref(obj: *mut CObj) -> i32 {
    boundary(PAYGO_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let hdr = match unsafe { check(obj) } {
            Ok(h) => h,
            Err(e) => return e,
        };
        if interrupts_a_call() {
            return PAYGO_EINTERNAL;
        }
        let d = match domain() {
            Ok(d) => d,
            Err(e) => return e,
        };
        // Room for the anchor is made first, under the one borrow of the call: a thread that
        // cannot record a reference (no memory, or a call it interrupted holds the map) takes
        // none.
        let r = with_info(|i| {
            let mut held = held(i)?;
            let addr = obj as usize;
            held.try_reserve(1).map_err(|_| PAYGO_ENOMEM)?;
            let mut fresh = Held::default();
            let v = match held.get_mut(&addr) {
                Some(v) => v,
                None => &mut fresh,
            };
            v.reserve(percpu::current_cpu())?;
            let a = d.get_or_wait_fallible(hdr).map_err(|e| match e {
                GetError::NotLive => unless_destroyed(hdr, PAYGO_EDEAD),
                GetError::NoMemory => PAYGO_ENOMEM,
            })?;
            let v = match held.get_mut(&addr) {
                Some(v) => v,
                None => &mut fresh,
            };
            // Fails only where the thread migrated between the room made and the get, to a
            // CPU whose group has no room, and none can be had: the reference is given back,
            // and the call took none.
            if let Err(a) = v.push(a) {
                d.put(hdr, a);
                return Err(PAYGO_ENOMEM);
            }
            if !fresh.groups.is_empty() {
                held.insert(addr, fresh);
            }
            Ok(())
        });
        match r.and_then(|r| r) {
            Ok(()) => PAYGO_OK,
            Err(e) => e,
        }
    })
}

/// UNREF: gives back one of the calling thread's references to `obj` (one taken on the
/// current CPU if there is one). `PAYGO_ENOREF` if the thread holds none: a thread without
/// anchor information gets it having made none.
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_unref(obj: *mut CObj) -> i32 {
    boundary(PAYGO_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let hdr = match unsafe { check(obj) } {
            Ok(h) => h,
            Err(e) => return e,
        };
        if interrupts_a_call() {
            return PAYGO_EINTERNAL;
        }
        // No domain yet: no reference was ever taken (this thread's would have made it first),
        // nor the object reclaimed or destroyed. Refused without making one, which would fix
        // the domain's size (a later `paygo_domain_init` then gets `PAYGO_EALREADY`) or fail
        // with `PAYGO_ENOMEM` for an unref that holds nothing.
        let Some(d) = default_domain_if_made() else {
            return unless_destroyed(hdr, PAYGO_ENOREF);
        };
        if hdr.is_dead() {
            return PAYGO_EDEAD;
        }
        let cpu = percpu::current_cpu();
        // A thread without anchor information holds no reference: nothing is made for it (its
        // making could fail, an error UNREF does not document).
        let given = with_info_if_made(|i| {
            let a = {
                let mut held = held(i)?;
                let Some(v) = held.get_mut(&(obj as usize)) else {
                    return Ok(false);
                };
                let Some(a) = v.take(cpu) else {
                    return Ok(false);
                };
                if v.groups.is_empty() {
                    held.remove(&(obj as usize));
                }
                a
            };
            interruption_point();
            // Given back while the call still counts as using the thread's anchor information:
            // a signal handler's REF or UNREF that interrupts the put is refused, where it could
            // wait for ever for the object's stripe lock, which the put holds on its overflow
            // path (for an eviction, or an UNREF on that path, of an object of the stripe).
            d.put(hdr, a);
            Ok(true)
        });
        match given.and_then(|g| g.unwrap_or(Ok(false))) {
            Ok(true) => PAYGO_OK,
            Ok(false) => unless_destroyed(hdr, PAYGO_ENOREF),
            Err(e) => e,
        }
    })
}

/// READ-ALL: the number of references (>= 0), or a negative error. Only reads the object
/// (`const paygo_obj_t *` in `paygo.h`, as [`paygo_is_referenced`]): its header is read through
/// a shared reference, and the domain's stripe lock it takes lives in the domain.
///
/// The count is read at 0 where [`Domain::read_all`] reads it below zero: that happens only
/// while REFs and UNREFs run (its sum takes an entry's local counter before its anchor
/// counter, so a REF and its UNREF from another CPU that both fall between the two loads count
/// -1), and a negative count would read as an error code (-16 as `PAYGO_EBUSY`, -2000 as
/// `PAYGO_ENOTOBJ`, ...).
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_read_all(obj: *const CObj) -> i64 {
    boundary(PAYGO_EINTERNAL as i64, || {
        // Counted as a use: a signal handler's call that interrupts it is refused, and so is
        // this call where it interrupted one (it would wait for a lock that one holds).
        let using = Using::enter();
        if using.interrupts() {
            return PAYGO_EINTERNAL as i64;
        }
        // SAFETY: forwarded contract.
        match unsafe { object(obj) } {
            Ok((h, d)) => d.read_all(h).max(0),
            Err(e) => e as i64,
        }
    })
}

/// 1 if some reference exists, 0 if none, or a negative error (early-exit READ-ALL). Only
/// reads the object, as [`paygo_read_all`].
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_is_referenced(obj: *const CObj) -> i32 {
    boundary(PAYGO_EINTERNAL, || {
        // Counted as a use: a signal handler's call that interrupts it is refused, and so is
        // this call where it interrupted one (it would wait for a lock that one holds).
        let using = Using::enter();
        if using.interrupts() {
            return PAYGO_EINTERNAL;
        }
        // SAFETY: forwarded contract.
        match unsafe { object(obj) } {
            Ok((h, d)) => d.is_referenced(h) as i32,
            Err(e) => e,
        }
    })
}

/// Try-reclaim: `PAYGO_OK` if the object had no reference (it is now dead), `PAYGO_EBUSY` if
/// it is referenced or being reclaimed by another thread (nothing changed), `PAYGO_EDEAD` if
/// it was already dead (also when another reclaim finished during the call), `PAYGO_ENOMEM` if
/// the kernel had no memory for its asymmetric fence, `PAYGO_EINTERNAL` if it refused it
/// otherwise (see `reclaim`; nothing changed either way).
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_try_reclaim(obj: *mut CObj) -> i32 {
    boundary(PAYGO_EINTERNAL, || {
        // Counted as a use: a signal handler's call that interrupts it is refused, and so is
        // this call where it interrupted one (it would wait for a lock that one holds).
        let using = Using::enter();
        if using.interrupts() {
            return PAYGO_EINTERNAL;
        }
        // SAFETY: forwarded contract.
        let (hdr, d) = match unsafe { object(obj) } {
            Ok(o) => o,
            Err(e) => return e,
        };
        match reclaim(d, hdr) {
            Ok(()) => PAYGO_OK,
            Err(ReclaimError::Dead) => PAYGO_EDEAD,
            Err(ReclaimError::Referenced) => PAYGO_EBUSY,
            Err(ReclaimError::NoMemory) => PAYGO_ENOMEM,
            Err(ReclaimError::InProgress) => unless_destroyed(hdr, PAYGO_EBUSY),
        }
    })
}

/// Makes a reclaimed object live again (`PAYGO_ELIVE` if it is not dead). One
/// compare-and-swap: of two concurrent reinits, one succeeds; a reinit never disturbs a
/// reclaim in progress.
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_reinit(obj: *mut CObj) -> i32 {
    boundary(PAYGO_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let hdr = match unsafe { check(obj) } {
            Ok(h) => h,
            Err(e) => return e,
        };
        // `Domain::try_reinit` without a domain, none being made: a reinit counts nothing (an
        // object is dead only after a reclaim, which made it), so a refused one
        // (`PAYGO_ELIVE`) does not fix the domain's size.
        if hdr.try_revive() {
            PAYGO_OK
        } else {
            unless_destroyed(hdr, PAYGO_ELIVE)
        }
    })
}

/// Prepares the calling thread for `dlclose` of the library: clears its rseq area's pointer to
/// the last critical section's descriptor (which lives in the library), and frees its anchor
/// information if it holds no reference, so that its exit runs no code of the library. Every
/// thread that used the library must call it before the library is unloaded; a later call
/// re-arms both. (The unloading deletes the key itself: see `delete_key`.)
#[no_mangle]
pub extern "C" fn paygo_prepare_unload() -> i32 {
    boundary(PAYGO_EINTERNAL, || {
        // Counted as a use from the start: a signal handler's REF that interrupts the rseq
        // step is refused, where its critical section would point the thread at a descriptor
        // in the library again.
        let using = Using::enter();
        percpu::prepare_unload();
        interruption_point();
        free_info_if_empty(&using);
        PAYGO_OK
    })
}

/// How many references threads still held when they exited (released for them).
#[no_mangle]
pub extern "C" fn paygo_leftovers_released() -> u64 {
    LEFTOVERS.load(Ordering::Relaxed)
}

/// Fills `*out` with the domain's statistics. `PAYGO_EINVAL` (nothing written) if `out` is
/// null or misaligned for a `paygo_stats_t`, as for an object pointer.
///
/// # Safety
/// `out` is null, misaligned, or points to writable memory for a `paygo_stats_t`.
#[no_mangle]
pub unsafe extern "C" fn paygo_stats(out: *mut CStats) -> i32 {
    // A misaligned `out` is refused, not written: `write` requires an aligned pointer (a
    // misaligned one is undefined behaviour).
    if out.is_null() || !out.is_aligned() {
        return PAYGO_EINVAL;
    }
    boundary(PAYGO_EINTERNAL, || {
        let d = match domain() {
            Ok(d) => d,
            Err(e) => return e,
        };
        let s = d.stats();
        let m = d.memory_usage();
        // SAFETY: the caller gives writable memory.
        unsafe {
            out.write(CStats {
                anchor_puts: s.anchor_puts,
                overflow_puts: s.overflow_puts,
                evictions: s.evictions,
                claims: s.claims,
                reclaims: s.reclaims,
                leftovers_released: LEFTOVERS.load(Ordering::Relaxed),
                table_bytes: m.table_bytes as u64,
                overflow_bytes: m.overflow_bytes as u64,
            })
        };
        PAYGO_OK
    })
}

/// A static, NUL-terminated description of an error code.
#[no_mangle]
pub extern "C" fn paygo_strerror(code: i32) -> *const core::ffi::c_char {
    let s: &'static core::ffi::CStr = match code {
        PAYGO_OK => c"success",
        PAYGO_EINVAL => c"null or misaligned pointer, or invalid argument",
        PAYGO_ENOTOBJ => c"not an initialised paygo object",
        PAYGO_ENOREF => c"this thread holds no reference to the object",
        PAYGO_EDEAD => c"the object has been reclaimed",
        PAYGO_EBUSY => c"the object is referenced or being reclaimed",
        PAYGO_ELIVE => c"the object is live",
        PAYGO_EALREADY => c"the domain is already set up",
        PAYGO_ESHUTDOWN => c"the calling thread is exiting, or libpaygo.so was unloaded",
        PAYGO_ENOMEM => {
            c"out of memory (for the domain, the thread's anchor information, an overflow list, or the kernel's membarrier(2) of a reclaim)"
        }
        PAYGO_EINTERNAL => {
            c"internal error (a bug in libpaygo), a call that interrupted another of its thread, or a membarrier(2) the kernel refused otherwise than for want of memory; nothing was changed"
        }
        _ => c"unknown paygo error",
    };
    s.as_ptr()
}

mod memcheck;
#[cfg(test)]
mod tests;
