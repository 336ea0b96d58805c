"""Text from outside (a payload, a command line) made storable.

JSON can carry a lone UTF-16 surrogate ("\\ud83d" without its pair: half of an emoji cut by a
truncation), and a command line carries undecodable bytes as surrogate escapes ($'\\xff').
Neither is valid UTF-8, so SQLite refuses it and the checkpoint would be lost. Such text is
kept escaped instead ("\\ud83d", "\\xff"): visible, and nothing else about it changes.
"""

from __future__ import annotations


def unbroken(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    return text.encode("utf-8", "surrogateescape" if _escapes_only(text) else "backslashreplace") \
        .decode("utf-8", "backslashreplace")


def _escapes_only(text: str) -> bool:
    """Every lone surrogate is a surrogate escape of a byte (\\udc80-\\udcff)."""
    return all(not 0xD800 <= ord(ch) <= 0xDFFF or 0xDC80 <= ord(ch) <= 0xDCFF for ch in text)


def unbroken_json(value):
    """`unbroken` on every string of a decoded JSON value (keys too)."""
    if isinstance(value, str):
        return unbroken(value)
    if isinstance(value, list):
        return [unbroken_json(v) for v in value]
    if isinstance(value, dict):
        return {unbroken(k): unbroken_json(v) for k, v in value.items()}
    return value
