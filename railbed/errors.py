"""Errors that carry the name of the offending field.

Every validation error in railbed names the field it is about (for example
``servers[1].nic_rate``) so the CLI can print one line and exit with code 2.
"""

from __future__ import annotations

import signal


class RailbedError(Exception):
    """Base class of errors railbed reports to users."""


class SpecError(RailbedError, ValueError):
    """Invalid user input: a field of a spec, a flag or a file.

    ``field`` is a dotted path into the input (``fabric.spines``); the message
    says what is wrong with it.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class EnvironmentProblem(RailbedError):
    """The machine cannot do what was asked (not root, no mnexec, a leftover run)."""


class RunFailed(RailbedError, RuntimeError):
    """A run could not complete (an agent died, integrity, timeout); the message says where."""


class Interrupted(BaseException):
    """The run received SIGTERM or SIGHUP; raised so the clean-up path runs."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
