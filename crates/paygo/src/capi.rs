//! The C API (`include/paygo.h`): the paper's user-level interface (§5) over one process-wide
//! domain, with per-thread anchor information.
//!
//! * Objects embed a `paygo_obj_t` (a [`CObj`]: a magic word and a [`Header`]);
//!   `paygo_obj_init` writes the magic (the constant [`MAGIC`] xor the object's address, so a
//!   copied or uninitialised object is not mistaken for one), and every call checks it.
//! * `paygo_ref(obj)` takes a reference and records its anchor in the calling thread's anchor
//!   information: a map from object address to the anchors the thread holds (a thread may hold
//!   several references to one object, taken on different CPUs). `paygo_unref(obj)` gives back
//!   one of them, preferring one taken on the current CPU (home path).
//! * When a thread exits, the anchors it still holds are given back and counted
//!   ([`paygo_leftovers_released`]), as the paper's task exit does.
//! * Misuse returns a negative `paygo_error` and changes nothing.

use crate::{Anchor, Config, Domain, Header};
use core::pin::Pin;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Success.
pub const PAYGO_OK: i32 = 0;
/// A null pointer, or an invalid configuration.
pub const PAYGO_EINVAL: i32 = -22;
/// The pointer is not an initialised paygo object (its magic word is wrong).
pub const PAYGO_ENOTOBJ: i32 = -2;
/// The calling thread holds no reference to the object (unref without a matching ref).
pub const PAYGO_ENOREF: i32 = -61;
/// The object has been reclaimed (dead): no reference can be taken or given back.
pub const PAYGO_EDEAD: i32 = -43;
/// try-reclaim or destroy: the object is referenced, or another thread is reclaiming it.
pub const PAYGO_EBUSY: i32 = -16;
/// reinit: the object is live (only a reclaimed object can be made live again).
pub const PAYGO_ELIVE: i32 = -17;
/// The domain was already set up (explicitly, or implicitly by a first call).
pub const PAYGO_EALREADY: i32 = -114;
/// The calling thread is exiting: its anchor information is gone.
pub const PAYGO_ESHUTDOWN: i32 = -108;

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
    /// Successful try-reclaims.
    pub reclaims: u64,
    /// References released at thread exit.
    pub leftovers_released: u64,
    /// Bytes of the per-CPU tables.
    pub table_bytes: u64,
    /// Bytes held by overflow lists now.
    pub overflow_bytes: u64,
}

static DOMAIN: OnceLock<Domain> = OnceLock::new();
static LEFTOVERS: AtomicU64 = AtomicU64::new(0);

fn domain() -> &'static Domain {
    DOMAIN.get_or_init(Domain::new)
}

/// A thread's anchor information: object address -> anchors held.
struct AnchorInfo {
    held: RefCell<HashMap<usize, Vec<Anchor>>>,
}

