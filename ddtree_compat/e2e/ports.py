"""Ports for the servers: free on 127.0.0.1, below the kernel's ephemeral range, apart from each other; and
:class:`PortInUse`, a port taken before the server bound it (ours to retry, not a verdict on the server)."""

from __future__ import annotations

import socket

PORT_RANGE = (20000, 55535)
"""Ports the servers get: DDTree trees of June-July 2026 (rancy-ddtree 398fc2c7, dbguo-ddtree-dev 514ea1f3) set
their gRPC port to ``port + 10000`` and refuse to start above 65535 (``ServerArgs._handle_deprecated_args``:
``SGLANG_GRPC_PORT (69511) must be between 1 and 65535``, seen on the H200 with ephemeral ports). Cut at the
kernel's ephemeral range (:func:`ephemeral_floor`): a port picked there can be taken by an outgoing connection
in the minute before the server binds it (H200, 2026-12-02, the ``ddtree`` e2e profile: two of 25 servers died on
``address already in use``)."""
PORT_SPACING = 16
"""Ports picked for one session stay this far apart (a server binds a few ports next to its own)."""


def ephemeral_floor(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The lowest port the kernel hands to outgoing connections (Linux's default 32768 where unreadable)."""
    try:
        return int(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class PortInUse(RuntimeError):
    """The server could not bind its HTTP port (something took it after it was picked): ours to retry, not a
    verdict on the server."""


def free_port(taken: set[int] | None = None, port_range: tuple[int, int] = PORT_RANGE) -> int:
    """A TCP port in ``port_range`` (half-open) below the kernel's ephemeral ports (:func:`ephemeral_floor`), free
    on 127.0.0.1 now and at least :data:`PORT_SPACING` from every port in ``taken`` (added to it).

    Raises:
        RuntimeError: none found in 200 tries.
    """
    import random

    taken = taken if taken is not None else set()
    low, high = port_range[0], min(port_range[1], max(port_range[0] + 1000, ephemeral_floor()))
    for _ in range(200):
        port = random.randrange(low, high)
        if any(abs(port - t) < PORT_SPACING for t in taken):
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise RuntimeError(f"no free port in {(low, high)} found in 200 tries")
