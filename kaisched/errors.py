"""The named exceptions of kaisched: for bugs, bad configuration and I/O.

Expected misfits (a pod that fits no node, a queue at its limit) are values,
not exceptions; see kaisched.api.fit.
"""


class KaischedError(Exception):
    """The root of every exception kaisched raises on purpose."""


class ConfigError(KaischedError):
    """The scheduler configuration is invalid; the message names the key."""


class InputError(KaischedError):
    """A file or object handed to the command line cannot be used."""

    exit_code = 1       # found once the work started: what a file says, a name not found


class PathError(InputError):
    """A path the command line names cannot be used: a file that is not there or is a
    directory, an output that cannot be written, a bundled name of the wrong kind. Refused
    before any work starts, so it exits 2, as click does for a bad command line."""

    exit_code = 2


class MissingConfigFile(ConfigError, PathError):
    """A configuration file the command line names (a kubeconfig) is not there: a
    ConfigError to the code that loads it, a path refused before the work (exit 2) to
    the user."""


class ApiError(KaischedError):
    """A call to the cluster API failed."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class TransientApiError(ApiError):
    """Worth retrying: server errors, timeouts, throttling, an unreachable server."""


class UnreachableError(TransientApiError):
    """No answer at all: the connection was refused, timed out or dropped."""


class PermanentApiError(ApiError):
    """Not worth retrying: not found, forbidden, invalid."""


class NotFoundError(PermanentApiError):
    def __init__(self, message: str) -> None:
        super().__init__(message, 404)


class ConflictError(PermanentApiError):
    """409: the object exists, changed meanwhile, or (a bind) the pod is already
    assigned. Sending the same request again cannot help: re-read instead."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 409)


class GoneError(TransientApiError):
    """A watch's resourceVersion is too old: relist."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 410)


class UsageDBError(KaischedError):
    """The usage database (a Prometheus server) gave no answer, or one that
    cannot be read: the last known usage stands."""
