"""The one exception type ArGen raises for problems a user can fix (bad input, bad config)."""


class ArgenError(Exception):
    """A problem with the user's input or configuration; the message names what is wrong."""


class JudgeOutage(ArgenError):
    """Too many judgements failed (an outage or rate limit): a fault that may pass on retry."""
