#!/usr/bin/env python3
"""The distribution benchmark: TheRock's map/reduce over Debian's ROCm 7.2.4.

Runs, on every artifact `scripts/fetch-distribution.sh` laid out in `$KPACK_DISTRO/shard`
(one component per Debian package, family `generic`):

  split      kpack split --batch IN --split-databases ... --output-format tar.zst (IN: each
             artifact as `<package>_fat.tar.zst`, since a batch skips `_generic` names)
  recombine  kpack recombine (every component) into TheRock-like per-family groups (tar.zst)
  verify     kpack verify RECOMBINED --original IN (every code object and database file
             recovered byte for byte, every host binary the original outside its device code)
  split-wheel of every wheel in $KPACK_CORPUS/wheels

each stage once over all the packages, as a distribution's packaging job would (the packages
share the cores and one memory budget), and beside each stage, on the same bytes in the same
run, a plain copy (`cp`) of the stage's inputs and `zstd -d` of them (`unzip -p` for wheels,
which are zip files). The full run then splits, recombines and verifies the largest package
alone at `--threads 8` (its peak RSS within 512 MiB).
Per stage: wall and CPU time (user + sys of the children, from wait4), cores busy (CPU s /
wall s), peak RSS (the largest child's), bytes in and out. Then what a one-GPU user installs:
the fat packages against generic + the one group holding the GPU.

The floor of a stage is what no implementation of it can avoid, measured with the zstd CLI
on the same bytes and cores (`-T<cores>` where zstd codes in parallel; `<cores>` processes
at once where it cannot, one per share of the bundles), each part in turn:
  split      decompress the input tarball; decode every CCOB bundle and check its MD5
             (the digest the CCOB format carries, which every reader must check); code the
             decoded bundles at the archives' scheme and level (zstd -3); compress the output
             tarballs (zstd -3)
  recombine  decompress the input tarballs; compress the output tarballs
  verify     decompress both sides' tarballs; decode every CCOB bundle and check its MD5;
             decode every archived code object; hash each side's code objects once
             (SHA-256, verify's digest, by
             `--sha256`: this script's child, hashlib through OpenSSL, which uses the CPU's
             SHA extensions as kpack's sha2 does; coreutils' sha256sum does not)
The CCOB frames come from `--frames`, this script run as a child (the harness holds no
large buffers): it reads the ELF members of a tarball and writes their CCOB bundles' zstd
frames into <cores> files of about equal size, and their uncompressed bundles into one.
Each file of frames is decoded by `--md5`, this script as a child again: `zstd -dc` piped
into hashlib's MD5 (OpenSSL's), the MD5 of the decoded stream costing what one per bundle
would.

Exits 1 if any stage's peak RSS exceeds 512 MiB, any verify fails or any kpack command fails,
naming the stage and package. Standard library only; the harness holds no large buffers (its
own high-water RSS would show in a vfork'ed child's ru_maxrss).
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time

RSS_LIMIT = 512 << 20
DECODE_CCOB = "decode every CCOB bundle, check its MD5"
HANDLERS = ["rocblas", "hipblaslt", "hipsparselt", "miopen"]
# TheRock's GPU families (build/packaging groups); a processor outside them gets a group
# named by the same rule (its digits but the last, then X).
FAMILIES = {
    "gfx8-legacy": ["gfx803"],
    "gfx9-legacy": ["gfx900"],
    "gfx90X-dcgpu": ["gfx906", "gfx908", "gfx90a"],
    "gfx94X-dcgpu": ["gfx942"],
    "gfx950-dcgpu": ["gfx950"],
    "gfx101X-dgpu": ["gfx1010", "gfx1011", "gfx1012"],
    "gfx103X-dgpu": ["gfx1030", "gfx1031", "gfx1032", "gfx1034", "gfx1035", "gfx1036"],
    "gfx110X-all": ["gfx1100", "gfx1101", "gfx1102", "gfx1103"],
    "gfx115X-all": ["gfx1150", "gfx1151", "gfx1152", "gfx1153"],
    "gfx120X-all": ["gfx1200", "gfx1201"],
}
GPUS = ["gfx1100", "gfx942"]  # a Radeon RX 7900 and an Instinct MI300X


class Run:
    def __init__(self, wall, cpu, rss, rc):
        self.wall, self.cpu, self.rss, self.rc = wall, cpu, rss, rc


def run(cmd, stdout=None, stderr=None):
    """Runs cmd; its wall time, CPU time and peak RSS from wait4."""
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL
    err = open(stderr, "wb") if stderr else subprocess.DEVNULL
    t0 = time.monotonic()
    try:
        p = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        if stdout:
            out.close()
        if stderr:
            err.close()
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return Run(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, p.returncode)


def run_all(cmds, stdouts=None):
    """Runs cmds at once; the wall time until the last ends, their CPU time summed, the
    largest peak RSS, the first non-zero exit status."""
    stdouts = stdouts or [None] * len(cmds)
    outs = [open(o, "wb") if o else subprocess.DEVNULL for o in stdouts]
    t0 = time.monotonic()
    cpu, rss, rc = 0.0, 0, 0
    try:
        procs = [subprocess.Popen([str(c) for c in cmd], stdout=o, stderr=subprocess.DEVNULL)
                 for cmd, o in zip(cmds, outs)]
        for p in procs:
            _, status, ru = os.wait4(p.pid, 0)
            cpu += ru.ru_utime + ru.ru_stime
            rss = max(rss, ru.ru_maxrss * 1024)
            rc = rc or os.waitstatus_to_exitcode(status)
    finally:
        for o in outs:
            if o is not subprocess.DEVNULL:
                o.close()
    return Run(time.monotonic() - t0, cpu, rss, rc)


class Floor:
    """The parts of a stage's floor: per part, wall and CPU seconds summed over packages."""

    def __init__(self):
        self.parts = {}

    def add(self, part, r):
        if r.rc != 0:
            raise RuntimeError(f"floor part {part!r} failed: exit {r.rc}")
        wall, cpu = self.parts.get(part, (0.0, 0.0))
        self.parts[part] = (wall + r.wall, cpu + r.cpu)

    def wall(self):
        return sum(w for w, _ in self.parts.values())

    def cpu(self):
        return sum(c for _, c in self.parts.values())


