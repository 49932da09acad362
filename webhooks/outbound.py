"""A webhook's URL as approve checks and calls it (docs/webhooks.md,
"Threat model"): the host policy of the tracking servers
(``tracking.remote``) under its own setting, ``WEBHOOK_ALLOWED_HOSTS``.

- The URL is parsed once, strictly: ``http(s)://host[:port][/path][?query]``
  with a lower-case host name or a canonical address (the same host rules as
  a tracking URI: no ``127.1`` or ``0x7f.1``), no user name, fragment,
  backslash or space; ``http`` only for a host the operator lists (or with
  ``DEBUG``): a delivery across the internet goes over TLS.
- The host is judged when the URL is registered and again at every attempt
  (DNS can change): listed hosts only when ``WEBHOOK_ALLOWED_HOSTS`` is set,
  else only hosts whose every address is public (loopback too with
  ``DEBUG``). The host is resolved once per attempt and the checked address
  connected (``tracking.remote.PinnedConnection``): no rebinding between the
  check and the connection.
- No redirect is followed (a 3xx is a failure); each connect and read has
  ``WEBHOOK_TIMEOUT_SECONDS``, the whole exchange twice that; at most
  ``RESPONSE_EXCERPT_MAX_CHARS`` bytes of the answer are read.
"""

import http.client
import re
import threading
from dataclasses import dataclass

from django.conf import settings

from tracking import remote
from workspace.errors import InvalidInput

from .models import RESPONSE_EXCERPT_MAX_CHARS, URL_MAX_LENGTH

POLICY = remote.HostPolicy(setting="WEBHOOK_ALLOWED_HOSTS", field="url")

SHAPE = (
    "must be https://host[:port][/path][?query], written plainly: a lower-case host name or address; no user "
    "name, fragment, backslash or space"
)
PLAIN_HTTP = (
    "must be https://: plain http:// is allowed only for a host the operator lists in WEBHOOK_ALLOWED_HOSTS "
    "(a delivery across the internet is sent over TLS)"
)
UNREACHABLE = (
    "the host does not resolve, or not only to public addresses: this server delivers only to public hosts "
    "unless the operator lists the host in WEBHOOK_ALLOWED_HOSTS"
)

# A path segment's and a query's characters (RFC 3986's pchar, %-escapes well formed).
_CHAR = r"(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"
_URL = re.compile(
    r"(https?)://(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::([1-9][0-9]{0,4}))?"
    rf"((?:/{_CHAR}*)*)(\?(?:{_CHAR}|[/?])*)?"
)


@dataclass(frozen=True)
class Url:
    """A webhook URL as parsed: where to connect, and the request target
    (its path and query, ``/`` for none)."""

    where: remote.Target
    request_target: str


@dataclass(frozen=True)
class Outcome:
    """What one attempt got: the status code (None: no answer), the first
    bytes of the answer as text, or why nothing answered."""

    status_code: int | None
    excerpt: str = ""
    error: str = ""
    # Refused by the policy before any look-up: no retry changes that.
    final: bool = False


def parse(url: str) -> Url:
    """``url`` parsed, or InvalidInput on ``url``."""
    match = _URL.fullmatch(url) if len(url) <= URL_MAX_LENGTH else None
    if match is None:
        raise InvalidInput({"url": SHAPE})
    scheme, host, port, path, query = match.groups()
    where = remote.target_of(scheme, host, port, path, field="url", shape=SHAPE)
    return Url(where, (path or "/") + (query or ""))


def check(url: str, *, resolve: bool = True) -> Url:
    """``url`` parsed and its host judged by ``POLICY``, or InvalidInput on
    ``url`` naming why: its shape, plain ``http`` to a host not listed, a
    host not listed (when the setting lists any), an address that is not
    public; with ``resolve``, a name that does not resolve to public
    addresses only (the same words whatever it resolves to)."""
    parsed = parse(url)
    remote.judge(parsed.where, POLICY)
    if parsed.where.scheme == "http" and not (POLICY.allowed() or settings.DEBUG):
        raise InvalidInput({"url": PLAIN_HTTP})
    if resolve:
        try:
            remote.addresses(parsed.where, POLICY)
        except remote.TrackerError:
            raise InvalidInput({"url": UNREACHABLE}) from None
    return parsed


def post(url: str, body: bytes, headers: dict[str, str]) -> Outcome:
    """POST ``body`` to ``url``, checked again first (``check``): the
    outcome, never an exception. The host is resolved once, here, and that
    address connected."""
    try:
        parsed = check(url, resolve=False)
        addresses = remote.addresses(parsed.where, POLICY)
    except InvalidInput as refused:
        return Outcome(None, error=f"refused: {'; '.join(refused.errors['url'])}", final=True)
    except remote.TrackerError:
        return Outcome(None, error=f"refused: {UNREACHABLE}")
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    connection = remote.PinnedConnection(parsed.where, addresses, timeout=timeout)
    deadline = threading.Timer(2 * timeout, connection.expire)
    deadline.daemon = True
    deadline.start()
    try:
        connection.request("POST", parsed.request_target, body=body, headers=headers)
        response = connection.getresponse()
        excerpt = response.read(RESPONSE_EXCERPT_MAX_CHARS).decode("utf-8", errors="replace")
        return Outcome(response.status, excerpt=excerpt)
    except TimeoutError:
        return Outcome(None, error=f"no answer within {timeout} seconds")
    except (OSError, http.client.HTTPException, ValueError) as error:
        return Outcome(None, error=f"{type(error).__name__}: {error}"[:300] if str(error) else type(error).__name__)
    finally:
        deadline.cancel()
        connection.close()
