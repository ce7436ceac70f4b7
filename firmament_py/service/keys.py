"""CURVE keys for the daemon and its clients (ZeroMQ's CurveZMQ: encryption and authentication).

A key directory, as `firmament-py keys generate` lays it out:

* `server.key` / `server.key_secret`: the daemon's key pair (clients need `server.key`);
* `clients/*.key`: the public keys of the clients allowed to connect; any other client fails
  the handshake and never reaches the daemon. A running daemon takes up keys added to (or
  removed from) the directory within a second (`AllowedClients`);
* a client's own pair, `NAME.key` / `NAME.key_secret`, lives with the client.

The files are ZeroMQ certificate files (`zmq.auth.create_certificates` writes them, and
`zmq.auth.load_certificate` reads them): text, a `curve` section holding `public-key = "..."`
(and `secret-key` in `*.key_secret`), each key 40 characters of Z85.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import zmq
import zmq.auth

if TYPE_CHECKING:  # loaded when a daemon with keys starts: it brings asyncio, 40 ms at start
    from zmq.auth.thread import ThreadAuthenticator

__all__ = [
    "AllowedClients",
    "CurveClientKeys",
    "CurveServerKeys",
    "KeyFileError",
    "authorise_client",
    "generate_key_pair",
    "start_authenticator",
]


class KeyFileError(Exception):
    """A key directory or file that cannot be used, naming it and what is missing."""


def _load(path: Path) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise KeyFileError(f"{path}: no such key file")
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (ValueError, OSError) as error:
        raise KeyFileError(f"{path}: not a ZeroMQ certificate: {error}") from None
    return public, secret


def generate_key_pair(directory: str | Path, name: str) -> tuple[Path, Path]:
    """Write `NAME.key` and `NAME.key_secret` into `directory` (created if needed); refuses to
    overwrite an existing pair."""
    if not name or name.startswith(".") or Path(name).name != name:
        raise KeyFileError(f"a key pair's name is a plain file name, got {name!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / f"{name}.key").exists() or (directory / f"{name}.key_secret").exists():
        raise KeyFileError(f"{directory}: a key pair named {name!r} exists already")
    public, secret = zmq.auth.create_certificates(directory, name)
    Path(secret).chmod(0o600)
    return Path(public), Path(secret)


def authorise_client(server_directory: str | Path, client_public_key: str | Path) -> Path:
    """Copy a client's public key into the server directory's `clients/` as `NAME.key`.

    Refuses a file that holds a secret key (copied, a secret would be one more file to leak,
    and readable by whoever may read `clients/`), and a server directory without the server's
    key pair (a typo would otherwise authorise nobody, silently)."""
    source = Path(client_public_key)
    public, secret = _load(source)
    if not public:
        raise KeyFileError(f"{source}: holds no public key")
    if secret is not None:
        raise KeyFileError(
            f"{source}: holds a secret key; authorise the client's public key file instead"
        )
    server_directory = Path(server_directory)
    if not (server_directory / "server.key_secret").is_file():
        raise KeyFileError(
            f"{server_directory}: no server key pair there (make one with `firmament-py keys "
            "generate`)"
        )
    clients = server_directory / "clients"
    clients.mkdir(exist_ok=True)
    target = clients / f"{source.stem if source.suffix == '.key' else source.name}.key"
    shutil.copyfile(source, target)
    return target


@dataclass(frozen=True)
class CurveServerKeys:
    """The daemon's key pair and the directory of allowed client keys."""

    public: bytes
    secret: bytes
    clients: Path

    @classmethod
    def load(cls, directory: str | Path) -> CurveServerKeys:
        directory = Path(directory)
        public, secret = _load(directory / "server.key_secret")
        if secret is None:
            raise KeyFileError(f"{directory / 'server.key_secret'}: holds no secret key")
        clients = directory / "clients"
        if not clients.is_dir() or not any(clients.glob("*.key")):
            raise KeyFileError(f"{clients}: no allowed client keys (*.key); nobody could connect")
        return cls(public, secret, clients)

    def apply_server(self, socket: zmq.Socket[bytes]) -> None:
        socket.curve_secretkey = self.secret
        socket.curve_publickey = self.public
        socket.curve_server = True


def start_authenticator(
    context: zmq.Context[zmq.Socket[bytes]], keys: CurveServerKeys
) -> ThreadAuthenticator:
    """Start ZeroMQ's authenticator on `context`, allowing the keys in `keys.clients`."""
    from zmq.auth.thread import ThreadAuthenticator

    authenticator = ThreadAuthenticator(context)
    authenticator.start()
    authenticator.configure_curve(domain="*", location=str(keys.clients))
    return authenticator


class AllowedClients:
    """Keeps an authenticator's allowed keys those in the `clients/` directory, which
    `keys authorise` (or an operator) changes while the daemon runs.

    ZeroMQ's authenticator reads the directory once, when configured: a key authorised later
    was refused until a restart. `refresh` configures it again whenever the directory's keys
    changed (a file added, removed or rewritten); the daemon calls it about once a second.
    New connections are checked against the keys of the moment; a connection that was let in
    stays up when its key is removed (close it, or restart the daemon, to cut it off)."""

    def __init__(self, authenticator: ThreadAuthenticator, directory: Path) -> None:
        self._authenticator = authenticator
        self._directory = directory
        self._seen = self._keys()

    def _keys(self) -> list[tuple[str, int, int]]:
        """What the allowed keys look like now: each file's name, modification time and size."""
        try:
            files = [(path.name, path.stat()) for path in self._directory.glob("*.key")]
        except OSError:  # the directory removed, or a file between listing and stat
            return []
        return sorted((name, info.st_mtime_ns, info.st_size) for name, info in files)

    def refresh(self) -> bool:
        """Reload the allowed keys if they changed; whether they did."""
        keys = self._keys()
        if keys == self._seen:
            return False
        self._seen = keys
        self._authenticator.configure_curve(domain="*", location=str(self._directory))
        return True


@dataclass(frozen=True)
class CurveClientKeys:
    """A client's key pair and the daemon's public key."""

    public: bytes
    secret: bytes
    server_public: bytes

    @classmethod
    def load(
        cls, client_secret_file: str | Path, server_public_file: str | Path
    ) -> CurveClientKeys:
        public, secret = _load(Path(client_secret_file))
        if secret is None:
            raise KeyFileError(f"{client_secret_file}: holds no secret key")
        server_public, _ = _load(Path(server_public_file))
        return cls(public, secret, server_public)

    def apply_client(self, socket: zmq.Socket[bytes]) -> None:
        socket.curve_secretkey = self.secret
        socket.curve_publickey = self.public
        socket.curve_serverkey = self.server_public
