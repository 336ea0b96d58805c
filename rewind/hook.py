"""The hook's fast entry: `python -S /path/to/rewind/hook.py AGENT`.

The installed hook command runs this file with `-S`, so the interpreter skips `site` (its
.pth files and the editable-install finder cost more than the hook's own work) and finds
rewind by this file's location. The hook path needs the standard library only. It is a
thin client first (hooks/client.py): the project's watcher records the event when it runs.
This file is compiled at every call (a script's bytecode is not cached) and imports no
`os` (2.5 ms of a -S start): keep it this small.
"""

import sys

if __file__.startswith("/"):
    sys.path[0] = __file__.rpartition("/")[0].rpartition("/")[0] or "/"
else:
    import os
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from rewind.hooks.client import script  # noqa: E402

sys.exit(script(sys.argv[1:]))
