"""The MLflow tracking server (or local ``file:`` store) as approve reads
and writes it. A tracking URI is any designer's to aim, and the server at it
anyone's to run: docs/architecture.md, "MLflow hosts", has the threat model.

A server is reached through the small client below, of the REST API 2.0
endpoints approve uses, never through MLflow's own HTTP client (which reads
its token from the environment, resolves the host again when it connects,
follows redirects and trusts whatever artifact location the server names).
Every call (``connected``):

- parses the URI once, strictly (``target``: ``http(s)://host[:port][/path]``,
  a lower-case name or a canonical address; no user name, backslash,
  %-escape, space or query: nothing two parsers could read differently);
- judges the host (``TRACKING_ALLOWED_HOSTS``, else public addresses only),
  resolves it once, judges every address, and connects to those addresses
  only (``PinnedConnection``: the host name is sent as ``Host`` and checked
  against the TLS certificate, but never looked up again);
- follows no redirect; sends the token in its own request's header (never in
  ``os.environ``, under no lock); reads each answer with a size cap and a
  deadline (``CALL_SECONDS`` for the whole exchange, ``TIMEOUT_SECONDS`` per
  read);
- reads and writes artifacts only through the server's own
  ``mlflow-artifacts`` proxy (``_proxied``), whatever location it names;
- answers every failure to reach an MLflow server with one message
  (``UNREACHABLE``), whatever the host, port or cause.

A ``file:`` store (only under ``TRACKING_FILE_ROOTS``) is read with MLflow's
own FileStore, its real path checked under the roots at every call, and the
folders the call reads checked to hold no symbolic link or special file;
its artifacts are opened one path component at a time, never following a
link (``_open_beneath``).
"""

import fnmatch
import http.client
import ipaddress
import json
import logging
import os
import re
import socket
import ssl
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar
from urllib.parse import quote, urlencode

from django.conf import settings

from workspace import limits
from workspace.errors import InvalidInput, ServiceError, Unavailable

logger = logging.getLogger(__name__)

# Each connect and each read of a socket; and the whole of one exchange
# (request, headers, body), however slowly a server answers.
TIMEOUT_SECONDS = 10
CALL_SECONDS = 20
# The caps on what a server may make approve read (workspace.limits): the
# JSON of one call, an error answer, the runs of an import, the artifacts
# listed per run and a path's length.
ANSWER_MAX_BYTES = limits.TRACKING_ANSWER_MAX_BYTES
ERROR_MAX_BYTES = limits.TRACKING_ERROR_MAX_BYTES
RUNS_MAX = limits.TRACKING_RUNS_MAX
ARTIFACTS_LISTED_MAX = limits.TRACKING_ARTIFACTS_LISTED_MAX
ARTIFACT_PATH_MAX_LENGTH = limits.TRACKING_ARTIFACT_PATH_MAX_LENGTH
# A page of runs; the most pages of any listing a server may make approve read.
RUNS_PAGE = 100
PAGES_MAX = 100
# The most of a host's (checked) addresses tried, one after another.
ADDRESSES_TRIED = 3
# The most experiments listed for the page's picker (more: the name or id is typed).
EXPERIMENTS_LISTED_MAX = 1000

UNREACHABLE = (
    "Could not reach the tracking server: nothing answered there as MLflow in time (an unknown host, a closed "
    "port, a redirect, a TLS or HTTP error), or the host is not one this server may contact (only public "
    "addresses, unless the operator lists the host in TRACKING_ALLOWED_HOSTS)."
)
UNAUTHORISED = "The tracking server refused the credentials (HTTP 401 or 403): check the token."
STORE_UNREADABLE = (
    "Could not read the MLflow store: there is no MLflow store there, it cannot be read, or it holds a "
    "symbolic link or a special file (refused: a store is read only under TRACKING_FILE_ROOTS)."
)
_ROOTS_ONLY = "file: stores are allowed only under the folders in TRACKING_FILE_ROOTS (a setting of the server)"
_URI_SHAPE = (
    "must be http://…, https://… or file:/… (a local MLflow store), written plainly: http(s)://host[:port][/path] "
    "with a lower-case host name or address; no user name, backslash, %-escape, space, query or trailing dot"
)

# MLflow 3 refuses a file: store unless told (its file backend is in
# maintenance, yet it is what a single machine without a server has). A
# constant for the process, not a credential.
os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")


class TrackerError(Unavailable):
    """The tracking server could not be used; ``code`` says why
    (``mlflow_unreachable``, ``mlflow_unauthorised``,
    ``mlflow_artifacts_refused``)."""


class ArtifactRefused(ServiceError):
    """A run's artifact approve does not read (or write): kept at a location
    the policy does not allow, or too large. The message says which."""


class _MlflowError(Exception):
    """MLflow answered with an error (``error_code``, ``message``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code)
        self.code, self.message = code, message


class _NotMlflow(Exception):
    """An answer that is not MLflow's (its shape, or its size)."""


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


@dataclass(frozen=True)
class Experiment:
    experiment_id: str
    name: str
    active: bool


# --- the tracking URI ---------------------------------------------------------------

_HTTP_URI = re.compile(r"(https?)://(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::([1-9][0-9]{0,4}))?((?:/[A-Za-z0-9._~-]+)*)/?")
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_FILE_URI = re.compile(r"file:(?://)?(/[^\x00-\x1f\x7f\\%?#]*)")
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Target:
    """An ``http(s)`` tracking URI as parsed, once: the host (an IPv6
    address without its brackets) and, when it is written as one, its
    address."""

    scheme: str
    host: str
    port: int
    prefix: str
    address: _Address | None


