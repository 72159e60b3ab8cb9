"""A decoded CommitLog message: plain data, plus its rendering as the public NDJSON contract."""

from __future__ import annotations

import base64
import functools
import hashlib
from dataclasses import dataclass, field

from ..formats.compression import DEFAULT_BODY_LIMIT, Decompressed, decompress_body
from ..formats.constants import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    CompressionType,
    SysFlag,
    TransactionType,
    compression_type,
)
from ..formats.msgid import host_string, offset_msg_id

# Keys of the NDJSON record contract: scripts read them. Never remove or rename one.
CONTRACT_KEYS = (
    "physical_offset", "total_size", "magic_version", "body_crc", "crc_ok", "queue_id", "flag", "queue_offset",
    "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
    "prepared_transaction_offset", "topic", "properties", "tags", "keys", "uniq_key", "offset_msg_id", "body_size",
    "body_sha256",
)


def split_keys(keys: str | None) -> list[str]:
    """The KEYS property as the index sees it: split on single spaces, empty tokens dropped
    (IndexService.buildIndex)."""
    return [t for t in keys.split(" ") if t] if keys else []


@functools.lru_cache(maxsize=1024)
def sys_flag_names(sys_flag: int) -> tuple[str, ...]:
    """The SYSFLAG bits as words (``sys_flag_names`` of the record contract). Cached by value: a store holds a few
    distinct flags, and spelling them through the enums cost more than decoding the record (cq --join)."""
    names = [f.name for f in SysFlag if sys_flag & f and f not in (SysFlag.TRANSACTION_PREPARED,
                                                                    SysFlag.TRANSACTION_COMMIT)]
    tt = TransactionType(sys_flag & 0xC)
    if tt != TransactionType.NOT_TYPE:
        names.append("TRANSACTION_" + tt.name)
    codec = sys_flag & 0x700
    if codec:
        names.append("COMPRESSION_" + {1: "LZ4", 2: "ZSTD", 3: "ZLIB"}.get(codec >> 8, f"UNKNOWN{codec >> 8}"))
    return tuple(names)


@dataclass(slots=True)
class Message:
    physical_offset: int  # where the record is (file start + position)
    total_size: int
    magic_version: int
    body_crc: int
    crc_ok: bool | None  # crc32(body) == bodyCRC (an empty body: stored CRC 0); None only when not decoded
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset_field: int  # the PHYSICALOFFSET stored in the record
    sys_flag: int
    born_timestamp: int
    born_ip: bytes
    born_port: int
    store_timestamp: int
    store_ip: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_raw: bytes
    properties: dict[str, str]
    file: str = ""
    position: int = 0
    problems: list[str] = field(default_factory=list)
    # 5.x ``__CRC32#`` whole-record CRC (FORMATS.md §1.8): None when the property is absent
    property_crc_ok: bool | None = None
    # DLedger mode: the entry around the record (index, term, pos, ...; store.walk.entries.Entry.header_dict)
    dledger: dict | None = None

    # --- derived ---------------------------------------------------------------------------------
    @property
    def born_host(self) -> str:
        return host_string(self.born_ip, self.born_port)

    @property
    def store_host(self) -> str:
        return host_string(self.store_ip, self.store_port)

    @property
    def offset_msg_id(self) -> str:
        return offset_msg_id(self.store_ip, self.store_port, self.physical_offset_field)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys_string(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def keys(self) -> list[str]:
        return split_keys(self.properties.get(PROPERTY_KEYS))

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def transaction_type(self) -> TransactionType:
        return TransactionType(self.sys_flag & 0xC)

    @property
    def compression(self) -> CompressionType | None:
        return compression_type(self.sys_flag)

    @property
    def flag_names(self) -> list[str]:
        return list(sys_flag_names(self.sys_flag))

    @property
    def body_sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()

    def decompressed_body(self, limit: int = DEFAULT_BODY_LIMIT) -> bytes:
        """The body as the consumer sees it, at most ``limit`` bytes (formats.compression.decompress_body;
        ``render_body`` says when it was cut). Raises ValueError when the codec fails or is unknown."""
        codec = self.compression
        if codec is None:
            return self.body
        return decompress_body(codec, self.body, limit).data

    # --- rendering ---------------------------------------------------------------------------------
    def to_dict(self, body: str = "none", body_limit: int = DEFAULT_BODY_LIMIT) -> dict:
        """The public record contract (CONTRACT_KEYS) plus extra fields. ``body``: none|text|hex|base64."""
        d = {
            "physical_offset": self.physical_offset,
            "total_size": self.total_size,
            "magic_version": self.magic_version,
            "body_crc": self.body_crc,
            "crc_ok": self.crc_ok,
            "queue_id": self.queue_id,
            "flag": self.flag,
            "queue_offset": self.queue_offset,
            "sys_flag": self.sys_flag,
            "born_timestamp": self.born_timestamp,
            "born_host": self.born_host,
            "store_timestamp": self.store_timestamp,
            "store_host": self.store_host,
            "reconsume_times": self.reconsume_times,
            "prepared_transaction_offset": self.prepared_transaction_offset,
            "topic": self.topic,
            "properties": self.properties,
            "tags": self.tags,
            "keys": self.keys,
            "uniq_key": self.uniq_key,
            "offset_msg_id": self.offset_msg_id,
            "body_size": len(self.body),
            "body_sha256": self.body_sha256,
            "file": self.file,
            "position": self.position,
            "physical_offset_field": self.physical_offset_field,
            "sys_flag_names": self.flag_names,
            "transaction_type": self.transaction_type.name,
            "compression": self._compression_name(),
        }
        if self.property_crc_ok is not None:
            d["property_crc_ok"] = self.property_crc_ok
        if self.dledger is not None:
            d.update({f"dledger_{k}": v for k, v in self.dledger.items()})
        if self.problems:
            d["problems"] = list(self.problems)
        if body != "none":
            d.update(render_body(self, body, body_limit))
        return d

    def _compression_name(self) -> str | None:
        try:
            codec = self.compression
        except ValueError:  # SYSFLAG codec bits 4..7: no CompressionType (damage, or a future codec)
            return f"UNKNOWN{(self.sys_flag & 0x700) >> 8}"
        return codec.name if codec else None


def render_body(msg: Message, mode: str, limit: int = DEFAULT_BODY_LIMIT) -> dict:
    """Body rendering: text falls back to hex for bytes that are not UTF-8. A compressed body is decompressed
    to at most ``limit`` bytes; a longer one is cut there and says so (``body_truncated``, ``body_note``)."""
    cut: Decompressed | None = None
    try:
        codec = msg.compression
        if codec is None:
            data = msg.body
        else:
            cut = decompress_body(codec, msg.body, limit)
            data = cut.data
        decompressed = codec is not None
    except ValueError as e:
        return {"body_error": str(e), "body_encoding": "hex", "body": msg.body.hex()}
    out: dict = {}
    if decompressed:
        out["body_decompressed_size"] = len(data)
    if cut is not None and cut.truncated:
        out["body_truncated"] = True
        out["body_note"] = (f"decompressed body cut at {limit} bytes (it expands further; --max-body-bytes "
                            "raises the cap)")
    if mode == "text":
        try:
            out["body"] = data.decode("utf-8")
            out["body_encoding"] = "text"
            return out
        except UnicodeDecodeError:
            mode = "hex"
    if mode == "hex":
        out["body"] = data.hex()
        out["body_encoding"] = "hex"
    elif mode == "base64":
        out["body"] = base64.b64encode(data).decode("ascii")
        out["body_encoding"] = "base64"
    return out
