"""The hook's fast entry: `python -S /path/to/rewind/hook.py AGENT`.

The installed hook command runs this file with `-S`, so the interpreter skips `site` (its
.pth files and the editable-install finder cost more than the hook's own work) and finds
rewind by this file's location. The hook path needs the standard library only. It is a
thin client first (hooks/client.py): the project's watcher records the event when it runs.
"""

import os
import sys

sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from rewind.hooks.client import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