@dataclass(frozen=True)
class HostPolicy:
    """Which hosts one kind of outgoing request may contact: those listed
    in the setting named ``setting`` when it lists any, else public
    addresses only (loopback too with ``DEBUG``); a refusal is an
    InvalidInput on ``field``. Tracking servers here; the webhooks app has
    its own (``WEBHOOK_ALLOWED_HOSTS``)."""

    setting: str
    field: str

    def allowed(self) -> list[str]:
        """The setting's hosts, read at each call (tests change it)."""
        return list(getattr(settings, self.setting))


TRACKING_HOSTS = HostPolicy(setting="TRACKING_ALLOWED_HOSTS", field="tracking_uri")


def _refused(message: str = _URI_SHAPE, field: str = "tracking_uri") -> InvalidInput:
    return InvalidInput({field: message})


def target(uri: str) -> Target:
    """``uri`` parsed, or InvalidInput on ``tracking_uri``: only the plain
    spelling every parser reads the same way (``target_of``)."""
    match = _HTTP_URI.fullmatch(uri)
    if match is None:
        raise _refused()
    scheme, host, port, prefix = match.groups()
    if any(segment in (".", "..") for segment in prefix.split("/")):
        raise _refused()
    return target_of(scheme, host, port, prefix)


def target_of(
    scheme: str, host: str, port: str | None, prefix: str, *, field: str = "tracking_uri", shape: str = _URI_SHAPE
) -> Target:
    """The parts of an ``http(s)`` URL a pattern matched, checked, or
    InvalidInput on ``field`` (``shape``, the words of a malformed URL). A
    host is a DNS name (labels of a-z, 0-9 and -) or an address; one whose
    last label is a number must be an IPv4 address in four decimal parts
    (no ``127.1``, ``2130706433``, ``0x7f.1`` or ``0177.0.0.1``)."""
    address: _Address | None = None
    if host.startswith("["):
        host = host[1:-1]
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            raise _refused(shape, field) from None
    else:
        labels = host.split(".")
        if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
            raise _refused(shape, field)
        if labels[-1].isdigit() or labels[-1].startswith("0x"):
            try:
                address = ipaddress.IPv4Address(host)
            except ValueError:
                raise _refused(shape, field) from None
    number = int(port) if port else (443 if scheme == "https" else 80)
    if number > 65535:
        raise _refused("the port must be a number from 1 to 65535", field)
    return Target(scheme, host, number, prefix, address)


def file_store_path(uri: str) -> Path | None:
    """The folder of a ``file:`` URI (``file:/path`` or ``file:///path``),
    or None for any other URI; InvalidInput on ``tracking_uri`` for a
    ``file:`` URI written otherwise (a host, a %-escape, ``..``)."""
    if not uri.startswith("file:"):
        return None
    match = _FILE_URI.fullmatch(uri)
    if match is None or "//" in match[1] or any(part in (".", "..") for part in match[1].split("/")):
        raise _refused()
    return Path(match[1])


def _store_root(path: Path) -> Path:
    """The store's real path, under one of ``TRACKING_FILE_ROOTS`` (the
    folders an operator lets designers read: none by default), checked now:
    a store swapped for a link since it was saved is refused."""
    roots = [Path(os.path.realpath(root)) for root in settings.TRACKING_FILE_ROOTS]
    real = Path(os.path.realpath(path))
    if not _under(real, roots):
        raise _refused(_ROOTS_ONLY)
    if not real.is_dir():
        raise TrackerError(STORE_UNREADABLE, "mlflow_unreachable")
    return real


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def check_uri(uri: str) -> None:
    """InvalidInput on ``tracking_uri`` unless it is an ``http(s)://`` URL
    whose host approve may contact (``check_host``) or a ``file:`` store
    under one of ``settings.TRACKING_FILE_ROOTS``."""
    path = file_store_path(uri)
    if path is not None:
        _store_root(path)
        return
    judge(target(uri))


def _host_allowed(host: str, allowed: list[str]) -> bool:
    """``host`` is one of ``allowed``: equal to an entry, or under an entry
    written ``.suffix`` (which also matches the bare ``suffix``)."""
    for entry in (entry.lower().rstrip(".") for entry in allowed):
        if host == entry or (entry.startswith(".") and (host.endswith(entry) or host == entry[1:])):
            return True
    return False


def _views(address: _Address) -> list[_Address]:
    """The addresses a packet to ``address`` may reach: an IPv4-mapped IPv6
    address is its IPv4 address; 6to4 and NAT64 addresses carry one too."""
    if isinstance(address, ipaddress.IPv4Address):
        return [address]
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    views: list[_Address] = [address]
    if address.sixtofour is not None:
        views.append(address.sixtofour)
    if address in ipaddress.IPv6Network("64:ff9b::/96") or address in ipaddress.IPv6Network("64:ff9b:1::/48"):
        views.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return views


def _kind(address: _Address) -> str | None:
    """Why approve may not contact ``address`` by default (``loopback``,
    ``private``, ...), or None: public (or loopback, with ``DEBUG``)."""
    for view in _views(address):
        if view.is_global or (settings.DEBUG and view.is_loopback):
            continue
        for kind in ("loopback", "link_local", "unspecified", "multicast", "private", "reserved"):
            if getattr(view, f"is_{kind}"):
                return kind.replace("_", "-")
        return "non-public"
    return None


def judge(where: Target, policy: HostPolicy = TRACKING_HOSTS) -> None:
    """InvalidInput on ``policy.field`` for what the URI itself says is
    not to be contacted: a host not in the policy's setting
    (``TRACKING_ALLOWED_HOSTS``) when it is set; else an address written in
    the URI that is not public."""
    allowed = policy.allowed()
    if allowed:
        if not _host_allowed(where.host, allowed):
            raise _refused(
                f"{where.host} is not among the hosts this server may contact ({policy.setting})", policy.field
            )
        return
    if where.address is not None:
        kind = _kind(where.address)
        if kind is not None:
            raise _refused(
                f"{where.host} is a {kind} address ({where.address}): this server contacts only public hosts "
                f"unless the operator lists the host in {policy.setting}",
                policy.field,
            )


