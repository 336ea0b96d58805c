"""Reading the walk's files: on the walk's thread, or batched to reader threads for a big scan.

Files are read by pipeline.read_still (as they were at one instant, or reported). A full
scan with more than PARALLEL_AFTER files to read (a first snapshot, a lost stat cache)
reads, hashes and compresses the rest on reader threads (pipeline.Pipeline). The walk
itself stays on its thread and in order, and each file's result is recorded in walk order,
so the trees, the stats and the stored objects are the sequential scan's; a directory's
tree is made once the last of its files is back. Small scans (the hooks' incremental ones)
never start a thread.
"""

from __future__ import annotations

import os
import stat as S

from rewind import clock
from rewind.capture.pipeline import read_batch, read_still
from rewind.model import StatEntry
from rewind.store.objects import RAW_PREFIX, digest_of
from rewind.store.tree import DIR, FILE, LARGE, Entry

HOT_NS = 2 * 10**9       # a file written this recently may have a write(2) still copying into it
PARALLEL_AFTER = 256     # a full scan reads files on threads past this many to read
_BATCH_FILES, _BATCH_BYTES = 16, 256 << 10   # one hand-off to a reader: a directory's files, up to this


class FileReads:
    """The file-reading half of `walker.Walker` (which holds the store, the stat cache and
    what the walk found): `read_file` per regular file; `send_reads`, `settle_reads` and
    `stop_reads` for the reads in flight on reader threads."""

    def start_reads(self, raw_bodies: bool = False) -> None:
        self.hot_since = (self.fs_now_ns or clock.wall_ns()) - HOT_NS
        self.parallel_after: int | None = None   # files to read past this go to reader threads
        self.raw_bodies = raw_bodies     # file contents stored uncompressed (a fan-out worker's)
        self.to_read = 0
        self.pipeline = None             # the reader threads, once started
        self.batch: list[tuple[str, str]] = []    # (name, path) of files to hand off together
        self.batch_at = None             # ...in this directory: (DirNode, fd)
        self.batch_bytes = 0

    def read_file(self, dfd: int, name: str, rel_path: str, st: os.stat_result, node) -> Entry | None:
        """A regular file of the directory `node` (open as `dfd`): its entry, or None when it
        is refused or still being read (it joins `node.tree` when it is back)."""
        perm = S.S_IMODE(st.st_mode)
        self.stats.files += 1
        if self.progress is not None and self.stats.files % 512 == 0:
            self.progress("files read", self.stats.files, 0)
        self.stats.bytes += st.st_size
        if st.st_nlink > 1:
            self.hardlinks.add(rel_path)
        if st.st_size > self.max_size:
            self.stats.large.append(rel_path)
            self.protected.add(rel_path)
            return Entry(LARGE, perm, "", st.st_size)
        c = self.cache.get(rel_path)
        if c is not None:       # unpacked once: seven reads by name cost 1.4 ms in 10,000 files
            kind, size, mtime_ns, ctime_ns, ino, mode, oid = c
            if (kind == FILE and size == st.st_size and mtime_ns == st.st_mtime_ns and ctime_ns == st.st_ctime_ns
                    and ino == st.st_ino and mode == perm and not (self.damaged and oid in self.damaged)):
                self.seen.add(rel_path)
                return Entry(FILE, perm, oid, st.st_size)
        if self.pipeline is None and self.parallel_after is not None:
            self.to_read += 1
            if self.to_read > self.parallel_after:
                from rewind.capture.pipeline import Pipeline
                self.pipeline = Pipeline()
        if self.pipeline is not None:
            if self.batch and self.batch_at[0] is not node:
                self._send()
            self.batch.append((name, rel_path))
            self.batch_at = node, dfd
            self.batch_bytes += 2 * st.st_size + 512     # its bytes and their compressed copy
            node.waiting += 1
            if len(self.batch) >= _BATCH_FILES or self.batch_bytes >= _BATCH_BYTES:
                self._send()
            return None
        return self._took(rel_path, *read_still(dfd, name, self.hot_since))

    def send_reads(self, node) -> None:
        """The directory `node` is walked: its files gathered for a reader go now."""
        if self.batch and self.batch_at[0] is node:
            self._send()

    def settle_reads(self) -> None:
        """Every read in flight taken back (before the walk records something in order)."""
        if self.pipeline is not None:
            self._send()
            self.pipeline.drain()

    def stop_reads(self) -> None:
        """The reader threads stopped: none still uses a directory's fd past this."""
        if self.pipeline is not None:
            self.pipeline.close()

    def _send(self) -> None:
        """Hand the gathered files to a reader; their results are taken back in this order."""
        if not self.batch:
            return
        batch, (node, dfd), size = self.batch, self.batch_at, self.batch_bytes
        self.batch, self.batch_at, self.batch_bytes = [], None, 0

        def take(results: list) -> None:
            for (name, rel_path), got in zip(batch, results):
                self._resolve(node, name, self._took(rel_path, *got))
        self.pipeline.submit(size, take, read_batch, dfd, [name for name, _ in batch], self.hot_since,
                             self.store)

    def _resolve(self, node, name: str, entry: Entry | None) -> None:
        """A file read on a reader thread is back: its entry joins its directory's tree, and
        each directory that waited only for it gets its tree, up the chain."""
        if entry is not None:
            node.tree[name] = entry
        node.waiting -= 1
        while node.waiting == 0 and node.walked:
            node.oid = self.finish_dir(node.tree, node.rel)
            parent = node.parent
            if parent is None:
                return
            self.held.discard(node)
            os.close(node.fd)
            node.fd = None
            parent.tree[node.name] = Entry(DIR, node.mode, node.oid, 0)
            parent.waiting -= 1
            node = parent

    def _took(self, rel_path: str, data: bytes | None, st, problem: tuple | None,
              oid: str | None = None, body: bytes | None = None) -> Entry | None:
        """Record what reading a file gave (read_still's answer; from a reader thread, with
        the id and maybe the compressed body too): its blob staged and its stat cache row,
        or why it has none."""
        if data is None:
            if problem is not None:
                kind, why = problem
                if kind == "changing":
                    self.stats.changing.append(rel_path)
                else:
                    getattr(self.stats, kind).append((rel_path, why))
                self.protected.add(rel_path)
            return None
        perm = S.S_IMODE(st.st_mode)
        if oid is None:
            oid = digest_of(data)
        self.stats.hashed += 1
        self.stats.hashed_bytes += len(data)
        if self.store is not None:
            if self.raw_bodies:
                # a fan-out worker: compressed later (an object already stored: nothing to write)
                body = RAW_PREFIX + data if self.store.wanted(oid) else None
            self.store_object(data, oid, body)
            self.store.note_binary(oid, data)
        racy = st.st_mtime_ns >= self.fs_now_ns
        self._remember(rel_path, StatEntry((FILE, -1 if racy else st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                            st.st_ino, perm, oid)))
        return Entry(FILE, perm, oid, len(data))

