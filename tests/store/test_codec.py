"""The object codec (store/objects.py): zstd for a big scan's file contents when the
process has zstandard, zlib otherwise; every read verified; a zstd object that a process
cannot read is not taken for damage."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_rewind, write
from rewind.capture.scan import PARALLEL_AFTER
from rewind.errors import CorruptObject
from rewind.store.objects import RAW, ZLIB, ZSTD, Store, decode, encode, loose_path

zstandard = pytest.importorskip("zstandard")      # a dependency: installed with rewind

TEXT = b"".join(b"def f%d(x):\n    return x * %d  # a line of code\n" % (i, i) for i in range(4000))


def test_fast_is_zstd_and_the_rest_zlib_and_both_read_back():
    z = encode(TEXT, fast=True)
    assert z[0] == ZSTD and len(z) < len(TEXT) / 3 and decode(z) == TEXT
    plain = encode(TEXT)
    assert plain[0] == ZLIB and decode(plain) == TEXT
    noise = os.urandom(200_000)                   # does not compress: stored raw either way
    assert encode(noise, fast=True)[0] == RAW and decode(encode(noise, fast=True)) == noise


def _loose(home: Path, data: bytes, raw: bytes) -> str:
    oid = hashlib.sha256(data).hexdigest()
    path = Path(loose_path(str(home / "objects"), oid))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return oid


def test_the_head_of_a_zstd_object_is_its_first_bytes(tmp_path):
    """What `diff` looks at to tell binary from text: only the start is inflated."""
    oid = _loose(tmp_path, TEXT, encode(TEXT, fast=True))
    store = Store(str(tmp_path))
    assert store.head(oid, 100) == TEXT[:100]
    assert store.head(oid, 10 * len(TEXT)) == TEXT
    assert store.get(oid) == TEXT


@pytest.mark.parametrize("damage", ["flipped", "cut", "huge size", "garbage"])
def test_a_damaged_zstd_object_is_caught_as_damaged(tmp_path, damage):
    body = bytearray(encode(TEXT, fast=True))
    if damage == "flipped":
        for i in range(40, len(body), 97):
            body[i] ^= 0x5A
    elif damage == "cut":
        body = body[: len(body) // 2]
    elif damage == "huge size":                   # a frame claiming 1 TB: refused, not allocated
        body = bytearray([ZSTD]) + zstandard.ZstdCompressor(level=1).compress(b"x" * 100)
        body = body[:1] + _with_content_size(bytes(body[1:]), 1 << 40)
    else:
        body = bytearray([ZSTD]) + os.urandom(300)
    store = Store(str(tmp_path))
    oid = _loose(tmp_path, TEXT, bytes(body))
    with pytest.raises(CorruptObject):
        store.get(oid)
    assert oid in store.found_damaged


def _with_content_size(frame: bytes, size: int) -> bytes:
    """The frame with its header's content size set to `size` (8-byte field)."""
    magic, fhd = frame[:4], frame[4]
    single = bool(fhd & 0x20)
    rest = frame[5:]
    did = [0, 1, 2, 4][fhd & 3]
    if not single:
        rest = rest[1:]                           # window descriptor
    rest = rest[did:]
    old = [1 if single else 0, 2, 4, 8][fhd >> 6]
    new_fhd = (fhd & 0x3F) | (3 << 6)
    return magic + bytes([new_fhd]) + frame[5:5 + (0 if single else 1) + did] + size.to_bytes(8, "little") + rest[old:]


def test_a_python_without_zstandard_writes_zlib_and_says_it_cannot_read_zstd(tmp_path):
    """The hook runs `python -S` (no site-packages, so no zstandard): it writes zlib, and a
    zstd object is one it cannot read, never one it marks damaged."""
    oid = _loose(tmp_path, TEXT, encode(TEXT, fast=True))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from rewind.store.objects import CodecUnavailable, Store, encode, ZLIB\n"
        "assert encode(b'abc' * 1000, fast=True)[0] == ZLIB\n"
        "s = Store(sys.argv[2])\n"
        "try:\n    s.get(sys.argv[3])\nexcept CodecUnavailable:\n    print('unavailable', s.found_damaged)\n")
    import rewind
    pkg_parent = str(Path(rewind.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-S", "-c", code, pkg_parent, str(tmp_path), oid],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "unavailable {}", out.stderr


def test_a_first_snapshot_stores_file_contents_as_zstd_and_gives_them_back(project_dir):
    root = project_dir
    files = {f"src/pkg{i % 7}/m{i}.py": TEXT[i * 10:i * 10 + 3000] + b"# %d\n" % i for i in range(700)}
    for rel, data in files.items():
        write(root, rel, data)
    os.symlink("src/pkg1/m1.py", root / "link.py")
    run_rewind("save", "-m", "first", cwd=root)
    store = Store(os.environ["REWIND_HOME"])
    codecs = [store._raw(hashlib.sha256(d).hexdigest())[0] for d in files.values()]
    # only the files read before the scan knew it was big (on its own thread) are zlib
    assert set(codecs) <= {ZLIB, ZSTD} and codecs.count(ZLIB) <= PARALLEL_AFTER + 8
    verified = json.loads(run_rewind("verify", "--json", cwd=root).stdout)
    assert verified["ok"] and verified["problems"] == [] and verified["objects"] >= 700
    for rel in list(files)[:50]:
        (root / rel).write_bytes(b"changed\n")
    (root / "link.py").unlink()
    run_rewind("to", "1", "--yes", cwd=root)
    assert all((root / rel).read_bytes() == data for rel, data in files.items())
    assert os.readlink(root / "link.py") == "src/pkg1/m1.py"
