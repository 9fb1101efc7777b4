"""ArGen's two exception types: a problem the user must fix, and a judge outage that may pass.

They are siblings, not parent and child, so that code retrying a fault never has to rely on the
order of its ``except`` clauses to keep a user's error from being retried.
"""


class ArgenError(Exception):
    """A problem with the user's input or configuration; the message names what is wrong."""


class JudgeOutage(Exception):
    """Too many judgements failed (an outage or rate limit): a fault that may pass on retry."""
