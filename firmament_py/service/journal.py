"""The daemon's journal: an append-only log of accepted changes, and snapshots that bound replay.

A journal directory holds `snapshot-<seq>.pickle` (the service state after record `seq`) and
`log-<seq>.bin` (the records after it, in order). Each record is framed as 4 bytes of length,
4 bytes of CRC-32 (both big-endian) and a msgpack map; the record maps themselves are the
service's business (`firmament_py.service.state`).

The daemon appends the records of a batch of requests, calls `flush`, and only then sends the
replies. `flush` writes the bytes to the file (so a `kill -9` of the daemon loses nothing it
acknowledged: the kernel has them) and then, by `fsync` policy, forces them to the disk:
"always" before every acknowledgement (an operating-system crash loses nothing either),
"interval" at most every `fsync_interval` seconds, "never" leaves it to the kernel.

A crash can cut the last record short. `recover` keeps every whole record before the cut and
truncates the rest, which was never acknowledged; a bad record anywhere else is corruption and
raises `JournalError` instead of silently dropping acknowledged changes.

A snapshot is written to a temporary file, fsynced and renamed, and a new log starts with it;
older snapshots and logs are deleted only after that, so a crash at any point leaves a
complete snapshot and the log after it.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import re
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import msgpack

__all__ = ["FSYNC_POLICIES", "Journal", "JournalError"]

FSYNC_POLICIES = ("always", "interval", "never")
_HEADER = struct.Struct(">II")
_MAX_RECORD = 1 << 30
_SNAPSHOT = re.compile(r"snapshot-(\d{12})\.pickle")
_LOG = re.compile(r"log-(\d{12})\.bin")


class JournalError(Exception):
    """The journal directory cannot be used: corrupt records, an unreadable snapshot."""


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    """One journal directory, opened by one daemon at a time."""

    def __init__(
        self, directory: str | Path, *, fsync: str = "always", fsync_interval: float = 0.05
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}, not {fsync!r}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.fsync_interval = fsync_interval
        self._buffer: list[bytes] = []
        self._file: BinaryIO | None = None
        self._last_sync = time.monotonic()
        self._lock_file: TextIO | None = None
        self.records_since_snapshot = 0

    # ------------------------------------------------------------------ reading

    def _numbered(self, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.iterdir():
            match = pattern.fullmatch(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def recover(self) -> tuple[Any, list[dict[str, Any]]]:
        """The latest snapshot's payload (None if there is none) and the records logged after
        it, in order; a record cut short at the very end is truncated away. Opens the log for
        appending, and holds the directory's lock until `close` (JournalError if another
        process holds it: two daemons on one journal would corrupt it)."""
        self._lock()
        snapshots = self._numbered(_SNAPSHOT)
        payload: Any = None
        base = 0
        if snapshots:
            base, path = snapshots[-1]
            try:
                with path.open("rb") as file:
                    payload = pickle.load(file)
            except Exception as error:
                raise JournalError(f"{path}: unreadable snapshot: {error}") from error
        logs = [(seq, path) for seq, path in self._numbered(_LOG) if seq >= base]
        records: list[dict[str, Any]] = []
        for index, (_, path) in enumerate(logs):
            last = index == len(logs) - 1
            records.extend(self._read_log(path, truncate_tail=last))
        log_path = logs[-1][1] if logs else self.directory / f"log-{base:012d}.bin"
        self._open_log(log_path)
        return payload, records

    def _read_log(self, path: Path, *, truncate_tail: bool) -> Iterator[dict[str, Any]]:
        with path.open("rb") as file:
            data = file.read()
        offset = 0
        records = []
        while offset < len(data):
            problem = None
            if len(data) - offset < _HEADER.size:
                problem = "a record header cut short"
            else:
                length, crc = _HEADER.unpack_from(data, offset)
                start = offset + _HEADER.size
                if length > _MAX_RECORD or start + length > len(data):
                    problem = "a record cut short"
                elif zlib.crc32(data[start : start + length]) != crc:
                    problem = "a record whose checksum does not match"
            if problem is not None:
                if not truncate_tail or self._more_records_after(data, offset):
                    raise JournalError(f"{path}: {problem} at byte {offset}")
                with path.open("r+b") as file:
                    file.truncate(offset)
                break
            payload = data[start : start + length]
            try:
                records.append(msgpack.unpackb(payload, raw=False))
            except Exception as error:
                raise JournalError(
                    f"{path}: undecodable record at byte {offset}: {error}"
                ) from None
            offset = start + length
        return iter(records)

    @staticmethod
    def _more_records_after(data: bytes, offset: int) -> bool:
        """Whether a whole valid record follows a bad one (corruption, not a cut tail)."""
        for start in range(offset + 1, len(data) - _HEADER.size):
            length, crc = _HEADER.unpack_from(data, start)
            end = start + _HEADER.size + length
            if 0 < length <= len(data) - start and end <= len(data):
                if zlib.crc32(data[start + _HEADER.size : end]) == crc:
                    return True
        return False

    def _lock(self) -> None:
        if self._lock_file is not None:
            return
        lock = (self.directory / "lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            raise JournalError(
                f"{self.directory}: in use by another process (its lock is held)"
            ) from None
        self._lock_file = lock

    # ------------------------------------------------------------------ writing

    def _open_log(self, path: Path) -> None:
        if self._file is not None:
            self._file.close()
        self._file = path.open("ab")
        _fsync_directory(self.directory)

    def append(self, record: dict[str, Any]) -> None:
        """Queue `record` for the next `flush`."""
        payload = msgpack.packb(record, use_bin_type=True)
        self._buffer.append(_HEADER.pack(len(payload), zlib.crc32(payload)) + payload)
        self.records_since_snapshot += 1

    def flush(self) -> None:
        """Write the queued records, then fsync as the policy says. Returns once they are safe
        from a crash of the daemon (and, with "always", of the machine)."""
        if self._file is None:
            raise JournalError("the journal is not open: call recover() first")
        if self._buffer:
            self._file.write(b"".join(self._buffer))
            self._buffer.clear()
            self._file.flush()
            if self.fsync == "always":
                os.fsync(self._file.fileno())
        if self.fsync == "interval" and time.monotonic() - self._last_sync >= self.fsync_interval:
            os.fsync(self._file.fileno())
            self._last_sync = time.monotonic()

    def write_snapshot(self, seq: int, payload: Any) -> Path:
        """Save `payload` as the state after record `seq`, start a new log after it, and delete
        what the snapshot makes unnecessary. Flushes first."""
        self.flush()
        assert self._file is not None
        os.fsync(self._file.fileno())
        path = self.directory / f"snapshot-{seq:012d}.pickle"
        temporary = path.with_suffix(".tmp")
        with temporary.open("wb") as file:
            pickle.dump(payload, file, protocol=pickle.HIGHEST_PROTOCOL)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        self._open_log(self.directory / f"log-{seq:012d}.bin")
        for old_seq, old in self._numbered(_SNAPSHOT) + self._numbered(_LOG):
            if old_seq < seq:
                old.unlink()
        _fsync_directory(self.directory)
        self.records_since_snapshot = 0
        return path

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Flush, force everything to disk, close, and release the lock."""
        if self._file is not None:
            self.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None
        if self._lock_file is not None:
            self._lock_file.close()  # closing releases the flock
            self._lock_file = None
