//! What [`Domain::memory`] and [`Object::memory`] report against what the global allocator
//! handed out for them: this binary's allocator counts the bytes live on each thread.

#![cfg(not(loom))]

use oplog::{CounterLog, Domain, Object, OpVec};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

std::thread_local! {
    /// Bytes allocated and not yet freed by this thread (frees of another thread's blocks
    /// count where they are made; the checks below allocate and free on one thread).
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn count(bytes: isize) {
    // `try_with`: the allocator may be called while the thread's locals are torn down.
    let _ = LIVE.try_with(|l| l.set(l.get() + bytes));
}

// SAFETY: every call is forwarded to `System` unchanged; only a counter is updated beside.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: as in `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The bytes `f` leaves allocated on this thread, and what it returns.
fn allocated<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = LIVE.with(Cell::get);
    let r = f();
    (r, (LIVE.with(Cell::get) - before) as usize)
}

/// A domain's memory is every byte it allocated: its header (in its `Arc`), one CPU slot per
/// possible CPU (each padded to its own cache lines), and the tables made; an object's is its
/// handle plus the bytes it allocated (its core and pending bits).
fn memory_is_what_was_allocated<L: oplog::Log>(op: impl Fn() -> L::Op, target: L::Target) {
    // Whatever the first domain allocates once per process (the count of possible CPUs, the
    // per-CPU mode) is allocated here, not counted below.
    drop(Domain::<L>::with_config(8, 4));
    let (d, bytes) = allocated(|| Domain::<L>::with_config(64, 4));
    assert_eq!(d.memory(), bytes, "a domain with no table");
    let (r, tables) = allocated(|| d.try_allocate_tables());
    r.expect("memory");
    assert_eq!(
        d.memory(),
        bytes + tables,
        "a domain with every CPU's table"
    );
    let (o, object) = allocated(|| Object::new(&d, target));
    assert_eq!(o.memory(), std::mem::size_of::<Object<L>>() + object);
    o.log(op());
    drop(o.synchronize());
    assert_eq!(d.memory(), bytes + tables);
}

#[test]
fn a_counter_domains_memory_is_what_it_allocated() {
    memory_is_what_was_allocated::<CounterLog>(|| 1, 0);
}

struct Push(u64);
impl oplog::Op for Push {
    type Target = Vec<u64>;
    fn exec(self, v: &mut Vec<u64>) {
        v.push(self.0);
    }
}

#[test]
fn a_plain_logs_domains_memory_is_what_it_allocated() {
    memory_is_what_was_allocated::<OpVec<Push>>(|| Push(1), Vec::new());
}
