"""The one base of every error that is the user's input, not quorum's fault.

The CLI turns any UserError into one line on stderr and exit code 2; everything else is a bug
or an outage and is reported as such. Kept free of imports so catching it costs nothing.
"""


class UserError(ValueError):
    """Bad input: a file, a setting, a question or an id the user gave."""


class Unavailable(ConnectionError):
    """A service quorum needs cannot be reached; the message names it and how to get it back."""


class UnusableHome(Unavailable):
    """The data directory (QUORUM_HOME) cannot be used: a file, unwritable, or full."""
