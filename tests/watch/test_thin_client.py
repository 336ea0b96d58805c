"""The installed hook's thin client (hooks/client.py, rewind/hook.py): what it costs to start
(no `os`, no package beyond its own), that it finds the data dir exactly as
rewind.locations does, and that it is served through a project dir given by a link."""

from __future__ import annotations

import json
import time
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import wait_ready
from rewind import locations
from rewind.hooks import ADAPTERS, client, install
from test_served import counts, make, payload, serving

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc and inotify")
PACKAGE_PARENT = str(Path(client.__file__).resolve().parents[2])


def test_the_client_imports_no_module_beyond_its_own_under_dash_s():
    code = ("import sys; before = set(sys.modules); sys.path[0] = %r; import rewind.hooks.client; "
            "print(' '.join(sorted(set(sys.modules) - before)))" % PACKAGE_PARENT)
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["rewind", "rewind.hooks", "rewind.hooks.client"]


def test_the_clients_agents_are_the_adapters():
    assert client.AGENTS == tuple(ADAPTERS)


def test_the_clients_copies_of_shared_values_equal_their_homes():
    """The client imports nothing of rewind's, so it keeps copies: they must not drift."""
    from rewind import constants
    from rewind.hooks import entry
    assert (client.STALL_S, client.STILL_S) == (constants.STALL_S, constants.STILL_S)
    assert client.MAX_PAYLOAD == entry.MAX_PAYLOAD
    from rewind.hooks import reserve             # entry keeps its name to skip the import
    assert entry.RESERVE == reserve.NAME
    from rewind import config
    from rewind.capture import ignore
    assert ignore.PROJECT_FILE == config.PROJECT_FILE


def _b(env: dict[str, str]) -> dict[bytes, bytes]:
    return {os.fsencode(k): os.fsencode(v) for k, v in env.items()}


@pytest.mark.parametrize("case", ["home", "tilde", "relative", "link", "xdg", "xdg-relative", "no-xdg",
                                  "slash-home", "tilde-user", "testing"])
