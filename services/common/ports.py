"""Whether a TCP port can be bound: checked before a server starts (a clear error instead of a
traceback from deep inside the server) and by the local-cluster tools choosing ports.

One rule for every caller: the probe sets ``SO_REUSEADDR``, as the servers themselves do (asyncio and
uvicorn set it on Linux), so a port held only by connections of a stopped process in TIME_WAIT counts as
free, exactly when the server could bind it, and a port a live process listens on does not.
"""

from __future__ import annotations

import socket

from services.common.errors import ConfigError

__all__ = ["check_port_free", "port_free"]


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def check_port_free(host: str, port: int, what: str) -> None:
    """ConfigError naming the port and its use if it cannot be bound."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port} for the {what}: {exc.strerror}; is another "
                              "process (an earlier instance?) already using that port?") from None
