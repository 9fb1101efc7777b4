"""The one exception type ArGen raises for problems a user can fix (bad input, bad config)."""


class ArgenError(Exception):
    """A problem with the user's input or configuration; the message names what is wrong."""