_Sockaddr = tuple[socket.AddressFamily, tuple[Any, ...]]


def addresses(where: Target, policy: HostPolicy = TRACKING_HOSTS) -> list[_Sockaddr]:
    """Where to connect: the host resolved here, once (the one look-up of
    the call), every address judged. A host listed in the policy's setting
    (``TRACKING_ALLOWED_HOSTS``) is contacted whatever its addresses; else
    each must be public. TrackerError (``UNREACHABLE``) when it does not
    resolve or one is not public: the same words either way, so that no
    answer tells what an internal name resolves to."""
    judge(where, policy)
    if where.address is not None:
        text = str(where.address)
        if isinstance(where.address, ipaddress.IPv6Address):
            return [(socket.AF_INET6, (text, where.port, 0, 0))]
        return [(socket.AF_INET, (text, where.port))]
    try:
        found = socket.getaddrinfo(where.host, where.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise TrackerError(UNREACHABLE, "mlflow_unreachable") from None
    addresses: list[_Sockaddr] = []
    for family, _, _, _, sockaddr in found:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        if not policy.allowed() and _kind(ipaddress.ip_address(str(sockaddr[0]).split("%")[0])):
            raise TrackerError(UNREACHABLE, "mlflow_unreachable")
        if (family, sockaddr) not in addresses:
            addresses.append((family, tuple(sockaddr)))
    if not addresses:
        raise TrackerError(UNREACHABLE, "mlflow_unreachable")
    return addresses[:ADDRESSES_TRIED]


def check_host(uri: str) -> None:
    """What every call to an ``http(s)`` server checks first: the URI
    (InvalidInput on ``tracking_uri``), then the host's addresses
    (TrackerError). ``TRACKING_ALLOWED_HOSTS`` set: only the hosts it lists
    (exact, or ``.suffix``), whatever their address. Empty: any host whose
    every address is public; with ``DEBUG``, loopback too (a developer's own
    MLflow)."""
    addresses(target(uri))


# --- the HTTP client ----------------------------------------------------------------


def _connect(checked: list[_Sockaddr], timeout: float, total: float) -> socket.socket:
    """A TCP connection to the first of the checked addresses that answers
    (each within ``timeout``, trying the next ones within ``total`` in all)."""
    failure: OSError = OSError("no address")
    deadline = time.monotonic() + total
    for family, sockaddr in checked:
        if time.monotonic() >= deadline:
            break
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(min(timeout, deadline - time.monotonic()))
        try:
            sock.connect(sockaddr)
        except OSError as error:
            sock.close()
            failure = error
            continue
        return sock
    raise failure


class PinnedConnection(http.client.HTTPConnection):
    """One exchange's connection, made to the checked addresses (never
    resolving the host again: no DNS rebinding between the check and the
    connection); over TLS for ``https``, the certificate verified against
    the host name (the system's CA certificates). The ``Host`` header names
    the host. ``expire`` cuts it from another thread. ``timeout`` each
    connect and read (default ``TIMEOUT_SECONDS``), the addresses tried
    within ``CALL_SECONDS``. http.client follows no redirect."""

    def __init__(self, where: Target, checked: list[_Sockaddr], timeout: float | None = None) -> None:
        self._each = TIMEOUT_SECONDS if timeout is None else timeout
        super().__init__(where.host, where.port, timeout=self._each)
        self.default_port = 443 if where.scheme == "https" else 80
        self._addresses = checked
        self._tls = ssl.create_default_context() if where.scheme == "https" else None
        self._watch: socket.socket | None = None

    def connect(self) -> None:
        sock = _connect(self._addresses, self._each, max(self._each, CALL_SECONDS))
        self._watch = sock.dup()
        self.sock = sock if self._tls is None else self._tls.wrap_socket(sock, server_hostname=self.host)

    def expire(self) -> None:
        watch = self._watch
        if watch is not None:
            with suppress(OSError):
                watch.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        super().close()
        if self._watch is not None:
            self._watch.close()
            self._watch = None


class _TooLarge(Exception):
    pass


def _read(response: http.client.HTTPResponse, limit: int, sink: IO[bytes] | None = None) -> bytes:
    """The body, at most ``limit`` bytes (into ``sink``, or returned):
    _TooLarge as soon as more is declared or read, having read no more than
    one byte past the limit."""
    declared = response.getheader("Content-Length") or ""
    if declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    total = 0
    while chunk := response.read(min(2**16, limit + 1 - total)):
        total += len(chunk)
        if total > limit:
            raise _TooLarge
        if sink is None:
            chunks.append(chunk)
        else:
            sink.write(chunk)
    return b"".join(chunks)


_ERROR_CODE = re.compile(r"[A-Z][A-Z_]{0,63}")
_ID = re.compile(r"[A-Za-z0-9][\w-]{0,127}", re.ASCII)
T = TypeVar("T")


def _field(data: object, key: str, kind: type[T]) -> T:
    """``data[key]``, of type ``kind``, or _NotMlflow."""
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, kind):
        raise _NotMlflow(key)
    return value


def _items(data: object, key: str) -> list[object]:
    """The list ``data[key]``, empty when absent (MLflow leaves empty lists out)."""
    if isinstance(data, dict) and key not in data:
        return []
    return _field(data, key, list)


def _identifier(data: object, key: str) -> str:
    value = _field(data, key, str)
    if not _ID.fullmatch(value):
        raise _NotMlflow(key)
    return value


