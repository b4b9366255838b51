#!/usr/bin/env python3
"""An independent reader for kpack's wheel tests: Python's zipfile, hashlib and csv only.

check_wheels.py WHEEL...  prints one JSON object per wheel:
  {"wheel", "record_ok", "problems", "entries": {name: mode}, "bundles": n}
record_ok: every RECORD row's sha256 (urlsafe base64, no padding) and size match the
member, every member is listed, RECORD lists itself with no hash. bundles: how many clang
offload bundle magics (uncompressed "__CLANG_OFFLOAD_BUNDLE__" and compressed "CCOB")
the members hold, i.e. device code still inside.
"""
import base64, csv, hashlib, io, json, sys, zipfile

MAGICS = (b"__CLANG_OFFLOAD_BUNDLE__", b"CCOB\x01\x00", b"CCOB\x02\x00", b"CCOB\x03\x00")


def check(path):
    problems = []
    entries = {}
    bundles = 0
    with zipfile.ZipFile(path) as z:
        names = [i.filename for i in z.infolist() if not i.is_dir()]
        if len(set(names)) != len(names):
            problems.append("duplicate names")
        records = [n for n in names if n.endswith(".dist-info/RECORD") and n.count("/") == 1]
        if len(records) != 1:
            problems.append(f"{len(records)} RECORD files")
            return {"wheel": path, "record_ok": False, "problems": problems, "entries": {}, "bundles": 0}
        record = records[0]
        rows = list(csv.reader(io.StringIO(z.read(record).decode("utf-8"))))
        listed = set()
        for row in rows:
            if not row:
                continue
            name, digest, size = row
            listed.add(name)
            if name == record:
                if digest or size:
                    problems.append("RECORD lists a hash for itself")
                continue
            if name not in names:
                problems.append(f"{name}: listed, not in the zip")
                continue
            data = z.read(name)
            algo, _, value = digest.partition("=")
            want = base64.urlsafe_b64encode(hashlib.new(algo, data).digest()).rstrip(b"=").decode()
            if algo != "sha256" or value != want:
                problems.append(f"{name}: hash {digest} is not {want}")
            if int(size) != len(data):
                problems.append(f"{name}: size {size} is not {len(data)}")
        for info in z.infolist():
            if info.is_dir():
                continue
            if info.filename not in listed:
                problems.append(f"{info.filename}: not in RECORD")
            entries[info.filename] = (info.external_attr >> 16) & 0o7777
            with z.open(info) as f:
                data = f.read()
            bundles += sum(data.count(m) for m in MAGICS)
    return {"wheel": path, "record_ok": not problems, "problems": problems, "entries": entries, "bundles": bundles}


for p in sys.argv[1:]:
    print(json.dumps(check(p)))
