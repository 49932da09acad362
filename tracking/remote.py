"""The MLflow tracking server (or ``file:`` store) as approve reads and
writes it, through the official client (``mlflow-skinny``).

Every call goes through ``connected``: it sets the client's token, a short
timeout and no retries for the duration of the call (MLflow reads them from
the environment), under one lock, so no two calls in a process see each
other's token; and it turns the client's failures into ``TrackerError``
(unreachable, unauthorised) or, for what the caller named wrongly, into the
``InvalidInput`` of that field.
"""

import fnmatch
import ipaddress
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from django.conf import settings

from workspace.errors import InvalidInput, ServiceError, Unavailable

# The client's own settings while a call runs: fail fast, never retry for a
# minute in a request; and a local file: store allowed (MLflow 3 refuses one
# unless told: its file backend is in maintenance, yet it is what a single
# machine without a server has).
TIMEOUT_SECONDS = 10
_ENVIRONMENT = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": str(TIMEOUT_SECONDS),
    "MLFLOW_ALLOW_FILE_STORE": "true",
}
_LOCK = threading.RLock()
# The most runs one import reads (a study holds at most MAX_CANDIDATES).
RUNS_MAX = 1000
# The most artifacts listed per run when matching a pattern.
ARTIFACTS_LISTED_MAX = 1000


class TrackerError(Unavailable):
    """The tracking server could not be used; ``code`` says why
    (``mlflow_unreachable``, ``mlflow_unauthorised``)."""


@dataclass(frozen=True)
class Connection:
    """Where to reach MLflow: the URI and the token (decrypted), if any."""

    tracking_uri: str
    token: str = ""


@dataclass
class RemoteRun:
    run_id: str
    name: str
    experiment_id: str
    status: str
    metrics: dict[str, float]
    tags: dict[str, str] = field(default_factory=dict)


def file_store_path(uri: str) -> Path | None:
    """The folder of a ``file:`` URI, or None for any other."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(parsed.path)


def check_uri(uri: str) -> None:
    """InvalidInput on ``tracking_uri`` unless it is an ``http(s)://`` URL
    or a ``file:`` store under one of ``settings.TRACKING_FILE_ROOTS`` (the
    folders an operator lets designers read: none by default)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        if not parsed.hostname:
            raise InvalidInput({"tracking_uri": "an http(s) tracking URI needs a host, e.g. http://mlflow:5000"})
        check_host(uri)
        return
    path = file_store_path(uri)
    if path is None:
        raise InvalidInput({"tracking_uri": "must be http://…, https://… or file:/… (a local MLflow store)"})
    roots = [Path(root).resolve() for root in settings.TRACKING_FILE_ROOTS]
    resolved = path.resolve()
    if not any(resolved == root or root in resolved.parents for root in roots):
        raise InvalidInput(
            {"tracking_uri": "file: stores are allowed only under the folders in TRACKING_FILE_ROOTS (docs/api.md)"}
        )
    if not resolved.is_dir():
        raise TrackerError(f"MLflow store unreachable: no folder {resolved}", "mlflow_unreachable")


def _host_allowed(host: str, allowed: list[str]) -> bool:
    """``host`` is one of ``allowed``: equal to an entry, or under an entry
    written ``.suffix`` (which also matches the bare ``suffix``)."""
    for entry in (entry.lower().rstrip(".") for entry in allowed):
        if host == entry or (entry.startswith(".") and (host.endswith(entry) or host == entry[1:])):
            return True
    return False