def test_the_clients_data_dir_is_rewinds(case, tmp_path, monkeypatch):
    """Only computed, never created: no real home is touched."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    for k in ("REWIND_HOME", "REWIND_TESTING", "XDG_DATA_HOME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "link"))
    env = {"home": {"REWIND_HOME": str(tmp_path / "real" / "h")},
           "tilde": {"REWIND_HOME": "~/h"},
           "relative": {"REWIND_HOME": "real/h"},
           "link": {"REWIND_HOME": str(tmp_path / "link" / "h")},
           "xdg": {"XDG_DATA_HOME": str(tmp_path / "link") + "/"},
           "xdg-relative": {"XDG_DATA_HOME": "link"},
           "no-xdg": {},
           "slash-home": {"HOME": "/"},
           "tilde-user": {"REWIND_HOME": "~root/h"},
           "testing": {"REWIND_TESTING": "1"}}[case]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if case == "testing":
        with pytest.raises(RuntimeError):
            locations.data_dir()
        with pytest.raises(RuntimeError):
            client.data_dir_b(_b(dict(os.environ)))
        return
    got = client.data_dir_b(_b(dict(os.environ)))
    if case in ("tilde-user", "xdg-relative"):
        assert got is None                  # the client asks rewind.locations then
        return
    assert os.path.realpath(os.fsdecode(got)) == locations.data_dir()


def _installed(p: dict, cwd: Path, **env) -> None:
    proc = subprocess.run(install.hook_command("claude"), shell=True, input=json.dumps(p).encode(),
                          capture_output=True, cwd=cwd, timeout=60, env={**os.environ, "REWIND_WATCH": "1", **env})
    assert proc.returncode == 0 and proc.stdout == b"", proc


def test_the_installed_hook_is_served_through_a_linked_project_dir(tmp_path):
    root = make(tmp_path, "p")
    link = tmp_path / "via"
    link.symlink_to(root)
    _installed(payload("SessionStart", root), root, CLAUDE_PROJECT_DIR=str(root))
    wait_ready(root)
    serving(root)
    # the agent names the project through the link: the client resolves it when the path as
    # given names no watched project, and the call is served all the same
    for event in ("UserPromptSubmit", "Stop"):
        p = payload(event, root)
        p["cwd"] = str(link)
        _installed(p, link, CLAUDE_PROJECT_DIR=str(link))
    assert counts(root, served=2) == (2, 1)     # the SessionStart came before the watcher
    cps = json.loads(subprocess.run([sys.executable, "-m", "rewind", "list", "--json"], cwd=root,
                                    capture_output=True, text=True, check=True).stdout)
    assert [cp["kind"] for cp in cps] == ["prompt"]


@pytest.mark.parametrize("in_process", [True, False])
def test_a_cookie_of_the_watchers_own_process_is_answered_in_memory(in_process, tmp_path, monkeypatch):
    """A served hook's scan syncs with the watcher it runs in: the answer is handed over in
    memory, after the events before the cookie are committed, and no answer row is written
    (a trigger on the real catalog tells). Any other process's cookie gets its row."""
    import threading
    from watchdog.events import FileCreatedEvent, FileModifiedEvent
    from helpers import project, write
    from rewind.capture import dirty
    from rewind.constants import COOKIE_PREFIX
    from rewind.watch.daemon import Watcher
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    proj = project(root)
    proj.catalog.db.execute("CREATE TRIGGER seen AFTER INSERT ON watch_cookies BEGIN "
                            "INSERT OR REPLACE INTO meta(key, value) VALUES ('test-cookie-row', NEW.name); END")
    w = Watcher(os.environ["REWIND_HOME"], str(root), proj.id, background=False, idle_s=None)
    monkeypatch.setattr(dirty, "LOCAL_ANSWERS", w.answers if in_process else None)
    got = {}

    def hook_side():                 # a served call's own connection, on its own thread
        mine = project(root)
        try:
            got["seq"] = dirty.sync(mine, timeout=10)
        finally:
            mine.close()
    t = threading.Thread(target=hook_side)
    t.start()
    try:
        w.on_event(FileModifiedEvent(str(root / "a.txt")))          # before the cookie
        for _ in range(1000):
            cookies = [n for n in os.listdir(root) if n.startswith(COOKIE_PREFIX)]
            if cookies:
                break
            time.sleep(0.005)
        w.on_event(FileCreatedEvent(str(root / cookies[0])))
        t.join(10)
        rows = proj.catalog.db.execute("SELECT seq, path FROM watch_events").fetchall()
        assert got["seq"] == max(seq for seq, _ in rows) and (got["seq"], b"a.txt") in rows
        row_seen = proj.catalog.db.execute("SELECT value FROM meta WHERE key='test-cookie-row'").fetchone()
        assert (row_seen is None) == in_process
        assert w.answers.waiting == {} and not [n for n in os.listdir(root) if n.startswith(COOKIE_PREFIX)]
    finally:
        t.join(10)
        for cat in w._catalogs:
            cat.close()
        proj.close()


def test_served_calls_follow_a_catalog_replaced_under_the_watcher(tmp_path):
    """The watcher lends its calls one catalog connection; a catalog file removed (a person
    clearing the data dir's catalog) or replaced since is opened anew, never written through
    the old inode, where every row would be lost."""
    from rewind.constants import CATALOG_NAME
    from test_served import hook, listing
    root = make(tmp_path, "p")
    hook(payload("SessionStart", root), root)
    wait_ready(root)
    serving(root)
    hook(payload("UserPromptSubmit", root), root)
    assert len(listing(root)) == 1
    home = Path(os.environ["REWIND_HOME"])
    for name in (CATALOG_NAME, CATALOG_NAME + "-wal", CATALOG_NAME + "-shm"):
        (home / name).unlink(missing_ok=True)
    hook(payload("UserPromptSubmit", root), root, REWIND_HOOK_TRACE="1")
    assert [cp["kind"] for cp in listing(root)] == ["prompt"]
    log = next(home.glob("*.log")).read_text()
    assert "UserPromptSubmit (served): checkpoint" in log, log[-2000:]


