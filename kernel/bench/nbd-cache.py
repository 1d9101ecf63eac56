#!/usr/bin/env python3
"""A disk with a volatile write cache, for kernel/fsx's power losses.

Serves a raw disk image over NBD (the fixed newstyle handshake, simple
replies) on a Unix socket, to one client (qemu's nbd block driver, which
gives the guest a virtio disk whose write cache it must flush).  What the
client writes is kept in a cache until it asks for a flush (NBD_CMD_FLUSH:
every write completed before it goes to the image) or writes with FUA; reads
see the cache.  When the connection ends without NBD_CMD_DISC (qemu killed:
the power loss), the cache is lost the way a real one can lose it, and only
then is the image what a disk would hold after the power came back:

  drop  every write since the block's last flush is lost;
  any   each 4 KiB block written since its last flush holds any one of its
        versions (as flushed, or as after one of the writes since), chosen
        at random and independently of the other blocks: a cache that
        wrote some blocks back, in any order, and lost the others;
  torn  as any, but each 512-byte sector of such a block on its own: a
        disk whose writes are atomic only per sector, so that a block can
        come back part old and part new.

The moment of the power loss: a kill at a chosen time nearly always finds
the cache empty (the guest flushes it often and at once after its bursts
of writes), so SIGUSR1 arms the server instead: the power fails at the
next flush the client asks for while the cache holds --cut-blocks blocks
or more, before that flush is done.  The server then writes the image as
above, prints its line, and answers nothing more (the guest's disk hangs
until qemu is killed).  A connection that ends first is a power loss too.

With --images N the server also takes N power losses as images while the
run goes on (see Images below), each at a flush with --cut-blocks blocks
or more cached, --interval seconds apart, with the durable writer's lines
that the guest's console log (--console) holds at that moment.

A clean end (NBD_CMD_DISC, after the guest shut down) writes the cache back.
Blocks are 4 KiB; only torn writes one back in parts.

Prints a line on stdout for each image and one at the end; exits 0, or 1
on a bad image or a protocol error (a message on stderr).  Usage:
  nbd-cache.py --image IMG --socket PATH --mode drop|any|torn [--seed N]
               [--cut-blocks K] [--images N --image-dir DIR --console LOG
               [--interval SECONDS]]
"""
import argparse
import os
import random
import re
import shutil
import signal
import socket
import struct
import sys
import time

BLOCK = 4096
SECTOR = 512
ACCEPT_TIMEOUT = 120

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPLY_MAGIC = 0x3E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698

FLAG_FIXED_NEWSTYLE = 1
FLAG_NO_ZEROES = 2

OPT_EXPORT_NAME = 1
OPT_ABORT = 2
OPT_INFO = 6
OPT_GO = 7

REP_ACK = 1
REP_INFO = 3
REP_ERR_UNSUP = 0x80000001
REP_ERR_INVALID = 0x80000003
INFO_EXPORT = 0

TFLAG_HAS_FLAGS = 1
TFLAG_SEND_FLUSH = 4
TFLAG_SEND_FUA = 8
TFLAGS = TFLAG_HAS_FLAGS | TFLAG_SEND_FLUSH | TFLAG_SEND_FUA

CMD_READ = 0
CMD_WRITE = 1
CMD_DISC = 2
CMD_FLUSH = 3
CMD_FLAG_FUA = 1

EINVAL = 22


class Error(Exception):
    """What ends the server with exit 1: a bad image or a client that does
    not speak NBD as expected."""


class Gone(Exception):
    """The connection ended (the client was killed, or closed it)."""


