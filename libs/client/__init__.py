"""The async client SDK and the ``allot`` command line."""

from allot.client.client import AsyncClient, CommandError

__all__ = ["AsyncClient", "CommandError"]
