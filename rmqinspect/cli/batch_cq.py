"""`batch-cq`: the 5.x BatchConsumeQueue (batchconsumequeue/) and the inner messages of INNER_BATCH records."""

from __future__ import annotations

import click

from ..store import Store
from ..store.errors import StoreNotFoundError
from ._params import broker_version_option, store_argument
from .output import emit, format_option, handle_errors


@click.command("batch-cq")
@store_argument
@click.option("--topic", help="Only this topic.")
@click.option("--queue", "queue_id", type=int, help="Only this queue id.")
@click.option("--expand", is_flag=True, help="Decode each INNER_BATCH record and list its inner messages.")
@broker_version_option
@format_option
@handle_errors
def batch_cq(store, topic, queue_id, expand, broker_version, fmt):
    """List BatchConsumeQueue entries (batchconsumequeue/, 46-byte entries, 5.x queue.type=BatchCQ); with
    --expand, the inner messages of each INNER_BATCH record (logical offset = INNER_BASE + i)."""
    from ..formats.constants import SysFlag
    from ..store.batch import BatchConsumeQueue, decode_inner_batch, list_batch_queues

    st = Store.open(store)
    qs = [q for q in list_batch_queues(st.root) if (topic is None or q[0] == topic)
          and (queue_id is None or q[1] == queue_id)]
    if not qs:
        raise StoreNotFoundError("no batch consume queue" + (f" for topic {topic!r}" if topic else ""),
                                 st.root)

    def rows():
        for t, q, d in qs:
            bcq = BatchConsumeQueue(t, q, d)
            for e in bcq.entries():
                base = {"topic": t, "queue_id": q, **e}
                if not expand:
                    yield base
                    continue
                m = st.commitlog.read_message(e["physical_offset"])
                if not m.sys_flag & SysFlag.INNER_BATCH:
                    yield {**base, "inner_index": None, "queue_offset": m.queue_offset,
                           "properties": m.properties, "body_size": len(m.body)}
                    continue
                for im in decode_inner_batch(m.body, m.queue_offset, m.file, m.physical_offset):
                    yield {**base, "inner_index": im.index, "queue_offset": im.queue_offset,
                           "properties": im.properties, "body_size": len(im.body)}

    cols = ("topic", "queue_id", "msg_base_offset", "batch_size", "physical_offset", "size", "tags_code")
    if expand:
        cols = ("topic", "queue_id", "queue_offset", "physical_offset", "inner_index", "body_size", "properties")
    emit(rows(), fmt, cols)


COMMANDS = [batch_cq]