def _dict(data: object, key: str) -> dict[str, Any]:
    """The object ``data[key]``, empty when absent."""
    if isinstance(data, dict) and key not in data:
        return {}
    return _field(data, key, dict)


def _integer(data: object, key: str) -> int:
    """``data[key]``, a whole number (0 when absent, as MLflow leaves it out)."""
    value = data.get(key, 0) if isinstance(data, dict) else None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _NotMlflow(key)
    return value


def _number(data: object) -> float:
    value = data.get("value") if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _NotMlflow("value")
    try:
        return float(value)
    except ValueError:
        raise _NotMlflow("value") from None


def _page_token(data: dict[str, Any]) -> str | None:
    token = data.get("next_page_token")
    return token if isinstance(token, str) and token else None


def _relative(path: str) -> str:
    """``path`` if it is a plain relative artifact path (no ``..``, no
    empty, absolute or backslashed part), else ArtifactRefused."""
    parts = path.split("/")
    if len(path) > ARTIFACT_PATH_MAX_LENGTH or any(
        part in ("", ".", "..") or "\\" in part or any(ord(char) < 32 for char in part) for part in parts
    ):
        raise ArtifactRefused(f"the artifact path {path[:100]!r} is not a plain relative path")
    return path


_PROXIED = re.compile(r"mlflow-artifacts:(?://)?/([^/?#%\\\s][^?#%\\\s]*?)/?")


def _proxied(uri: str) -> str:
    """The path under the tracking server's ``mlflow-artifacts`` proxy of a
    run's artifact location: only ``mlflow-artifacts:/path`` (no other host)
    is read from a tracking server; ArtifactRefused for any other location
    (``file:``, ``s3:``, a relative path, another host)."""
    match = _PROXIED.fullmatch(uri)
    if match is None:
        scheme = uri.partition(":")[0] if re.fullmatch(r"[a-z][a-z0-9+.-]{0,30}:.*", uri, re.DOTALL) else ""
        where = f"a {scheme}: location" if scheme else "a location that is not a URI"
        raise ArtifactRefused(
            f"its artifacts are kept at {where}, which approve does not read: from a tracking server only "
            "mlflow-artifacts: locations, served by the server itself (mlflow server --serve-artifacts)"
        )
    return _relative(match[1])


