//! Valgrind's Memcheck told that bytes `paygo_obj_init` reads on purpose are defined.
//!
//! `paygo_obj_init` reads the magic word of the memory it is given, to refuse a live object
//! (`PAYGO_ELIVE`). Fresh memory (`malloc`, the stack) holds no value there, and Memcheck
//! reports the comparison with the magic as "conditional jump or move depends on
//! uninitialised value(s)" inside the library, in every C program that initialises an object
//! in memory it has not cleared: the documented use. The word is marked defined first
//! (`VALGRIND_MAKE_MEM_DEFINED`, a client request), which changes no byte; its bytes are then
//! whatever the memory held, and the init overwrites them.
//!
//! A client request is a sequence of instructions that does nothing on a real CPU (four
//! rotations of `rdi` by 128 bits in all, then `xchg rbx, rbx`) and that Valgrind recognises
//! (`valgrind.h`, x86-64 Linux): a few cycles per call outside Valgrind. It is written here
//! because the crates that offer client requests build their bindings from Valgrind's headers
//! (with `bindgen` and libclang, or a C compiler and the headers installed), which a machine
//! that builds this library need not have. Elsewhere (other architectures, Miri, loom) it
//! does nothing.

/// `VG_USERREQ_TOOL_BASE('M', 'C') + 2`: `VALGRIND_MAKE_MEM_DEFINED` (`memcheck.h`).
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
const MAKE_MEM_DEFINED: u64 = ((b'M' as u64) << 24 | (b'C' as u64) << 16) + 2;

/// Tells Memcheck that the `len` bytes at `addr` hold defined values (their bits are
/// unchanged); nothing where the program does not run under Valgrind.
#[inline]
pub(super) fn mark_defined(addr: *const u8, len: usize) {
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
    {
        // The request's words: the request, its five arguments (`valgrind.h`).
        let args: [u64; 6] = [MAKE_MEM_DEFINED, addr as u64, len as u64, 0, 0, 0];
        let mut result: u64 = 0;
        // SAFETY: on a CPU the sequence rotates `rdi` by 3 + 13 + 61 + 51 = 128 bits (back to
        // its value, which is declared clobbered all the same), which sets the flags, and
        // exchanges `rbx` with itself: it changes no memory and no other register. Under
        // Valgrind it reads the six words at `rax` (alive for the block) and writes the result
        // to `rdx`; the request changes Memcheck's shadow state only, no byte of the program's
        // memory. The block is not `readonly`: the compiler then keeps the caller's later
        // reads of the marked bytes after it (a read moved before the request would load
        // undefined bits all the same).
        unsafe {
            core::arch::asm!(
                "rol rdi, 3",
                "rol rdi, 13",
                "rol rdi, 61",
                "rol rdi, 51",
                "xchg rbx, rbx",
                in("rax") args.as_ptr(),
                inout("rdx") result,
                out("rdi") _,
                options(nostack),
            );
        }
        let _ = result;
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom))))]
    let _ = (addr, len);
}
