"""A block of free loopback ports for one cluster, so that clusters of several people (and our own
test clusters) on one machine do not collide."""

from __future__ import annotations

import random
import socket
from dataclasses import dataclass

from mqctl.cluster.processes import port_range
from tests.rocketmq.errors import KitError

#: Offsets inside a block: the name server, the controllers, then one slot of 10 per broker
#: (RocketMQ's broker listens on L, on L-2 for its "fast" server, and on L+1 for HA).
CONTROLLER_OFFSET, BROKER_OFFSET, BROKER_SLOT = 1, 12, 10


@dataclass(frozen=True)
class Ports:
    namesrv: int
    controllers: tuple[int, ...]
    brokers: tuple[int, ...]

    def all(self) -> tuple[int, ...]:
        used = [self.namesrv, *self.controllers]
        for listen in self.brokers:
            used += [listen - 2, listen, listen + 1]
        return tuple(used)


def layout(base: int, controllers: int, brokers: int) -> Ports:
    return Ports(base, tuple(base + CONTROLLER_OFFSET + i for i in range(controllers)),
                 tuple(base + BROKER_OFFSET + BROKER_SLOT * i for i in range(brokers)))


def is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_block(controllers: int, brokers: int, attempts: int = 200) -> Ports:
    """A block from the range mqctl's own test clusters take theirs from (``port_range``: this worker's
    slice, below the kernel's ephemeral ports, where a port a JVM is about to bind cannot meanwhile become
    the source port of some outgoing connection)."""
    chooser = random.SystemRandom()
    low, high = port_range()
    span = max(p for p in layout(0, controllers, brokers).all()) + 1 if controllers + brokers else 1
    first = -(-low // 100) * 100
    for _ in range(attempts):
        if high - span < first:
            break
        ports = layout(chooser.randrange(first, high - span + 1, 100), controllers, brokers)
        if all(is_free(port) for port in ports.all()):
            return ports
    raise KitError(f"no block of free ports found for {controllers} controllers and {brokers} brokers "
                   f"between {low} and {high}")


def free_ports(count: int) -> tuple[int, ...]:
    """``count`` ports free now, side by side in one block (for a name server or a controller group)."""
    return free_block(count - 1, 0).all()[:count] if count > 0 else ()