class _Rest:
    """The REST API 2.0 of one tracking server, for one call."""

    def __init__(self, where: Target, addresses: list[_Sockaddr], token: str) -> None:
        self._where, self._addresses = where, addresses
        self._headers = {"User-Agent": "approve", "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._roots: dict[str, str] = {}
        self._budget = ANSWER_MAX_BYTES

    @contextmanager
    def _exchange(
        self,
        method: str,
        endpoint: str,
        *,
        query: dict[str, str] | None = None,
        payload: object = None,
        data: bytes | None = None,
        content_type: str = "",
    ) -> Iterator[http.client.HTTPResponse]:
        """The answer (200) of one request, within ``CALL_SECONDS``;
        TrackerError otherwise (``UNAUTHORISED`` for 401 and 403), or
        _MlflowError for MLflow's own error answer."""
        url = quote(self._where.prefix + endpoint) + (f"?{urlencode(query)}" if query else "")
        headers = dict(self._headers)
        if payload is not None:
            data, content_type = json.dumps(payload).encode(), "application/json"
        if content_type:
            headers["Content-Type"] = content_type
        connection = PinnedConnection(self._where, self._addresses)
        deadline = threading.Timer(CALL_SECONDS, connection.expire)
        deadline.daemon = True
        deadline.start()
        try:
            connection.request(method, url, body=data, headers=headers)
            response = connection.getresponse()
            if response.status != 200:
                self._refusal(response)
            yield response
        except (OSError, http.client.HTTPException, ValueError, _NotMlflow, _TooLarge):
            raise TrackerError(UNREACHABLE, "mlflow_unreachable") from None
        finally:
            deadline.cancel()
            connection.close()

    @staticmethod
    def _refusal(response: http.client.HTTPResponse) -> None:
        if response.status in (401, 403):
            raise TrackerError(UNAUTHORISED, "mlflow_unauthorised")
        try:
            body = json.loads(_read(response, ERROR_MAX_BYTES))
        except (_TooLarge, ValueError, RecursionError):
            raise _NotMlflow("error") from None
        code, message = (body.get("error_code"), body.get("message")) if isinstance(body, dict) else (None, None)
        if 400 <= response.status < 500 and isinstance(code, str) and _ERROR_CODE.fullmatch(code):
            raise _MlflowError(code, message if isinstance(message, str) else "")
        raise _NotMlflow("status")

    def _json(self, method: str, endpoint: str, **request: Any) -> dict[str, Any]:
        with self._exchange(method, endpoint, **request) as response:
            try:
                text = _read(response, self._budget)
                self._budget -= len(text)
                body = json.loads(text)
            except (_TooLarge, ValueError, RecursionError):  # (JSON nested deeper than Python recurses)
                raise _NotMlflow("answer") from None
        if not isinstance(body, dict):
            raise _NotMlflow("answer")
        return body

    def _get(self, endpoint: str, **query: str) -> dict[str, Any]:
        return self._json("GET", f"/api/2.0/mlflow/{endpoint}", query=query)

    def _post(self, endpoint: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", f"/api/2.0/mlflow/{endpoint}", payload=payload)

    def experiment_count(self) -> int:
        count, token = 0, None
        for _ in range(PAGES_MAX):
            page = self._post("experiments/search", {"max_results": 1000, **({"page_token": token} if token else {})})
            count += len(_items(page, "experiments"))
            token = _page_token(page)
            if token is None:
                return count
        raise _NotMlflow("pages")

    def experiments(self, max_results: int) -> list[Experiment]:
        found: list[Experiment] = []
        token = None
        for _ in range(PAGES_MAX):
            page = self._post(
                "experiments/search",
                {"max_results": min(1000, max_results - len(found)), **({"page_token": token} if token else {})},
            )
            for entry in _items(page, "experiments"):
                stage = entry.get("lifecycle_stage", "active") if isinstance(entry, dict) else None
                found.append(
                    Experiment(_identifier(entry, "experiment_id"), _field(entry, "name", str), stage == "active")
                )
            token = _page_token(page)
            if token is None or len(found) >= max_results:
                return found[:max_results]
        raise _NotMlflow("pages")

    def _experiment(self, endpoint: str, **query: str) -> Experiment | None:
        try:
            found = _field(self._get(endpoint, **query), "experiment", dict)
        except _MlflowError as error:
            if error.code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                return None
            raise
        name = _field(found, "name", str)
        return Experiment(_identifier(found, "experiment_id"), name, found.get("lifecycle_stage") == "active")

    def experiment_by_name(self, name: str) -> Experiment | None:
        return self._experiment("experiments/get-by-name", experiment_name=name)

    def experiment_by_id(self, experiment_id: str) -> Experiment | None:
        return self._experiment("experiments/get", experiment_id=experiment_id)

    def runs(self, experiment_id: str, filter_string: str, max_results: int) -> list[RemoteRun]:
        runs: list[RemoteRun] = []
        token = None
        for _ in range(PAGES_MAX):
            page = self._post(
                "runs/search",
                {
                    "experiment_ids": [experiment_id],
                    "filter": filter_string,
                    "run_view_type": "ACTIVE_ONLY",
                    "max_results": min(RUNS_PAGE, max_results - len(runs)),
                    "order_by": ["attributes.start_time ASC"],
                    **({"page_token": token} if token else {}),
                },
            )
            runs += [_run(found) for found in _items(page, "runs")]
            token = _page_token(page)
            if token is None or len(runs) >= max_results:
                return runs[:max_results]
        raise _NotMlflow("pages")

    def metric_at_step(self, run_id: str, key: str, step: int) -> float | None:
        latest: tuple[int, float] | None = None
        query = {"run_id": run_id, "metric_key": key}
        for _ in range(PAGES_MAX):
            page = self._get("metrics/get-history", **query)
            for entry in _items(page, "metrics"):
                timestamp = _integer(entry, "timestamp")
                if _integer(entry, "step") == step and (latest is None or timestamp > latest[0]):
                    latest = (timestamp, _number(entry))
            token = _page_token(page)
            if token is None:
                return None if latest is None else latest[1]
            query["page_token"] = token
        raise _NotMlflow("pages")

    def artifact_root(self, run_id: str) -> str:
        if run_id not in self._roots:
            info = _field(_field(self._get("runs/get", run_id=run_id), "run", dict), "info", dict)
            self._roots[run_id] = _proxied(_field(info, "artifact_uri", str))
        return self._roots[run_id]

    def artifacts(self, run_id: str, folder: str | None) -> list[tuple[str, bool]]:
        root = self.artifact_root(run_id)
        path = f"{root}/{_relative(folder)}" if folder else root
        listed = self._json("GET", "/api/2.0/mlflow-artifacts/artifacts", query={"path": path})
        entries = []
        for entry in _items(listed, "files"):
            name = _relative(_field(entry, "path", str))
            is_dir = isinstance(entry, dict) and entry.get("is_dir") is True
            entries.append((f"{folder}/{name}" if folder else name, is_dir))
        return entries

    def artifact_copy(self, run_id: str, path: str, sink: IO[bytes], max_bytes: int) -> None:
        endpoint = f"/api/2.0/mlflow-artifacts/artifacts/{self.artifact_root(run_id)}/{_relative(path)}"
        with self._exchange("GET", endpoint) as response:
            try:
                _read(response, max_bytes, sink)
            except _TooLarge:
                raise ArtifactRefused(f"{path} is larger than {max_bytes} bytes") from None

    def artifact_write(self, run_id: str, path: str, data: bytes) -> None:
        endpoint = f"/api/2.0/mlflow-artifacts/artifacts/{self.artifact_root(run_id)}/{_relative(path)}"
        kind = "application/json" if path.endswith(".json") else "text/csv"
        with self._exchange("PUT", endpoint, data=data, content_type=kind) as response:
            _read(response, ERROR_MAX_BYTES)

    def tag_set(self, run_id: str, key: str, value: str) -> None:
        self._post("runs/set-tag", {"run_id": run_id, "key": key, "value": value})

    def run_create(self, experiment_id: str, name: str, tags: dict[str, str]) -> str:
        created = self._post(
            "runs/create",
            {
                "experiment_id": experiment_id,
                "run_name": name,
                "start_time": int(time.time() * 1000),
                "tags": [{"key": key, "value": value} for key, value in tags.items()],
            },
        )
        return _identifier(_field(_field(created, "run", dict), "info", dict), "run_id")

    def run_finish(self, run_id: str) -> None:
        self._post("runs/update", {"run_id": run_id, "status": "FINISHED", "end_time": int(time.time() * 1000)})


def _run(found: object) -> RemoteRun:
    """A run of a search's answer."""
    info, data = _field(found, "info", dict), _dict(found, "data")
    run_id = _identifier(info, "run_id")
    name = info.get("run_name")
    tags = {_field(tag, "key", str): _field(tag, "value", str) for tag in _items(data, "tags")}
    return RemoteRun(
        run_id=run_id,
        name=name if isinstance(name, str) and name else run_id,
        experiment_id=_identifier(info, "experiment_id"),
        status=str(info.get("status", "")),
        metrics={_field(metric, "key", str): _number(metric) for metric in _items(data, "metrics")},
        tags={key: value for key, value in tags.items() if not key.startswith("mlflow.")},
    )


# --- the file store ------------------------------------------------------------------


def _plain_tree(folder: str, skip: Callable[[str, int], bool] = lambda name, depth: False, depth: int = 0) -> None:
    """TrackerError unless everything in ``folder`` (walked, never following
    a link) is a plain folder or file: no symbolic link (it may point out of
    the roots), no FIFO (reading one would wait for ever), no device.
    ``skip(name, depth)``: a folder not walked."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if not skip(entry.name, depth):
                    _plain_tree(entry.path, skip, depth + 1)
            elif not entry.is_file(follow_symlinks=False):
                raise TrackerError(STORE_UNREADABLE, "mlflow_unreachable")


def _plain_entries(folder: Path) -> list[Path]:
    """The folders in ``folder``; TrackerError when any entry is not a plain
    folder or file."""
    folders = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(Path(entry.path))
            elif not entry.is_file(follow_symlinks=False):
                raise TrackerError(STORE_UNREADABLE, "mlflow_unreachable")
    return folders


def _open_beneath(path: Path, flags: int, *, create: bool = False) -> int:
    """A descriptor of ``path`` (absolute and real), opened one component at
    a time from ``/`` without following any link: a component swapped for a
    link since its real path was checked is refused (OSError). ``create``:
    the missing folders are made."""
    folder = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in path.parts[1:-1]:
            flags_inner = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
            try:
                inner = os.open(name, flags_inner, dir_fd=folder)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, dir_fd=folder)
                inner = os.open(name, flags_inner, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(path.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644, dir_fd=folder)
    finally:
        os.close(folder)


class _File:
    """A local ``file:`` store, for one call: MLflow's FileStore on its real
    path, each folder a call reads checked first (``_plain_tree``)."""

    def __init__(self, path: Path) -> None:
        from mlflow.store.tracking.file_store import FileStore

        self._root = _store_root(path)
        self._roots = [Path(os.path.realpath(root)) for root in settings.TRACKING_FILE_ROOTS]
        self._experiments_checked = False
        self._store = self._calling(lambda: FileStore(str(self._root)))

    def _calling(self, call: Callable[[], T]) -> T:
        """``call()``: MLflow's own refusal as _MlflowError; anything else the
        store's files make it raise as TrackerError, naming nothing in them."""
        from mlflow.exceptions import MlflowException

        try:
            return call()
        except MlflowException as error:
            raise _MlflowError(str(error.error_code), str(error.message)) from None
        except (ServiceError, _MlflowError):
            raise
        except Exception as error:
            logger.warning("MLflow store %s unreadable: %s", self._root, type(error).__name__)
            raise TrackerError(STORE_UNREADABLE, "mlflow_unreachable") from None

    def _experiment_folders(self) -> list[Path]:
        """Every experiment's folder (and the deleted ones'), their entries
        and tags checked."""
        folders = _plain_entries(self._root)
        trash = self._root / ".trash"
        if trash in folders:
            folders.remove(trash)
            folders += _plain_entries(trash)
        if not self._experiments_checked:
            for folder in folders:
                _plain_entries(folder)
                if (folder / "tags").is_dir():
                    _plain_tree(str(folder / "tags"))
            self._experiments_checked = True
        return folders

    def _check_experiment(self, experiment_id: str) -> None:
        """The experiment's folder walked (its runs, all but their artifacts)."""
        if not _ID.fullmatch(experiment_id):
            raise _MlflowError("INVALID_PARAMETER_VALUE", f"Invalid experiment ID: {experiment_id!r}")
        for folder in self._experiment_folders():
            if folder.name == experiment_id:
                _plain_tree(str(folder), lambda name, depth: depth == 1 and name == "artifacts")

    def _check_run(self, run_id: str) -> None:
        """The run's folder walked (all but its artifacts)."""
        if not _ID.fullmatch(run_id):
            raise _MlflowError("INVALID_PARAMETER_VALUE", f"Invalid run ID: {run_id!r}")
        for folder in self._experiment_folders():
            if (folder / run_id).is_dir():
                _plain_tree(str(folder / run_id), lambda name, depth: depth == 0 and name == "artifacts")

    def experiment_count(self) -> int:
        self._experiment_folders()
        count, token = 0, None
        for _ in range(PAGES_MAX):
            page = self._calling(partial(self._store.search_experiments, max_results=1000, page_token=token))
            count += len(page)
            token = page.token
            if not token:
                return count
        raise TrackerError(STORE_UNREADABLE, "mlflow_unreachable")

    def experiments(self, max_results: int) -> list[Experiment]:
        self._experiment_folders()
        found: list[Experiment] = []
        token = None
        for _ in range(PAGES_MAX):
            page = self._calling(
                partial(
                    self._store.search_experiments, max_results=min(1000, max_results - len(found)), page_token=token
                )
            )
            found += [
                Experiment(str(entry.experiment_id), str(entry.name), entry.lifecycle_stage == "active")
                for entry in page
            ]
            token = page.token
            if not token or len(found) >= max_results:
                return found[:max_results]
        raise TrackerError(STORE_UNREADABLE, "mlflow_unreachable")

    def _experiment(self, call: Callable[[], Any]) -> Experiment | None:
        self._experiment_folders()
        try:
            found = self._calling(call)
        except _MlflowError as error:
            if error.code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                return None
            raise
        if found is None:
            return None
        return Experiment(str(found.experiment_id), str(found.name), found.lifecycle_stage == "active")

    def experiment_by_name(self, name: str) -> Experiment | None:
        return self._experiment(lambda: self._store.get_experiment_by_name(name))

    def experiment_by_id(self, experiment_id: str) -> Experiment | None:
        return self._experiment(lambda: self._store.get_experiment(experiment_id))

    def runs(self, experiment_id: str, filter_string: str, max_results: int) -> list[RemoteRun]:
        from mlflow.entities import ViewType

        self._check_experiment(experiment_id)
        found = self._calling(
            lambda: self._store.search_runs(
                [experiment_id], filter_string, ViewType.ACTIVE_ONLY, max_results, ["attributes.start_time ASC"]
            )
        )
        return [
            RemoteRun(
                run_id=run.info.run_id,
                name=run.info.run_name or run.info.run_id,
                experiment_id=str(run.info.experiment_id),
                status=run.info.status,
                metrics=dict(run.data.metrics),
                tags={key: value for key, value in run.data.tags.items() if not key.startswith("mlflow.")},
            )
            for run in found
        ]

    def metric_at_step(self, run_id: str, key: str, step: int) -> float | None:
        self._check_run(run_id)
        history = self._calling(lambda: self._store.get_metric_history(run_id, key))
        at_step = [entry for entry in history if entry.step == step]
        return float(max(at_step, key=lambda entry: entry.timestamp).value) if at_step else None

    def artifact_root(self, run_id: str) -> str:
        """The run's artifact folder, real, under the roots; ArtifactRefused
        for a location elsewhere or of another kind."""
        self._check_run(run_id)
        uri = str(self._calling(lambda: self._store.get_run(run_id)).info.artifact_uri)
        try:
            path = file_store_path(uri)
        except InvalidInput:
            path = None
        if path is None:
            raise ArtifactRefused("its artifacts are kept at a location that is not a plain file: URI")
        real = Path(os.path.realpath(path))
        if not _under(real, self._roots):
            raise ArtifactRefused("its artifacts are kept outside the folders in TRACKING_FILE_ROOTS")
        return str(real)

    def artifacts(self, run_id: str, folder: str | None) -> list[tuple[str, bool]]:
        base = Path(self.artifact_root(run_id))
        where = base / _relative(folder) if folder else base
        try:
            descriptor = _open_beneath(where, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return []
        except OSError:
            raise ArtifactRefused("its artifacts folder holds a symbolic link or cannot be read") from None
        try:
            with os.scandir(descriptor) as entries:
                return [
                    (f"{folder}/{entry.name}" if folder else entry.name, entry.is_dir(follow_symlinks=False))
                    for entry in entries
                    if entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False)
                ]
        finally:
            os.close(descriptor)

    def artifact_copy(self, run_id: str, path: str, sink: IO[bytes], max_bytes: int) -> None:
        try:
            descriptor = _open_beneath(Path(self.artifact_root(run_id)) / _relative(path), os.O_RDONLY)
        except OSError:
            raise ArtifactRefused(f"{path} cannot be read (or is a symbolic link)") from None
        with os.fdopen(descriptor, "rb") as stream:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode):
                raise ArtifactRefused(f"{path} is not a plain file")
            if status.st_size > max_bytes:
                raise ArtifactRefused(f"{path} is larger than {max_bytes} bytes")
            remaining = max_bytes
            while chunk := stream.read(min(2**16, remaining + 1)):
                remaining -= len(chunk)
                if remaining < 0:
                    raise ArtifactRefused(f"{path} is larger than {max_bytes} bytes")
                sink.write(chunk)

    def artifact_write(self, run_id: str, path: str, data: bytes) -> None:
        target_path = Path(self.artifact_root(run_id)) / _relative(path)
        try:
            descriptor = _open_beneath(target_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, create=True)
        except OSError:
            raise ArtifactRefused("its artifacts folder holds a symbolic link or cannot be written") from None
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)

    def tag_set(self, run_id: str, key: str, value: str) -> None:
        from mlflow.entities import RunTag

        self._check_run(run_id)
        self._calling(lambda: self._store.set_tag(run_id, RunTag(key, value)))

    def run_create(self, experiment_id: str, name: str, tags: dict[str, str]) -> str:
        from mlflow.entities import RunTag

        self._check_experiment(experiment_id)
        run_tags = [RunTag(key, value) for key, value in tags.items()]
        created = self._calling(
            lambda: self._store.create_run(experiment_id, "", int(time.time() * 1000), run_tags, name)
        )
        return str(created.info.run_id)

    def run_finish(self, run_id: str) -> None:
        from mlflow.entities import RunStatus

        self._check_run(run_id)
        finished = RunStatus.from_string("FINISHED")
        self._calling(lambda: self._store.update_run_info(run_id, finished, int(time.time() * 1000), None))


