#!/usr/bin/env python3
"""Writes tests/data/store-v1.tar.gz: a store and catalog as rewind wrote them before
deltas (store format 1: objects raw, zlib or zstd, each whole; catalog schema 10), with
manifest.json, every checkpoint's files by path -> [kind, sha256 or link target].

Run at commit a2c615d (the last code that wrote this format); kept for the record, since
running it with a later rewind writes that rewind's format:
    REWIND_HOME=/tmp/v1/home python tests/data/make_store_v1.py /tmp/v1
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import tarfile


def on_disk(root: str) -> dict:
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ["link", os.readlink(p)]
            else:
                with open(p, "rb") as fh:
                    out[rel] = ["file", hashlib.sha256(fh.read()).hexdigest()]
    return out


def main(work: str) -> None:
    from rewind.capture.working_copy import capture
    from rewind.project import open_project
    rng = random.Random(7)
    root = os.path.join(work, "project")
    os.makedirs(root)
    words = "def class return value index config store tree entry path data".split()
    for d in range(4):
        for f in range(12):
            p = os.path.join(root, f"pkg{d}", f"mod{f}.py")
            os.makedirs(os.path.dirname(p), exist_ok=True)
            lines = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(rng.randint(20, 120))]
            with open(p, "w") as fh:
                fh.write("\n".join(lines) + "\n")
    with open(os.path.join(root, "blob.bin"), "wb") as fh:
        fh.write(rng.randbytes(12000))
    os.symlink("pkg0/mod0.py", os.path.join(root, "link"))
    project = open_project(root, create=True)
    states = [on_disk(root)]
    capture(project, "manual", message="first")
    for p in range(1, 6):
        for _ in range(4):
            path = os.path.join(root, f"pkg{rng.randrange(4)}", f"mod{rng.randrange(12)}.py")
            if os.path.exists(path):
                with open(path, "a") as fh:
                    fh.write(f"value = {rng.randrange(10**6)}  # prompt {p}\n")
        if p == 3:
            os.unlink(os.path.join(root, "pkg1", "mod1.py"))
        states.append(on_disk(root))
        capture(project, "prompt", message=f"prompt {p}")
    manifest = {}
    for cp in project.catalog.checkpoints(project.id):
        manifest[str(cp.number)] = {"tree": cp.tree, "files": states[cp.number - 1]}
    project.close()
    home = os.environ["REWIND_HOME"]
    with open(os.path.join(work, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
    with tarfile.open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "store-v1.tar.gz"), "w:gz") as tar:
        tar.add(home, arcname="home")
        tar.add(os.path.join(work, "manifest.json"), arcname="manifest.json")
    print(hashlib.sha256(open(os.path.join(work, "manifest.json"), "rb").read()).hexdigest())


if __name__ == "__main__":
    main(sys.argv[1])
