"""The daemon's journal: an append-only log of accepted changes, and snapshots that bound replay.

A journal directory holds `snapshot-<seq>.pickle` (the service state after record `seq`) and
`log-<seq>.bin` (the records after it, in order). The log is a sequence of frames: 4 bytes of
length, 4 bytes of CRC-32 (both big-endian) and a msgpack payload, which is either one record
(a map) or a list of records (a batch: the daemon writes one frame per turn of its loop and
forwards the same bytes to its scheduling process). The record maps themselves are the
service's business (`firmament_py.service.state`).

The daemon appends the records of a batch of requests, calls `flush`, and only then sends the
replies. `flush` writes the bytes to the file (so a `kill -9` of the daemon loses nothing it
acknowledged: the kernel has them) and then, by `fsync` policy, forces them to the disk:
"always" before every acknowledgement (an operating-system crash loses nothing either),
"interval" at most every `fsync_interval` seconds, "never" leaves it to the kernel.

A crash can cut the last frame short. `recover` keeps every whole frame before the cut and
truncates the rest, which was never acknowledged; a bad frame anywhere else is corruption and
raises `JournalError` instead of silently dropping acknowledged changes.

A snapshot is written to a temporary file, fsynced and renamed, and a new log starts with it;
older snapshots and logs are deleted only after that, so a crash at any point leaves a
complete snapshot and the logs after it. `write_snapshot` does this in the caller;
`start_snapshot` does it in a forked child (the state is copied on write, so the daemon goes on
serving while a large state is pickled) and `poll_snapshot` reaps the child and deletes what
its snapshot made unnecessary. The child dies with its parent, and gives up its share of the
directory's lock at once, so a restarted daemon is never locked out by it.

A journal is read by the version of the daemon that wrote it or a later one: snapshots gain
fields as the daemon does (a later version loads an older snapshot with defaults), and an older
daemon cannot read a newer snapshot.
"""

from __future__ import annotations

import fcntl
import logging
import os
import pickle
import re
import struct
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import msgpack

from firmament_py.parent_death import die_with_parent

__all__ = ["FSYNC_POLICIES", "Journal", "JournalError"]

FSYNC_POLICIES = ("always", "interval", "never")
_HEADER = struct.Struct(">II")
_MAX_RECORD = 1 << 30
_SNAPSHOT = re.compile(r"snapshot-(\d{12})\.pickle")
_LOG = re.compile(r"log-(\d{12})\.bin")
_TEMPORARY = re.compile(r"snapshot-\d{12}\.\d+\.tmp")