# --- the calls -----------------------------------------------------------------------


class Tracker(Protocol):
    """What approve asks of a tracking server or store (``_Rest``, ``_File``)."""

    def experiment_count(self) -> int: ...
    def experiments(self, max_results: int) -> list[Experiment]: ...
    def experiment_by_name(self, name: str) -> Experiment | None: ...
    def experiment_by_id(self, experiment_id: str) -> Experiment | None: ...
    def runs(self, experiment_id: str, filter_string: str, max_results: int) -> list[RemoteRun]: ...
    def metric_at_step(self, run_id: str, key: str, step: int) -> float | None: ...
    def artifact_root(self, run_id: str) -> str: ...
    def artifacts(self, run_id: str, folder: str | None) -> list[tuple[str, bool]]: ...
    def artifact_copy(self, run_id: str, path: str, sink: IO[bytes], max_bytes: int) -> None: ...
    def artifact_write(self, run_id: str, path: str, data: bytes) -> None: ...
    def tag_set(self, run_id: str, key: str, value: str) -> None: ...
    def run_create(self, experiment_id: str, name: str, tags: dict[str, str]) -> str: ...
    def run_finish(self, run_id: str) -> None: ...


@contextmanager
def connected(connection: Connection) -> Iterator[Tracker]:
    """The study's server (or store), checked now and used within the block
    only: the URI and the host (or the store's real path) are checked again
    at every use, since the setting, the host's address or the folder may
    have changed. MLflow's own refusal of a request not handled by the
    caller is a TrackerError naming its code."""
    path = file_store_path(connection.tracking_uri)
    tracker: Tracker
    if path is not None:
        tracker = _File(path)
    else:
        where = target(connection.tracking_uri)
        tracker = _Rest(where, addresses(where), connection.token)
    try:
        yield tracker
    except _MlflowError as error:
        raise TrackerError(f"The tracking server refused the request ({error.code}).", "mlflow_unreachable") from None
    except (_NotMlflow, OSError):
        # An answer not MLflow's; a store's folder gone or unreadable mid-call.
        raise TrackerError(UNREACHABLE if path is None else STORE_UNREADABLE, "mlflow_unreachable") from None


