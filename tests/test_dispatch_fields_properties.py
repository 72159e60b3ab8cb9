"""The compiled ``dispatch_fields`` (store/_fastscan.c) equals the pure-Python reference (``record_fields_py``:
``dispatch_properties``, ``b"INNER_MULTI_DISPATCH\\x01" in raw``, ``formats.javahash``) on generated property
blobs and topics, for both ``want_keys``, wherever the bytes sit in the buffer.

The compiled parse finds the separators 16 bytes at a time and reads up to 15 bytes past a record's properties
when the buffer goes on (none past the buffer's end), tests INNER_MULTI_DISPATCH at each \\x01 against the 20
bytes before it, hashes ASCII 8 and 4 bytes a step and interns topics with a word hash: the blobs here put
separators, names and pattern pieces on every side of those boundaries.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqinspect.analyses import dispatcher as rb
from rmqinspect.formats.javahash import java_string_hash
from rmqinspect.store import Store, scanner
from rmqinspect.store.walk.file import walk_file
from rmqinspect.store.walk.records import RecordRun
from support import ALL_SCENARIOS, require_oracle

pytestmark = pytest.mark.skipif(not scanner.compiled_built(),
                                reason="compiled extension not built (no C compiler / zlib headers)")

MULTI = b"INNER_MULTI_DISPATCH\x01"


def packed(records: list[tuple[bytes, bytes, bytes]], trailing: bytes = b"") -> tuple[bytes, np.ndarray]:
    """A buffer of (padding, topic, properties) records one after another, the scanner's rows for them (topic
    and properties positions and lengths; the rest is not read), and ``trailing`` after the last properties
    (empty: they end the buffer, so the compiled scan cannot read ahead there)."""
    buf = bytearray()
    rows = np.zeros((len(records), 16), dtype=np.int64)
    for i, (pad, topic, props) in enumerate(records):
        buf += pad
        rows[i, 11], rows[i, 12] = len(buf), len(topic)
        buf += topic
        rows[i, 13], rows[i, 14] = len(buf), len(props)
        buf += props
    buf += trailing
    return bytes(buf), rows


def assert_compiled_equals_reference(buf: bytes, rows: np.ndarray) -> None:
    """Same topic ids and topics, tagsCode, key count, DELAY position and length, flags and key hashes."""
    for want_keys in (False, True):
        fc, kc, tc = rb.dispatch_fields(buf, rows, want_keys)
        fp, kp, tp = rb.dispatch_fields(buf, rows, want_keys, use_compiled=False)
        assert tc == tp
        assert fc.tolist() == fp.tolist(), want_keys
        assert kc.tolist() == kp.tolist(), want_keys


# --- INNER_MULTI_DISPATCH: "a \x01 with the pattern's 20 bytes before it" is the substring rule -----------------

@pytest.mark.parametrize(("props", "present"), [
    (MULTI + b"%LMQ%a\x02", True),                                  # the very start
    (b"KEYS\x01k\x02" + MULTI + b"x\x02", True),                    # a later piece's name
    (b"WAIT\x01abc" + MULTI + b"\x02", True),                       # inside a value, ends a piece with no value
    (b"TAGS\x01a\x01INNER_MULTI_DISPATCH\x01b\x02", True),          # after a second \x01 in a value
    (b"INNER_MULTI_INNER_MULTI_DISPATCH\x01\x02", True),            # overlapping with a false start
    (MULTI + MULTI + MULTI, True),                                  # repeated, ends the blob
    (b"x" * 7 + MULTI, True),                                       # the \x01 is the last byte
    (b"INNER_MULTI\x02DISPATCH\x01v\x02", False),                   # split by \x02
    (b"INNER_MULTI_DISPATCH\x02\x01", False),                       # \x02 where the \x01 belongs
    (b"INNER_MULTI_DISPATCH", False),                               # no \x01 at all
    (b"\x01INNER_MULTI_DISPATCH\x02", False),                       # \x01 before, not after
    (b"NNER_MULTI_DISPATCH\x01v\x02", False),                       # 19 bytes: the pattern's start cut off
    (b"\x01v\x02", False),                                          # only the bytes before the blob match
    (b"INNER_MULTI_DISPATCh\x01v\x02", False),                      # one byte different
    (b"", False),
])
def test_multi_dispatch_flag_is_the_substring_rule(props, present):
    assert (MULTI in props) == present  # the reference's rule says what the case says
    # the topic right before the properties is the pattern's name: bytes before the blob must not count
    buf, rows = packed([(b"", b"INNER_MULTI_DISPATCH", props), (b"", b"T", props)])
    fields, _, _ = rb.dispatch_fields(buf, rows, False)
    assert (fields[:, 5] & rb.DF_MULTI_DISPATCH).astype(bool).tolist() == [present, present]
    assert_compiled_equals_reference(buf, rows)


def test_pattern_and_names_at_every_offset_across_the_16_byte_steps():
    """The pattern, and a TAGS and a DELAY piece, starting at each offset 0..40 of filler with no separators,
    the blob ending the buffer or followed by more bytes: every place the \\x01 can fall in a step and in the
    blob's last (partial) step."""
    cases = []
    for at in range(41):
        for body in (MULTI + b"v", b"TAGS\x01Tag" + bytes([97 + at % 26]), b"DELAY\x01" + str(at).encode()):
            cases.append((b"\x02" * (at % 3), b"TopicTest", b"y" * at + b"\x02" + body))
    for trailing in (b"", b"\x01" * 17, b"\x02" * 3):
        buf, rows = packed(cases, trailing)
        assert_compiled_equals_reference(buf, rows)
        fields, _, _ = rb.dispatch_fields(buf, rows, False)
        assert [bool(f & rb.DF_MULTI_DISPATCH) for f in fields[:, 5]] == [MULTI in c[2] for c in cases]