class Stage:
    def __init__(self, name, floor):
        self.name, self.floor = name, floor  # floor: the decompression baseline's name
        self.runs = 0
        self.wall = self.cpu = 0.0
        self.rss = 0
        self.bytes_in = self.bytes_out = 0
        self.copy_wall = self.copy_cpu = self.dec_wall = self.dec_cpu = 0.0
        self.copy_rss = self.dec_rss = 0
        self.floor_parts = Floor()

    def add(self, r, bytes_in, bytes_out, runs=1):
        self.runs += runs
        self.wall += r.wall
        self.cpu += r.cpu
        self.rss = max(self.rss, r.rss)
        self.bytes_in += bytes_in
        self.bytes_out += bytes_out

    def baselines(self, files, scratch):
        """cp of files into scratch, then the decompression floor of the same bytes."""
        os.makedirs(scratch, exist_ok=True)
        r = run(["cp", "--"] + files + [scratch])
        self.copy_wall += r.wall
        self.copy_cpu += r.cpu
        self.copy_rss = max(self.copy_rss, r.rss)
        shutil.rmtree(scratch)
        for f in files:
            cmd = ["unzip", "-p", f] if f.endswith(".whl") else ["zstd", "-dcq", f]
            r = run(cmd)
            self.dec_wall += r.wall
            self.dec_cpu += r.cpu
            self.dec_rss = max(self.dec_rss, r.rss)
            if not f.endswith(".whl"):
                self.floor_parts.add("decompress the input tarballs", r)

    def compress_floor(self, tarballs, scratch, cores):
        """Compressing `tarballs`' content again (zstd -3 -T<cores>), from their tar
        streams decompressed into scratch beforehand."""
        os.makedirs(scratch, exist_ok=True)
        plain = []
        for i, f in enumerate(tarballs):
            plain.append(os.path.join(scratch, f"{i}.tar"))
            run(["zstd", "-dqf", f, "-o", plain[-1]])
        if plain:
            r = run(["zstd", "-qc", "-3", f"-T{cores}"] + plain)
            self.floor_parts.add("compress the output tarballs", r)
        shutil.rmtree(scratch)


CCOB, BUNDLE = b"CCOB", b"__CLANG_OFFLOAD_BUNDLE__"


