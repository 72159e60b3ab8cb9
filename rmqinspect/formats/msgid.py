"""Message ids: offsetMsgId (FORMATS.md §2.1) and UNIQ_KEY (§2.2)."""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from .fields import FieldTable

# --- FORMATS.md §2.1, offsetMsgId (MessageDecoder.createMessageId): store IP (4|16 bytes), then this ----------
OFFSET_MSG_ID_TAIL = FieldTable((("store_port", "i"), ("physical_offset", "q")))


def java_ip_string(ip: bytes) -> str:
    """Inet4Address/Inet6Address.getHostAddress: IPv6 in full form, no '::' compression, no leading zeros."""
    if len(ip) == 4:
        return "%d.%d.%d.%d" % (ip[0], ip[1], ip[2], ip[3])
    if len(ip) == 16:
        return ":".join("%x" % v for v in struct.unpack(">8H", ip))
    return ip.hex()


def host_string(ip: bytes, port: int) -> str:
    """How RocketMQ renders a SocketAddress: ``ip:port`` and ``[ipv6]:port``."""
    if len(ip) == 16:
        return "[%s]:%d" % (java_ip_string(ip), port)
    return "%s:%d" % (java_ip_string(ip), port)


def offset_msg_id(store_ip: bytes, store_port: int, physical_offset: int) -> str:
    """MessageDecoder.createMessageId: upper-case hex of store ip + port + physical offset."""
    return (store_ip + OFFSET_MSG_ID_TAIL.pack(store_port, physical_offset)).hex().upper()


@dataclass(frozen=True)
class OffsetMsgId:
    store_ip: bytes
    store_port: int
    physical_offset: int

    @property
    def store_host(self) -> str:
        return host_string(self.store_ip, self.store_port)


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """MessageDecoder.decodeMessageId: 32 hex chars = IPv4, 56 = IPv6."""
    s = msg_id.strip()
    if len(s) not in (32, 56):
        raise ValueError(f"an offsetMsgId has 32 (IPv4) or 56 (IPv6) hex characters, got {len(s)}")
    raw = bytes.fromhex(s)
    ip_len = len(raw) - OFFSET_MSG_ID_TAIL.size
    port, off = OFFSET_MSG_ID_TAIL.unpack_from(raw, ip_len)
    return OffsetMsgId(raw[:ip_len], port, off)


@dataclass(frozen=True)
class UniqKey:
    """MessageClientIDSetter layout: ip, pid (low 16 bits), class-loader hash, ms since month start, counter."""

    ip: str
    pid: int
    class_loader_hash: int
    millis_since_month_start: int
    counter: int

def decode_uniq_key(uniq: str) -> UniqKey:
    s = uniq.strip()
    if len(s) not in (32, 56):
        raise ValueError(f"a UNIQ_KEY of the Java client has 32 or 56 hex characters, got {len(s)}")
    raw = bytes.fromhex(s)
    ip_len = len(raw) - 12
    pid, clh, delta, counter = struct.unpack(">HiIH", raw[ip_len:])
    return UniqKey(str(ipaddress.ip_address(raw[:ip_len])) if ip_len in (4, 16) else raw[:ip_len].hex(),
                   pid, clh, delta, counter)


def nearly_born_time(millis_since_month_start: int, reference_ms: int) -> int:
    """MessageClientIDSetter.getNearlyTimeFromID: the id holds milliseconds since the start of the producer's month;
    the month is the reference time's, or the one before when that start plus the span is not before the
    reference. The Java client takes month starts in its default time zone and the reference as "now"; here both
    are the caller's (month starts in UTC), so the answer can be off by the producer's UTC offset."""
    import datetime as dt

    ref = dt.datetime.fromtimestamp(reference_ms / 1000, dt.UTC)
    start = dt.datetime(ref.year, ref.month, 1, tzinfo=dt.UTC)
    start_ms = int(start.timestamp() * 1000)
    if start_ms + millis_since_month_start >= reference_ms:
        prev = dt.datetime(ref.year - (ref.month == 1), 12 if ref.month == 1 else ref.month - 1, 1, tzinfo=dt.UTC)
        start_ms = int(prev.timestamp() * 1000)
    return start_ms + millis_since_month_start
