/*
 * pagecache.h: a page cache over real files, its frames counted by a reference counting scheme
 * chosen by name at run time, the C interface.
 *
 * A cache holds at most memory_limit_pages frames of 4096 bytes. Files are opened through it
 * and read and written with the shape of pread(2)/pwrite(2): a read of a cached page copies
 * from its frame under a reference of the cache's counting scheme ("paygo", "atomic",
 * "percpu-ref", "refcache", ...); a miss fills a frame with one read of the file (with up to 32
 * following pages when the reads are sequential: readahead); writes go into the frames and are
 * written back by pagecache_sync(), by eviction (CLOCK, when no frame is free) and by
 * pagecache_drop_cache(). A file grows through the cache (writes past its end, or
 * pagecache_set_len), and its new pages are cached as the others.
 *
 * Linking: libpagecache.a (and -lpthread -ldl -lm -lrt -lgcc_s) or libpagecache.so, both built
 * by `cargo build --release -p paygo-pagecache-c` (under target/release/). A fully static
 * program (cc -static) drops -lgcc_s, which has no static archive (`cannot find -lgcc_s`):
 * libpagecache.a -lpthread -ldl -lm -lrt; the linker then warns that the Rust runtime's
 * getaddrinfo and getpwuid_r need glibc's shared libraries at run time, which is harmless: the
 * library never calls them (no name lookup, no home directory). The static library
 * carries its own Rust runtime, so it is not linked together with another Rust static library
 * such as libpaygo.a; it exports paygo.h's functions as well (PAYGO's process-wide domain,
 * separate from the caches' counters), so a program that needs both links libpagecache alone.
 * A first program: crates/pagecache-c/tests/c/quickstart.c of the repository, built and run
 * as crates/pagecache-c/README.md shows.
 * Before dlclose() of libpagecache.so, every thread that used it calls
 * pagecache_prepare_unload(), and the program closes every file and frees every cache: no
 * handle outlives the library (a "refcache" cache left alive also keeps its epoch thread
 * running, and with it the library loaded). The library is unmapped only by a dlclose() that
 * comes after the threads that used it have exited: a thread still running then (the calling
 * one included) holds thread-local data of the library (its record of handles in use, its
 * pagecache_last_error message) whose destructors glibc must run at that thread's exit, so
 * dlclose() returns 0 and leaves the library mapped, harmlessly (a later dlopen() gets that
 * copy back, whose dlclose() once those threads exited unmaps it). A thread that used paygo.h's
 * functions of the library follows paygo.h's unload procedure too (paygo_prepare_unload(),
 * which frees the thread's anchor information, so that its exit runs no code of the library).
 *
 * Errors: every function that can fail returns a negative code, and nothing else is negative:
 *   - the library's own codes (pagecache_error): PAGECACHE_EINVAL, PAGECACHE_ENOMEM,
 *     PAGECACHE_EFBIG, PAGECACHE_EBADF, PAGECACHE_E2BIG, PAGECACHE_EBUSY and PAGECACHE_EPERM
 *     equal -EINVAL, -ENOMEM, -EFBIG, -EBADF, -E2BIG, -EBUSY and -EPERM; the others are -1000
 *     to -1999, never an errno nor one of paygo.h's own codes (-2000 and below), which the
 *     paygo_ functions this library exports return;
 *   - -errno for an I/O error: the system's code (-ENOENT, -EACCES, -EIO, ...), or, for an
 *     error the cache finds itself, the errno that means it (-EISDIR for a directory, -EINVAL
 *     for a file that is not a regular file or is on a pseudo file system such as procfs or
 *     sysfs, -EACCES for a write to a file opened read-only).
 * A handle or out pointer that is misaligned for its type is never a live handle or a place
 * for a result: every function refuses it as it refuses NULL (PAGECACHE_EINVAL, nothing done;
 * pagecache_free does nothing, as with NULL).
 * pagecache_strerror() describes both; pagecache_last_error() says which argument or file, and
 * why, for the last call of the calling thread that failed (a per-thread message, set by
 * failures only). The code is returned, never reported through errno, whose value after a call
 * is unspecified (a system call inside it that failed may have set it, such as a failed open(2)
 * of pagecache_open). A call refused for its arguments (PAGECACHE_EINVAL,
 * PAGECACHE_ENOSCHEME, ...) changes nothing and leaves *out as it was; the cache and its files go
 * on working after any error. An I/O error of a read or a write may come after part of the range
 * was done, as with pread and pwrite: a read leaves the buffer's contents unspecified, a write may
 * have written a prefix of its range. No call aborts the process: a Rust panic inside the library
 * is caught at the boundary and returned as PAGECACHE_EINTERNAL, and the allocations sized by the
 * arguments (a cache's frames, a file's page table) that cannot be made return PAGECACHE_ENOMEM.
 * (The library's other allocations are small; one that fails aborts the process, as in any Rust
 * program.)
 *
 * Threads: handles are thread-safe. One pagecache_t and one pagecache_file_t may be used from
 * many threads at once (reads, writes, sync, drop_cache, len, set_len, counts, open, stats); a
 * pagecache_mapping_t is the one exception: it is its thread's (see Lifetimes); reads and
 * writes of overlapping ranges racing each other see, byte by byte, the old or the new bytes,
 * as pread racing pwrite may (and a read racing a pagecache_set_len that cuts, the old bytes
 * or zeros). No call is a cancellation point, although calls read, write, sync, open and
 * close files: each disables the calling thread's cancellation (pthread_setcancelstate) while
 * it runs (a pagecache_read_at or pagecache_page_get of cached pages, which reaches no
 * cancellation point: its only system calls are the optimistic mode's sched_yield and, for a
 * get, those of the rare waits and locks of the file handle's PAYGO reference, none of them
 * one; only once it finds a page that is not; pagecache_mapping_read of pages whose mapping
 * entries name their frames makes no system call at all, and disables it only once it finds a
 * page whose entry does not; pagecache_page_read makes no system call, pagecache_page_write
 * none but getrlimit(2) and lseek(2) for a write that grows the file past what was checked,
 * and pagecache_page_put none but those of the drop of that reference, which now and then runs
 * the PAYGO collector, a lock and a membarrier(2), and none of the three disables it at all),
 * so a pending pthread_cancel is acted on at the caller's next cancellation point, after the
 * call returned (acted on inside the library, it would unwind the thread through the library's
 * state). That is deferred cancellation, the default: no call is async-cancel-safe, and a
 * thread whose cancellation type is PTHREAD_CANCEL_ASYNCHRONOUS may be cancelled inside a
 * pagecache_read_at of cached pages, which may leave its file handle held (a later
 * pagecache_close of that handle then waits for ever) and, in the counting mode, a page
 * referenced for good.
 *
 * Signal handlers: no call is async-signal-safe. Calls allocate memory and take locks (of a
 * cache, of a file, of the handle tables), which a call from a handler may wait for for ever
 * where the call it interrupted on its thread holds them; and a pagecache_close (or
 * pagecache_free) from a handler that interrupted a call with the same handle on its thread
 * waits for ever for that call to return. The epoch thread of a "refcache" cache blocks every
 * signal, so the program's process-directed signals are handled on the program's own threads.
 *
 * Lifetimes: a handle is the address of a slot in a table that the library never frees (64
 * bytes per slot, 128 for a mapping's on 64-bit targets, made 16 at a time when no slot is free,
 * kept for the life of the process: a program never holds more slots than the most handles it
 * had open at once, rounded up to 16; caches, files and mappings have a table each). So a handle
 * stays a valid pointer after its close or free, and the library checks it:
 *   - pagecache_close(file) twice, or any call with a closed file handle (read, write, sync,
 *     drop_cache, len, set_len, page_get, map, page_count, mapcount), returns PAGECACHE_EBADF
 *     and does nothing, as close(2) and pread(2) of a closed descriptor return EBADF.
 *     pagecache_free(cache) twice does nothing; pagecache_open and pagecache_stats with a freed
 *     cache handle return PAGECACHE_EBADF (nothing done, *out untouched), pagecache_scheme
 *     returns NULL.
 *   - A slot is reused, like a file descriptor's number: after pagecache_close(f), a later
 *     pagecache_open (by any thread) may return the same pointer, and the stale copy of f then
 *     names the new file: a call with it reaches that file, and a pagecache_close with it
 *     closes it. (And so for a freed cache handle and a later pagecache_new.) As with
 *     descriptors, drop a handle when you close it: PAGECACHE_EBADF is a check, not a promise
 *     across later opens.
 *   - Closing a file handle (or freeing a cache handle) while another thread is inside a call
 *     with it, or may start one, is the caller's bug, like close(2) of a descriptor another
 *     thread is reading: the call runs on the open handle, or gets PAGECACHE_EBADF, or, once
 *     the slot was reused, reaches the new handle. It is memory-safe: pagecache_close and
 *     pagecache_free wait for the calls on that handle that began before them to return, and
 *     only then close the file or drop the cache.
 *   - After fork(2), the child has only the thread that forked. A call that another thread was
 *     inside when the process forked never returns in the child, so pagecache_close of its
 *     handle there returns PAGECACHE_EFORKED at once (and pagecache_free of its cache handle
 *     returns) instead of waiting for it for ever: the handle is closed, and the file or
 *     cache it held is neither written back nor freed, as that call may have left it half
 *     changed (its pages stay with the parent). Neither its slot nor that of a closed handle
 *     such a call was made with (about to return PAGECACHE_EBADF) is reused in the child, so
 *     a handle opened there never returns PAGECACHE_EFORKED. Other calls with such a handle
 *     in the child may wait for ever for locks that call held: in a child of a threaded
 *     parent, as POSIX says, call only async-signal-safe functions until exec. A "refcache"
 *     cache's epoch thread is not in the child either: the child's copy of the cache runs no
 *     epochs (its counts stay exact), and its free there does not wait for that thread.
 *   - A pointer that no pagecache_new or pagecache_open returned (a file handle passed as a
 *     cache handle included) is not checked: passing one is undefined behaviour.
 *   - A held page (pagecache_page_get) keeps its file handle open: pagecache_close returns
 *     PAGECACHE_EBUSY until every page taken through the handle was put. The file's other
 *     handles (another pagecache_open of the same file) close as they would. So does a
 *     mapping (pagecache_map) until it is unmapped.
 *   - A mapping (pagecache_mapping_t) belongs to the thread that made it: only that thread
 *     reads through it, holds and releases its pages, and unmaps it; a call with it from
 *     another thread returns PAGECACHE_EPERM and touches nothing. Its handle is a slot of a
 *     third table, as a file handle's: pagecache_unmap twice, or a read after it, returns
 *     PAGECACHE_EBADF, and a slot is reused by a later pagecache_map (of any thread: the stale
 *     handle then names that mapping, refused with PAGECACHE_EPERM where another thread made
 *     it). A mapping not unmapped before its thread exits is never unmapped (no other thread
 *     may): its entries stay allocated, its held pages held, and its file handle busy
 *     (pagecache_close returns PAGECACHE_EBUSY), as a page held for ever keeps it; nothing
 *     else is changed.
 *   - A file handle may outlive the cache it was opened through: pagecache_free(cache) with
 *     files still open is allowed, and those files go on working (reads, writes, sync,
 *     drop_cache, len, close) on the cache's frames, which are freed with the last of them.
 *     Only the cache handle itself is closed.
 *   - Pointers passed in are only used during the call. Strings passed in (a scheme's name, a
 *     path) end with a NUL byte: the library reads up to it, and a string without one is
 *     undefined behaviour; a path is bytes, not text (any encoding, as open(2) takes it). A
 *     buffer must be valid for len bytes and not written by another thread during the call;
 *     the library cannot check its size: a buffer shorter than len is undefined behaviour
 *     (even where fewer bytes would be read or written).
 *
 * Strings returned (pagecache_scheme, pagecache_strerror) are static: never freed, valid for
 * the life of the process; but pagecache_last_error's belongs to the calling thread (see it).
 */
