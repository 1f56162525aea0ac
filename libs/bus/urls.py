"""NATS server addresses: one URL or, for a cluster, a comma-separated list of its members'
(``--nats-url`` and ``ALLOT_NATS_URL`` may hold either); as logs and messages may show
them, without their secrets."""

import re

# ``scheme://userinfo@host``, in one address or each of a comma-separated list. The match is
# greedy up to the last ``@`` of the address, so a password holding a raw ``@`` is hidden too.
_USERINFO = re.compile(r"//([^/,]*)@")


def redacted(url: str) -> str:
    """``url`` with its password (``user:***@``) or token (``***@``) hidden."""
    return _USERINFO.sub(lambda match: f"//{_hidden(match[1])}@", url)


def _hidden(userinfo: str) -> str:
    user, colon, _ = userinfo.partition(":")
    return f"{user}:***" if colon else "***"  # without a colon, it is all a token


def servers(url: str) -> list[str]:
    """Each server ``url`` names, as nats-py takes them: it reads a string as one address,
    so a cluster's comma-separated list must be split first."""
    return [server.strip() for server in url.split(",") if server.strip()]
