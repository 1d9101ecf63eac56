#!/usr/bin/env python3
# Run by kernel/check-scripts: the volatile write cache of kernel/fsx's
# FSX_WRITE_CACHE (bench/nbd-cache.py) against a model.  An NBD client (the
# handshake qemu makes: an option the server does not serve refused, then
# NBD_OPT_GO) writes, flushes, writes with FUA and reads; after the power
# loss (the connection ended without NBD_CMD_DISC, or a flush after
# SIGUSR1) the image must hold what the mode allows, and every version a
# block (mode any) or a sector (mode torn) may hold must show up over 40
# seeds; the images of power losses taken while the run goes on (--images)
# must hold the flushed writes alone and name the durable lines the
# console showed.  Usage: nbd-cache-test.py
# SERVER TMPDIR; exits 1 with a message on the first check that fails.
import os, signal, socket, struct, subprocess, sys, time

server, tmp = sys.argv[1], sys.argv[2]
B = 4096
NBLOCKS = 8

def fail(msg):
    print(f"check-scripts: FAILED: nbd-cache.py: {msg}", file=sys.stderr)
    sys.exit(1)

def block(tag):
    return bytes([tag]) * B

def start(mode, seed, cut=None, extra=()):
    img = os.path.join(tmp, "nbd.img")
    with open(img, "wb") as f:
        for b in range(NBLOCKS):
            f.write(block(0xA0 + b))
    sock = os.path.join(tmp, "nbd.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    args = [sys.executable, server, "--image", img, "--socket", sock, "--mode", mode, "--seed", str(seed)]
    if cut is not None:
        args += ["--cut-blocks", str(cut)]
    args += extra
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sock)
    c.settimeout(10)
    return p, c, img

def recv(c, n):
    buf = b""
    while len(buf) < n:
        k = c.recv(n - len(buf))
        if not k:
            fail("the server closed the connection")
        buf += k
    return buf

def handshake(c):
    magic, opt, flags = struct.unpack(">QQH", recv(c, 18))
    if magic != 0x4E42444D41474943 or opt != 0x49484156454F5054 or not flags & 1:
        fail(f"greeting {magic:#x} {opt:#x} {flags:#x}")
    c.sendall(struct.pack(">I", 3))
    # structured replies (8), as qemu asks first: refused
    c.sendall(struct.pack(">QII", 0x49484156454F5054, 8, 0))
    _, o, typ, ln = struct.unpack(">QIII", recv(c, 20))
    if o != 8 or typ != 0x80000001 or ln:
        fail(f"structured replies not refused: {o} {typ:#x} {ln}")
    # NBD_OPT_GO, the default export, no info requests
    c.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6) + struct.pack(">IH", 0, 0))
    _, o, typ, ln = struct.unpack(">QIII", recv(c, 20))
    info = recv(c, ln)
    t, size, tflags = struct.unpack(">HQH", info)
    if (o, typ, t, size) != (7, 3, 0, NBLOCKS * B) or tflags & 0xD != 0xD:
        fail(f"export info {o} {typ} {t} {size} {tflags:#x}")
    _, o, typ, ln = struct.unpack(">QIII", recv(c, 20))
    if (o, typ, ln) != (7, 1, 0):
        fail("no NBD_REP_ACK after the export info")

handle = [0]
def request(c, typ, off=0, data=b"", length=None, fua=False, reply=True):
    handle[0] += 1
    n = len(data) if length is None else length
    c.sendall(struct.pack(">IHHQQI", 0x25609513, 1 if fua else 0, typ, handle[0], off, n) + data)
    if not reply:
        return None
    magic, err, h = struct.unpack(">IIQ", recv(c, 16))
    if magic != 0x67446698 or h != handle[0]:
        fail(f"reply {magic:#x} to handle {h}, not {handle[0]}")
    return err, (recv(c, n) if typ == 0 and not err else b"")

def image(img):
    with open(img, "rb") as f:
        d = f.read()
    return [d[b * B:(b + 1) * B] for b in range(NBLOCKS)]

