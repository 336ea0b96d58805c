"""What a command of rewind costs to start, for two checkouts side by side, interleaved in
one run: the CPU time (user + system) of `rewind list --json`, `rewind show 1 --json`,
`rewind status` and `rewind --help` on a small project with one checkpoint, the median of
ROUNDS, each against `python -c pass` of the same interpreter (the floor) measured in the
same rounds.

    python benchmarks/cli_start.py OLD_CHECKOUT [NEW_CHECKOUT] [--rounds 15]

Each checkout is byte-compiled first, as an installed package is, and run as
`python -c "from rewind.cli import main; main()" ARGS` with it first on sys.path.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LINES = (["list", "--json"], ["show", "1", "--json"], ["status"], ["--help"])


def cpu(argv: list[str], env: dict, cwd: str) -> float:
    """The CPU seconds of one run of `argv` (its children's rusage, before and after)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv[-3:])} failed: {r.stderr.decode(errors='replace')[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path, nargs="?", default=Path(__file__).resolve().parents[1])
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    checkouts = {"old": a.old.resolve(), "new": a.new.resolve()}
    for path in checkouts.values():
        if not (path / "rewind" / "cli" / "__init__.py").is_file():
            sys.exit(f"{path} is no checkout of rewind")
        compileall.compile_dir(str(path / "rewind"), quiet=1)
    work = Path(tempfile.mkdtemp(prefix="rewind-cli-start-"))
    project = work / "proj"
    project.mkdir()
    (project / "a.txt").write_text("a\n")
    base = dict(os.environ, REWIND_HOME=str(work / "home"), REWIND_WATCH="0", NO_COLOR="1", COLUMNS="100")
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    envs = {k: dict(base, PYTHONPATH=str(p)) for k, p in checkouts.items()}
    code = "from rewind.cli import main; main()"
    for env in envs.values():           # one checkpoint, and the store's gc clock set
        subprocess.run([sys.executable, "-c", code, "save", "-m", "one"], env=env, cwd=project,
                       capture_output=True, check=True)
    times: dict[tuple[str, str], list[float]] = {}
    floor: list[float] = []
    for _ in range(a.rounds):
        floor.append(cpu([sys.executable, "-c", "pass"], base, str(project)))
        for line in LINES:
            for name, env in envs.items():
                times.setdefault((name, " ".join(line)), []).append(
                    cpu([sys.executable, "-c", code, *line], env, str(project)))
    f = statistics.median(floor)
    print(f"CPU per start, median of {a.rounds} (python -c pass: {f * 1000:.0f} ms)")
    print(f"  {'command':<16}{'old':>9}{'new':>9}{'new/old':>9}{'old/floor':>11}{'new/floor':>11}")
    for line in LINES:
        key = " ".join(line)
        old, new = statistics.median(times[("old", key)]), statistics.median(times[("new", key)])
        print(f"  {key:<16}{old * 1000:>7.0f}ms{new * 1000:>7.0f}ms{new / old:>8.2f}x"
              f"{old / f:>10.1f}x{new / f:>10.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
