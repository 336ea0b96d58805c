"""`gc` and `status` count the store the same way: each object once, loose or packed, and
the bytes its files take on disk. (A newcomer saw gc keep 455 objects, 91 KiB, while status
said 454 objects, 57 KiB, of the same store.)"""

from __future__ import annotations

import json

from helpers import run_rewind, write


def store_of_status(root) -> tuple[int, int]:
    got = json.loads(run_rewind("status", "--json", cwd=root, check=0).stdout)["store"]
    return got["objects"], got["bytes"]


def test_gc_and_status_count_the_same_objects_and_bytes(tmp_path):
    root = tmp_path / "p"
    for i in range(120):
        write(root, f"f{i}.txt", f"file {i}\n")
    run_rewind("save", "-m", "first", cwd=root, check=0)
    for k in range(3):                      # each save a small pack; gc merges them
        for i in range(30):
            write(root, f"f{i}.txt", f"file {i} v{k}\n")
        run_rewind("save", "-m", f"v{k}", cwd=root, check=0)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    before = store_of_status(root)
    dry = json.loads(run_rewind("gc", "--dry-run", "--json", cwd=root, check=0).stdout)
    assert (dry["store_objects"], dry["store_bytes"]) == before
    done = json.loads(run_rewind("gc", "--json", cwd=root, check=0).stdout)
    after = store_of_status(root)
    assert (done["store_objects"], done["store_bytes"]) == after
    assert after[0] == before[0] - done["objects_swept"]
    text = run_rewind("gc", cwd=root, check=0).stdout
    assert f"the store now holds {after[0]:,} objects" in text, text
    status = run_rewind("status", cwd=root, check=0).stdout
    assert f"{after[0]:,} objects" in status