def workload(c):
    """Block 0: A flushed, then B; block 1: C1 and C2 (a write across the
    end of block 1 and the start of block 2 makes block 2's one version);
    block 3: D with FUA; block 4 untouched. Returns what each block may hold
    after a power loss that loses the cache, in any order of its versions."""
    orig = [block(0xA0 + b) for b in range(NBLOCKS)]
    request(c, 1, 0, block(0x11))
    request(c, 3)
    request(c, 1, 0, block(0x12))
    request(c, 1, B, block(0x21))
    c2 = block(0x22)[: B // 2]
    request(c, 1, B + B // 2, c2 + c2)           # second half of 1, first of 2
    request(c, 1, 3 * B, block(0x31), fua=True)
    err, got = request(c, 0, 0, length=B)
    if err or got != block(0x12):
        fail("a read does not see the cached write")
    err, _ = request(c, 0, (NBLOCKS - 1) * B, length=2 * B)
    if err != 22:
        fail(f"a read past the end: error {err}, not EINVAL")
    v1a = block(0x21)
    v1b = block(0x21)[: B // 2] + c2
    v2 = c2 + orig[2][B // 2:]
    allowed = [
        [block(0x11), block(0x12)],
        [orig[1], v1a, v1b],
        [orig[2], v2],
        [block(0x31)],
    ] + [[orig[b]] for b in range(4, NBLOCKS)]
    newest = [a[-1] for a in allowed]
    return orig, allowed, newest

def finish(p):
    out, err = p.communicate(timeout=20)
    if p.returncode != 0:
        fail(f"exit {p.returncode}: {err}")
    return out

def lost(mode, seed):
    """The workload, then the connection closed without NBD_CMD_DISC: the
    server's line, the image and the workload's blocks."""
    p, c, img = start(mode, seed)
    handshake(c)
    blocks = workload(c)
    c.close()
    return (finish(p), image(img)) + blocks

# drop: every unflushed write lost, the flushed and the FUA one kept
out, got, orig, allowed, newest = lost("drop", 1)
if "power loss at the end of the connection" not in out:
    fail(f"drop: {out}")
want = [allowed[0][0], orig[1], orig[2], allowed[3][0]] + orig[4:]
if got != want:
    fail("drop: the image is not the flushed writes and the FUA write alone")
# any: each block one of its versions, every version seen over the seeds
seen = [set() for _ in range(NBLOCKS)]
for seed in range(40):
    out, got, orig, allowed, newest = lost("any", seed)
    for b, d in enumerate(got):
        if d not in allowed[b]:
            fail(f"any, seed {seed}: block {b} holds a version it never had")
        seen[b].add(d)
for b in range(NBLOCKS):
    if len(seen[b]) != len(allowed[b]):
        fail(f"any: block {b} held {len(seen[b])} of its {len(allowed[b])} versions over 40 seeds")
# torn: each 512-byte sector one of its block's versions, and blocks that
# come back part old and part new
S = 512
torn = 0
seen = [[set() for _ in range(B // S)] for _ in range(NBLOCKS)]
for seed in range(40):
    out, got, orig, allowed, newest = lost("torn", seed)
    if "came back torn" not in out:
        fail(f"torn, seed {seed}: {out}")
    for b, d in enumerate(got):
        for i in range(B // S):
            sec = d[i * S:(i + 1) * S]
            if sec not in [v[i * S:(i + 1) * S] for v in allowed[b]]:
                fail(f"torn, seed {seed}: sector {i} of block {b} holds bytes it never had")
            seen[b][i].add(sec)
        torn += d not in allowed[b]
for b in range(NBLOCKS):
    for i in range(B // S):
        if len(seen[b][i]) != len({v[i * S:(i + 1) * S] for v in allowed[b]}):
            fail(f"torn: sector {i} of block {b} did not take each of its versions over 40 seeds")
if not torn:
    fail("torn: no block came back torn over 40 seeds")
# a clean end writes everything back
p, c, img = start("any", 7)
handshake(c)
orig, allowed, newest = workload(c)
request(c, 2, reply=False)
c.close()
out = finish(p)
if "clean end" not in out or image(img) != newest:
    fail(f"NBD_CMD_DISC did not write the cache back: {out}")
# armed: the flush with 2 or more blocks cached is not done nor answered
p, c, img = start("drop", 3, cut=2)
handshake(c)
request(c, 1, 5 * B, block(0x51))
request(c, 3)                                   # not armed: done
p.send_signal(signal.SIGUSR1)
time.sleep(0.5)
request(c, 1, 6 * B, block(0x61))
request(c, 3)                                   # armed, 1 block: done
request(c, 1, 7 * B, block(0x71))
request(c, 1, 4 * B, block(0x41))
request(c, 3, reply=False)                      # armed, 2 blocks: the cut
c.settimeout(1)
try:
    if c.recv(16):
        fail("the flush of the cut was answered")
except socket.timeout:
    pass
line = p.stdout.readline()
if "power loss at a flush" not in line or "2 blocks in the cache" not in line:
    fail(f"armed: {line}")
want = orig[:5] + [block(0x51), block(0x61), orig[7]]
if image(img) != want:
    fail("armed: the image is not the writes flushed before the cut")
c.close()
finish(p)
# images: power losses taken while the run goes on, once the console shows
# a durable line, each with the durable lines seen (a partial one not)
console = os.path.join(tmp, "console.log")
open(console, "wb").close()
p, c, img = start("drop", 5, cut=2, extra=["--images", "2", "--image-dir", tmp,
                                          "--console", console, "--interval", "0"])
handshake(c)
request(c, 1, 5 * B, block(0x51))
request(c, 1, 6 * B, block(0x61))
request(c, 3)                                   # no durable line yet: no image
with open(console, "ab") as f:
    f.write(b"boot\n# durable 5\n")
request(c, 1, 4 * B, block(0x41))
request(c, 1, 7 * B, block(0x71))
request(c, 3)                                   # image 1
with open(console, "ab") as f:
    f.write(b"# durable 6\n# durable 7\r\n# dur")
request(c, 1, 0, block(0x01))
request(c, 1, B, block(0x02))
request(c, 3)                                   # image 2
request(c, 1, 2 * B, block(0x03))
request(c, 1, 3 * B, block(0x04))
request(c, 3)                                   # no third
c.close()
out = finish(p).splitlines()
want_lines = [
    f"nbd-cache: image 1 {tmp}/crash-1.img, ",
    f"nbd-cache: image 2 {tmp}/crash-2.img, ",
]
if len(out) != 3 or any(not o.startswith(w) for o, w in zip(out, want_lines)):
    fail(f"images: {out}")
if not out[0].endswith("durable 5 5: 2 blocks in the cache: 0 kept their newest version, 0 an older one, 2 none") \
        or "durable 5 7: 2 blocks" not in out[1]:
    fail(f"images: the durable lines or the blocks: {out}")
i1 = orig[:5] + [block(0x51), block(0x61), orig[7]]
i2 = orig[:4] + [block(0x41), block(0x51), block(0x61), block(0x71)]
if image(os.path.join(tmp, "crash-1.img")) != i1 or image(os.path.join(tmp, "crash-2.img")) != i2:
    fail("images: an image is not the flushed writes alone")
if os.path.exists(os.path.join(tmp, "crash-3.img")):
    fail("images: more images than asked for")
if image(img) != [block(0x01), block(0x02), block(0x03), block(0x04)] + i2[4:]:
    fail("images: the run's own image is not every flushed write")
# an image that is not whole blocks is refused
with open(os.path.join(tmp, "bad.img"), "wb") as f:
    f.write(b"x" * 1000)
r = subprocess.run([sys.executable, server, "--image", os.path.join(tmp, "bad.img"), "--socket",
                    os.path.join(tmp, "bad.sock"), "--mode", "drop"], capture_output=True, text=True)
if r.returncode != 1 or "not a whole number of 4096-byte blocks" not in r.stderr:
    fail(f"an image of 1000 bytes: exit {r.returncode}: {r.stderr}")