_log = logging.getLogger(__name__)


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
        self._snapshot_child: tuple[int, int] | None = None  # (pid, seq) being written
        self.records_since_snapshot = 0
        self.recovered_snapshot: bytes | None = None
        self.snapshot_failures = 0
        """Background snapshots whose child failed (each one logged; the journal stays valid)."""

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
        process holds it: two daemons on one journal would corrupt it). The snapshot's bytes
        stay in `recovered_snapshot` (for a scheduling process to load the same state without
        this one pickling it again) until `take_recovered_snapshot`."""
        self._lock()
        for path in self.directory.iterdir():
            if _TEMPORARY.fullmatch(path.name):
                path.unlink()  # a snapshot whose writer died before renaming it
        snapshots = self._numbered(_SNAPSHOT)
        payload: Any = None
        base = 0
        if snapshots:
            base, path = snapshots[-1]
            try:
                data = path.read_bytes()
                payload = pickle.loads(data)
            except Exception as error:
                raise JournalError(f"{path}: unreadable snapshot: {error}") from error
            self.recovered_snapshot = data
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
                # The end of the last log: a write a crash cut short, never acknowledged if
                # the fsync policy is `always` (one that reached the disk whole and rotted
                # since looks the same, hence the warning).
                _log.warning(
                    "%s: dropped its last %d bytes from byte %d on: %s",
                    path,
                    len(data) - offset,
                    offset,
                    problem,
                )
                with path.open("r+b") as file:
                    file.truncate(offset)
                break
            payload = data[start : start + length]
            try:
                decoded = msgpack.unpackb(payload, raw=False)
            except Exception as error:
                raise JournalError(
                    f"{path}: undecodable record at byte {offset}: {error}"
                ) from None
            if isinstance(decoded, list):
                records.extend(decoded)
            else:
                records.append(decoded)
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

    def take_recovered_snapshot(self) -> bytes | None:
        """The bytes of the snapshot `recover` loaded (None if it loaded none), once."""
        data, self.recovered_snapshot = self.recovered_snapshot, None
        return data

    def append(self, record: dict[str, Any]) -> None:
        """Queue `record` for the next `flush`."""
        self.append_packed(msgpack.packb(record, use_bin_type=True), 1)

    def append_packed(self, payload: bytes, count: int) -> None:
        """Queue `payload`, a msgpack record or list of `count` records, as one frame."""
        self._buffer.append(_HEADER.pack(len(payload), zlib.crc32(payload)) + payload)
        self.records_since_snapshot += count

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
        what the snapshot makes unnecessary. Flushes first; waits for a background snapshot."""
        self.poll_snapshot(wait=True)
        self._start_new_log(seq)
        path = self._write_snapshot_file(seq, payload)
        self._delete_before(seq)
        return path

    def start_snapshot(self, seq: int, payload: Callable[[], Any]) -> bool:
        """Start a new log after record `seq` and write the snapshot `payload()` (the state
        after record `seq`, taken in the child) from a forked child; False, doing nothing, if
        the previous one is still being written. The caller calls `poll_snapshot` now and
        then."""
        self.poll_snapshot()
        if self._snapshot_child is not None:
            return False
        self._start_new_log(seq)
        lock_fd = self._lock_file.fileno() if self._lock_file is not None else None
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: write the file and exit, running nothing else of the parent's
            code = 1
            try:
                die_with_parent(parent)
                if lock_fd is not None:
                    os.close(lock_fd)  # its share of the lock: a restarted daemon may take it
                self._write_snapshot_file(seq, payload())
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        self._snapshot_child = (pid, seq)
        return True

    @property
    def snapshot_in_progress(self) -> bool:
        """Whether a background snapshot's child is still writing."""
        return self._snapshot_child is not None

    def poll_snapshot(self, *, wait: bool = False) -> None:
        """Reap a finished background snapshot (with `wait`, wait for it): if it was written,
        delete the snapshots and logs before it; if its child failed, log it and keep them
        (the journal is as valid as before, with one more log)."""
        if self._snapshot_child is None:
            return
        pid, seq = self._snapshot_child
        done, status = os.waitpid(pid, 0 if wait else os.WNOHANG)
        if done == 0:
            return
        self._snapshot_child = None
        code = os.waitstatus_to_exitcode(status)
        if code == 0 and (self.directory / f"snapshot-{seq:012d}.pickle").exists():
            self._delete_before(seq)
        else:
            self.snapshot_failures += 1
            _log.error("%s: the snapshot after record %d failed (status %d)", self, seq, code)

    def _start_new_log(self, seq: int) -> None:
        """Flush and fsync the log, and append the records after `seq` to a new one."""
        self.flush()
        assert self._file is not None
        os.fsync(self._file.fileno())
        self._open_log(self.directory / f"log-{seq:012d}.bin")
        self.records_since_snapshot = 0

    def _write_snapshot_file(self, seq: int, payload: Any) -> Path:
        path = self.directory / f"snapshot-{seq:012d}.pickle"
        temporary = self.directory / f"{path.stem}.{os.getpid()}.tmp"
        try:
            with temporary.open("wb") as file:
                pickle.dump(payload, file, protocol=pickle.HIGHEST_PROTOCOL)
                file.flush()
                os.fsync(file.fileno())
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        os.replace(temporary, path)
        _fsync_directory(self.directory)
        return path

    def _delete_before(self, seq: int) -> None:
        for old_seq, old in self._numbered(_SNAPSHOT) + self._numbered(_LOG):
            if old_seq < seq:
                old.unlink()
        _fsync_directory(self.directory)

    def __repr__(self) -> str:
        return f"Journal({str(self.directory)!r})"

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Wait for a background snapshot; flush, force everything to disk, close, and release
        the lock."""
        self.poll_snapshot(wait=True)
        if self._file is not None:
            self.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None
        if self._lock_file is not None:
            self._lock_file.close()  # closing releases the flock
            self._lock_file = None
