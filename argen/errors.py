"""ArGen's two exception types: a problem the user must fix, and a judge outage that may pass.

They are siblings, not parent and child, so that code retrying a fault never has to rely on the
order of its ``except`` clauses to keep a user's error from being retried.
"""

import reprlib


class ArgenError(Exception):
    """A problem with the user's input or configuration; the message names what is wrong."""


class JudgeOutage(Exception):
    """Too many judgements failed (an outage or rate limit): a fault that may pass on retry."""


def short(value: object, limit: int = 60) -> str:
    """A value's repr cut to `limit` characters: what a message about a bad value quotes, so a
    huge value (a long `--set`, YAML aliases expanded, a damaged file) never makes a huge one.
    `reprlib` stops after a few items per level, so a nested value is never expanded whole."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 80