def _address_kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    for kind in ("loopback", "link_local", "unspecified", "multicast", "private", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return "non-public"


def check_host(uri: str) -> None:
    """InvalidInput on ``tracking_uri`` unless approve may contact the host
    of this ``http(s)://`` URI (a server-side request any designer can aim:
    docs/architecture.md, "MLflow hosts"). With ``TRACKING_ALLOWED_HOSTS``
    set, only the hosts it lists (exact, or ``.suffix``), contacted whatever
    their address. Without it, any host whose every address is public; with
    ``DEBUG``, loopback too (a developer's own MLflow). A name that does not
    resolve passes here and fails as unreachable, saying so."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("http", "https"):
        return
    host = (parsed.hostname or "").lower().rstrip(".")
    allowed = list(settings.TRACKING_ALLOWED_HOSTS)
    if allowed:
        if not _host_allowed(host, allowed):
            raise InvalidInput(
                {"tracking_uri": f"{host} is not among the hosts this server may contact (TRACKING_ALLOWED_HOSTS)"}
            )
        return
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        raise InvalidInput({"tracking_uri": "the port must be a number from 0 to 65535"}) from None
    try:
        found = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return
    for *_, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if address.is_global or (settings.DEBUG and address.is_loopback):
            continue
        raise InvalidInput(
            {
                "tracking_uri": f"{host} is a {_address_kind(address)} address ({address}): this server contacts "
                "only public hosts unless the operator lists the host in TRACKING_ALLOWED_HOSTS"
            }
        )


def _failure(error: Exception, uri: str) -> ServiceError:
    """What a failed call means, in words naming the server."""
    code = getattr(error, "error_code", "")
    message = str(error)
    if code in ("UNAUTHENTICATED", "PERMISSION_DENIED") or " 401 " in message or " 403 " in message:
        return TrackerError(
            f"MLflow at {uri} refused the credentials (unauthorised): check the token", "mlflow_unauthorised"
        )
    if code == "INVALID_PARAMETER_VALUE":
        return InvalidInput({"filter": f"MLflow refused it: {message.splitlines()[0][:300]}"})
    return TrackerError(f"MLflow at {uri} is unreachable: {_cause(message)}", "mlflow_unreachable")


# What the client's messages say, in words (the first found names the cause).
_CAUSES = (
    (("NameResolutionError", "Name or service not known", "nodename nor servname"), "the host name is unknown"),
    (("Connection refused", "NewConnectionError"), "the connection was refused"),
    (("timed out", "Timeout"), f"no answer within {TIMEOUT_SECONDS} s"),
    (("SSLError", "CERTIFICATE_VERIFY_FAILED"), "its TLS certificate was not accepted"),
)


def _cause(message: str) -> str:
    for needles, words in _CAUSES:
        if any(needle in message for needle in needles):
            return words
    return message.splitlines()[0][:300] if message else "no answer"


@contextmanager
def connected(connection: Connection) -> Iterator[Any]:
    """An ``MlflowClient`` for ``connection``, used within the block only."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    check_host(connection.tracking_uri)  # again at each use: the setting or the host's address may have changed
    with _LOCK:
        saved = {name: os.environ.get(name) for name in (*_ENVIRONMENT, "MLFLOW_TRACKING_TOKEN")}
        os.environ.update(_ENVIRONMENT)
        if connection.token:
            os.environ["MLFLOW_TRACKING_TOKEN"] = connection.token
        else:
            os.environ.pop("MLFLOW_TRACKING_TOKEN", None)
        try:
            yield MlflowClient(tracking_uri=connection.tracking_uri)
        except (MlflowException, OSError) as error:
            raise _failure(error, connection.tracking_uri) from None
        except Exception as error:
            # requests' own errors (a refused connection, a timeout) and the
            # like: the server is not there as an MLflow server.
            if error.__class__.__module__.startswith(("requests", "urllib3")):
                raise _failure(error, connection.tracking_uri) from None
            raise
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def experiment_count(connection: Connection) -> int:
    """How many (active) experiments the server holds."""
    with connected(connection) as client:
        count, token = 0, None
        while True:
            page = client.search_experiments(max_results=1000, page_token=token)
            count += len(page)
            token = page.token
            if not token:
                return count


def experiment_resolve(connection: Connection, experiment: str) -> tuple[str, str]:
    """``(id, name)`` of the experiment named (or of that id); InvalidInput
    on ``experiment`` when the server has no such experiment."""
    from mlflow.exceptions import MlflowException

    with connected(connection) as client:
        found = client.get_experiment_by_name(experiment)
        if found is None and experiment.isdigit():
            try:
                found = client.get_experiment(experiment)
            except MlflowException as error:
                if getattr(error, "error_code", "") not in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                    raise
        if found is None or found.lifecycle_stage != "active":
            raise InvalidInput({"experiment": f"unknown experiment {experiment!r} at {connection.tracking_uri}"})
        return str(found.experiment_id), str(found.name)


def runs_search(connection: Connection, experiment_id: str, filter_string: str) -> list[RemoteRun]:
    """The active runs of the experiment that match the filter (MLflow's
    search syntax), oldest first; InvalidInput on ``filter`` when MLflow
    refuses it, or when more than ``RUNS_MAX`` match."""
    with connected(connection) as client:
        runs = client.search_runs(
            [experiment_id],
            filter_string=filter_string,
            max_results=RUNS_MAX + 1,
            order_by=["attributes.start_time ASC"],
        )
    if len(runs) > RUNS_MAX:
        raise InvalidInput({"filter": f"more than {RUNS_MAX} runs match: narrow the filter"})
    return [
        RemoteRun(
            run_id=run.info.run_id,
            name=run.info.run_name or run.info.run_id,
            experiment_id=str(run.info.experiment_id),
            status=run.info.status,
            metrics=dict(run.data.metrics),
            tags={key: value for key, value in run.data.tags.items() if not key.startswith("mlflow.")},
        )
        for run in runs
    ]


def metric_at_step(connection: Connection, run_id: str, key: str, step: int) -> float | None:
    """The run's value of ``key`` at ``step`` (the last one logged at it), or None."""
    with connected(connection) as client:
        history = client.get_metric_history(run_id, key)
    at_step = [entry for entry in history if entry.step == step]
    return max(at_step, key=lambda entry: entry.timestamp).value if at_step else None


def artifacts_matching(connection: Connection, run_id: str, pattern: str) -> list[str]:
    """The run's artifact paths that match the glob ``pattern``, sorted."""
    found: list[str] = []
    with connected(connection) as client:
        folders: list[str | None] = [None]
        listed = 0
        while folders and listed < ARTIFACTS_LISTED_MAX:
            for entry in client.list_artifacts(run_id, folders.pop()):
                listed += 1
                if entry.is_dir:
                    folders.append(entry.path)
                elif fnmatch.fnmatch(entry.path, pattern):
                    found.append(entry.path)
    return sorted(found)


def artifact_download(connection: Connection, run_id: str, path: str, folder: str) -> Path:
    """The artifact copied into ``folder``: its local path."""
    with connected(connection) as client:
        return Path(client.download_artifacts(run_id, path, folder))
