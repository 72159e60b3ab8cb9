"""The reference side of the rebuild dispatch tests: a recording consume-queue sink and the CQ entries derived
independently (record scan + full Message decode + analyses.dispatch_rules rules)."""

from __future__ import annotations


class RecordingSink:
    """A consume-queue sink that records every put."""

    def __init__(self):
        self.rows = []

    def queue(self, topic, queue_id):
        rows = self.rows

        class _Q:
            def put(self, qoff, phys, size, code):
                rows.append((topic, queue_id, qoff, phys, size, code))

        return _Q()


def reference_dispatch_rows(commitlog):
    """Independent path: the record scan + full Message decode + analyses.dispatch rules."""
    from rmqinspect.analyses.dispatch_rules import dispatch_tags_code, goes_to_consume_queue
    from rmqinspect.store.walk.kinds import HALF, MESSAGE
    from rmqinspect.store.walk.records import decode_slot

    rows, halves = [], []
    for slot in commitlog.scan(check_crc=False):
        if slot.kind == HALF:
            halves.append(slot.offset)
        elif slot.kind == MESSAGE:
            m = decode_slot(slot.file.buffer, slot.file.start, slot.position, slot.header, slot.body_pos, None)
            if goes_to_consume_queue(m.sys_flag):
                code, _ = dispatch_tags_code(m.topic, m.properties, m.store_timestamp)
                rows.append((m.topic, m.queue_id, m.queue_offset, m.physical_offset, m.total_size, code))
    return rows, halves