def test_a_served_checkpoints_number_mark_is_written_after_its_answer(tmp_path):
    """The highest number handed out is also kept outside the catalog (catalog/numbers.py); a
    served call writes it right after its answer, still never lowering it."""
    from rewind.catalog.numbers import read_highest_number
    from test_served import hook
    root = make(tmp_path, "p")
    hook(payload("SessionStart", root), root)
    wait_ready(root)
    serving(root)
    home = os.environ["REWIND_HOME"]
    for n in (1, 2, 3):
        hook(payload("UserPromptSubmit", root), root, REWIND_HOOK_TRACE="1")
        for _ in range(200):
            if read_highest_number(home, str(root)) == n:
                break
            time.sleep(0.01)
        assert read_highest_number(home, str(root)) == n
    log = next(Path(home).glob("*.log")).read_text()
    assert log.count("UserPromptSubmit (served): checkpoint") == 3


def test_a_served_call_ends_without_the_interpreters_finalization_and_a_standalone_one_with_it(tmp_path):
    """A served call has nothing left to flush or close: its process ends at once
    (client.script), skipping the interpreter's teardown and its exit handlers; a call done
    in the hook's own process exits normally (its log and SQLite connection closed)."""
    root = make(tmp_path, "p")
    _installed(payload("SessionStart", root), root, CLAUDE_PROJECT_DIR=str(root))
    wait_ready(root)
    serving(root)
    code = ("import sys, atexit; sys.path[0] = %r; "
            "atexit.register(lambda: sys.stderr.write('finalized')); "
            "from rewind.hooks.client import script; sys.exit(script(sys.argv[1:]))" % PACKAGE_PARENT)

    def call(event: str, **env) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-S", "-c", code, "claude"], input=json.dumps(payload(event, root)).encode(),
                              capture_output=True, cwd=root, timeout=60,
                              env={**os.environ, "REWIND_WATCH": "1", "CLAUDE_PROJECT_DIR": str(root), **env})

    served = call("UserPromptSubmit")
    assert (served.returncode, served.stdout, served.stderr) == (0, b"", b"")
    assert counts(root, served=1) == (1, 1)
    alone = call("Stop", REWIND_WATCH="0")
    assert (alone.returncode, alone.stdout, alone.stderr) == (0, b"", b"finalized")
    assert counts(root) == (1, 2)
    cps = json.loads(subprocess.run([sys.executable, "-m", "rewind", "list", "--json"], cwd=root,
                                    capture_output=True, text=True, check=True).stdout)
    assert [cp["kind"] for cp in cps] == ["prompt"]


def test_the_environment_key_tells_apart_what_the_watcher_compares_and_nothing_else():
    """Two environments get the same env_key exactly when serve.env_differences finds no
    difference between them: a server of other environments' hooks (watch/envserver.py) is
    found by the key the client computes from its own."""
    from rewind.envkey import env_key
    from rewind.watch.serve import env_differences
    base = {"HOME": "/h", "PATH": "/bin", "REWIND_HOME": "/d", "CLAUDE_CONFIG_DIR": "/c", "TERM": "x"}
    variants = [base, {**base, "PATH": "/usr/bin", "TERM": "y"}, {**base, "CLAUDE_PROJECT_DIR": "/p"},
                {**base, "REWIND_HOOK_TRACE": "1"}, {**base, "CLAUDE_CONFIG_DIR": "/other"},
                {**base, "REWIND_SETTLE_TIMEOUT": "7"}, {k: v for k, v in base.items() if k != "HOME"},
                {**base, "XDG_CONFIG_HOME": "/x"}, {**base, "REWIND_HOME": "/d2"}]

    def key(env):
        return env_key({os.fsencode(k): os.fsencode(v) for k, v in env.items()})
    for a in variants:
        for b in variants:
            assert (key(a) == key(b)) == (not env_differences(a, b)), (a, b)
    assert len(key(base)) == 16 and key(base) == key(dict(reversed(list(base.items()))))
