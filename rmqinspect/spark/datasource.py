"""``spark.read.format("rocketmq").load(path)``: RocketMQ store directories as a DataFrame (PySpark 4 Python
Data Source API). One input partition per commitlog file; each partition runs ``analyses.rows.file_batches``,
so the rows are exactly those of the local engine.

Options: ``path`` (what ``load()`` gets) or ``paths`` (JSON list of store directories), ``labels`` (JSON list,
values of the ``source`` column), ``withBody`` (``true`` adds the ``body`` column), ``topic`` / ``topics`` (JSON
list) and ``since`` / ``until`` (epoch ms or ISO-8601, inclusive, on the store time). Spark filters on ``topic``
(=, IN) and ``store_timestamp_ms`` (<, <=, >, >=, =) are pushed into the scan as well.
"""

from __future__ import annotations

import json

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from ..analyses.export import file_tasks
from ..analyses.rows import FileTask, RowFilter, file_batches, spark_ddl
from ..formats.timestamps import parse_epoch_millis


def _bool(v) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def _time(v) -> int | None:
    if v is None or v == "":
        return None
    return parse_epoch_millis(v)


class FilePartition(InputPartition):
    def __init__(self, task: FileTask):
        super().__init__(task.path)
        self.task = task


class RocketMQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def _paths(self) -> list[str]:
        if self.options.get("paths"):
            return list(json.loads(self.options["paths"]))
        if self.options.get("path"):
            return [self.options["path"]]
        raise ValueError("rocketmq data source: give a store path to load() or the option paths=[...]")

    def schema(self) -> str:
        return spark_ddl(_bool(self.options.get("withBody", "false")))

    def reader(self, schema) -> RocketMQReader:
        return RocketMQReader(self.options, self._paths())


class RocketMQReader(DataSourceReader):
    def __init__(self, options, paths: list[str]):
        self.with_body = _bool(options.get("withBody", "false"))
        labels = json.loads(options["labels"]) if options.get("labels") else None
        self.tasks = file_tasks(paths, labels, txn_states=True)
        topics = None
        if options.get("topics"):
            topics = frozenset(json.loads(options["topics"]))
        elif options.get("topic"):
            topics = frozenset([options["topic"]])
        self.flt = RowFilter(topics, _time(options.get("since")), _time(options.get("until")))

    def pushFilters(self, filters):
        flt = self.flt
        for f in filters:
            col = f.attribute if isinstance(f.attribute, str) else ".".join(f.attribute)
            if col == "topic" and isinstance(f, (EqualTo, In)):
                vals = frozenset([f.value] if isinstance(f, EqualTo) else f.value)
                flt.topics = vals if flt.topics is None else flt.topics & vals
            elif col == "store_timestamp_ms" and isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan,
                                                                 LessThanOrEqual)) and isinstance(f.value, int):
                v = f.value
                lo = {EqualTo: v, GreaterThan: v + 1, GreaterThanOrEqual: v}.get(type(f))
                hi = {EqualTo: v, LessThan: v - 1, LessThanOrEqual: v}.get(type(f))
                if lo is not None:
                    flt.since = lo if flt.since is None else max(flt.since, lo)
                if hi is not None:
                    flt.until = hi if flt.until is None else min(flt.until, hi)
            else:
                yield f

    def partitions(self):
        return [FilePartition(t) for t in self.tasks]

    def read(self, partition: FilePartition):
        flt = None if self.flt.empty else self.flt
        yield from file_batches(partition.task, with_body=self.with_body, flt=flt)
