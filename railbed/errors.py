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
    says what is wrong with it. Both are kept to one line and cut to
    :data:`MAX_FIELD_CHARS` and :data:`MAX_MESSAGE_CHARS`, whatever the
    input held (values enter messages through :func:`railbed.safeload.describe`;
    this is the last guard).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = _one_line(field, MAX_FIELD_CHARS)
        self.message = _one_line(message, MAX_MESSAGE_CHARS)
        super().__init__(f"{self.field}: {self.message}" if self.field else self.message)


MAX_FIELD_CHARS = 200
MAX_MESSAGE_CHARS = 400


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class EnvironmentProblem(RailbedError):
    """The machine cannot do what was asked (not root, no mnexec, a leftover run)."""


class RunFailed(RailbedError, RuntimeError):
    """A run could not complete (an agent died, integrity, timeout); the message says where."""


class Interrupted(BaseException):
    """The run received SIGTERM or SIGHUP; raised so the clean-up path runs."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
