"""Numbers and names that the rest of rewind agrees on."""

RING_SIZE = 100            # checkpoints kept per project
RETENTION_DAYS = 30        # checkpoints older than this are dropped
MAX_FILE_SIZE = 50 * 1024 * 1024   # larger files are flagged `large`, not stored

SCHEMA_VERSION = 11        # catalog schema (catalog/schema.py MIGRATIONS takes older ones up)
TREE_FORMAT = b"rewind-tree 1\n"   # first line of every tree object

CATALOG_NAME = "catalog.sqlite"
OBJECTS_DIR = "objects"
TMP_DIR = "tmp"
JOURNAL_DIR = "journal"
LOCKS_DIR = "locks"
LOG_NAME = "rewind.log"

TMP_PREFIX = ".rewind-tmp-"       # temporary files a restore writes inside the project
PROJECT_FILE = ".rewind.toml"     # a project's settings (config.py), recorded like the ignore files
COOKIE_PREFIX = TMP_PREFIX + "cookie-"   # a hook's sync cookie or window marker (watch/daemon.py)

KINDS = ("prompt", "manual", "rewind")
SOURCES = ("tool", "bash", "external", "rewind", "unknown")
FLAGS = ("symlink", "outside", "large", "hardlink", "binary", "mode", "ignored", "git", "unrecorded")

STALL_S = 2.0     # what a stopped watcher may cost a hook before it is killed (stalled.py, README)
STILL_S = 0.5     # seen stopped twice this far apart: not a job being continued

HEARTBEAT_STALE_S = 5.0   # the watcher's heartbeat older than this: it is gone, its first scan not running
COARSE_MTIME_NS = 2 * 10**9   # FAT's mtime granularity, the coarsest a project may have: a file
                              # changed this recently may change again with the same stat