#ifndef PAGECACHE_H
#define PAGECACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

/* The version of the library this header belongs to (the package's semantic version). For
 * #if: PAGECACHE_VERSION_NUMBER is MAJOR * 10000 + MINOR * 100 + PATCH. The shared
 * library's SONAME carries the same version (libpagecache.so.MAJOR, or libpagecache.so.0.MINOR
 * below 1.0), so a program built with this header loads no library of another ABI. */
#define PAGECACHE_VERSION_MAJOR 0
#define PAGECACHE_VERSION_MINOR 1
#define PAGECACHE_VERSION_PATCH 0
#define PAGECACHE_VERSION_NUMBER \
	(PAGECACHE_VERSION_MAJOR * 10000 + PAGECACHE_VERSION_MINOR * 100 + PAGECACHE_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The library's error codes: negative. Any other negative value a function returns is -errno.
 * The codes from -1000 down each mean one thing; the seven that equal an errno
 * (PAGECACHE_EINVAL, PAGECACHE_ENOMEM, PAGECACHE_EFBIG, PAGECACHE_EBADF, PAGECACHE_E2BIG,
 * PAGECACHE_EBUSY, PAGECACHE_EPERM) are also that errno's code where it means the same, and
 * then name the cause less closely:
 * pagecache_open's -EINVAL (PAGECACHE_EINVAL) is an argument refused (below) or a path that is
 * not a regular file (a FIFO, a socket, a device) or is a file of a pseudo file system (a /proc
 * or /sys file), and a file's I/O error can be -EFBIG or -ENOMEM. pagecache_last_error() says
 * which: the argument refused, or the file and why. */
typedef enum pagecache_error {
    PAGECACHE_OK = 0,
    PAGECACHE_EINVAL = -22,      /* (= -EINVAL) a null pointer (or a misaligned handle, out
                                    pointer or options pointer), a memory limit of 0 or
                                    above 4294967294 pages, a mode other than 0 or 1, a
                                    scheme's setting that it does not take or that is out
                                    of range, options whose size is below the first
                                    version's or whose flags have a bit no flag has, a
                                    length above SSIZE_MAX, a write ending past 2^63 - 1,
                                    a negative length, a buffer of pagecache_page_read
                                    that overlaps its page */
    PAGECACHE_ENOMEM = -12,      /* (= -ENOMEM) pagecache_new: the frames of the memory limit
                                    (their pages, and the scheme's counters, which take
                                    more on machines of many CPUs), or the tables of
                                    "paygo"'s domain or the caches of "refcache",
                                    cannot be allocated;
                                    pagecache_open: the file's page
                                    table (4 bytes a page, at most 4 MiB) cannot be;
                                    pagecache_map: the mapping's memory cannot be;
                                    pagecache_page_get, pagecache_mapping_hold,
                                    pagecache_mapping_write: every frame of the cache is
                                    held */
    PAGECACHE_EFBIG = -27,       /* (= -EFBIG) pagecache_write_at, pagecache_set_len: the file
                                    cannot hold the write or the length, which ends past the
                                    largest file of its file system (16 TiB - 4 KiB on ext4
                                    with 4 KiB blocks) or past the process's RLIMIT_FSIZE;
                                    refused before anything changed, so the write-back never
                                    fails for it (nor raises SIGXFSZ) */
    PAGECACHE_EBADF = -9,        /* (= -EBADF) a file handle already closed, a cache handle
                                    already freed, a mapping already unmapped (see
                                    Lifetimes), a pagecache_page_t that holds no page (put
                                    already, or PAGECACHE_PAGE_INIT): nothing done */
    PAGECACHE_E2BIG = -7,        /* (= -E2BIG) pagecache_new_opts: options of a later version
                                    of the library, which set a field this one does not
                                    know (a byte past its fields that is not zero), or a
                                    size above 4096: nothing done */
    PAGECACHE_EBUSY = -16,       /* (= -EBUSY) pagecache_close: pages taken through the
                                    handle (pagecache_page_get) are still held, or mappings
                                    of it (pagecache_map) still mapped; pagecache_unmap:
                                    pages held through the mapping
                                    (pagecache_mapping_hold): nothing done, the handle
                                    stays open */
    PAGECACHE_EPERM = -1,        /* (= -EPERM) pagecache_mapping_read, _write, _hold,
                                    _release, pagecache_unmap: the mapping was made by another
                                    thread (only the thread that made it uses it, as only
                                    a mutex's owner unlocks it): nothing done */
    PAGECACHE_EINTERNAL = -1000, /* a bug in libpagecache (a Rust panic caught at the
                                    boundary) */
    PAGECACHE_ENOSCHEME = -1001, /* pagecache_new: no counting scheme has that name (a name
                                    that is not UTF-8 included) */
    PAGECACHE_EUNFIT = -1002,    /* pagecache_new: the scheme exists but cannot count the
                                    frames of a page cache ("percpu-limit" cannot detect zero,
                                    so no frame could ever be evicted) */
    PAGECACHE_EFORKED = -1003    /* pagecache_close in a child of fork(2): another thread of
                                    the parent was inside a call with the handle when it
                                    forked, a call that never returns in the child; the
                                    handle is closed, its file neither written back nor
                                    freed (see Lifetimes) */
} pagecache_error;

/* How reads of cached pages find their bytes (the mode of pagecache_new). */
typedef enum pagecache_mode {
    /* Every read takes a reference with the scheme's try-get, re-checks the frame, copies
     * and puts it back. */
    PAGECACHE_MODE_COUNTING = 0,
    /* Reads of cached pages take no reference: they copy between two loads of the frame's
     * version and retry if it changed. Misses, writes and sync still count. */
    PAGECACHE_MODE_OPTIMISTIC = 1
} pagecache_mode;

/* How pagecache_open_flags opens a file (its flags; 0: as pagecache_open, read-write if
 * permitted, else read-only). */
typedef enum pagecache_open_flag {
    /* Read-only (O_RDONLY): pagecache_write_at and pagecache_set_len through the handle
     * return -EACCES, nothing changed, and another process may execve(2) the file while it is
     * open (unless the cache already held it open writable: see pagecache_open). */
    PAGECACHE_O_RDONLY = 1,
    /* Read-write, or the open's -errno (-EACCES, -EROFS, -ETXTBSY: a program being run), with
     * no read-only fallback; a file already open in the cache read-only is joined, and the
     * handle writes through this open's writable descriptor (see pagecache_open_flags). */
    PAGECACHE_O_RDWR = 2
} pagecache_open_flag;

/* The flags of pagecache_options_t. */
typedef enum pagecache_option_flag {
    /* The cache finds the mappings (pagecache_map) of a page it reclaims through the
     * process-space reverse map: each thread keeps its mappings in an index of its own, and a
     * reclaim of a mapped page searches every thread that maps a file of the cache. Without it,
     * the file-space one: each file keeps the mappings of it (as the kernel's i_mmap tree),
     * and a reclaim searches the file's. Mappings read and count alike with either. */
    PAGECACHE_OPT_RMAP_PROCESS = 1
} pagecache_option_flag;

/* The size of a page (of a frame), in bytes. */
#define PAGECACHE_PAGE_SIZE 4096

/* A cache (opaque). */
typedef struct pagecache pagecache_t;

/* A file opened through a cache (opaque). */
typedef struct pagecache_file pagecache_file_t;

/* A mapping of pages of a file for one thread (opaque; see pagecache_map). */
typedef struct pagecache_mapping pagecache_mapping_t;

/* A page held through pagecache_page_get: the caller's memory (on its stack, in its own
 * structures), 64 bytes that the library fills and empties; its fields are the library's.
 * Initialised with PAGECACHE_PAGE_INIT (or zeroed), it holds no page. Not copied while it holds
 * one: a copy is not a page (only the one the get filled is read and put). 8-aligned on every
 * target, also where a uint64_t member alone is 4-aligned (i386), as the library needs (a
 * page that is not 8-aligned is refused with PAGECACHE_EINVAL): alignas in C++11, _Alignas in
 * C11, the GNU aligned attribute in older dialects. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define PAGECACHE_ALIGN8_ alignas(8)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define PAGECACHE_ALIGN8_ _Alignas(8)
#elif defined(__GNUC__)
#define PAGECACHE_ALIGN8_ __attribute__((aligned(8)))
#else
#define PAGECACHE_ALIGN8_
#endif
typedef struct pagecache_page {
    PAGECACHE_ALIGN8_ uint64_t pagecache_private[8];
} pagecache_page_t;
#undef PAGECACHE_ALIGN8_

/* A pagecache_page_t that holds no page. */
#define PAGECACHE_PAGE_INIT { { 0 } }

/* Counts of a cache. (The tag is not the function's name, which C++ -Wshadow would report
 * as hiding the struct's constructor.) */
typedef struct pagecache_stats_s {
    uint64_t fills;               /* pages filled from their files (pread), read ahead
                                     included */
    uint64_t evictions;           /* frames evicted or dropped */
    uint64_t write_backs;         /* dirty pages written back */
    uint64_t direct_ios;          /* reads and writes that went straight to a file because
                                     no frame could be had (every frame referenced, or the
                                     others dirty with failing write-backs) */
    uint64_t resident;            /* frames holding a page (or being filled) now; <= limit
                                     (retired frames, only after a Rust scheme's panic, are
                                     not counted: the C API's schemes do not panic) */
    uint64_t resident_high_water; /* the most frames that ever held a page at once */
    uint64_t limit;               /* the memory limit, in frames */
    uint64_t read_ahead;          /* of the fills, pages read ahead of a sequential miss (up
                                     to 32 after it, in the same pread) */
} pagecache_stats_t;

/* Makes a cache of memory_limit_pages frames (1 to 4294967294) counted by the scheme named
 * scheme (NULL: "paygo"; "atomic", "cas", "frozen-bit", "rcuref", "sticky", "sloppy",
 * "percpu-ref", "refcache", "snzi", "brc", "oplog-counter" or "paygo", the schemes of
 * `refbench list` that can count a page cache's frames: its "percpu-limit" cannot, and is
 * PAGECACHE_EUNFIT), reading in mode (a pagecache_mode),
 * and stores its handle in *out. Errors: PAGECACHE_EINVAL (out is NULL, a limit of 0 or too
 * large, more frames than the scheme can count: 2^22 for "percpu-ref", "sloppy" and
 * "refcache", another mode), PAGECACHE_ENOSCHEME (no such scheme), PAGECACHE_EUNFIT (a
 * scheme that cannot serve a page cache), PAGECACHE_ENOMEM (the frames, or the memory the
 * scheme's counters keep of their own, cannot be allocated: the latter is probed before the
 * counters are made, and a counter whose memory still cannot be allocated then is this error
 * too; or the tables of the domain of "paygo", 192 KiB per possible CPU, or the caches of
 * "refcache", 64 KiB per possible CPU, or the table of chunks of the arena of "percpu-ref" and
 * "sloppy" or of the slab of "refcache", 192 KiB), the -errno of a scheme that cannot be made
 * (-EAGAIN: the epoch thread of "refcache" cannot be started). The frames are allocated here. */
int pagecache_new(size_t memory_limit_pages, const char *scheme, int mode, pagecache_t **out);

/* pagecache_new, with the tables of the domain of "paygo" sized at paygo_slots_per_cpu slots
 * per possible CPU (0: the default, 4,096; 48 bytes a slot). A frame's home slot in a CPU's
 * table is its number modulo the slots: in a cache of more frames than slots, a page's first
 * read on a CPU claims the slot from another frame (every read does over a file larger than the
 * tables read in order); with at least as many slots as frames, each frame's home slot is its
 * own, claimed on its first read on each CPU. Errors: pagecache_new's, and PAGECACHE_EINVAL for
 * a size other than 0 with another scheme than "paygo", or one that is not a power of two from 8
 * (the default probe window's slots) to 16777216 (2^24). pagecache_new_opts, which also sets the
 * window, takes any power of two up to 2^24 of at least the window's slots (1 with a window of
 * 1). */
int pagecache_new_sized(size_t memory_limit_pages, const char *scheme, int mode,
                        size_t paygo_slots_per_cpu, pagecache_t **out);

/* The settings of a cache, for pagecache_new_opts: pagecache_new_sized's arguments and the
 * settings of the schemes, in a struct that later versions extend at its end. Set size to
 * sizeof(pagecache_options_t) and zero every field you do not set: every field but size and
 * memory_limit_pages means "the default" at 0, so
 *
 *   pagecache_options_t o = { .size = sizeof o, .memory_limit_pages = 1024 };
 *
 * is pagecache_new(1024, NULL, PAGECACHE_MODE_COUNTING, ...). A program built with this header
 * keeps working with a later library (the fields it does not know take their defaults); one
 * built with a later header works with this library as long as the fields this one does not
 * know are 0 (else PAGECACHE_E2BIG): the rule of openat2(2)'s struct open_how. */
typedef struct pagecache_options {
    size_t size;                /* sizeof(pagecache_options_t): at least this first version's
                                   (56 bytes on 64-bit targets), at most 4096 */
    size_t memory_limit_pages;  /* frames, 1 to 4294967294 */
    const char *scheme;         /* the counting scheme's name; NULL: "paygo" */
    int mode;                   /* a pagecache_mode; 0: PAGECACHE_MODE_COUNTING */
    uint32_t flags;             /* pagecache_option_flag bits; 0: none */
    size_t paygo_slots_per_cpu; /* slots per possible CPU of "paygo"'s tables (see
                                   pagecache_new_sized): a power of two up to 2^24, at
                                   least the window; 0: 4096. Only with "paygo" */
    size_t paygo_window;        /* the probe window of "paygo"'s tables: how many slots from
                                   a frame's home slot may hold its entry, 1 to the slots
                                   per CPU; 0: 8. Only with "paygo" */
    uint64_t refcache_epoch_us; /* the epoch of "refcache"'s background thread, in
                                   microseconds: a frame whose last reference was put back
                                   can be evicted after two or three epochs; 0: 10000
                                   (10 ms). Any other value is taken as it is: an epoch
                                   longer than the cache's life leaves every frame once
                                   referenced unevictable, and reads and writes of
                                   uncached pages then go to the file directly. Only
                                   with "refcache" */
} pagecache_options_t;

/* Makes a cache with the settings of *opts and stores its handle in *out. Errors:
 * pagecache_new_sized's; PAGECACHE_EINVAL for opts NULL or misaligned, a size below this first
 * version's, flags with a bit no pagecache_option_flag has, a setting for another scheme than the
 * one it names (paygo_slots_per_cpu or paygo_window other than 0 without "paygo",
 * refcache_epoch_us other than 0 without "refcache"), a window of more slots than the tables have;
 * PAGECACHE_E2BIG for a size above 4096 or a byte past this version's fields that is not 0. Reads
 * at most size bytes of *opts; refused, it changes nothing. */
int pagecache_new_opts(const pagecache_options_t *opts, pagecache_t **out);

/* Frees a cache handle; NULL, a misaligned pointer or a handle already freed does nothing.
 * Files opened through it stay open and usable (see Lifetimes above); the frames are freed
 * with the last of them, or here if none is open. Waits for calls with this handle that other
 * threads began before it (in a child of fork(2), not for one that another thread of the
 * parent was inside when it forked: the cache is then not freed, see Lifetimes). */
void pagecache_free(pagecache_t *cache);

/* Opens the file at path through the cache, read-write if permitted, else read-only, and
 * stores its handle in *out. Errors: PAGECACHE_EINVAL (cache, path or out is NULL),
 * PAGECACHE_EBADF (cache was freed), PAGECACHE_ENOMEM (the file's page table, 4 bytes a page
 * up to 4 MiB, cannot be allocated), the open's
 * -errno (-ENOENT: no such file, -EACCES: no permission to read, -ENAMETOOLONG: a path of
 * PATH_MAX (4096) bytes or more, refused before it is copied, or a name of more than 255,
 * -ENOTDIR, -ELOOP, -EAGAIN: another open file holds a lease on it (fcntl F_SETLEASE),
 * whose break this open starts but does not wait for, ...), -EISDIR (a directory), -EINVAL
 * (not a regular file: a FIFO, a socket, a device, whatever its open said; or a file of a
 * pseudo file system, procfs, sysfs and the like, whose size is not its length). A program
 * being run opens read-only. The cache takes the file's size at open and is its only writer
 * while it is open: what others write meanwhile is not seen in pages it holds, a page it
 * fills later reads the file as it is then, and its write-backs go over it. A file already
 * open in the cache (the same device and inode, by any path) is shared, as in the kernel's page
 * cache: the handles read and write the same cached pages (a write through one is read through
 * the other at once), through the first open's descriptor (and, where that one is read-only
 * and a later open's writable, that open's descriptor for the writes and write-backs too);
 * each handle writes as its own open allowed (see pagecache_open_flags); the pages are
 * written back and dropped when the last handle of the file is closed. A file this user may
 * write (as root, nearly every file) is held open for writing even by a program that only
 * reads it: while it is open, execve(2) of it, by any process, fails with ETXTBSY. A reader
 * opens with pagecache_open_flags(cache, path, PAGECACHE_O_RDONLY, out). */
int pagecache_open(pagecache_t *cache, const char *path, pagecache_file_t **out);

/* pagecache_open in the access mode flags names: 0 as pagecache_open, PAGECACHE_O_RDONLY
 * read-only (writes and length changes through the handle return -EACCES, nothing changed,
 * even where the file is shared with a handle that writes it), PAGECACHE_O_RDWR read-write
 * or the open's -errno (see pagecache_open_flag). Any other flags: PAGECACHE_EINVAL, nothing
 * done (pagecache_last_error names the flags). Otherwise the errors and the sharing of a file
 * already open in the cache are pagecache_open's; each handle writes as its own open allowed,
 * whatever the file's other handles may do. A file already open writable keeps its writable
 * descriptor until its last handle is closed, a read-only handle of it included, and a file
 * open read-only that a writable open joins keeps that open's descriptor as well. */
int pagecache_open_flags(pagecache_t *cache, const char *path, int flags,
                         pagecache_file_t **out);

/* Closes a file handle, or returns PAGECACHE_EBUSY where pages taken through it
 * (pagecache_page_get) are still held, or mappings of it (pagecache_map) still mapped: nothing
 * done then, the handle stays open (put the pages and unmap the mappings, then close again; a
 * call racing this refused close may get PAGECACHE_EBADF, as any call racing a close). At the
 * file's last handle, writes its dirty pages back (as
 * pagecache_sync), then frees its frames, writing back again a page whose write-back failed;
 * where the first write-backs failed and the second all succeeded, fdatasync(2)s the file
 * again. Returns PAGECACHE_OK (every page written is in the file, and the last fdatasync, where
 * one was needed, succeeded; or not the last handle: nothing written), PAGECACHE_EINVAL (file
 * is NULL: nothing done), PAGECACHE_EBADF (file is already closed: nothing done), or, at the
 * last handle: an fdatasync's -errno (every page was written back, but the device may not
 * hold them), or a write-back's -errno (a page failed twice: its bytes are discarded, in no
 * file and seen by no later open; the other pages were written back, with no fdatasync). The
 * cache does not say which page failed: a caller that must not lose its writes keeps them until
 * a pagecache_sync succeeds (while a handle is open, a page that failed stays dirty and every
 * pagecache_sync tries it again), or writes them again through a new handle after this error.
 * Another handle's write can leave pages dirty after a pagecache_sync of this one, so the close
 * can fail after a sync that succeeded. The handle is closed whatever it returns, as by
 * close(2); it waits for calls with this handle that other threads began before it, or, in a
 * child of fork(2) where another thread of the parent was inside one when it forked, returns
 * PAGECACHE_EFORKED at once (see Lifetimes). */
int pagecache_close(pagecache_file_t *file);

/* Reads up to len bytes at offset into buf, like pread(2): returns the number of bytes read,
 * fewer than len at the end of the file and 0 at or past it. Errors: PAGECACHE_EINVAL (file is
 * NULL, buf is NULL with len > 0, len > SSIZE_MAX), PAGECACHE_EBADF (file is closed), a
 * fill's -errno (the pread of a missed page failed: the page is not cached, and the next read
 * tries again) or a direct read's (every frame was held). A read that fails at a later page
 * returns, as pread(2), the bytes of the pages before it (fewer than len; a read at the rest
 * then meets the error); an error means nothing was read. buf is written only up to the number
 * of bytes the file holds past offset. */
ssize_t pagecache_read_at(pagecache_file_t *file, void *buf, size_t len, uint64_t offset);

/* Holds page index of the file (its bytes index * 4096 to index * 4096 + 4095) in *page: takes
 * a reference on its frame, as a read does (filling it from the file on a miss), and keeps it
 * until pagecache_page_put(page). Meanwhile the page stays in its frame, neither evicted nor
 * dropped by pagecache_drop_cache, and pagecache_page_read copies its bytes with no lookup and
 * no counting; the file handle cannot be closed (pagecache_close returns PAGECACHE_EBUSY). The
 * reference costs what a read's does (with "paygo", no write to a line another CPU writes),
 * and so does the hold on the file handle (a PAYGO reference too). Returns the bytes of the page
 * inside the file (1 to 4096: fewer in the last page). Errors: PAGECACHE_EINVAL (file or page
 * is NULL or misaligned), PAGECACHE_EBADF (file is closed), -ENXIO (the page is at or past the
 * end of the file), PAGECACHE_ENOMEM (every frame of the cache is held), a write-back's -errno
 * (the frames not held are dirty and their write-back fails), a fill's -errno (the pread of
 * the page failed). On an error *page is left as it was. A page that *page holds
 * already is overwritten, its reference leaked (its frame held for ever, the handle never
 * closed): put it first. No other thread may read or write *page during the call (a
 * pagecache_page_put or pagecache_page_read of it included). */
ssize_t pagecache_page_get(pagecache_file_t *file, uint64_t index, pagecache_page_t *page);

/* Copies up to len bytes of the held page at offset (within the page) into buf: returns the
 * number of bytes copied, fewer than len at the end of the page's bytes inside the file (as
 * they were at the get), 0 at or past it. A write through the file lands in the same frame, so
 * the next read of the page sees it (as pagecache_read_at racing a write, a read racing one
 * sees the old or the new bytes, byte by byte). Errors: PAGECACHE_EINVAL (page is NULL or
 * misaligned, buf is NULL with len > 0, len > SSIZE_MAX, the len bytes of buf overlap *page:
 * nothing written), PAGECACHE_EBADF (page holds no page: put already, or PAGECACHE_PAGE_INIT).
 * Many threads may read one page at once; a put racing them is the caller's bug (as free(3)
 * racing a read). */
ssize_t pagecache_page_read(const pagecache_page_t *page, void *buf, size_t len, size_t offset);

/* Writes len bytes of buf at offset (within the page) into the held page, in its frame, and
 * marks the page dirty: what pagecache_write_at at the page's place in the file does, without
 * the lookup (the bytes reach the file as that call's do; a write ending past the file's length
 * grows the file). Returns len (0 for len 0 through a handle that may write). Errors, which
 * write nothing: PAGECACHE_EINVAL (page is NULL or misaligned, buf is NULL with len > 0,
 * offset + len above 4096, a write ending past 2^63 - 1 bytes), PAGECACHE_EBADF (page holds no
 * page), -EACCES (the page was got through a handle opened read-only, also for len 0),
 * PAGECACHE_EFBIG (the file cannot hold the write, as for pagecache_write_at). Reads and
 * writes racing it see, byte by byte, the old or the new bytes. pagecache_page_read still reads
 * up to the page's length at the get. The threads rules are pagecache_page_read's. */
ssize_t pagecache_page_write(const pagecache_page_t *page, const void *buf, size_t len,
                             size_t offset);

/* Gives back the page that *page holds: it may be evicted again, and *page holds no page.
 * Returns PAGECACHE_OK, PAGECACHE_EINVAL (page is NULL or misaligned), PAGECACHE_EBADF (page
 * holds no page: a second put, or PAGECACHE_PAGE_INIT; nothing done). Two puts of one page
 * racing each other are safe (one gives it back, the other returns PAGECACHE_EBADF), but the
 * one that gives it back reads *page until it returns: a put that returned PAGECACHE_EBADF
 * does not mean that *page may be reused (got into again) or freed yet; wait for both. */
int pagecache_page_put(pagecache_page_t *page);

/* Maps pages first_page to first_page + pages - 1 of the file for the calling thread (LODIC:
 * logical distributed counting) and stores the mapping's handle in *out. A read through the
 * mapping (pagecache_mapping_read) counts its reference on the mapping's own entry for the page,
 * with plain stores to memory of this thread's (no atomic read-modify-write, no line another CPU
 * writes, whatever the scheme), where pagecache_read_at counts on the page's shared counter; a
 * reclaim (eviction, pagecache_drop_cache) of a mapped page sums the entries of the mappings that
 * cover it, and keeps the page while a read through one is copying it. Pages need not be cached to
 * be mapped: a read fills them as pagecache_read_at does. Every cache can map its files (its
 * reverse map: see PAGECACHE_OPT_RMAP_PROCESS). The mapping is the calling thread's (see
 * Lifetimes): only that thread reads through it and unmaps it. While it is mapped, the file handle
 * cannot be closed (pagecache_close returns PAGECACHE_EBUSY). Costs 8 bytes a page, and, at the
 * file's first mapping, 4 bytes a page of the file (up to 4 MiB) kept until the file is closed.
 * Errors: PAGECACHE_EINVAL (file or out is NULL or misaligned, pages is 0), PAGECACHE_EBADF (file
 * is closed), -ENXIO (the range ends past the file's last page, partial or whole, as its length is
 * now), PAGECACHE_ENOMEM (the mapping's memory cannot be allocated). On an error nothing is mapped
 * and *out is left as it was. A file cut shorter later (pagecache_set_len) stays mapped: its pages
 * past the cut read as the cache holds them (zeros unless written since). */
int pagecache_map(pagecache_file_t *file, uint64_t first_page, uint64_t pages,
                  pagecache_mapping_t **out);

/* Copies len bytes of the mapping at offset into buf, as a load from mapped memory: offset is
 * within the mapping (offset 0 is the file's byte first_page * 4096), and the read is exact:
 * it returns len, or an error, never fewer bytes. Bytes of the mapped pages past the end of
 * the file read as they are cached (zeros unless written). Errors: PAGECACHE_EINVAL (m is NULL
 * or misaligned, buf is NULL with len > 0, len > SSIZE_MAX), PAGECACHE_EBADF (m was
 * unmapped), PAGECACHE_EPERM (the calling thread did not make the mapping), -ENXIO (the range
 * ends past the mapping's pages * 4096 bytes: nothing read), a fill's -errno (the pread of a
 * missed page failed; buf may hold the bytes of the pages before it) or a direct read's (every
 * frame was held). len 0 at an offset up to the mapping's end returns 0. */
ssize_t pagecache_mapping_read(pagecache_mapping_t *m, void *buf, size_t len, uint64_t offset);

/* Writes len bytes of buf at offset of the mapping, as a store to memory mapped shared: offset
 * is within the mapping, as pagecache_mapping_read's, and the write is exact: it returns len, or
 * an error. The bytes land in the pages' frames, dirty, and reach the file as those of
 * pagecache_write_at at the same place do (pagecache_sync, eviction, pagecache_drop_cache, the
 * last close); every read of the file and of its mappings sees them. A write ending past the
 * file's length grows the file (where a store into the tail of a mapped last page would not).
 * Errors: PAGECACHE_EINVAL (m is NULL or misaligned, buf is NULL with len > 0, len >
 * SSIZE_MAX, a write ending past 2^63 - 1 bytes), PAGECACHE_EBADF (m was unmapped),
 * PAGECACHE_EPERM (the calling thread did not make the mapping), -EACCES (the file was opened
 * read-only; len 0 too), -ENXIO (the range ends past the mapping's pages * 4096 bytes: nothing
 * written), PAGECACHE_EFBIG (the file cannot hold the write, as for pagecache_write_at),
 * PAGECACHE_ENOMEM (every frame of the cache is held), a write-back's -errno (the frames not
 * held are dirty and their write-back fails), a fill's -errno (the pages before the one that
 * failed are written). */
ssize_t pagecache_mapping_write(pagecache_mapping_t *m, const void *buf, size_t len,
                                uint64_t offset);

/* Holds page `page` of the mapping (page first_page + page of the file): takes a reference on
 * it, counted on the mapping's entry for it as a read's is (filling it on a miss), and keeps it
 * until pagecache_mapping_release(m, page). Meanwhile the page stays in its frame, neither
 * evicted nor dropped by pagecache_drop_cache, and pagecache_unmap(m) returns
 * PAGECACHE_EBUSY. A page may be held many times; each hold is released once. Returns
 * PAGECACHE_OK. Errors, which hold nothing: PAGECACHE_EINVAL (m is NULL or misaligned),
 * PAGECACHE_EBADF (m was unmapped), PAGECACHE_EPERM (the calling thread did not make the
 * mapping), -ENXIO (page is not below the mapping's pages), PAGECACHE_ENOMEM (every frame of
 * the cache is held), a write-back's -errno (the frames not held are dirty and their
 * write-back fails), a fill's -errno. */
int pagecache_mapping_hold(pagecache_mapping_t *m, uint64_t page);

/* Gives back one hold of page `page` of the mapping (pagecache_mapping_hold): the page may be
 * evicted again once no other hold or read keeps it. Returns PAGECACHE_OK, PAGECACHE_EINVAL (m
 * is NULL or misaligned, or no hold of that page is left: nothing done), PAGECACHE_EBADF (m
 * was unmapped), PAGECACHE_EPERM (the calling thread did not make the mapping). */
int pagecache_mapping_release(pagecache_mapping_t *m, uint64_t page);

/* Unmaps a mapping: its entries are freed, and its file handle may be closed again (once no
 * other mapping or held page of it is left). Returns PAGECACHE_OK, PAGECACHE_EINVAL (m is NULL
 * or misaligned), PAGECACHE_EBADF (m was unmapped already: nothing done), PAGECACHE_EPERM (the
 * calling thread did not make the mapping: nothing done, the mapping stays its thread's),
 * PAGECACHE_EBUSY (pages held through it, pagecache_mapping_hold: nothing done), or,
 * in a child of fork(2) where another thread of the parent was inside a call with m when it
 * forked, PAGECACHE_EFORKED (m is unmapped, its mapping left as it was: its file handle stays
 * busy). A mapping made by the thread that forked is its in the child too. */
int pagecache_unmap(pagecache_mapping_t *m);

/* Writes len bytes of buf at offset through the cache: each page is filled first, the bytes
 * are copied in and the page marked dirty; the file grows when the range ends past it.
 * Returns len (0 for len 0, at any offset up to 2^63 - 1, on a file the handle may write: the
 * handle's checks come first, so a write of len 0 still returns PAGECACHE_EINVAL for a NULL
 * file, PAGECACHE_EBADF for a closed one and -EACCES for one opened read-only, before the
 * length and the offset are looked at). Errors: PAGECACHE_EINVAL (file is
 * NULL, buf is NULL with len > 0, len > SSIZE_MAX, offset + len above 2^63 - 1),
 * PAGECACHE_EBADF (file is closed), -EACCES (the
 * file was opened read-only), PAGECACHE_EFBIG (the file cannot hold the write: it ends past
 * the largest file of its file system, or past the process's RLIMIT_FSIZE, where pwrite(2)
 * would raise SIGXFSZ; for a file already longer than RLIMIT_FSIZE, so does a write into the
 * page that holds the limit, as write-back rewrites that page up to the file's length; nothing
 * is written), a fill's or a direct write's -errno (a direct write: every frame was held;
 * the write ends at that page: the pages before it are written and the length covers them,
 * and so does it cover the bytes of that page that a direct write's pwrite(2) wrote before it
 * failed, as the file's length does; a write that so ends after writing some bytes returns
 * their number, as pwrite(2), and a write of the rest then meets the error: an error means
 * nothing was written). The bytes reach the file by pagecache_sync, eviction,
 * pagecache_drop_cache or pagecache_close. Only writes ending past what the file was checked
 * for (its size at open, then the pages of earlier checked writes) are checked, with
 * getrlimit(2) and lseek(2); RLIMIT_FSIZE lowered below what was already checked is not seen,
 * and the write-back of the pages past it then raises SIGXFSZ, as pwrite(2) would. */
ssize_t pagecache_write_at(pagecache_file_t *file, const void *buf, size_t len, uint64_t offset);

/* Writes every dirty page of the file back (pwrite), then fdatasync(2)s it where the cache wrote
 * to the file (a write-back, a direct write, a set_len) since the last fdatasync began or that one
 * failed: a file opened read-only, or opened writable and only read, is never fdatasync'ed
 * (read-only file systems refuse it), nor is a file not written since a sync that succeeded,
 * at its last close either. It walks the pages of the groups of 64 written since the last sync
 * (a bit per group), not every page of the file. Errors:
 * PAGECACHE_EINVAL (file is NULL), PAGECACHE_EBADF (file is closed), the first failed
 * write-back's or fdatasync's -errno (a page
 * that failed stays dirty). */
int pagecache_sync(pagecache_file_t *file);

/* Writes the file's dirty pages back and frees every frame of it that no concurrent read or
 * write holds (like posix_fadvise(POSIX_FADV_DONTNEED)): returns how many frames were freed
 * (>= 0). A held page stays cached, written back if dirty (without fdatasync). Errors:
 * PAGECACHE_EINVAL (file is NULL), PAGECACHE_EBADF (file is closed), the first failed
 * write-back's -errno (that page stays cached and dirty). */
ssize_t pagecache_drop_cache(pagecache_file_t *file);

/* The file's length in bytes (its size at open, grown by writes, set by pagecache_set_len),
 * or PAGECACHE_EINVAL (file is NULL), PAGECACHE_EBADF (file is closed). */
int64_t pagecache_len(pagecache_file_t *file);

/* Stores in *out the count of page index of the file (its bytes index * 4096 to index * 4096 +
 * 4095) now: the READ-ALL of its frame's counter, which holds the references of the reads and
 * writes in flight and of the pages held (pagecache_page_get), plus the entries of every mapping
 * that covers it (pagecache_map), which hold those of the reads through mappings in flight and
 * of the pages held through them (pagecache_mapping_hold). 0 for a page not cached: one never
 * read, evicted, dropped, or past the end of the file (a page past a cut that a mapping holds
 * is cached, and counted). So with no other thread at work, a page's count is the number of
 * its holds, pagecache_page_get's and pagecache_mapping_hold's: each adds one, each
 * pagecache_page_put and pagecache_mapping_release takes it back. A snapshot: exact while no
 * other thread takes or gives back a reference of the page (racing them, a scheme that counts
 * per CPU may sum parts read at different times). It takes the cache's lock of its frames (as
 * a fill and an eviction do) and the file's lock of its mappings: a look at the counts, not a
 * call for a fast path. Returns PAGECACHE_OK. Errors, which leave *out as it was:
 * PAGECACHE_EINVAL (file or out is NULL or misaligned), PAGECACHE_EBADF (file is closed),
 * -ENXIO (index is above 2^51 - 1, the last page of a file of 2^63 - 1 bytes: no file has that
 * page, such as (uint64_t)-1; a page past the end of this file is no error). */
int pagecache_page_count(pagecache_file_t *file, uint64_t index, int64_t *out);

/* Stores in *out how many mappings (pagecache_map, of any thread) cover page index of the file
 * now: 0 for a page that no mapping covers. A mapping covers its pages from its map to its
 * unmap, cached or not, and past a cut of the file (pagecache_set_len) as well; one whose thread
 * exited without unmapping it covers them for ever. Two mappings that overlap count twice on
 * the pages they share. A snapshot, as pagecache_page_count's. Returns PAGECACHE_OK. Errors,
 * which leave *out as it was: PAGECACHE_EINVAL (file or out is NULL or misaligned),
 * PAGECACHE_EBADF (file is closed), -ENXIO (index is above 2^51 - 1, as for
 * pagecache_page_count). */
int pagecache_mapcount(pagecache_file_t *file, uint64_t index, uint32_t *out);

/* Sets the file's length, as ftruncate(2) does, through the cache. Growing: the new bytes read
 * as zeros. Shrinking: the bytes past the new end are gone, cached, dirty or not (a later growth
 * reads zeros there); pages wholly past it leave the cache unless a read holds them (they stay,
 * zeroed, until let go). Writes and pagecache_sync of the file wait meanwhile. Errors:
 * PAGECACHE_EINVAL (file is NULL, len < 0), PAGECACHE_EBADF (file is closed), -EACCES (opened
 * read-only), PAGECACHE_EFBIG (a growth past the largest file of the file system or past
 * RLIMIT_FSIZE, checked as a write's end is), ftruncate's -errno (-EIO, ...). Nothing is
 * changed on an error. */
int pagecache_set_len(pagecache_file_t *file, int64_t len);

/* Fills *out with the cache's counts. Errors: PAGECACHE_EINVAL (cache or out is NULL),
 * PAGECACHE_EBADF (cache was freed). */
int pagecache_stats(pagecache_t *cache, pagecache_stats_t *out);

/* The name of the cache's counting scheme ("paygo", ...), static; NULL if cache is NULL or
 * was freed. */
const char *pagecache_scheme(pagecache_t *cache);

/* Before dlclose() of libpagecache.so: every thread that used the library calls this, so
 * that the kernel no longer points the thread at a restartable sequence's descriptor inside
 * the library (the "paygo" scheme and other per-CPU schemes run them), and, where the thread's
 * rseq area is the library's own (glibc 2.34 and older), no longer writes that area. A later
 * call into the library re-arms both. Returns PAGECACHE_OK. */
int pagecache_prepare_unload(void);

/* A static description of a pagecache_error or of a -errno (the system's text); "unknown
 * error" for any other value. Thread-safe; never NULL; allocates nothing, so it answers also
 * where no memory is left. */
const char *pagecache_strerror(int code);

/* The message of the last call of the calling thread that failed, or NULL if no call of this
 * thread has failed yet: the function's name, then which argument was refused and why, or
 * which file and the system's text of its error, such as
 *     "pagecache_open: /tmp/x: No such file or directory (os error 2)"
 *     "pagecache_new: memory_limit_pages is 0"
 *     "pagecache_read_at: buf is NULL and len is 64, not 0"
 *     "pagecache_sync: file (0x5555...) is a closed file handle (pagecache_close was called with it)"
 * It is the message of pagecache_strerror(code)'s case, made precise: read it right after a
 * call returned an error, as errno. For humans (logs, error reports): its wording may change
 * between versions; a program decides on the code, never on the text.
 *   - Only failures set it: a call that succeeds leaves it as it was (as errno), so after a
 *     success it still describes an earlier failure. The calls that return no code set it
 *     too: pagecache_scheme when it returns NULL, and any call whose internal error
 *     (PAGECACHE_EINTERNAL, a panic) it catches, also pagecache_free. pagecache_strerror and
 *     pagecache_last_error never change it.
 *   - Per thread: a failure on another thread does not change this thread's message.
 *   - Lifetime: the string belongs to the library and to the calling thread: do not free it,
 *     and do not pass it to another thread. It stays valid until the next pagecache_* call of
 *     the same thread (pagecache_strerror and pagecache_last_error excepted) or the thread's
 *     exit; copy it to keep it longer.
 *   - A path is shown as the bytes it was given (not necessarily UTF-8); a NUL byte inside a
 *     message is written as the two characters \0. Where the memory for the message cannot be
 *     allocated, it is a static text that says so (the code still says what failed).
 * Thread-safe; reads the thread's own message only, and does no work on a call's success
 * path (a failure is recorded where it is returned). */
const char *pagecache_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* PAGECACHE_H */
