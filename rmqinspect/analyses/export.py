"""``export``: every message of one or more stores as a Parquet dataset (hive partitions
topic_partition=/store_date=), written one commitlog file (or chunk of one) at a time.

A file is the unit of work of the Spark engine (``spark.jobs.export_spark``, one task per file); the local engine
splits a large file into about ``jobs`` chunks (``chunk_tasks``, ``join_chunk_results``). Both call
``write_file_task``, which writes the rows of ``analyses.rows.file_batches`` (the row decoder, where the columns are
declared) with pyarrow's Parquet writer.

pyarrow is imported lazily: the rest of rmqinspect never needs it.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence
from urllib.parse import quote

from ..errors import StoreNotFoundError
from ..sinks.staging import Staged
from ..store.broker_conf import BrokerConf
from ..store.layout import StoreLayout, ensure_new_directory, ensure_output_outside
from ..store.mapped import MappedFile
from ..store.walk.parallel import DEFAULT_CHUNK_BYTES, chunk_bytes, map_files, resolve_jobs
from ..store.walk.resync import ChunkJoin
from .rows import (
    PARTITION_COLUMNS,
    RUN_RECORDS,
    FileDamage,
    FileResult,
    FileTask,
    RowFilter,
    arrow_schema,
    file_batches,
)
from .txn import txn_states_by_file


def store_labels(stores: Sequence[str], labels: Sequence[str] | None = None, conf: BrokerConf | None = None
                 ) -> list[str]:
    """Labels for the ``source`` column: the given ones, else each store directory's name, disambiguated with
    the parent directory (``broker-a/store``) and finally the full path when names collide."""
    if labels:
        if len(labels) != len(stores):
            raise ValueError(f"{len(labels)} labels for {len(stores)} stores")
        return list(labels)
    roots = [StoreLayout.open(s, conf).root for s in stores]
    out = [os.path.basename(r) or r for r in roots]
    if len(set(out)) < len(out):
        out = [os.path.join(os.path.basename(os.path.dirname(r)), os.path.basename(r)) for r in roots]
    if len(set(out)) < len(out):
        out = roots
    return out


def file_tasks(stores: Sequence[str], labels: Sequence[str] | None = None, *, txn_states: bool = False,
               conf: BrokerConf | None = None) -> list[FileTask]:
    """Every commitlog file of every store, in store order then commitlog order. ``txn_states``: with each
    file's transaction verdicts (the ``txn_state`` column; one pass of ``analyses.txn`` per store first).
    ``conf``: the broker.conf the stores are opened with (which DLedger member, where its data files are)."""
    labels = store_labels(stores, labels, conf)
    tasks = []
    for store, label in zip(stores, labels):
        lay = StoreLayout.open(store, conf)
        entries = lay.commitlog_file_paths()
        if not entries:
            raise StoreNotFoundError("no commitlog files", lay.commitlog_dirs[0] if lay.commitlog_dirs else lay.root)
        per_file = txn_states_by_file(store, [start for start, _ in entries], conf) if txn_states else None
        for i, (start, path) in enumerate(entries):
            tasks.append(FileTask(_text(label), _text(lay.root), path, start, os.stat(path).st_size, i,
                                  i == len(entries) - 1, per_file[i] if per_file else (), lay.dledger is not None))
    return tasks


def chunk_tasks(tasks: Sequence[FileTask], jobs: int) -> list[FileTask]:
    """``tasks`` (one per file) split inside each file at valid record starts (``resync.record_chunks``) into
    about ``jobs`` chunks of at least ``parallel.DEFAULT_CHUNK_BYTES`` (``RMQINSPECT_CHUNK_BYTES`` when set: tests
    force tiny chunks), so a large file keeps every worker busy without cutting the dataset into many small Parquet
    files (every chunk writes its own part files in every partition it meets). The row walk carries nothing from
    one record to the next but its position, so a chunk's rows are the file's from the chunk's start; each chunk
    ends where it lands on a later chunk's start (``FileTask.stops``) and ``join_chunk_results`` keeps exactly the
    chunks the file's walk goes through. DLedger data files stay whole (their walk goes entry by entry)."""
    from ..store.walk.resync import record_chunks  # numpy: a split file only

    out: list[FileTask] = []
    for t in tasks:
        step = chunk_bytes(max(DEFAULT_CHUNK_BYTES, -(-t.size // max(jobs, 1))))
        if t.dledger or t.size <= step:
            out.append(t)
            continue
        mf = MappedFile(t.path, t.start, dledger=False)
        try:
            starts = record_chunks(mf, 0, step=step)
        finally:
            mf.close()
        for k, pos in enumerate(starts):
            txn = t.txn
            if txn and pos:  # the transaction records from the chunk's start on (the walk may go to the file's end)
                i = bisect.bisect_left(txn[0], t.start + pos)
                txn = (txn[0][i:], txn[1][i:]) if i < len(txn[0]) else ()
            out.append(dataclasses.replace(t, pos=pos, stops=tuple(starts[k + 1:]), txn=txn))
    return out


def join_chunk_results(pairs: Iterable[tuple[FileTask, FileResult]]) -> Iterator[tuple[FileTask, FileResult, bool]]:
    """(task, result, kept) in task order, kept as the walk of whole files goes through the chunk (``ChunkJoin``).
    The file's rows and damage are those of the chunks kept."""
    join = ChunkJoin()
    for t, r in pairs:
        yield t, r, join.keeps(t.path, t.pos, r.landed)


def _remove_parts(paths: list[str], out: str) -> None:
    """Remove the Parquet files of chunks not kept, and the partition directories left empty (at the end: a worker
    may still be creating a directory it writes into)."""
    dirs = set()
    for p in paths:
        os.remove(p)
        dirs.add(os.path.dirname(p))
    top = os.path.abspath(out)
    for d in sorted(dirs, key=len, reverse=True):
        d = os.path.abspath(d)
        while d != top and d.startswith(top + os.sep):
            try:
                os.rmdir(d)
            except OSError:  # not empty: a kept chunk wrote there
                break
            d = os.path.dirname(d)


def _text(name: str) -> str:
    """A name for a Parquet string column, which must be UTF-8: the bytes of a path that are not (held as surrogate
    escapes) written as \\xff."""
    return os.fsencode(name).decode("utf-8", "backslashreplace") if not name.isascii() else name


def check_output_dir(out: str, stores: Iterable[str], conf: BrokerConf | None = None) -> None:
    """Refuse an output directory inside any inspected store, or one that already holds files. A Hadoop URI
    (``hdfs://``, ``s3a://``; Spark engine only) cannot be inside a local store and is left to Spark."""
    if "://" in out:
        return
    try:
        os.path.abspath(out).encode("utf-8")
    except UnicodeEncodeError:  # a ValueError: the CLI says it as a usage error (exit 2)
        raise ValueError(f"--out {os.fsencode(out)!r}: Parquet writing (pyarrow) needs a path of UTF-8 characters; "
                         "choose another --out") from None
    for s in stores:
        ensure_output_outside(StoreLayout.open(s, conf), out)
    ensure_new_directory(out)


# --- local engine ----------------------------------------------------------------------------------


@dataclass
class ExportResult:
    engine: str
    out: str
    stores: list[str]
    files: int
    rows: int
    damage: list[FileDamage] = field(default_factory=list)
    scanners: dict[str, int] = field(default_factory=dict)  # Spark engine: tasks per record scanner they ran

    def to_dict(self) -> dict:
        d = {"engine": self.engine, "out": self.out, "stores": self.stores, "files": self.files,
             "rows": self.rows, "damage": [d.to_dict() for d in self.damage]}
        if self.scanners:
            d["scanners"] = self.scanners
        return d


# Columns Parquet encodes with a dictionary: those with few distinct values (hosts, topics, tags, flags, sizes, the
# property names). The others (offsets, timestamps, CRCs, message ids, keys, property values, bodies) are nearly all
# distinct: the writer's dictionary for them only fills up to its page limit and is dropped for plain encoding, which
# cost more than half the time of writing a row group, for larger files.
DICTIONARY_COLUMNS = ("source", "store_path", "file", "topic", "queue_id", "flag", "sys_flag", "transaction_type",
                      "born_host", "store_host", "reconsume_times", "tags", "tags_code", "magic_version", "txn_state",
                      "body_size", "total_size", "properties.key_value.key", "problems.list.element")


def write_file_task(number: int, task: FileTask, out: str, *, with_body: bool = False,
                    flt: RowFilter | None = None) -> FileResult:
    """Write the rows of one commitlog file (or chunk) into the dataset at ``out`` (local path or a Hadoop-style
    URI pyarrow understands: hdfs://, s3://). The unit of work of both engines: the local engine runs the tasks
    one after another or on worker processes, the Spark engine runs one task per file; names
    ``part-<number>-<i>.parquet`` (``i``: the task's partitions in the order it meets them) never collide, so
    concurrent tasks write into the same partition directories safely.

    Each partition's file is written here, in this thread, a row group per run of records that holds rows of it:
    pyarrow's dataset writer queued the batches for its own threads without bound (a worker held ~200 MiB where the
    rows need ~100) and cut every 4096-row batch into a row group per partition (~300 rows each), which cost more
    time and memory in Parquet metadata than the rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    schema = arrow_schema(with_body)
    keep = [i for i, f in enumerate(schema) if f.name not in PARTITION_COLUMNS]
    file_schema = pa.schema([schema.field(i) for i in keep])
    parts = [schema.get_field_index(n) for n in PARTITION_COLUMNS]
    fs, root = pafs.FileSystem.from_uri(out) if "://" in out else (pafs.LocalFileSystem(), os.path.abspath(out))
    result = FileResult(task)
    writers: dict[str, object] = {}
    try:
        for b in file_batches(task, with_body=with_body, flt=flt, result=result, batch_rows=RUN_RECORDS):
            # rows grouped by partition in walk order (a stable sort): one take per batch, a slice per partition
            key = pc.binary_join_element_wise(*(b.column(i) for i in parts), "/").dictionary_encode()
            names = key.dictionary.to_pylist()
            rows = b.select(keep)
            if len(names) > 1:
                idx = key.indices.to_numpy()
                rows = rows.take(pa.array(np.argsort(idx, kind="stable")))
                counts = np.bincount(idx, minlength=len(names)).tolist()
            else:
                counts = [b.num_rows]
            at = 0
            for name, n in zip(names, counts):
                w = writers.get(name)
                if w is None:
                    d = "/".join(f"{c}={quote(v, safe='')}" for c, v in zip(PARTITION_COLUMNS, name.split("/")))
                    fs.create_dir(f"{root}/{d}", recursive=True)
                    path = f"{root}/{d}/part-{number:05d}-{len(writers)}.parquet"
                    w = writers[name] = pq.ParquetWriter(path, file_schema, filesystem=fs,
                                                         use_dictionary=list(DICTIONARY_COLUMNS))
                    result.written.append(path)
                w.write_batch(rows.slice(at, n), row_group_size=n)
                at += n
    except BaseException:
        _close_writers(writers.values(), quiet=True)  # the error under way is the one to tell
        raise
    _close_writers(writers.values())
    return result


def _close_writers(writers, quiet: bool = False) -> None:
    """Close every Parquet writer (a full disk may fail any of them); the first failure is raised after all were
    tried, unless ``quiet``. A writer whose close failed is marked closed: its finaliser would try again and print
    the same error a second time."""
    first = None
    for w in writers:
        try:
            w.close()
        except Exception as e:
            w.is_open = False
            first = first or e
    if first is not None and not quiet:
        raise first


def _write_task(args) -> FileResult:
    """``write_file_task`` with one argument: the per-file function of the parallel engine."""
    n, task, out, with_body, flt = args
    return write_file_task(n, task, out, with_body=with_body, flt=flt)


def export_local(stores: Sequence[str], out: str, *, labels: Sequence[str] | None = None, with_body: bool = False,
                 flt: RowFilter | None = None, advance=None, jobs: int | None = None,
                 conf: BrokerConf | None = None) -> ExportResult:
    """Write the Parquet dataset with pyarrow (hive partitions topic_partition/store_date), one commitlog file
    per task: ``jobs`` 1 (the library default, ``parallel.resolve_jobs``) in this process, one file after another;
    more through ``store.walk.parallel``, a file larger than the default chunk split into about ``jobs`` chunks
    (``chunk_tasks``; every task writes its own ``part-<number>-*`` files, so the dataset is the same file for file
    as long as no file is split, and the same rows when one is)."""
    check_output_dir(out, stores, conf)
    files = file_tasks(stores, labels, txn_states=True, conf=conf)
    tasks = chunk_tasks(files, resolve_jobs(jobs))
    # written under a temporary name beside out, renamed at the end (sinks.staging): nothing at out after an
    # error, a full disk or a signal
    staged = Staged(out, "the Parquet dataset", directory=True)
    final_out, out = out, staged.path
    results = []
    dropped: list[str] = []
    done = 0
    pairs = zip(tasks, map_files(_write_task, [(n, t, out, with_body, flt) for n, t in enumerate(tasks)], jobs))
    for t, r, kept in join_chunk_results(pairs):
        if kept:
            results.append(r)
        else:
            dropped += r.written
        done += (t.stops[0] if t.stops else t.size) - t.pos
        if advance:
            advance(done)
    _remove_parts(dropped, out)
    staged.commit()
    return ExportResult("local", os.path.abspath(final_out), [t.store_path for t in files if t.index == 0],
                        len(files), sum(r.rows for r in results), [d for r in results for d in r.damage])


def read_dataset(out: str):
    """Read an exported dataset back as one Arrow table (partition columns restored as strings)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    part = ds.partitioning(pa.schema([pa.field(n, pa.string()) for n in PARTITION_COLUMNS]), flavor="hive")
    return ds.dataset(out, format="parquet", partitioning=part).to_table()