impl Drop for AnchorInfo {
    fn drop(&mut self) {
        let held = core::mem::take(&mut *self.held.borrow_mut());
        let d = domain();
        for (addr, anchors) in held {
            let obj = addr as *const CObj;
            // SAFETY: the thread holds references to the object, so (by the API's contract) its
            // memory is still there; the magic check catches one destroyed meanwhile.
            let ok = unsafe { (*obj).magic.load(Ordering::Acquire) } == MAGIC ^ addr as u64;
            if !ok {
                continue;
            }
            // SAFETY: as above; the header does not move while it is referenced.
            let hdr = unsafe { Pin::new_unchecked(&(*obj).hdr) };
            for a in anchors {
                d.unref(hdr, a);
                LEFTOVERS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

std::thread_local! {
    static INFO: AnchorInfo = AnchorInfo { held: RefCell::new(HashMap::new()) };
}

/// Checks the pointer and the magic; the pinned header.
///
/// # Safety
/// `obj` is null or points to readable memory of at least `sizeof(paygo_obj_t)` bytes.
unsafe fn check<'a>(obj: *const CObj) -> Result<Pin<&'a Header>, i32> {
    if obj.is_null() {
        return Err(PAYGO_EINVAL);
    }
    // SAFETY: the caller guarantees readable memory; the magic is read atomically.
    let m = unsafe { (*obj).magic.load(Ordering::Acquire) };
    if m != MAGIC ^ obj as u64 {
        return Err(PAYGO_ENOTOBJ);
    }
    // SAFETY: an initialised object; C objects do not move while initialised (documented).
    Ok(unsafe { Pin::new_unchecked(&(*obj).hdr) })
}

/// Sets up the process-wide domain. `slots_per_cpu` a power of two, `1 <= window <=
/// slots_per_cpu`.
#[no_mangle]
pub extern "C" fn paygo_domain_init(slots_per_cpu: usize, window: usize) -> i32 {
    if !slots_per_cpu.is_power_of_two() || window == 0 || window > slots_per_cpu {
        return PAYGO_EINVAL;
    }
    let mut fresh = false;
    DOMAIN.get_or_init(|| {
        fresh = true;
        Domain::with_config(Config {
            slots_per_cpu,
            window,
        })
    });
    if fresh {
        PAYGO_OK
    } else {
        PAYGO_EALREADY
    }
}

/// Initialises an object header (live, no reference).
///
/// # Safety
/// `obj` is null or points to writable memory for a `paygo_obj_t` that is not in use.
#[no_mangle]
pub unsafe extern "C" fn paygo_obj_init(obj: *mut CObj) -> i32 {
    if obj.is_null() {
        return PAYGO_EINVAL;
    }
    // SAFETY: the caller gives us the memory; nothing else uses it.
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
}

/// Ends an object's life: reclaims it if live (`PAYGO_EBUSY` if referenced, and nothing
/// changes), then clears the magic.
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_obj_destroy(obj: *mut CObj) -> i32 {
    // SAFETY: forwarded contract.
    let hdr = match unsafe { check(obj) } {
        Ok(h) => h,
        Err(e) => return e,
    };
    if !hdr.is_dead() && !domain().try_reclaim(hdr) {
        return PAYGO_EBUSY;
    }
    // SAFETY: obj is an initialised object (checked); dead, so unreferenced.
    unsafe {
        (*obj).magic.store(0, Ordering::Release);
        core::ptr::drop_in_place(&mut (*obj).hdr);
    }
    PAYGO_OK
}

/// REF: takes a reference (waits out a concurrent try-reclaim, as the paper's REF retries)
/// and records its anchor in the calling thread's anchor information.
///
/// # Safety
/// `obj` is null or points to readable memory of a `paygo_obj_t`.
#[no_mangle]
pub unsafe extern "C" fn paygo_ref(obj: *mut CObj) -> i32 {
    // SAFETY: forwarded contract.
    let hdr = match unsafe { check(obj) } {
        Ok(h) => h,
        Err(e) => return e,
    };
    let d = domain();
    let Some(a) = d.ref_or_wait(hdr) else {
        return PAYGO_EDEAD;
    };
    let mut a = Some(a);
    let r = INFO.try_with(|i| {
        i.held
            .borrow_mut()
            .entry(obj as usize)
            .or_default()
            .push(a.take().unwrap());
    });
    match r {
        Ok(()) => PAYGO_OK,
        Err(_) => {
            if let Some(a) = a {
                d.unref(hdr, a);
            }
            PAYGO_ESHUTDOWN
        }
    }
}

/// UNREF: gives back one of the calling thread's references to `obj` (one taken on the
/// current CPU if there is one).
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_unref(obj: *mut CObj) -> i32 {
    // SAFETY: forwarded contract.
    let hdr = match unsafe { check(obj) } {
        Ok(h) => h,
        Err(e) => return e,
    };
    if hdr.is_dead() {
        return PAYGO_EDEAD;
    }
    let cpu = percpu::current_cpu();
    let taken = INFO.try_with(|i| {
        let mut held = i.held.borrow_mut();
        let v = held.get_mut(&(obj as usize))?;
        let k = v
            .iter()
            .rposition(|a| a.cpu() == cpu)
            .unwrap_or(v.len() - 1);
        let a = v.swap_remove(k);
        if v.is_empty() {
            held.remove(&(obj as usize));
        }
        Some(a)
    });
    match taken {
        Ok(Some(a)) => {
            domain().unref(hdr, a);
            PAYGO_OK
        }
        Ok(None) => PAYGO_ENOREF,
        Err(_) => PAYGO_ESHUTDOWN,
    }
}

/// READ-ALL: the number of references (>= 0), or a negative error.
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_read_all(obj: *mut CObj) -> i64 {
    // SAFETY: forwarded contract.
    match unsafe { check(obj) } {
        Ok(h) => domain().read_all(h),
        Err(e) => e as i64,
    }
}

/// 1 if some reference exists, 0 if none, or a negative error (early-exit READ-ALL).
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_is_referenced(obj: *mut CObj) -> i32 {
    // SAFETY: forwarded contract.
    match unsafe { check(obj) } {
        Ok(h) => domain().is_referenced(h) as i32,
        Err(e) => e,
    }
}

/// Try-reclaim: `PAYGO_OK` if the object had no reference (it is now dead), `PAYGO_EBUSY` if
/// it is referenced or being reclaimed by another thread (nothing changed), `PAYGO_EDEAD` if
/// it was already dead.
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_try_reclaim(obj: *mut CObj) -> i32 {
    // SAFETY: forwarded contract.
    let hdr = match unsafe { check(obj) } {
        Ok(h) => h,
        Err(e) => return e,
    };
    if hdr.is_dead() {
        return PAYGO_EDEAD;
    }
    if domain().try_reclaim(hdr) {
        PAYGO_OK
    } else {
        PAYGO_EBUSY
    }
}

/// Makes a reclaimed object live again (`PAYGO_ELIVE` if it is not dead).
///
/// # Safety
/// As [`paygo_ref`].
#[no_mangle]
pub unsafe extern "C" fn paygo_reinit(obj: *mut CObj) -> i32 {
    // SAFETY: forwarded contract.
    let hdr = match unsafe { check(obj) } {
        Ok(h) => h,
        Err(e) => return e,
    };
    if !hdr.is_dead() {
        return PAYGO_ELIVE;
    }
    domain().reinit(hdr);
    PAYGO_OK
}

/// How many references threads still held when they exited (released for them).
#[no_mangle]
pub extern "C" fn paygo_leftovers_released() -> u64 {
    LEFTOVERS.load(Ordering::Relaxed)
}

/// Fills `*out` with the domain's statistics.
///
/// # Safety
/// `out` is null or points to writable memory for a `paygo_stats_t`.
#[no_mangle]
pub unsafe extern "C" fn paygo_stats(out: *mut CStats) -> i32 {
    if out.is_null() {
        return PAYGO_EINVAL;
    }
    let d = domain();
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
}

/// A static, NUL-terminated description of an error code.
#[no_mangle]
pub extern "C" fn paygo_strerror(code: i32) -> *const core::ffi::c_char {
    let s: &'static core::ffi::CStr = match code {
        PAYGO_OK => c"success",
        PAYGO_EINVAL => c"null pointer or invalid argument",
        PAYGO_ENOTOBJ => c"not an initialised paygo object",
        PAYGO_ENOREF => c"this thread holds no reference to the object",
        PAYGO_EDEAD => c"the object has been reclaimed",
        PAYGO_EBUSY => c"the object is referenced or being reclaimed",
        PAYGO_ELIVE => c"the object is live",
        PAYGO_EALREADY => c"the domain is already set up",
        PAYGO_ESHUTDOWN => c"the calling thread is exiting",
        _ => c"unknown paygo error",
    };
    s.as_ptr()
}
