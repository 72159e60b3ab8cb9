"""`batch-cq`: the 5.x BatchConsumeQueue (batchconsumequeue/) and the inner messages of INNER_BATCH records."""

from __future__ import annotations

import os

import click

from ..store import Store
from ._params import NON_NEGATIVE_LONG, QUEUE_ID, broker_conf, broker_version_option, store_argument
from .output import emit, emit_document, format_option, handle_errors, no_match, print_kv, topic_names, warn


@click.command("batch-cq")
@store_argument
@click.option("--topic", help="Only this topic.")
@click.option("--queue", "queue_id", type=QUEUE_ID, help="Only this queue id.")
@click.option("--expand", is_flag=True, help="Decode each INNER_BATCH record and list its inner messages.")
@click.option("--get", "get_offset", type=NON_NEGATIVE_LONG, default=None, metavar="OFFSET",
              help="What a consumer pulling at OFFSET gets (DefaultMessageStore.getMessage): needs --topic and "
                   "--queue.")
@click.option("--max", "max_msg_nums", type=click.IntRange(1, 1 << 20), default=32, show_default=True,
              help="maxMsgNums of the pull (--get).")
@click.option("--broker-role", type=click.Choice(("master", "slave")), default="master", show_default=True,
              help="--get: a SLAVE (offsetCheckInSlave=false) keeps the requested offset as nextBeginOffset on "
              "OFFSET_TOO_SMALL/OVERFLOW answers.")
@broker_version_option
@format_option
@handle_errors
def batch_cq(store, topic, queue_id, expand, get_offset, max_msg_nums, broker_role, broker_version, fmt):
    """List BatchConsumeQueue entries (batchconsumequeue/, 46-byte entries, 5.x queue.type=BatchCQ); with
    --expand, the inner messages of each INNER_BATCH record (logical offset = INNER_BASE + i); with --get, the
    broker's answer to a pull at that offset (whole batches from the base of the one containing it)."""
    from ..formats.constants import SysFlag
    from ..store.batch import BatchConsumeQueue, decode_inner_batch, list_batch_queues

    st = Store.open(store, conf=broker_conf())
    qs = [q for q in list_batch_queues(st.root) if (topic is None or q[0] == topic)
          and (queue_id is None or q[1] == queue_id)]
    if not qs:
        what = (f" for topic {topic!r}" if topic is not None else "") + (
            f" queue {queue_id}" if queue_id is not None else "")
        plain = topic is not None and queue_id is None and topic in topic_names(st.root)
        # a topic with a plain ConsumeQueue is in the store but not here: say where it is
        no_match(f"no batch consume queue{what} in {os.path.join(st.root, 'batchconsumequeue')}"
                 + (f" ({topic!r} has a ConsumeQueue: `cq`)" if plain else ""), topic=topic, store_root=st.root)
    if get_offset is not None:
        from ..analyses.get_message import GetMessageOptions, batch_get_message

        if topic is None or queue_id is None:
            raise click.UsageError("--get needs --topic and --queue")
        res = batch_get_message(BatchConsumeQueue(*qs[0], st.conf), get_offset, max_msg_nums, st.commitlog,
                                GetMessageOptions(slave=broker_role == "slave"))

        def render(doc):
            print_kv(f"getMessage {topic}/{queue_id} @ {get_offset}", [
                ("status", res.status), ("nextBeginOffset", res.next_begin_offset),
                ("queue min / max", f"{res.min_offset} / {res.max_offset}"),
                ("batches / messages", f"{res.msg_count4commercial} / {res.message_count}"),
                ("batch base offsets", " ".join(map(str, res.message_queue_offsets))),
                ("commit-log offsets", " ".join(map(str, res.physical_offsets)))])
            for n in res.notes:
                warn(n)

        emit_document(res.to_dict(), fmt, render)
        return

    def rows():
        for t, q, d in qs:
            bcq = BatchConsumeQueue(t, q, d, st.conf)
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
    for t, q, d in qs:  # mapperFileSizeBatchConsumeQueue (--broker-config, else the files' length) vs the files
        for note in BatchConsumeQueue(t, q, d, st.conf).file_notes():
            warn(note)


COMMANDS = [batch_cq]
