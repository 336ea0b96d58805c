"""rewind: an undo point for every prompt of a coding-agent session. The code, by stage:
1. hooks/    an agent's hook payload -> Event -> recorded (hook.py is the installed entry)
2. capture/  the working tree -> tree objects, with who changed what (watch/ feeds it hints)
3. store/    bytes and ids (objects, packs, sweep); catalog/ the SQLite rows, the only SQL
4. history/  reading and rewriting history: restore, undo, gc, verify, export, conversation
5. cli/      the commands, the only importer of typer, rich and textual
"""

__version__ = "0.1.0"
