"""The Raft password, which every controller has: without one, pysyncobj unpickles (runs) whatever
reaches the Raft port.

Where it comes from, first match wins:

1. ``controllerRaftPassword``;
2. ``controllerRaftPasswordFile``: the whole file, surrounding whitespace removed. It must not be
   readable or writable by group or others, like an SSH key;
3. a single-node group (the only peer is this node): ``<controllerStorePath>/raft.password``, generated
   (256 random bits, mode 0600) at the first start and read afterwards. No other node needs it.

A group of several nodes with neither property refuses to start (``ControllerConfig.validate``): the
nodes must share the secret, and there is no channel to agree on one that an attacker on the network
could not also use. ``mqctl cluster up``, ``mqctl quickstart`` and the test fixtures write one file for
all their nodes.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from services.common.durable import atomic_write
from services.common.errors import ConfigError
from services.controller.config import ControllerConfig

GENERATED_FILE = "raft.password"
#: A password file larger than this is not a password (and is not read whole).
MAX_FILE_BYTES = 4096


def generate_password() -> str:
    return secrets.token_urlsafe(32)


def write_password_file(path: Path, password: str | None = None) -> str:
    """Create ``path`` (mode 0600 from its first byte, written durably) holding a new password."""
    password = password or generate_password()
    atomic_write(path, password + "\n", mode=0o600)
    return password


def resolve_password(config: ControllerConfig) -> tuple[str, str]:
    """The password and where it came from (for the log; never the password itself)."""
    if config.controllerRaftPassword:
        return config.controllerRaftPassword, "controllerRaftPassword"
    if config.controllerRaftPasswordFile:
        path = Path(os.path.expanduser(config.controllerRaftPasswordFile))
        return read_password_file(path, "controllerRaftPasswordFile", follow=True), f"controllerRaftPasswordFile {path}"
    if len(config.peers()) > 1:  # validate() says so first; this keeps a caller that skipped it safe
        raise ConfigError(config.missing_password_message())
    path = config.store_dir / GENERATED_FILE
    if path.exists() or path.is_symlink():
        return read_password_file(path, "the generated Raft password"), f"generated file {path}"
    write_password_file(path)
    return read_password_file(path, "the generated Raft password"), f"generated file {path} (new)"


def read_password_file(path: Path, what: str, follow: bool = False) -> str:
    """The password in ``path``. ``follow``: the operator's file may be a symbolic link (secret mounts
    often are); the generated one is ours and never is."""
    # O_NONBLOCK: a FIFO put in its place must not hang the start-up (it is refused below).
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ConfigError(f"{what}: {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{what}: cannot open {path}: {exc.strerror}") from None
    try:
        _check_private_file(fd, path, what)
        raw = os.read(fd, MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{what}: {path} is larger than {MAX_FILE_BYTES} bytes; it should hold only the password")
    try:
        password = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"{what}: {path} is not UTF-8 text") from None
    if not password:
        raise ConfigError(f"{what}: {path} is empty")
    return password


def _check_private_file(fd: int, path: Path, what: str) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{what}: {path} is not a regular file")
    if info.st_mode & 0o077:
        raise ConfigError(f"{what}: {path} is accessible to other users (mode {info.st_mode & 0o777:o}); it "
                          f"holds the Raft password: run chmod 600 {path}")
