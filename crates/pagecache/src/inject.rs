//! Test builds: allocation failure injected at the allocation points of code that must leave
//! nothing behind when an allocation fails (LODIC's `map`, a fill): the calling thread arms
//! it (`fail_allocation`), and the `n`-th point it reaches from then on fails. A point of an
//! allocation that reports failure (`try_reserve`) reports it; a point of one that cannot
//! panics, as such an allocation does under `-Zoom=panic` or an allocation error hook that
//! panics. And pauses: a thread arms one (`pause_at_next`) and runs it at the next
//! [`pause_point`] it reaches, so that a test can let another thread act at that point of a
//! call (an open between its checks of the file and its listing). And short writes: a thread
//! arms one (`fail_write_after`), and its direct writes' `pwrite`s write that many bytes in
//! all, then fail. Other builds inject nothing, at no cost.

#[cfg(all(test, not(loom)))]
std::thread_local! {
    /// The calling thread's failure to inject: the point that fails, counted from 0 among
    /// those reached since it was armed; `None` once it failed, or when none is armed.
    static ALLOC_FAULT: core::cell::Cell<Option<u32>> = const { core::cell::Cell::new(None) };
}

/// Arms the calling thread's injection: the `n`-th allocation point it reaches fails.
#[cfg(all(test, not(loom)))]
pub(crate) fn fail_allocation(n: u32) {
    ALLOC_FAULT.with(|a| a.set(Some(n)));
}

/// Disarms the calling thread's injection: whether the failure was injected (else no point
/// was reached often enough).
#[cfg(all(test, not(loom)))]
pub(crate) fn disarm() -> bool {
    ALLOC_FAULT.with(|a| a.replace(None)).is_none()
}

/// An allocation point: `true` where the failure is injected here and the allocation reports
/// failure (`fallible`: the caller then fails as if it had); a panic where it is injected and
/// the allocation cannot report failure.
#[cfg(all(test, not(loom)))]
pub(crate) fn alloc_fails(fallible: bool) -> bool {
    let fail = ALLOC_FAULT.with(|a| match a.get() {
        Some(0) => {
            a.set(None);
            true
        }
        Some(k) => {
            a.set(Some(k - 1));
            false
        }
        None => false,
    });
    if fail && !fallible {
        panic!("pagecache: injected allocation failure");
    }
    fail
}

/// Other builds: no failure is injected.
#[cfg(not(all(test, not(loom))))]
#[inline(always)]
pub(crate) fn alloc_fails(_fallible: bool) -> bool {
    false
}

/// The point of an allocation that cannot report failure: panics where one is injected.
#[inline(always)]
pub(crate) fn alloc_point() {
    let _ = alloc_fails(false);
}

#[cfg(all(test, not(loom)))]
std::thread_local! {
    /// The calling thread's pause: run, once, at the next pause point it reaches.
    static PAUSE: core::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { core::cell::RefCell::new(None) };
}

/// Arms the calling thread's pause: `f` runs at the next [`pause_point`] it reaches.
#[cfg(all(test, not(loom)))]
pub(crate) fn pause_at_next(f: impl FnOnce() + 'static) {
    PAUSE.with(|p| *p.borrow_mut() = Some(Box::new(f)));
}

/// A pause point: runs the calling thread's armed pause, if any (test builds; others
/// nothing).
#[inline(always)]
pub(crate) fn pause_point() {
    #[cfg(all(test, not(loom)))]
    if let Some(f) = PAUSE.with(|p| p.borrow_mut().take()) {
        f();
    }
}

#[cfg(all(test, not(loom)))]
std::thread_local! {
    /// The calling thread's short write: the bytes its direct writes may still write before
    /// the next `pwrite` fails; `None` when none is armed.
    static SHORT_WRITE: core::cell::Cell<Option<usize>> = const { core::cell::Cell::new(None) };
}

/// Arms the calling thread's short write: its direct writes write `n` bytes in all (the
/// `pwrite` that reaches the `n`-th byte is cut there), and the next `pwrite` fails.
#[cfg(all(test, not(loom)))]
pub(crate) fn fail_write_after(n: usize) {
    SHORT_WRITE.with(|w| w.set(Some(n)));
}

/// A direct write's point before a `pwrite` of `len` bytes: how many of them it may write
/// (`Some(0)`: it fails) where a short write is armed; `None` (all) elsewhere. A failure
/// disarms it. The bytes count once written ([`wrote`]): a `pwrite` that the system cuts
/// shorter still (Miri's file shim cuts writes at random) leaves the rest for the next.
#[cfg(all(test, not(loom)))]
pub(crate) fn write_room(len: usize) -> Option<usize> {
    SHORT_WRITE.with(|w| {
        let left = w.get()?;
        if left == 0 {
            w.set(None);
        }
        Some(left.min(len))
    })
}

/// A direct write's point after a `pwrite` that wrote `n` bytes: counts them against an armed
/// short write.
#[cfg(all(test, not(loom)))]
pub(crate) fn wrote(n: usize) {
    SHORT_WRITE.with(|w| {
        if let Some(left) = w.get() {
            w.set(Some(left.saturating_sub(n)));
        }
    })
}

/// Other builds: every `pwrite` writes what it is given.
#[cfg(not(all(test, not(loom))))]
#[inline(always)]
pub(crate) fn write_room(_len: usize) -> Option<usize> {
    None
}

/// Other builds: nothing to count.
#[cfg(not(all(test, not(loom))))]
#[inline(always)]
pub(crate) fn wrote(_n: usize) {}