def hip_fatbin(mm):
    """(offset, size) of an ELF64's `.hip_fatbin` holding file bytes, or None."""
    import struct
    if mm[:5] != b"\x7fELF\x02" or len(mm) < 64:
        return None
    shoff, = struct.unpack_from("<Q", mm, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", mm, 0x3A)
    if not shoff or shstrndx >= shnum or shoff + shnum * shentsize > len(mm):
        return None
    headers = [struct.unpack_from("<IIQQQQ", mm, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    for name, kind, _, _, off, size in headers:
        end = mm.find(b"\0", names + name)
        if mm[names + name:end] == b".hip_fatbin" and kind != 8 and off + size <= len(mm):
            return off, size
    return None


def bundles(mm, start, end):
    """(offset, length, compressed) of each offload bundle in mm[start:end], the stored
    zstd frame's range for a CCOB (v1 runs to the next bundle), the whole bundle otherwise.
    Zlib CCOBs (which the zstd CLI cannot decode) are skipped."""
    import struct
    pos = start
    while True:
        c, b = mm.find(CCOB, pos, end), mm.find(BUNDLE, pos, end)
        at = min(x for x in (c, b, end) if x >= 0)
        if at >= end:
            return
        if at == c:
            version, method = struct.unpack_from("<HH", mm, at + 4)
            if version == 1:
                header = 20
                nxt = [mm.find(m, at + 4, end) for m in (CCOB, BUNDLE)]
                total = min([x for x in nxt if x >= 0] + [end]) - at
            else:
                header = 24 if version == 2 else 32
                total, = struct.unpack_from("<I" if version == 2 else "<Q", mm, at + 8)
            if method == 1:
                yield at + header, total - header, True
            pos = at + max(total, 4)
        else:
            n, = struct.unpack_from("<Q", mm, at + 24)
            last, p = at + 32, at + 32
            for _ in range(n):
                if p + 24 > end:
                    break
                off, size, idlen = struct.unpack_from("<QQQ", mm, p)
                p += 24 + idlen
                last = max(last, at + off + size)
            yield at, last - at, False
            pos = last


def write_frames(tarball, out, shares):
    """The --frames child: the CCOB frames of `tarball`'s ELF members in `shares` files
    out/frames.<k> of about equal size, its uncompressed bundles in out/plain."""
    import mmap
    files = [open(os.path.join(out, f"frames.{k}"), "wb") for k in range(shares)]
    sizes = [0] * shares
    plain = open(os.path.join(out, "plain"), "wb")
    member_path = os.path.join(out, "member")
    z = subprocess.Popen(["zstd", "-dcq", tarball], stdout=subprocess.PIPE)
    with tarfile.open(fileobj=z.stdout, mode="r|") as t:
        for m in t:
            if not m.isreg() or m.size < 64:
                continue
            src = t.extractfile(m)
            if src.read(5) != b"\x7fELF\x02":
                continue
            with open(member_path, "wb") as f:
                f.write(b"\x7fELF\x02")
                shutil.copyfileobj(src, f, 1 << 20)
            with open(member_path, "rb") as f, \
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                section = hip_fatbin(mm)
                if section:
                    for at, length, compressed in bundles(mm, section[0], section[0] + section[1]):
                        if compressed:
                            k = sizes.index(min(sizes))
                            files[k].write(mm[at:at + length])
                            sizes[k] += length
                        else:
                            plain.write(mm[at:at + length])
            os.remove(member_path)
    z.stdout.close()
    z.wait()
    for f in files + [plain]:
        f.close()


def digest(h, stream):
    """The hex digest by `h` of everything `stream` holds, read into one 4 MiB buffer (no
    allocation per chunk: the floor's hashing costs what the hash does)."""
    buf = bytearray(4 << 20)
    view = memoryview(buf)
    with stream:
        while n := stream.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def files_under(d):
    out = []
    for root, _, names in os.walk(d):
        out += [os.path.join(root, n) for n in names]
    return sorted(out)


def size(paths):
    return sum(os.lstat(p).st_size for p in paths)


def installed_bytes(tarball):
    """Bytes of the regular files a .tar.zst package installs (streamed, never held)."""
    z = subprocess.Popen(["zstd", "-dcq", tarball], stdout=subprocess.PIPE)
    total = 0
    with tarfile.open(fileobj=z.stdout, mode="r|") as t:
        for m in t:
            if m.isreg():
                total += m.size
    z.stdout.close()
    z.wait()
    return total


def family(arch):
    for name, arches in FAMILIES.items():
        if arch in arches:
            return name
    m = re.fullmatch(r"(gfx\d+)[0-9a-z]", arch)
    return (m.group(1) + "X") if m else arch


def mb(n):
    return f"{n / 1e6:,.1f}"


def mib(n):
    return f"{n / (1 << 20):.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dist", default=os.environ.get("KPACK_DISTRO", "/var/tmp/kpack-distro"))
    ap.add_argument("--corpus", default=os.environ.get("KPACK_CORPUS", "/var/tmp/kpack-corpus"))
    ap.add_argument("--kpack")
    ap.add_argument("--label", default="full run")
    ap.add_argument("--doc", help="also write the result as this Markdown file")
    ap.add_argument("--slice", action="store_true",
                    help="CI's slice: without the largest package's run at --threads 8")
    ap.add_argument("--note", default="", help="a line for the document (machine load, ...)")
    ap.add_argument("--frames", nargs=3, metavar=("TARBALL", "OUT", "SHARES"),
                    help="only write TARBALL's CCOB frames into OUT (the floor's input)")
    ap.add_argument("--sha256", metavar="FILE", help="only hash FILE (the floor's hash)")
    ap.add_argument("--md5", metavar="FRAMES",
                    help="only decode FRAMES with zstd and hash them with MD5 (the floor's "
                         "decode of CCOB bundles)")
    args = ap.parse_args()
    if args.frames:
        write_frames(args.frames[0], args.frames[1], int(args.frames[2]))
        return
    if args.sha256:
        print(digest(hashlib.sha256(), open(args.sha256, "rb")))
        return
    if args.md5:
        z = subprocess.Popen(["zstd", "-dcq", args.md5], stdout=subprocess.PIPE)
        print(digest(hashlib.md5(), z.stdout))
        if z.wait() != 0:
            sys.exit(f"zstd -d {args.md5} failed")
        return
    if not args.kpack:
        ap.error("--kpack is required")
    dist, kpack = os.path.abspath(args.dist), os.path.abspath(args.kpack)
    shard = os.path.join(dist, "shard")
    work = os.path.join(dist, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    artifacts = sorted(f for f in os.listdir(shard) if f.endswith("_generic.tar.zst"))
    wheels = sorted(
        os.path.join(args.corpus, "wheels", w)
        for w in os.listdir(os.path.join(args.corpus, "wheels"))
        if w.endswith(".whl")
    )
    if not artifacts:
        sys.exit(f"bench-distribution: no artifacts in {shard}; run scripts/fetch-distribution.sh")
    config_path = os.path.join(work, "packaging.json")
    groups = {}  # name -> architectures, config order

    def write_config():
        cfg = {
            "primary_shard": "debian",
            "architecture_groups": {
                g: {"display_name": g, "architectures": a} for g, a in groups.items()
            },
            "validation": {
                "error_on_duplicate_device_code": True,
                "verify_generic_artifacts_match": True,
                "error_on_missing_architecture": False,
            },
        }
        with open(config_path, "w") as f:
            json.dump(cfg, f, indent=2)

    for g, a in FAMILIES.items():
        groups[g] = list(a)
    write_config()

    stages = {
        "split": Stage("split", "zstd -d"),
        "recombine": Stage("recombine", "zstd -d"),
        "verify": Stage("verify --original", "zstd -d"),
        "split-wheel": Stage("split-wheel", "unzip -p"),
    }
    failures = []
    packages = []
    verified = {"code_objects": 0, "original_files": 0, "entries": 0, "archives": 0}
    t_start = time.monotonic()
    load_start = os.getloadavg()
    cores = os.cpu_count()

    def check(stage, what, r, errfile):
        ok = True
        if r.rc != 0:
            tail = open(errfile, errors="replace").read().strip().splitlines()[-3:]
            failures.append(f"{stage.name} {what}: exit {r.rc}: " + " | ".join(tail))
            ok = False
        if r.rss > RSS_LIMIT:
            failures.append(f"{stage.name} {what}: peak RSS {mib(r.rss)} MiB > 512 MiB")
        return ok

    # Each stage runs once over every package (`split --batch`, `recombine` and `verify` of
    # all components), as a distribution's packaging job would: the packages' work shares
    # the cores and one memory budget. The floors are measured package by package first, on
    # the input bytes, each part on every core; a stage's floor is their sum.
    batch_in = os.path.join(work, "in")
    os.makedirs(batch_in)
    split_dir = os.path.join(work, "split")
    out = os.path.join(split_dir, "debian")
    rec = os.path.join(work, "recombined")
    err = os.path.join(work, "stderr")
    js = os.path.join(work, "out.json")
    for art in artifacts:
        comp = art[: -len("_generic.tar.zst")]
        a_path = os.path.join(shard, art)
        info = {"package": comp, "artifact": os.path.getsize(a_path)}
        meta = os.path.join(dist, "meta", comp + ".info")
        if os.path.exists(meta):
            f = open(meta).read().split()
            info.update(version=f[1], deb=int(f[3]), files=int(f[4]), fat=int(f[5]))
        else:
            info.update(version="?", deb=0, files=0, fat=installed_bytes(a_path))
        packages.append(info)
        # `split --batch` skips artifacts named `_generic` (already split, by the
        # reference's rule), so the batch reads each under the family name `fat`.
        os.link(a_path, os.path.join(batch_in, f"{comp}_fat.tar.zst"))
        print(f"bench-distribution: floor of {comp}", file=sys.stderr, flush=True)
        st = stages["split"]
        st.baselines([a_path], os.path.join(work, "copy"))
        floor = os.path.join(work, "floor")
        os.makedirs(floor)
        r = run([sys.executable, __file__, "--frames", a_path, floor, cores], stderr=err)
        if r.rc != 0:
            sys.exit(f"bench-distribution: --frames {comp} failed: {open(err).read()}")
        frames = [os.path.join(floor, f"frames.{k}") for k in range(cores)]
        frames = [f for f in frames if os.path.getsize(f)]
        plain = os.path.join(floor, "plain")
        decode = run_all([[sys.executable, __file__, "--md5", f] for f in frames])
        st.floor_parts.add(DECODE_CCOB, decode)
        decoded = [f + ".decoded" for f in frames]
        run_all([["zstd", "-dqf", f, "-o", d] for f, d in zip(frames, decoded)])
        coded = os.path.join(floor, "coded.zst")
        st.floor_parts.add("code every code object (zstd -3)",
                           run(["zstd", "-qc", "-3", f"-T{cores}"] + decoded + [plain], coded))
        st = stages["verify"]
        st.baselines([a_path], os.path.join(work, "copy"))
        st.floor_parts.add(DECODE_CCOB, decode)
        st.floor_parts.add("decode every archived code object", run(["zstd", "-dcq", coded]))
        # Each side's code objects hashed once: the same bytes, twice.
        st.floor_parts.add("hash both sides' code objects (SHA-256)",
                           run_all([[sys.executable, __file__, "--sha256", d]
                                    for d in (decoded + [plain]) * 2]))
        shutil.rmtree(floor, ignore_errors=True)

    def outputs_by_package(files):
        """Each package's files among `files` (`<package>_<name>.tar.zst`)."""
        by = {p["package"]: [] for p in packages}
        for f in files:
            name = os.path.basename(f)
            comp = max((c for c in by if name.startswith(c + "_")), key=len, default=None)
            if comp:
                by[comp].append(f)
        return by

    everything = f"all {len(packages)}"
    print("bench-distribution: split", file=sys.stderr, flush=True)
    st = stages["split"]
    r = run([kpack, "split", "--batch", batch_in, "-o", out, "--split-databases", *HANDLERS,
             "--output-format", "tar.zst", "--json"], js, err)
    ok = check(st, everything, r, err)
    split_files = files_under(out) if ok else []
    st.add(r, size(os.path.join(batch_in, f) for f in os.listdir(batch_in)),
           size(split_files), len(packages))
    rec_files = []
    if ok:
        st.compress_floor(split_files, os.path.join(work, "scratch"), cores)
        for p, files in outputs_by_package(split_files).items():
            info = next(i for i in packages if i["package"] == p)
            info["arches"] = sorted(
                os.path.basename(f)[len(p) + 1: -len(".tar.zst")] for f in files
                if not f.endswith("_generic.tar.zst"))
            for a in info["arches"]:
                if not any(a in v for v in groups.values()):
                    groups.setdefault(family(a), []).append(a)
        write_config()

        print("bench-distribution: recombine", file=sys.stderr, flush=True)
        st = stages["recombine"]
        st.baselines(split_files, os.path.join(work, "copy"))
        r = run([kpack, "recombine", "--shards", split_dir, "--config", config_path, "-o",
                 rec, "--output-format", "tar.zst", "--json"], js, err)
        ok = check(st, everything, r, err)
        rec_files = files_under(rec) if ok else []
        st.add(r, size(split_files), size(rec_files), len(packages))
        if ok:
            st.compress_floor(rec_files, os.path.join(work, "scratch"), cores)
    shutil.rmtree(split_dir, ignore_errors=True)
    if ok:
        print("bench-distribution: verify --original", file=sys.stderr, flush=True)
        st = stages["verify"]
        st.baselines(rec_files, os.path.join(work, "copy"))
        r = run([kpack, "verify", rec, "--original", batch_in, "--json"], js, err)
        ok = check(st, everything, r, err)
        st.add(r, size(rec_files) + sum(p["artifact"] for p in packages), 0,
               len(packages))
        try:
            rep = json.load(open(js))
            for k in verified:
                verified[k] += rep.get(k, 0)
            for f in rep.get("failures", [])[:5]:
                failures.append(f"verify: {f.get('message', f)}")
        except (OSError, ValueError) as e:
            failures.append(f"verify: no JSON report ({e})")
        # What a user installs: generic, and the group of each GPU.
        for p, files in outputs_by_package(rec_files).items():
            info = next(i for i in packages if i["package"] == p)
            sizes = {os.path.basename(f)[len(p) + 1: -len(".tar.zst")]: installed_bytes(f)
                     for f in files}
            info["generic"] = sizes.get("generic", 0)
            info["groups"] = {g: b for g, b in sizes.items() if g != "generic"}
    shutil.rmtree(rec, ignore_errors=True)

    # The largest package alone at --threads 8 (more workers than cores: the most work in
    # flight the memory gates must hold within 512 MiB), full run only.
    largest = None
    if not args.slice and packages:
        largest = max(packages, key=lambda p: p["artifact"])
        comp = largest["package"]
        print(f"bench-distribution: {comp} at --threads 8", file=sys.stderr, flush=True)
        one = os.path.join(work, "one")
        os.makedirs(one)
        os.link(os.path.join(batch_in, f"{comp}_fat.tar.zst"),
                os.path.join(one, f"{comp}_fat.tar.zst"))
        t8 = ["--threads", "8"]
        for name, cmd in [
            ("split", [kpack, "split", os.path.join(one, f"{comp}_fat.tar.zst"), "-o", out,
                       "--component", comp, "--split-databases", *HANDLERS,
                       "--output-format", "tar.zst", *t8]),
            ("recombine", [kpack, "recombine", "--shards", split_dir, "--config", config_path,
                           "-o", rec, "--component", comp, "--output-format", "tar.zst", *t8]),
            ("verify --original", [kpack, "verify", rec, "--original", one, *t8]),
        ]:
            r = run(cmd, None, err)
            largest[f"t8 {name}"] = r
            if r.rc != 0 or r.rss > RSS_LIMIT:
                check(Stage(f"{name} --threads 8", ""), comp, r, err)
                break
        shutil.rmtree(split_dir, ignore_errors=True)
        shutil.rmtree(rec, ignore_errors=True)

    wheel_in = []
    for w in wheels:
        st = stages["split-wheel"]
        name = "-".join(os.path.basename(w).split("-")[:2])
        print(f"bench-distribution: {name}", file=sys.stderr, flush=True)
        st.baselines([w], os.path.join(work, "copy"))
        wout = os.path.join(work, "wheels")
        r = run([kpack, "split-wheel", w, "-o", wout, "--json"], js, err)
        check(st, name, r, err)
        st.add(r, os.path.getsize(w), size(files_under(wout)))
        wheel_in.append(name)
        shutil.rmtree(wout, ignore_errors=True)
    total_wall = time.monotonic() - t_start
    load_end = os.getloadavg()
    shutil.rmtree(work, ignore_errors=True)

    def config_groups():
        return "; ".join(f"{g}: {' '.join(a)}" for g, a in groups.items())

    # The table.
    lines = []
    lines.append(
        "| stage | packages | wall s | CPU s | cores busy | floor s | × floor "
        "| peak RSS MiB | MB in | MB out "
        "| plain copy s | × copy | decompress s | × decompress |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    floor_lines = ["| stage | floor part | wall s | CPU s | cores busy |",
                   "|---|---|---:|---:|---:|"]
    for st in stages.values():
        if not st.runs:
            continue
        fw = st.floor_parts.wall()
        floor_cols = (f"{fw:.1f} | {st.wall / max(fw, 1e-3):.2f}x"
                      if len(st.floor_parts.parts) > 1 else "— | —")
        lines.append(
            f"| {st.name} | {st.runs} | {st.wall:.1f} | {st.cpu:.1f} "
            f"| {st.cpu / max(st.wall, 1e-3):.2f} | {floor_cols} | {mib(st.rss)} "
            f"| {mb(st.bytes_in)} | {mb(st.bytes_out) if st.bytes_out else '—'} "
            f"| {st.copy_wall:.1f} "
            f"| {st.wall / max(st.copy_wall, 1e-3):.1f}x | {st.dec_wall:.1f} ({st.floor}) "
            f"| {st.wall / max(st.dec_wall, 1e-3):.1f}x |"
        )
        if len(st.floor_parts.parts) > 1:
            for part, (w, c) in st.floor_parts.parts.items():
                floor_lines.append(f"| {st.name} | {part} | {w:.1f} | {c:.1f} "
                                   f"| {c / max(w, 1e-3):.2f} |")
            floor_lines.append(f"| {st.name} | **floor** | {fw:.1f} | "
                               f"{st.floor_parts.cpu():.1f} "
                               f"| {st.floor_parts.cpu() / max(fw, 1e-3):.2f} |")
    # Over the packages that went through every stage; a failed one is listed apart.
    done = [p for p in packages if "generic" in p]
    failed = [p["package"] for p in packages if "generic" not in p]
    fat = sum(p["fat"] for p in done)
    gen = sum(p["generic"] for p in done)
    gpu_lines = [f"| fat (what every machine installs today) | {mb(fat)} | 100 % |",
                 f"| generic only (host code, no GPU) | {mb(gen)} | {100 * gen / max(fat, 1):.1f} % |"]
    for gpu in GPUS:
        grp = family(gpu)
        b = gen + sum(p["groups"].get(grp, 0) for p in done)
        gpu_lines.append(f"| generic + `{grp}` (one {gpu}) | {mb(b)} | {100 * b / max(fat, 1):.1f} % |")
    gpu_title = (f"| one-GPU install, the {len(done)} packages split, recombined and verified "
                 "| MB | of fat |")
    if failed:
        gpu_lines.append(f"| not included: {len(failed)} packages that failed ({', '.join(failed)}) "
                         f"| {mb(sum(p['fat'] for p in packages) - fat)} fat | |")
    pkg_lines = [
        "| package | version | .deb MB | fat MB | generic MB | gfx110X-all MB | gfx94X-dcgpu MB "
        "| GPU artifacts |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for p in packages:
        g = p.get("groups", {})
        pkg_lines.append(
            f"| {p['package']} | {p['version']} | {mb(p['deb'])} | {mb(p['fat'])} "
            f"| {mb(p.get('generic', 0))} | {mb(g.get('gfx110X-all', 0))} "
            f"| {mb(g.get('gfx94X-dcgpu', 0))} "
            f"| {len(p.get('arches', []))}{'' if 'generic' in p else ' (failed)'} |"
        )
    # The 16-core figure: a stage's CPU seconds do not grow with the cores, so at the share
    # of the cores it kept busy here, 16 cores take CPU s / (share × 16).
    sixteen = []
    for key in ("split", "recombine", "verify"):
        st = stages[key]
        if st.runs and st.wall > 0:
            share = st.cpu / st.wall / cores
            sixteen.append(f"{st.name} about {st.cpu / (share * 16):.0f} s "
                           f"(CPU {st.cpu:.1f} s at {share * 100:.0f} % of the cores; "
                           f"{st.wall:.0f} s here)")
    sixteen_lines = [
        f"**On a 16-core machine** (derived from the run below, not measured): a stage's CPU "
        f"seconds do not grow with the cores, so at the share of the {cores} cores each stage "
        f"kept busy here: " + "; ".join(sixteen) + ". Whether as large a share of 16 cores "
        "stays busy has not been measured: the largest package's serial parts (its "
        "tarball's decompression, the spooling of its largest library) bound it from below.",
        ""] if sixteen and not args.slice else []
    t8_lines = []
    if largest:
        runs = [(k[3:], r) for k, r in largest.items() if k.startswith("t8 ")]
        t8_lines = [
            f"The largest package, {largest['package']} ({mb(largest['artifact'])} MB of "
            ".tar.zst), alone at `--threads 8` (more workers than cores: the most work in "
            "flight the memory gates must hold): "
            + "; ".join(f"{name} {r.wall:.1f} s, peak RSS {mib(r.rss)} MiB"
                        + ("" if r.rc == 0 else f" (exit {r.rc})") for name, r in runs)
            + " (limit 512 MiB).", ""]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, cwd=os.path.dirname(__file__)).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True,
                               cwd=os.path.dirname(__file__)).stdout.strip()
        commit += " (uncommitted changes)" if dirty else ""
    except OSError:
        commit = "?"
    cpu_model = "?"
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                cpu_model = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        f"{args.label}: {len(packages)} Debian ROCm 7.2.4 packages as TheRock artifacts "
        f"({mb(sum(p['deb'] for p in packages))} MB of .deb, "
        f"{mb(sum(p['fat'] for p in packages))} MB installed, "
        f"{mb(sum(p['artifact'] for p in packages))} MB of .tar.zst), {len(wheel_in)} wheels",
        f"{when}; kpack {commit}; {os.cpu_count()} cores ({cpu_model}), load average "
        f"{load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end; {total_wall:.0f} s in all",
        f"{len(done)} of {len(packages)} packages through every stage; "
        f"verify --original: {verified['code_objects']} code objects and "
        f"{verified['original_files']} original files identical, {verified['entries']} archive "
        f"entries in {verified['archives']} archives read through their digests",
    ]
    text = "\n".join(head + [""] + lines + [""] + floor_lines + [""] + t8_lines
                     + [gpu_title, "|---|---:|---:|"] + gpu_lines)
    print(text)
    if failures:
        print("\nFAILURES:\n" + "\n".join(failures))
    if args.doc:
        doc = [
            "# Debian's ROCm 7.2.4, split as TheRock would",
            "",
            "Written by `scripts/bench-distribution.sh` (not edited by hand; see "
            "[benchmarks.md](benchmarks.md#the-whole-distribution)). Each Debian package that "
            "carries device code is one TheRock component artifact (`<package>_generic.tar.zst`); "
            "the map/reduce runs once over all of them, as a distribution's packaging job "
            "would: `kpack split --batch` (databases: "
            + ", ".join(HANDLERS)
            + "), `kpack recombine` of every component into TheRock's per-family groups (`"
            + config_groups() + "`), `kpack verify --original` of them all; "
            "then `kpack split-wheel` of the corpus wheels (" + ", ".join(wheel_in) + "). "
            "Peak RSS is the largest single command's; the baselines ran in the same run on "
            "the stage's input bytes: `cp` of them, and `zstd -d` of them to /dev/null "
            "(`unzip -p` for the wheels). MB are 10^6 bytes.",
            "",
            "Each stage also beside its floor, measured in the same run on the same bytes and "
            "cores: what no split, recombine or verify can avoid (decompressing the inputs, "
            "decoding every CCOB bundle, coding the code objects at the archives' level, "
            "compressing the outputs; for verify, decoding both sides and hashing each once), "
            "done by the zstd CLI on every core; cores busy is CPU s / wall s.",
            "",
            "Where the time beyond the floor goes (`perf record` of split and verify "
            "--original on librocsparse1, 2.1 GB of CCOB decoded): in split, 26-28 % of the "
            "CPU is the MD5 of every decoded CCOB, 24-28 % zstd level-3 coding of code "
            "objects and tarballs, 5 % decoding (all three the floor's own: the floor checks "
            "each CCOB's MD5 too, the digest the format carries), most of the rest writing, "
            "reading back and packing the staged files; in verify --original, 31 % MD5 "
            "again, 22 % SHA-256 (verify digests every output file and every code object of "
            "both sides), 11 % decoding. md-5's assembly backend (`md5-asm`) hashes only 3-4 % "
            "faster than its Rust code here, does not build for Windows and comes from an "
            "archived repository, so kpack keeps the Rust code (OpenSSL's MD5, the floor's, "
            "is about 25 % faster than either). "
            "Removed: verify's reading of one tarball at a time on one core (the output "
            "tarballs are now read one per core, an original fat binary's bundles decoded on "
            "every core), the one-at-a-time packing of output tarballs (now one per core), "
            "`split --batch`'s artifacts one after another and a tarball's fat binaries one "
            "after another (now on the workers, all under one memory gate); the tarball "
            "split's two reads of its input (now one, each fat binary handed to a worker as "
            "soon as it is spooled); a bundle counted twice in the working memory. Then "
            "(the run below): each stage run once over all the packages, not package by "
            "package (a package's serial parts, its tarball's decompression and the spooling "
            "of its largest library, now overlap other packages' work); recombine's tarball "
            "shards unpacked one per worker (they were unpacked one after another on one "
            "thread: 1 of librocsparse1's 2.4 s); verify's original tarballs read one per "
            "worker, one spooling a member while another's bundles are decoded; a finished "
            "bundle waiting for its turn holding only its coded output in the memory gate, "
            "not its decoded size, so the bundles after a large one are admitted in its "
            "place. Recombine's components recombined one per worker, the largest first: "
            "each one's tarball shards unpacked, its packages written and the unpacked files "
            "removed while the next one is unpacked (it was a step at a time over every "
            "component: all 8 GB unpacked, then the packages written by moving and copying "
            "the unpacked files, then packed); its tarballs packed from the unpacked files "
            "where they lie, not from copies. Then: the removal of a component's unpacked "
            "shards and the syncing of its tarballs handed to a disk thread, so that no "
            "worker waits on the disk for them (removing the unpacked shards kept workers 5 s "
            "in the kernel's discards of the freed blocks, recombine's cores falling to "
            "0.7-1.1 meanwhile). Left: the spooling of a single large library before its "
            "split or verify can start (the library is mapped whole), a bundle over a third "
            "of the in-flight budget (librocsparse1's of 160 MB) running beside little else, "
            "and recombine's unpacking of every shard to the disk: over half its CPU is the "
            "kernel's (page-cache writes, reads and removal of 8 GB unpacked beside 8 GB "
            "packed), with the machine 94-96 % busy; a recombine that packs its packages "
            "from the shards' members as they are read, without unpacking them, would not "
            "do that work.",
            "",
        ]
        doc += sixteen_lines
        if args.note:
            doc += [args.note, ""]
        doc += ["```"] + head + ["```", ""] + lines + [""]
        doc += ["The floor of each stage, part by part (summed over the packages; see the "
                "method in [benchmarks.md](benchmarks.md#the-whole-distribution)):", ""]
        doc += floor_lines + [""]
        doc += t8_lines
        doc += ["What a machine with one GPU installs (bytes of the installed files):", ""]
        doc += [gpu_title, "|---|---:|---:|"] + gpu_lines + [""]
        doc += ["Per package (GPU artifacts: processors the split found):", ""]
        doc += pkg_lines + [""]
        if failures:
            doc += ["Failures:", ""] + [f"- {f}" for f in failures] + [""]
        with open(args.doc + ".tmp", "w") as f:
            f.write("\n".join(doc))
        os.replace(args.doc + ".tmp", args.doc)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