# --- generated blobs ------------------------------------------------------------------------------------------

_NAMES = [b"TAGS", b"KEYS", b"UNIQ_KEY", b"DELAY", b"INNER_MULTI_DISPATCH", b"", b"TAG", b"TAGSS", b"KEY", b"DELA",
          b"DELAYY", b"UNIQ_KE", b"UNIQ_KEYS", b"xTAGS", b"WAIT", b"DISPATCH", b"INNER_MULTI_", b"KEYS ", b"tags"]
_PIECES = _NAMES + [b"\x01", b"\x02", b"\x01\x02", b" ", b"  ", "中文".encode(), "é".encode(), "😀".encode(),
                    "𝄞".encode(), b"\xff", b"\xfe", b"\xe4\xb8", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80",
                    b"\xc3", b"\x80", b"a", b"0", b"3", b"-1", b"+7", MULTI, b"x" * 9, b"order-1 user-2",
                    b"7F00000100002A9F0000000000000000"]
_text = st.one_of(st.sampled_from(_PIECES), st.binary(max_size=6), st.text(max_size=6).map(str.encode))
_value = st.lists(_text, max_size=6).map(b"".join)
_piece = st.tuples(st.one_of(st.sampled_from(_NAMES), _value), st.sampled_from([b"\x01", b"", b"\x01\x01", b"\x02"]),
                   _value).map(b"".join)
_blob = st.one_of(
    st.tuples(st.lists(_piece, max_size=8), st.sampled_from([b"\x02", b"", b"\x02\x02"]))
    .map(lambda t: b"\x02".join(t[0]) + t[1]),
    st.binary(max_size=80),
)
_TOPICS = [b"TopicTest", b"TopicTesu", b"T", b"", "中文Topic".encode(), b"T\xff", b"abcd", b"abce", b"abcdx",
           b"abcdy", b"TopicA1", b"TopicA2", b"abcdefgh", b"abcdefgi", b"TopicTestA", b"TopicTestB",
           b"TopicTest1234567", b"TopicTest1234568", b"x" * 17, b"x" * 300, b"%RETRY%g",
           b"SCHEDULE_TOPIC_XXXX", b"INNER_MULTI_DISPATCH"]
