"""The async client SDK and the ``allot`` command line."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from allot.client.client import AsyncClient
    from allot.client.sending import CommandError

__all__ = ["AsyncClient", "CommandError"]


def __getattr__(name: str) -> Any:
    """``AsyncClient`` loads asyncio and nats-py: only for whoever asks for it, not for a
    command line that imports a module of this package and needs neither."""
    if name == "AsyncClient":
        from allot.client.client import AsyncClient

        return AsyncClient
    if name == "CommandError":
        from allot.client.sending import CommandError

        return CommandError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
