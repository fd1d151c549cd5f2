"""Java .properties files, the format of Kafka's server.properties (`rayka start --config-file`).

Rules (java.util.Properties.load):
- One entry per logical line; blank lines and lines whose first non-blank character is `#` or
  `!` are comments; a line ending in an odd number of backslashes continues on the next one
  (the next line's leading blanks dropped).
- The key ends at the first unescaped `=`, `:` or blank; blanks and one `=` or `:` after it
  are skipped; the rest is the value (so a value keeps every later `=`, as a jaas config has).
- Escapes in keys and values: `\\t \\n \\r \\f`, `\\uXXXX`, and `\\x` for any other x.
- Keys are kept exactly as written (no "_" / "." normalising: replicas/config_keys.py);
  a later entry wins. Pure: the stdlib only.
"""

from __future__ import annotations

__all__ = ["parse_properties", "load_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str) -> dict[str, str]:
    with open(path, encoding="latin-1") as f:     # Properties.load(InputStream)'s charset
        return parse_properties(f.read())


def parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _logical_lines(text: str):
    pending = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        joined = line[:-1] if trailing % 2 else line
        pending = joined if pending is None else pending + joined
        if not trailing % 2:
            yield pending
            pending = None
    if pending is not None:
        yield pending


def _split(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:min(i, n)], line[min(i, n):]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u" and i + 6 <= len(s):
            out.append(chr(int(s[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