_topic = st.one_of(st.sampled_from(_TOPICS), st.binary(max_size=20))
_record = st.tuples(st.one_of(st.just(b""), st.binary(max_size=20)), _topic, _blob)


@settings(max_examples=400, deadline=None)
@given(st.lists(_record, min_size=1, max_size=12), st.one_of(st.just(b""), st.binary(max_size=20)))
def test_compiled_dispatch_fields_equal_reference_on_generated_properties(records, trailing):
    """Pieces with \\x01/\\x02 in odd places, empty names and values, duplicates (the later wins), the
    dispatcher's names inside names and values, non-UTF-8 and multi-byte UTF-8, repeated and near-equal topics,
    any padding between records, the last blob ending the buffer or not."""
    buf, rows = packed(records, trailing)
    assert_compiled_equals_reference(buf, rows)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(_text, max_size=12).map(b"".join), st.binary(max_size=40)))
def test_compiled_java_hash_equals_java_string_hash_or_refuses(data):
    """Strict UTF-8 (Python's decoder) hashes as Java's String.hashCode of the decoded text, ASCII words and
    tails of every length included; anything else is refused (the wrapper then uses the reference)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    got = scanner.compiled().java_hash_utf8(data)
    assert got == (None if text is None else java_string_hash(text))


def test_topics_differing_in_one_byte_get_their_own_ids():
    """Topic interning compares lengths 4-16 with two overlapping loads and hashes a word at a time: each topic of
    lengths 0..24 next to the same topic with one byte changed (at each position), back and forth, numbered in
    order of first appearance as the reference numbers them."""
    records = []
    for n in range(25):
        base = bytes(range(65, 65 + n))
        for k in range(n):
            other = base[:k] + b"~" + base[k + 1:]
            records += [(b"", base, b"TAGS\x01a\x02"), (b"", other, b""), (b"", base, b"")]
    buf, rows = packed(records)
    assert_compiled_equals_reference(buf, rows)
    _, _, topics = rb.dispatch_fields(buf, rows, False)
    assert len(topics) == len(set(t for _, t, _ in records))


# --- the oracle stores' records, packed -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_oracle_records_packed_end_to_end_equal_reference(name):
    """Every distinct (topic, properties) of an oracle store, packed with nothing between them and the last
    ending the buffer (in the store a record's properties are followed by the next record)."""
    p = require_oracle(name)
    seen: dict[tuple[bytes, bytes], None] = {}
    with Store.open(p / "store") as st_:
        for f in st_.commitlog.files:
            for ev in walk_file(f, check_crc=False):
                if type(ev) is RecordRun:
                    for row in ev.rows.tolist():
                        t = bytes(f.buffer[row[11]:row[11] + row[12]])
                        seen.setdefault((t, bytes(f.buffer[row[13]:row[13] + row[14]])), None)
    assert seen
    buf, rows = packed([(b"", t, props) for t, props in seen])
    assert_compiled_equals_reference(buf, rows)


@pytest.mark.parametrize("bad", [(2**62, 2**62), (-1, 5), (3, 2**63 - 1), (2**63 - 1, 2**63 - 1)])
def test_rows_outside_the_buffer_are_refused_also_when_read_ahead(bad):
    """The rows a few places on are read ahead (their lines prefetched) before their own check: out-of-range
    positions there must still end in the ValueError when their turn comes, whatever the numbers."""
    buf, rows = packed([(b"", b"TopicTest", b"TAGS\x01a\x02")] * 12)
    rows[10, 13], rows[10, 14] = bad
    with pytest.raises(ValueError, match="outside the buffer"):
        scanner.compiled().dispatch_fields(buf, rows, True)
    assert_compiled_equals_reference(buf, rows[:10])