def recv_exact(conn, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = conn.recv_into(view[got:], n - got)
        if k == 0:
            raise Gone()
        got += k
    return buf


class Disk:
    """The image, and the cache in front of it."""

    def __init__(self, image, mode, rng):
        self.image = image
        self.fd = os.open(image, os.O_RDWR)
        self.size = os.fstat(self.fd).st_size
        if self.size == 0 or self.size % BLOCK:
            raise Error(f"{image}: {self.size} bytes, not a whole number of {BLOCK}-byte blocks")
        # What a read sees: the image with every write applied.
        self.view = bytearray(os.pread(self.fd, self.size, 0))
        if len(self.view) != self.size:
            raise Error(f"{image}: short read")
        self.mode = mode
        self.rng = rng
        # Block number -> its versions since its last flush, oldest first
        # (modes any and torn), or None (mode drop: only whether it is in
        # the cache).
        self.cached = {}
        self.stats = dict(reads=0, writes=0, fua=0, flushes=0)

    def read(self, off, n):
        self.stats["reads"] += 1
        return memoryview(self.view)[off:off + n]

    def write(self, off, data, fua):
        self.stats["writes"] += 1
        self.view[off:off + len(data)] = data
        first, last = off // BLOCK, (off + len(data) - 1) // BLOCK
        for b in range(first, last + 1):
            if fua:
                # Durable now: the whole block as it stands (more than FUA
                # promises for the block's other bytes, never less).
                self._write_back(b)
                self.cached.pop(b, None)
            elif self.mode != "drop":
                self.cached.setdefault(b, []).append(bytes(self.view[b * BLOCK:(b + 1) * BLOCK]))
            else:
                self.cached[b] = None
        if fua:
            self.stats["fua"] += 1

    def _write_back(self, b, data=None):
        if data is None:
            data = self.view[b * BLOCK:(b + 1) * BLOCK]
        os.pwrite(self.fd, data, b * BLOCK)

    def flush(self):
        self.stats["flushes"] += 1
        for b in sorted(self.cached):
            self._write_back(b)
        self.cached.clear()

    def power_loss(self, fd=None):
        """Writes to fd (the image, by default; or a copy of it) what the
        image holds after the cache was lost; returns (blocks in the cache,
        blocks that kept their newest version, an older one, none, and,
        mode torn, blocks of sectors of different versions)."""
        fd = self.fd if fd is None else fd
        newest = older = none = torn = 0
        for b in sorted(self.cached):
            versions = self.cached[b]
            if versions is None:
                none += 1
                continue
            k = len(versions)
            # mode torn: a version for each sector; mode any: one for all
            picks = [self.rng.randrange(k + 1)]
            if self.mode == "torn":
                picks += [self.rng.randrange(k + 1) for _ in range(BLOCK // SECTOR - 1)]
            if len(set(picks)) > 1:
                torn += 1
            elif picks[0] == 0:
                none += 1
                continue
            elif picks[0] == k:
                newest += 1
            else:
                older += 1
            flushed = os.pread(self.fd, BLOCK, b * BLOCK)
            data = bytearray()
            for i in range(BLOCK // SECTOR):
                pick = picks[i % len(picks)]
                src = flushed if pick == 0 else versions[pick - 1]
                data += src[i * SECTOR:(i + 1) * SECTOR]
            os.pwrite(fd, bytes(data), b * BLOCK)
        return len(self.cached), newest, older, none, torn

    def loss_line(self, counts):
        n, newest, older, none, torn = counts
        return (f"{n} blocks in the cache: {newest} kept their newest version, "
                f"{older} an older one, {none} none"
                + (f", {torn} came back torn" if self.mode == "torn" else ""))


class Images:
    """Power losses taken as images while the run goes on (--images N):
    at a flush with --cut-blocks blocks or more cached, once the guest's
    console (--console) shows its durable writer at work and --interval
    seconds after the image before, a copy of the image as the power loss
    would leave it (the flush not done), DIR/crash-K.img, and a line that
    names it with the durable writer's first and last "# durable N" line
    in the console at that moment: each such line was printed after its
    fsync() returned, so after the flushes it needs were done."""

    def __init__(self, n, folder, console, interval):
        self.n, self.folder, self.console, self.interval = n, folder, console, interval
        self.taken = 0
        self.last = None
        self.start = time.monotonic()
        self.seen = 0
        self.partial = b""
        self.first_durable = self.last_durable = 0

    def _read_console(self):
        try:
            with open(self.console, "rb") as f:
                f.seek(self.seen)
                new = f.read()
        except FileNotFoundError:
            new = b""
        self.seen += len(new)
        *lines, self.partial = (self.partial + new).split(b"\n")
        for line in lines:
            m = re.fullmatch(rb"# durable (\d+)\r?", line)
            if m:
                self.last_durable = int(m.group(1))
                self.first_durable = self.first_durable or self.last_durable

    def take(self, disk):
        """At a flush that has not been done: takes an image if one is due."""
        now = time.monotonic()
        if self.taken == self.n or (self.last is not None and now - self.last < self.interval):
            return
        self._read_console()
        if not self.last_durable:
            return
        self.taken += 1
        self.last = now
        path = os.path.join(self.folder, f"crash-{self.taken}.img")
        shutil.copyfile(disk.image, path)
        fd = os.open(path, os.O_RDWR)
        try:
            counts = disk.power_loss(fd)
        finally:
            os.close(fd)
        print(f"nbd-cache: image {self.taken} {path}, {now - self.start:.1f} s in, durable "
              f"{self.first_durable} {self.last_durable}: {disk.loss_line(counts)}", flush=True)


def handshake(conn, size):
    conn.sendall(struct.pack(">QQH", NBDMAGIC, IHAVEOPT, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))
    (cflags,) = struct.unpack(">I", recv_exact(conn, 4))
    if not cflags & FLAG_FIXED_NEWSTYLE:
        raise Error(f"client flags {cflags:#x}: not fixed newstyle")
    zeroes = not cflags & FLAG_NO_ZEROES

    def reply(opt, typ, data=b""):
        conn.sendall(struct.pack(">QIII", REPLY_MAGIC, opt, typ, len(data)) + data)

    while True:
        magic, opt, length = struct.unpack(">QII", recv_exact(conn, 16))
        if magic != IHAVEOPT:
            raise Error(f"option magic {magic:#x}")
        if length > 65536:
            raise Error(f"option {opt} of {length} bytes")
        data = bytes(recv_exact(conn, length))
        if opt == OPT_EXPORT_NAME:
            conn.sendall(struct.pack(">QH", size, TFLAGS) + (bytes(124) if zeroes else b""))
            return
        if opt in (OPT_INFO, OPT_GO):
            if len(data) < 6:
                reply(opt, REP_ERR_INVALID)
                continue
            reply(opt, REP_INFO, struct.pack(">HQH", INFO_EXPORT, size, TFLAGS))
            reply(opt, REP_ACK)
            if opt == OPT_GO:
                return
        elif opt == OPT_ABORT:
            reply(opt, REP_ACK)
            raise Gone()
        else:
            # structured replies, meta contexts, extended headers, ...
            reply(opt, REP_ERR_UNSUP)


def serve(conn, disk, armed, cut_blocks, images):
    """How the connection ended: "disc" (NBD_CMD_DISC), "eof" (it ended
    without one) or "cut" (armed() became true, and a flush came with
    cut_blocks blocks or more in the cache: not done, not answered).
    Takes the images (an Images, or None) on the way."""
    try:
        handshake(conn, disk.size)
        while True:
            magic, flags, typ, handle, off, length = struct.unpack(">IHHQQI", recv_exact(conn, 28))
            if magic != REQUEST_MAGIC:
                raise Error(f"request magic {magic:#x}")
            if typ == CMD_DISC:
                return "disc"
            if typ == CMD_FLUSH and len(disk.cached) >= cut_blocks:
                if armed():
                    return "cut"
                if images:
                    images.take(disk)
            data = recv_exact(conn, length) if typ == CMD_WRITE else None
            err = 0
            if typ in (CMD_READ, CMD_WRITE) and (off + length > disk.size or length == 0):
                err = EINVAL
            elif typ == CMD_READ:
                out = disk.read(off, length)
                conn.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, 0, handle))
                conn.sendall(out)
                continue
            elif typ == CMD_WRITE:
                disk.write(off, data, flags & CMD_FLAG_FUA)
            elif typ == CMD_FLUSH:
                disk.flush()
            else:
                err = EINVAL
            conn.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, err, handle))
    except (Gone, ConnectionError):
        return "eof"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--image", required=True)
    p.add_argument("--socket", required=True)
    p.add_argument("--mode", choices=("drop", "any", "torn"), required=True)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--cut-blocks", type=int, default=16)
    p.add_argument("--images", type=int, default=0)
    p.add_argument("--image-dir")
    p.add_argument("--console")
    p.add_argument("--interval", type=float, default=3.0)
    a = p.parse_args()
    if a.images and not (a.image_dir and a.console):
        p.error("--images needs --image-dir and --console")
    armed_at = []
    signal.signal(signal.SIGUSR1, lambda *_: armed_at or armed_at.append(time.monotonic()))
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 32)
    try:
        disk = Disk(a.image, a.mode, random.Random(seed))
    except (OSError, Error) as e:
        print(f"nbd-cache: {e}", file=sys.stderr)
        return 1
    if os.path.exists(a.socket):
        os.unlink(a.socket)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound and listening under another name, then renamed: a client that
    # finds the socket can connect to it.
    srv.bind(a.socket + ".new")
    srv.listen(1)
    os.rename(a.socket + ".new", a.socket)
    # A client that never comes (qemu failed to start) ends the wait.
    srv.settimeout(ACCEPT_TIMEOUT)
    try:
        conn, _ = srv.accept()
    except socket.timeout:
        print(f"nbd-cache: no client connected within {ACCEPT_TIMEOUT} s", file=sys.stderr)
        os.unlink(a.socket)
        return 1
    conn.settimeout(None)
    srv.close()
    os.unlink(a.socket)
    try:
        images = Images(a.images, a.image_dir, a.console, a.interval) if a.images else None
        end = serve(conn, disk, lambda: bool(armed_at), a.cut_blocks, images)
    except Error as e:
        conn.close()
        print(f"nbd-cache: protocol error: {e}", file=sys.stderr)
        return 1
    s = disk.stats
    head = (f"reads {s['reads']} writes {s['writes']} (fua {s['fua']}) flushes {s['flushes']}")
    if end == "disc":
        n = len(disk.cached)
        disk.flush()
        print(f"nbd-cache: clean end: {head}; {n} cached blocks written back")
    else:
        if end == "cut":
            when = (f"at a flush with {a.cut_blocks} or more blocks cached, "
                    f"{time.monotonic() - armed_at[0]:.1f} s after SIGUSR1")
        else:
            when = "at the end of the connection"
        counts = disk.power_loss()
        print(f"nbd-cache: power loss {when} (mode {a.mode}, seed {seed}): {head}; "
              f"{disk.loss_line(counts)}", flush=True)
    os.close(disk.fd)
    # After a cut the disk answers nothing more, until the client is gone.
    while end == "cut" and conn.recv(1 << 16):
        pass
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