def experiment_count(connection: Connection) -> int:
    """How many (active) experiments the server holds."""
    with connected(connection) as tracker:
        return tracker.experiment_count()


def experiments(connection: Connection, max_results: int = EXPERIMENTS_LISTED_MAX) -> list[Experiment]:
    """The server's active experiments, at most ``max_results`` (in the
    server's order: MLflow's newest first)."""
    with connected(connection) as tracker:
        return [found for found in tracker.experiments(max_results) if found.active]


def experiment_resolve(connection: Connection, experiment: str) -> tuple[str, str]:
    """``(id, name)`` of the experiment named (or of that id); InvalidInput
    on ``experiment`` when the server has no such experiment."""
    with connected(connection) as tracker:
        found = tracker.experiment_by_name(experiment)
        if found is None and experiment.isdigit():
            found = tracker.experiment_by_id(experiment)
    if found is None or not found.active:
        raise InvalidInput({"experiment": f"unknown experiment {experiment!r} at {connection.tracking_uri}"})
    return found.experiment_id, found.name


def runs_search(connection: Connection, experiment_id: str, filter_string: str) -> list[RemoteRun]:
    """The active runs of the experiment that match the filter (MLflow's
    search syntax), oldest first; InvalidInput on ``filter`` when MLflow
    refuses it, or when more than ``RUNS_MAX`` match."""
    with connected(connection) as tracker:
        try:
            runs = tracker.runs(experiment_id, filter_string, RUNS_MAX + 1)
        except _MlflowError as error:
            if error.code != "INVALID_PARAMETER_VALUE":
                raise
            words = (error.message.splitlines() or [""])[0][:300]
            raise InvalidInput({"filter": f"MLflow refused it: {words}"}) from None
    if len(runs) > RUNS_MAX:
        raise InvalidInput({"filter": f"more than {RUNS_MAX} runs match: narrow the filter"})
    return runs


