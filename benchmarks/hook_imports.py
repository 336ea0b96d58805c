"""What the installed hook imports, for two checkouts side by side, interleaved in one run:
the sum of `python -X importtime`'s self times (median of ROUNDS), the number of modules,
and any module that is neither the standard library nor rewind (the hook path must stay
standard-library only).

    python benchmarks/hook_imports.py OLD_CHECKOUT [NEW_CHECKOUT] [--rounds 15]

Each run: a fresh REWIND_HOME, REWIND_WATCH=0, a small git project; three payloads (a
prompt, an edit tool's PreToolUse, a shell's PreToolUse). Both checkouts are byte-compiled
first, as an installed package is (otherwise this measures the compiler).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def imports(checkout: Path, payload: dict, project: str) -> tuple[int, list[str]]:
    home = tempfile.mkdtemp(prefix="rewind-imports-")
    env = dict(os.environ, REWIND_HOME=home, REWIND_WATCH="0", CLAUDE_PROJECT_DIR=project)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    err = subprocess.run([sys.executable, "-S", "-X", "importtime", str(checkout / "rewind" / "hook.py"), "claude"],
                         input=json.dumps(payload), capture_output=True, text=True, env=env).stderr
    total, names = 0, []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line:
            self_us, _, name = line[len("import time:"):].split("|")
            if self_us.strip().isdigit():
                total += int(self_us)
                names.append(name.strip())
    return total, names


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    checkouts = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    for path in checkouts.values():
        compileall.compile_dir(str(path / "rewind"), quiet=1)
    project = tempfile.mkdtemp(prefix="rewind-imports-proj-")
    Path(project, "a.txt").write_text("a\n")
    subprocess.run(["git", "init", "-q", project], check=True)
    payloads = {
        "UserPromptSubmit": {"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": project,
                             "prompt": "hi", "transcript_path": os.path.join(project, "t.jsonl")},
        "PreToolUse Write": {"hook_event_name": "PreToolUse", "session_id": "s", "cwd": project, "tool_name": "Write",
                             "tool_use_id": "t1", "tool_input": {"file_path": os.path.join(project, "x"),
                                                                 "content": "y"}},
        "PreToolUse Bash": {"hook_event_name": "PreToolUse", "session_id": "s", "cwd": project, "tool_name": "Bash",
                            "tool_use_id": "t2", "tool_input": {"command": "ls"}},
    }
    times = {(k, p): [] for k in checkouts for p in payloads}
    names: dict[tuple[str, str], list[str]] = {}
    for r in range(args.rounds):
        for p, payload in payloads.items():
            for k in (("old", "new") if r % 2 else ("new", "old")):
                t, n = imports(checkouts[k], payload, project)
                times[(k, p)].append(t)
                names[(k, p)] = n
    stdlib = set(sys.stdlib_module_names)
    print(f"{'hook':18s} {'old ms':>8s} {'mods':>5s} {'new ms':>8s} {'mods':>5s} {'new/old':>8s}")
    bad = set()
    for p in payloads:
        o, n = (statistics.median(times[(k, p)]) / 1000 for k in ("old", "new"))
        print(f"{p:18s} {o:8.2f} {len(names[('old', p)]):5d} {n:8.2f} {len(names[('new', p)]):5d} {n / o:8.3f}")
        bad |= {m for m in names[("new", p)] if m.split(".")[0] not in stdlib and m.split(".")[0] != "rewind"}
    print("modules outside the standard library and rewind:", ", ".join(sorted(bad)) or "none")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