def metric_at_step(connection: Connection, run_id: str, key: str, step: int) -> float | None:
    """The run's value of ``key`` at ``step`` (the last one logged at it), or None."""
    with connected(connection) as tracker:
        return tracker.metric_at_step(run_id, key, step)


def artifacts_matching(connection: Connection, run_id: str, pattern: str) -> list[str]:
    """The run's artifact paths that match the glob ``pattern``, sorted;
    ArtifactRefused when its artifacts are kept where approve does not read."""
    found: list[str] = []
    with connected(connection) as tracker:
        folders: list[str | None] = [None]
        listed = 0
        while folders and listed < ARTIFACTS_LISTED_MAX:
            for path, is_dir in tracker.artifacts(run_id, folders.pop()):
                listed += 1
                if is_dir:
                    folders.append(path)
                elif fnmatch.fnmatch(path, pattern):
                    found.append(path)
    return sorted(found)


def artifact_download(connection: Connection, run_id: str, path: str, folder: str, max_bytes: int) -> Path:
    """The artifact copied into ``folder`` (its local path), read as it
    streams and refused (ArtifactRefused) as soon as it is larger than
    ``max_bytes``."""
    local = Path(folder) / Path(_relative(path)).name
    local.parent.mkdir(parents=True, exist_ok=True)
    with connected(connection) as tracker, local.open("wb") as sink:
        tracker.artifact_copy(run_id, path, sink, max_bytes)
    return local


def publish(
    connection: Connection,
    *,
    experiment_id: str,
    summary: tuple[str, str],
    summary_name: str,
    summary_tags: dict[str, str],
    run_tags: dict[str, dict[str, str]],
    files: dict[str, bytes],
) -> str:
    """Write a decision: the summary run (found by its tag ``summary``, a
    ``(key, value)``, else created with ``summary_tags``), its artifact
    location checked before anything else is written; then ``run_tags`` on
    each run, ``files`` into the summary run's artifacts, and the summary
    run finished. Returns the summary run's id; TrackerError
    (``mlflow_artifacts_refused``) when its artifacts are kept where approve
    does not write."""
    key, value = summary
    with connected(connection) as tracker:
        found = tracker.runs(experiment_id, f"tags.`{key}` = '{value}'", 1)
        summary_id = found[0].run_id if found else tracker.run_create(experiment_id, summary_name, summary_tags)
        try:
            tracker.artifact_root(summary_id)
        except ArtifactRefused as error:
            raise TrackerError(f"The summary run {summary_id}: {error}.", "mlflow_artifacts_refused") from None
        for run_id, tags in run_tags.items():
            for tag, text in tags.items():
                tracker.tag_set(run_id, tag, text)
        for path, data in files.items():
            tracker.artifact_write(summary_id, path, data)
        tracker.run_finish(summary_id)
    return summary_id
