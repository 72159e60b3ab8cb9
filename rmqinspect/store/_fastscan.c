/*
 * Compiled fast path of rmqinspect.store.commitlog.scan_buffer: walks the well-formed MESSAGE records
 * of one commitlog buffer (FORMATS.md section 1.2 layout, section 1.10 checks) and stops at the first
 * position that is anything else (blank, zeros, damage, half record, CRC mismatch, end of buffer).
 * The pure-Python scanner then handles that position, so every unusual case keeps exactly one
 * implementation; tests prove both paths produce identical slots on the oracle and on damaged data.
 *
 * Imported only by rmqinspect.store.scanner (the compiled / pure-Python switch).
 *
 * Output: a bytes object of `count` records, each NFIELDS native int64 in the order of
 * rmqinspect.store.commitlog.RECORD_FIELDS (viewed there as the numpy dtype RECORD_DTYPE):
 *   position, total_size, body_pos, body_len, crc_ok(-1 unchecked / 0 / 1), sys_flag, queue_id, queue_offset,
 *   physical_offset_field, store_timestamp, born_timestamp, topic_pos, topic_len, properties_pos,
 *   properties_len, magic_version
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#if defined(__SSE2__)
#include <emmintrin.h> /* dispatch_fields' separator search, 16 bytes a step */
#endif

#define NFIELDS 16
#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define MAGIC_V2 ((int32_t)0xDAA320AB)
#define MIN_RECORD_SIZE 91
#define HEADER_V4 88

/* ---- CRC-32 (zlib's polynomial, the broker's UtilAll.crc32) ------------------------------------------------
 * zlib 1.2.x computes it a word at a time (about 3.5-4.5 GB/s here), which made the body CRCs most of a
 * verify walk. On x86-64 with PCLMULQDQ the bulk of each body is folded 64 bytes at a time with carry-less
 * multiplies (the method of Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ", written
 * for the reflected polynomial 0xEDB88320), the tail under 16 bytes goes to zlib. Same value as zlib.crc32 for
 * every input (tests: tests/test_fast_crc32.py, lengths 0..5000 at every alignment, against zlib); CPUs
 * without the instructions take zlib's path. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_CRC_FOLD 1
#include <immintrin.h>

static int crc_fold_ok = 0; /* set at import: the CPU has PCLMULQDQ and SSE4.1 */

__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_fold(uint32_t crc, const unsigned char *p,
                                                                     size_t len) {
    /* crc: the raw register (zlib's value with its bits inverted); len >= 64 and a multiple of 16 */
    __m128i x1 = _mm_loadu_si128((const __m128i *)p), x2 = _mm_loadu_si128((const __m128i *)(p + 16)),
            x3 = _mm_loadu_si128((const __m128i *)(p + 32)), x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    p += 64;
    len -= 64;
    /* x^(512+32) and x^(512-32) mod P, bit-reflected: fold each 128-bit lane 512 bits forward */
    __m128i k = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    while (len >= 64) {
        __m128i t1 = _mm_clmulepi64_si128(x1, k, 0x00), t2 = _mm_clmulepi64_si128(x2, k, 0x00),
                t3 = _mm_clmulepi64_si128(x3, k, 0x00), t4 = _mm_clmulepi64_si128(x4, k, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k, 0x11);
        x2 = _mm_clmulepi64_si128(x2, k, 0x11);
        x3 = _mm_clmulepi64_si128(x3, k, 0x11);
        x4 = _mm_clmulepi64_si128(x4, k, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, t1), _mm_loadu_si128((const __m128i *)p));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, t2), _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, t3), _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, t4), _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        len -= 64;
    }
    /* the same for 128 bits: the four lanes into one, then the remaining 16-byte blocks */
    k = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
#define FOLD128(a, b)                                                                                           \
    do {                                                                                                        \
        __m128i t_ = _mm_clmulepi64_si128(a, k, 0x00);                                                          \
        a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x11), t_), b);                              \
    } while (0)
    FOLD128(x1, x2);
    FOLD128(x1, x3);
    FOLD128(x1, x4);
    while (len >= 16) {
        FOLD128(x1, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        len -= 16;
    }
#undef FOLD128
    /* 128 -> 64 bits (appending the 32 zero bits of the CRC's definition), 64 -> 32, then Barrett's reduction */
    __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), _mm_clmulepi64_si128(k, x1, 0x01));
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), _mm_set_epi64x(0, 0x163cd6124LL), 0x00);
    x1 = _mm_xor_si128(x1, x2);
    __m128i pu = _mm_set_epi64x(0x1f7011641LL, 0x1db710641LL); /* mu, P */
    x2 = x1;
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), pu, 0x10);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), pu, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* A maintained library's crc32 when one is installed (ISA-L's crc32_gzip_refl, or zlib-ng's zng_crc32_z: both
 * zlib's convention, crc in and out un-inverted, 64-bit length): set at import by store/scanner.py through
 * set_crc32 with the address of the function inside the library's own Python extension (already loaded). On CPUs
 * with VPCLMULQDQ they fold 256 bytes at a time: ISA-L ran 10.5 GB/s on 1.2 KiB bodies here against 8.6 for
 * crc32_fold and 2.7 for zlib (benchmarks in docs/benchmarks.md). */
typedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, uint64_t);
static crc_fn ext_crc = NULL;
static char ext_crc_name[32] = "";

/* zlib.crc32(data, crc) */
static uLong crc32_of(uLong crc, const unsigned char *p, Py_ssize_t len) {
    if (ext_crc != NULL) return (uLong)ext_crc((uint32_t)crc, p, (uint64_t)len);
#ifdef HAVE_CRC_FOLD
    if (crc_fold_ok && len >= 80) {
        size_t n = (size_t)len & ~(size_t)15;
        crc = (uLong)(~crc32_fold(~(uint32_t)crc, p, n) & 0xFFFFFFFFu);
        p += n;
        len -= (Py_ssize_t)n;
    }
#endif
    while (len > 0) {
        uInt chunk = len > (1 << 30) ? (1u << 30) : (uInt)len;
        crc = crc32(crc, p, chunk);
        p += chunk;
        len -= chunk;
    }
    return crc;
}

static inline int32_t rd32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}
static inline int16_t rd16(const unsigned char *p) { return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]); }
/* native-order loads, for comparing bytes several at a time */
static inline uint32_t ld32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t ld64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline int64_t rd64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)rd32(p) << 32) | (uint64_t)(uint32_t)rd32(p + 4));
}

/* The broker's check of one record at pos (bytes up to limit): fills r (NFIELDS) and returns TOTALSIZE when it
 * is a well-formed MESSAGE, 0 when anything else is there (the pure-Python scanner then decides what). */
static inline Py_ssize_t check_record(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t limit, int check_crc,
                                      int accept_v2, long long cap, int64_t *r) {
    Py_ssize_t rem = limit - pos;
    if (rem < 8) return 0;
    const unsigned char *p = buf + pos;
    int32_t total = rd32(p), magic = rd32(p + 4);
    int version;
    if (magic == MAGIC_V1) version = 1;
    else if (magic == MAGIC_V2 && accept_v2) version = 2;
    else return 0;
    if (total < MIN_RECORD_SIZE || (Py_ssize_t)total > rem || (long long)total > cap) return 0;
    if (rem < HEADER_V4 + 3) return 0;
    int32_t sys_flag = rd32(p + 36);
    Py_ssize_t born = (sys_flag & 0x10) ? 20 : 8, store = (sys_flag & 0x20) ? 20 : 8;
    Py_ssize_t hsize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8 + 4;
    if (rem < hsize + 3) return 0;
    Py_ssize_t bpos = pos + hsize;
    int32_t blen = rd32(buf + bpos - 4);
    int crc_ok = -1;
    Py_ssize_t tpos = bpos;
    if (blen > 0) {
        if (blen > total || bpos + blen > limit) return 0;
        if (check_crc) {
            uLong c = crc32_of(0L, buf + bpos, blen);
            if ((int32_t)(c & 0x7FFFFFFF) != rd32(p + 8)) return 0;
            crc_ok = 1;
        }
        tpos = bpos + blen;
    }
    Py_ssize_t tlen, tsz, ppos;
    if (version == 1) {
        if (tpos + 1 > limit) return 0;
        tlen = (int8_t)buf[tpos];
        tsz = 1;
    } else {
        if (tpos + 2 > limit) return 0;
        tlen = rd16(buf + tpos);
        tsz = 2;
    }
    ppos = tpos + tsz + tlen;
    if (tlen < 0 || ppos + 2 > limit) return 0;
    Py_ssize_t plen = rd16(buf + ppos);
    if (plen > 0 && ppos + 2 + plen > limit) return 0;
    Py_ssize_t calc = hsize + (blen > 0 ? blen : 0) + tsz + tlen + 2 + (plen > 0 ? plen : 0);
    if (calc != total) return 0; /* HALF: the Python scanner reports it */
    r[0] = pos;
    r[1] = total;
    r[2] = bpos;
    r[3] = blen;
    r[4] = crc_ok;
    r[5] = sys_flag;
    r[6] = rd32(p + 12);
    r[7] = rd64(p + 20);
    r[8] = rd64(p + 28);
    r[9] = rd64(p + 48 + born);
    r[10] = rd64(p + 40);
    r[11] = tpos + tsz;
    r[12] = tlen;
    r[13] = ppos + 2;
    r[14] = plen > 0 ? plen : 0;
    r[15] = version;
    return total;
}

/* Argument checks and the output buffer shared by both scanners; NULL with an exception set on error. */
static PyObject *new_rows(Py_buffer *view, Py_ssize_t start, Py_ssize_t *limit, Py_ssize_t *max_records,
                          Py_ssize_t min_size) {
    if (*limit > view->len) *limit = view->len;
    if (start < 0 || *max_records <= 0) {
        PyErr_SetString(PyExc_ValueError, "bad start or max_records");
        return NULL;
    }
    /* No more records than fit in the bytes to scan: bounds the output allocation (max_records * NFIELDS * 8
     * cannot overflow) without changing the result (each record has at least min_size bytes). */
    Py_ssize_t fit = (*limit > start ? (*limit - start) / min_size : 0) + 1;
    if (*max_records > fit) *max_records = fit;
    if (*max_records > PY_SSIZE_T_MAX / (Py_ssize_t)(NFIELDS * sizeof(int64_t))) {
        PyErr_SetString(PyExc_OverflowError, "max_records too large");
        return NULL;
    }
    return PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(*max_records * NFIELDS * sizeof(int64_t)));
}

static PyObject *scan_messages(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, limit, max_records;
    int check_crc, accept_v2;
    long long cap;
    if (!PyArg_ParseTuple(args, "y*nnppnL", &view, &start, &limit, &check_crc, &accept_v2, &max_records, &cap))
        return NULL;
    PyObject *out = new_rows(&view, start, &limit, &max_records, MIN_RECORD_SIZE);
    if (!out) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t *rec = (int64_t *)PyBytes_AS_STRING(out);
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t pos = start, n = 0;

    Py_BEGIN_ALLOW_THREADS
    while (n < max_records) {
        Py_ssize_t total = check_record(buf, pos, limit, check_crc, accept_v2, cap, rec + n * NFIELDS);
        if (!total) break;
        n++;
        pos += total;
    }
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&out, (Py_ssize_t)(n * NFIELDS * sizeof(int64_t))) < 0) return NULL;
    return Py_BuildValue("Nnn", out, n, pos);
}

/*
 * scan_entries: the same for a DLedger data file (rmqinspect.store.dledger.walk_entries): entries one after
 * another from `start` (an entry boundary; `base` = the file's start offset), each a 48-byte big-endian header
 * (formats/dledger.py) whose own checks pass - magic 1, size > 44, pos = base + position, bodySize + 48 = size,
 * the entry inside the bytes - around one record that passes check_record bounded by the entry and whose
 * TOTALSIZE is the bodySize. Stops at the first entry boundary where anything else is (blank, zeros, damage),
 * which the Python walk then decides. Rows are the records' (positions of the records, entry position + 48).
 */
#define ENTRY_BODY_OFFSET 48
#define ENTRY_HEADER_SIZE 44

static PyObject *scan_entries(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, limit, max_records;
    long long base, cap;
    int check_crc, accept_v2;
    if (!PyArg_ParseTuple(args, "y*nnLppnL", &view, &start, &limit, &base, &check_crc, &accept_v2, &max_records,
                          &cap))
        return NULL;
    PyObject *out = new_rows(&view, start, &limit, &max_records, ENTRY_BODY_OFFSET + MIN_RECORD_SIZE);
    if (!out) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t *rec = (int64_t *)PyBytes_AS_STRING(out);
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t pos = start, n = 0;

    Py_BEGIN_ALLOW_THREADS
    while (n < max_records) {
        Py_ssize_t rem = limit - pos;
        if (rem < ENTRY_BODY_OFFSET) break;
        const unsigned char *p = buf + pos;
        int32_t magic = rd32(p), size = rd32(p + 4), body_size = rd32(p + 44);
        if (magic != 1 || size <= ENTRY_HEADER_SIZE || (Py_ssize_t)size > rem) break;
        if (rd64(p + 24) != base + (long long)pos || (long long)body_size + ENTRY_BODY_OFFSET != size) break;
        Py_ssize_t total = check_record(buf, pos + ENTRY_BODY_OFFSET, pos + size, check_crc, accept_v2, cap,
                                        rec + n * NFIELDS);
        if (total != body_size) break;
        n++;
        pos += size;
    }
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&out, (Py_ssize_t)(n * NFIELDS * sizeof(int64_t))) < 0) return NULL;
    return Py_BuildValue("Nnn", out, n, pos);
}


/*
 * dispatch_fields: what the broker's dispatchers need from each record the scanner accepted, in bulk.
 * Mirrors rmqinspect.analyses.dispatcher.dispatch_properties (MessageDecoder.string2messageProperties: pieces
 * split on \x02, name up to the first \x01, name and value non-empty, later duplicates win) and Java
 * String.hashCode over the UTF-16 code units of the UTF-8 strings (formats/javahash.py). Strings that are
 * not strict UTF-8 (Python's decoder rules) are flagged DF_FALLBACK: Java's and Python's replacement rules
 * differ, so the Python side recomputes those records with the reference code.
 *
 * Input: buf, rows (int64 n x NFIELDS from scan_messages), want_keys.
 * Output: (fields bytes: n x DF_NOUT int64, key_hashes bytes: int64, topics: list of bytes)
 *   fields: topic_id, tags_code (0 absent), nkeys (index keys: UNIQ_KEY then non-empty KEYS tokens),
 *           delay_pos (-1 absent), delay_len, flags (DF_FALLBACK | DF_MULTI_DISPATCH)
 */
#define DF_NOUT 6
#define DF_FALLBACK 1
#define DF_MULTI_DISPATCH 2

/* 31^k mod 2^32, for Horner's rule several bytes a step */
#define P31_2 (31u * 31u)
#define P31_3 (P31_2 * 31u)
#define P31_4 (P31_3 * 31u)
#define P31_5 (P31_4 * 31u)
#define P31_6 (P31_5 * 31u)
#define P31_7 (P31_6 * 31u)
#define P31_8 (P31_7 * 31u)

/* Java hash of the UTF-16 code units of strict UTF-8 text; returns -1 on malformed input (*hp unchanged). */
static inline int jhash_utf8(const unsigned char *s, Py_ssize_t len, uint32_t *hp) {
    uint32_t h = *hp;
    Py_ssize_t i = 0;
    /* ASCII (each byte one UTF-16 unit) eight bytes at a step: h*31^8 + s0*31^7 + ... + s7. The byte-at-a-time
       rule is a chain of dependent multiply-adds (a few cycles a byte); here only one multiply a step waits on
       the previous h. Same value modulo 2^32. The first non-ASCII word goes to the general loop. */
    while (i + 8 <= len) {
        if (ld64(s + i) & 0x8080808080808080ULL) break;
        const unsigned char *c = s + i;
        h = h * P31_8 + c[0] * P31_7 + c[1] * P31_6 + c[2] * P31_5 + c[3] * P31_4 + c[4] * P31_3 + c[5] * P31_2 +
            c[6] * 31u + c[7];
        i += 8;
    }
    /* and four (a TAGS value is often a short word) */
    if (i + 4 <= len && !(ld32(s + i) & 0x80808080u)) {
        const unsigned char *c = s + i;
        h = h * P31_4 + c[0] * P31_3 + c[1] * P31_2 + c[2] * 31u + c[3];
        i += 4;
    }
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            h = 31 * h + c;
            i++;
            continue;
        }
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= len || (s[i + 1] & 0xC0) != 0x80) return -1;
            cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F);
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= len) return -1;
            unsigned c1 = s[i + 1], c2 = s[i + 2];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80) return -1;
            if (c == 0xE0 && c1 < 0xA0) return -1;  /* overlong */
            if (c == 0xED && c1 > 0x9F) return -1;  /* surrogates are not valid UTF-8 */
            cp = ((c & 0x0F) << 12) | ((c1 & 0x3F) << 6) | (c2 & 0x3F);
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= len) return -1;
            unsigned c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) return -1;
            if (c == 0xF0 && c1 < 0x90) return -1;
            if (c == 0xF4 && c1 > 0x8F) return -1;
            cp = ((c & 0x07) << 18) | ((c1 & 0x3F) << 12) | ((c2 & 0x3F) << 6) | (c3 & 0x3F);
            i += 4;
        } else {
            return -1;
        }
        if (cp < 0x10000) {
            h = 31 * h + cp;
        } else {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        }
    }
    *hp = h;
    return 0;
}

static inline int64_t index_hash(uint32_t h) {
    int32_t v = (int32_t)h;
    if (v == INT32_MIN) return 0;
    return v < 0 ? -(int64_t)v : (int64_t)v;
}

/* The topic table's slot hash, a word at a time (FNV-1a's multiply a byte was a chain of ten multiplies for a
   ten-byte topic, on every record whose topic is not the previous one's). Only where a topic lands in the table
   depends on it, never its id. Words overlap for lengths that are not multiples of 8; the length is mixed in
   first, so overlapping words of different lengths still differ. */
static inline uint64_t topic_mix(uint64_t h, uint64_t w) { return (h ^ w) * 0x9E3779B97F4A7C15ULL; }
static inline uint64_t topic_hash(const unsigned char *s, Py_ssize_t n) {
    uint64_t h = topic_mix(0, (uint64_t)n);
    if (n >= 8) {
        Py_ssize_t i = 0;
        for (; i + 8 <= n; i += 8) h = topic_mix(h, ld64(s + i));
        if (i < n) h = topic_mix(h, ld64(s + n - 8));
    } else if (n >= 4) {
        h = topic_mix(h, (uint64_t)ld32(s) | ((uint64_t)ld32(s + n - 4) << 32));
    } else {
        uint64_t w = 0;
        for (Py_ssize_t k = 0; k < n; k++) w = (w << 8) | s[k];
        h = topic_mix(h, w);
    }
    /* a multiply moves entropy only upwards; the slot is taken from the low bits */
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 32);
}

/* Equal topic bytes: topics of 4 to 16 bytes (the common ones) compared with two overlapping loads, not a
   memcmp call. */
static inline int same_bytes(const unsigned char *a, const unsigned char *b, Py_ssize_t n) {
    if (n >= 8 && n <= 16) return ld64(a) == ld64(b) && ld64(a + n - 8) == ld64(b + n - 8);
    if (n >= 4 && n < 8) return ld32(a) == ld32(b) && ld32(a + n - 4) == ld32(b + n - 4);
    return memcmp(a, b, (size_t)n) == 0;
}

/* The distinct topics of a run of records, numbered in order of first appearance: an open-addressing table over
   the topic bytes in the buffer (no copy), with the previous record's topic tried first (runs of one topic). */
typedef struct {
    int32_t *table;
    Py_ssize_t cap, n;
    Py_ssize_t *pos, *len;
    uint64_t *hash;
    int32_t last;
} topic_table;

static int topics_init(topic_table *t, Py_ssize_t records) {
    t->cap = 16;
    while (t->cap < 2 * records) t->cap <<= 1;
    t->n = 0;
    t->last = -1;
    t->table = malloc((size_t)t->cap * sizeof(int32_t));
    t->pos = malloc((size_t)(records + 1) * sizeof(Py_ssize_t));
    t->len = malloc((size_t)(records + 1) * sizeof(Py_ssize_t));
    t->hash = malloc((size_t)(records + 1) * sizeof(uint64_t));
    if (!t->table || !t->pos || !t->len || !t->hash) return -1;
    memset(t->table, 0xFF, (size_t)t->cap * sizeof(int32_t));
    return 0;
}

static void topics_free(topic_table *t) {
    free(t->table); free(t->pos); free(t->len); free(t->hash);
}

static int32_t topic_intern(topic_table *t, const unsigned char *buf, Py_ssize_t tp, Py_ssize_t tl) {
    const unsigned char *topic = buf + tp;
    int32_t last = t->last;
    if (last >= 0 && t->len[last] == tl && same_bytes(buf + t->pos[last], topic, tl)) return last;
    uint64_t th = topic_hash(topic, tl);
    Py_ssize_t slot = (Py_ssize_t)(th & (uint64_t)(t->cap - 1));
    for (;;) {
        int32_t e = t->table[slot];
        if (e < 0) {
            int32_t id = (int32_t)t->n++;
            t->table[slot] = id;
            t->pos[id] = tp;
            t->len[id] = tl;
            t->hash[id] = th;
            return t->last = id;
        }
        if (t->hash[e] == th && t->len[e] == tl && same_bytes(buf + t->pos[e], topic, tl)) return t->last = e;
        slot = (slot + 1) & (t->cap - 1);
    }
}

/* The table's topics as a list of bytes, in id order. */
static PyObject *topics_list(const topic_table *t, const unsigned char *buf) {
    PyObject *topics = PyList_New(t->n);
    if (!topics) return NULL;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)buf + t->pos[i], t->len[i]);
        if (!b) { Py_DECREF(topics); return NULL; }
        PyList_SET_ITEM(topics, i, b);
    }
    return topics;
}

/* The dispatch properties of one record (dispatch_properties' rule): each value's bytes and length, NULL when
   absent; multi: the bytes hold "INNER_MULTI_DISPATCH\x01" anywhere (the reference's substring test). */
typedef struct {
    const unsigned char *tags, *keys, *uniq, *delay;
    Py_ssize_t tags_l, keys_l, uniq_l, delay_l;
    int multi;
} dispatch_props;

/* One piece [p, end) whose first \x01 is at sep (NULL: none). Names are told apart by length first, then one
   4- or 8-byte load against the name's bytes (the constants are loaded the same way, so byte order does not
   matter). KEYS and UNIQ_KEY are only the index's: without want_keys they are not recorded. */
static inline void props_piece(dispatch_props *d, const unsigned char *p, const unsigned char *sep,
                               const unsigned char *end, int want_keys) {
    if (!sep || sep == p || sep + 1 >= end) return; /* no separator, empty name or empty value: ignored */
    Py_ssize_t nl = sep - p, vl = end - sep - 1;
    const unsigned char *v = sep + 1;
    if (nl == 4) {
        uint32_t w = ld32(p);
        if (w == ld32((const unsigned char *)"TAGS")) {
            d->tags = v; d->tags_l = vl;
        } else if (want_keys && w == ld32((const unsigned char *)"KEYS")) {
            d->keys = v; d->keys_l = vl;
        }
    } else if (nl == 8) {
        if (want_keys && ld64(p) == ld64((const unsigned char *)"UNIQ_KEY")) {
            d->uniq = v; d->uniq_l = vl;
        }
    } else if (nl == 5) {
        if (ld32(p) == ld32((const unsigned char *)"DELA") && p[4] == 'Y') {
            d->delay = v; d->delay_l = vl;
        }
    }
}

/* Index of the lowest set bit of m (m != 0). */
static inline int lowest_bit(uint32_t m) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctz(m);
#else
    int k = 0;
    while (!(m & 1)) { m >>= 1; k++; }
    return k;
#endif
}

/* Bit k set when s[k] is \x01 or \x02, for k < n (n <= 16). Sixteen bytes are compared at once when sixteen
   bytes of the buffer are there: the bytes past n (the next record's, or whatever follows in the buffer) are
   read but their bits masked off; only within 16 bytes of the buffer's end is it done a byte at a time. */
static inline uint32_t separator_bits(const unsigned char *s, Py_ssize_t n, const unsigned char *buf_end) {
#if defined(__SSE2__)
    if (buf_end - s >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)s);
        uint32_t m = (uint32_t)_mm_movemask_epi8(
            _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(1)), _mm_cmpeq_epi8(x, _mm_set1_epi8(2))));
        return n < 16 ? m & ((1u << n) - 1) : m;
    }
#else
    (void)buf_end;
#endif
    uint32_t m = 0;
    for (Py_ssize_t k = 0; k < n; k++) m |= (uint32_t)(s[k] == 1 || s[k] == 2) << k;
    return m;
}

/* dispatch_properties in one pass over the bytes: the separators of 16 bytes at a time as a bit mask, then only
   the separators are visited (about a dozen in a hundred bytes), instead of two memchr calls a piece and a
   separate substring search. The INNER_MULTI_DISPATCH test is folded in: the pattern ends with its only \x01,
   so it occurs in the bytes exactly when some \x01 at j >= 20 has "INNER_MULTI_DISPATCH" in the 20 bytes
   before it (whatever pieces those bytes belong to; tests/test_dispatch_fields_properties.py proves the
   two rules agree on overlapping, split, repeated and edge cases). */
static inline void scan_dispatch_props(const unsigned char *props, Py_ssize_t pl, const unsigned char *buf_end,
                                       int want_keys, dispatch_props *d) {
    memset(d, 0, sizeof(*d));
    if (pl <= 0) return;
    const unsigned char *pend = props + pl, *piece = props, *sep = NULL;
    for (const unsigned char *c = props; c < pend; c += 16) {
        uint32_t m = separator_bits(c, pend - c < 16 ? pend - c : 16, buf_end);
        while (m) {
            const unsigned char *x = c + lowest_bit(m);
            m &= m - 1;
            if (*x == 0x01) {
                if (!sep) sep = x;
                /* the pattern's last 8 bytes first: one load rules out nearly every \x01 */
                if (x - props >= 20 && ld64(x - 8) == ld64((const unsigned char *)"DISPATCH") &&
                    memcmp(x - 20, "INNER_MULTI_", 12) == 0)
                    d->multi = 1;
            } else {
                props_piece(d, piece, sep, x, want_keys);
                piece = x + 1;
                sep = NULL;
            }
        }
    }
    props_piece(d, piece, sep, pend, want_keys);
}

/* Records are about a kilobyte apart and only their topic and properties (a line or three at the record's end)
   are read, too sparse for the hardware prefetcher: without a hint nearly every record waits for memory. The
   lines of the record PREFETCH_AHEAD rows on are asked for now, so they arrive while this one is parsed (4, 8 and
   16 rows measured the same on the bench store; 201 -> 82 ns a record). Long properties' lines past the first
   few are left to the hardware, which follows a sequential read. */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 8
#endif
#define PREFETCH_MAX_LINES 4
static inline void prefetch_record(const int64_t *row, const unsigned char *buf) {
#if defined(__GNUC__) || defined(__clang__)
    /* The row is checked only when its turn comes, so its numbers may be anything here: the addresses are
       computed as unsigned integers (wrapping is defined) and a prefetch never faults, whatever the address.
       (A range check before the prefetches made GCC 12 drop them altogether.) */
    uintptr_t lo = (uintptr_t)buf + (uintptr_t)row[11];
    uintptr_t end = (uintptr_t)buf + (uintptr_t)row[13] + (uintptr_t)row[14];
    for (uintptr_t a = lo & ~(uintptr_t)63; a < end && a < lo + PREFETCH_MAX_LINES * 64; a += 64)
        __builtin_prefetch((const void *)a);
#else
    (void)row; (void)buf;
#endif
}

/* One line at buf + at (unchecked, as above): intern_topics' topic and split_properties' properties, PREFETCH_AHEAD
   records on (trailer_rows, one byte after each record, measured no gain). */
static inline void prefetch_at(const unsigned char *buf, uint64_t at) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch((const void *)((uintptr_t)buf + (uintptr_t)at));
#else
    (void)buf; (void)at;
#endif
}

typedef struct {
    int64_t *data;
    Py_ssize_t len, cap;
} i64vec;

static int vec_push(i64vec *v, int64_t x) {
    if (v->len == v->cap) {
        Py_ssize_t nc = v->cap ? v->cap * 2 : 4096;
        int64_t *nd = realloc(v->data, (size_t)nc * sizeof(int64_t));
        if (!nd) return -1;
        v->data = nd;
        v->cap = nc;
    }
    v->data[v->len++] = x;
    return 0;
}

static PyObject *dispatch_fields(PyObject *self, PyObject *args) {
    Py_buffer view, rv;
    int want_keys;
    if (!PyArg_ParseTuple(args, "y*y*p", &view, &rv, &want_keys)) return NULL;
    Py_ssize_t n = rv.len / (Py_ssize_t)(NFIELDS * sizeof(int64_t));
    const int64_t *rows = (const int64_t *)rv.buf;
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t blen = view.len;
    PyObject *out = NULL, *keys_out = NULL, *topics = NULL;
    i64vec keys = {NULL, 0, 0};
    topic_table tt;
    int bad = 0;
    /* by topic id: the Java hash of "topic#", where each of the topic's index keys starts, computed at the topic's
       first keyed record instead of at every one (state 0: not yet, 1: done, 2: the topic is not strict UTF-8) */
    uint32_t *prefix_hash = malloc((size_t)(n + 1) * sizeof(uint32_t));
    unsigned char *prefix_state = calloc((size_t)(n + 1), 1);
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * DF_NOUT * sizeof(int64_t)));
    if (topics_init(&tt, n) < 0 || !out || !prefix_hash || !prefix_state) {
        PyErr_NoMemory();
        goto fail;
    }
    int64_t *o = (int64_t *)PyBytes_AS_STRING(out);

    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n && !bad; r++) {
        const int64_t *row = rows + r * NFIELDS;
        Py_ssize_t tp = (Py_ssize_t)row[11], tl = (Py_ssize_t)row[12], pp = (Py_ssize_t)row[13],
                   pl = (Py_ssize_t)row[14];
        if (tp < 0 || tl < 0 || pp < 0 || pl < 0 || tp > blen || tl > blen - tp || pp > blen || pl > blen - pp) {
            bad = 1;
            break;
        }
        if (r + PREFETCH_AHEAD < n) prefetch_record(rows + (r + PREFETCH_AHEAD) * NFIELDS, buf);
        const unsigned char *topic = buf + tp;
        int32_t id = topic_intern(&tt, buf, tp, tl);
        dispatch_props d;
        scan_dispatch_props(buf + pp, pl, buf + blen, want_keys, &d);
        const unsigned char *tags = d.tags, *kv = d.keys, *uniq = d.uniq, *delay = d.delay;
        Py_ssize_t tags_l = d.tags_l, kv_l = d.keys_l, uniq_l = d.uniq_l, delay_l = d.delay_l;
        int64_t flags = d.multi ? DF_MULTI_DISPATCH : 0;
        int64_t tcode = 0;
        if (tags) {
            uint32_t h = 0;
            if (jhash_utf8(tags, tags_l, &h) < 0) flags |= DF_FALLBACK;
            tcode = (int64_t)(int32_t)h;
        }
        int64_t nk = 0;
        if (want_keys && (uniq || kv)) {
            if (!prefix_state[id]) {
                uint32_t h = 0;
                prefix_state[id] = jhash_utf8(topic, tl, &h) < 0 ? 2 : 1;
                prefix_hash[id] = 31 * h + '#';
            }
            uint32_t hp = prefix_hash[id];
            if (prefix_state[id] == 2) flags |= DF_FALLBACK;
            if (uniq) {
                uint32_t h = hp;
                if (jhash_utf8(uniq, uniq_l, &h) < 0) flags |= DF_FALLBACK;
                if (vec_push(&keys, index_hash(h)) < 0) { bad = 2; break; }
                nk++;
            }
            if (kv) {
                const unsigned char *k = kv, *kend = kv + kv_l;
                while (k < kend) {
                    const unsigned char *sp = memchr(k, ' ', (size_t)(kend - k));
                    if (!sp) sp = kend;
                    if (sp > k) {
                        uint32_t h = hp;
                        if (jhash_utf8(k, sp - k, &h) < 0) flags |= DF_FALLBACK;
                        if (vec_push(&keys, index_hash(h)) < 0) { bad = 2; break; }
                        nk++;
                    }
                    k = sp + 1;
                }
            }
        }
        int64_t *f = o + r * DF_NOUT;
        f[0] = id;
        f[1] = tcode;
        f[2] = nk;
        f[3] = delay ? (int64_t)(delay - buf) : -1;
        f[4] = delay_l;
        f[5] = flags;
    }
    Py_END_ALLOW_THREADS

    if (bad == 1) {
        PyErr_SetString(PyExc_ValueError, "row positions outside the buffer");
        goto fail;
    }
    if (bad == 2) {
        PyErr_NoMemory();
        goto fail;
    }
    keys_out = PyBytes_FromStringAndSize(keys.data ? (const char *)keys.data : "",
                                         (Py_ssize_t)(keys.len * sizeof(int64_t)));
    if (!keys_out) goto fail;
    topics = topics_list(&tt, buf);
    if (!topics) goto fail;
    topics_free(&tt); free(keys.data); free(prefix_hash); free(prefix_state);
    PyBuffer_Release(&view);
    PyBuffer_Release(&rv);
    return Py_BuildValue("NNN", out, keys_out, topics);
fail:
    topics_free(&tt); free(keys.data); free(prefix_hash); free(prefix_state);
    Py_XDECREF(out); Py_XDECREF(keys_out); Py_XDECREF(topics);
    PyBuffer_Release(&view);
    PyBuffer_Release(&rv);
    return NULL;
}

/* intern_topics(buf, rows) -> (ids, topics): every scanned record's topic id (native int64 each, numbered in
   order of first appearance) and the distinct topics' bytes in id order: the topic numbering dispatch_fields
   does, without its property parsing (the report's per-run traffic and counts need topics only). */
static PyObject *intern_topics(PyObject *self, PyObject *args) {
    Py_buffer view, rv;
    if (!PyArg_ParseTuple(args, "y*y*", &view, &rv)) return NULL;
    Py_ssize_t n = rv.len / (Py_ssize_t)(NFIELDS * sizeof(int64_t));
    const int64_t *rows = (const int64_t *)rv.buf;
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t blen = view.len;
    PyObject *out = NULL, *topics = NULL;
    topic_table tt;
    int bad = 0;
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(int64_t)));
    if (topics_init(&tt, n) < 0 || !out) {
        PyErr_NoMemory();
        goto fail;
    }
    int64_t *o = (int64_t *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        Py_ssize_t tp = (Py_ssize_t)rows[r * NFIELDS + 11], tl = (Py_ssize_t)rows[r * NFIELDS + 12];
        if (tp < 0 || tl < 0 || tp > blen || tl > blen - tp) {
            bad = 1;
            break;
        }
        if (r + PREFETCH_AHEAD < n) prefetch_at(buf, (uint64_t)rows[(r + PREFETCH_AHEAD) * NFIELDS + 11]);
        o[r] = topic_intern(&tt, buf, tp, tl);
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "row positions outside the buffer");
        goto fail;
    }
    topics = topics_list(&tt, buf);
    if (!topics) goto fail;
    topics_free(&tt);
    PyBuffer_Release(&view);
    PyBuffer_Release(&rv);
    return Py_BuildValue("NN", out, topics);
fail:
    topics_free(&tt);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    PyBuffer_Release(&rv);
    return NULL;
}

static PyObject *java_hash_utf8(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    uint32_t h = 0;
    int rc = jhash_utf8((const unsigned char *)view.buf, view.len, &h);
    PyBuffer_Release(&view);
    if (rc < 0) Py_RETURN_NONE;
    return PyLong_FromLong((long)(int32_t)h);
}

static PyObject *py_crc32(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long crc = 0;
    if (!PyArg_ParseTuple(args, "y*|k", &view, &crc)) return NULL;
    uLong c;
    Py_BEGIN_ALLOW_THREADS
    c = crc32_of((uLong)(crc & 0xFFFFFFFFul), (const unsigned char *)view.buf, view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong((unsigned long)c);
}

static PyObject *py_set_crc32(PyObject *self, PyObject *args) {
    unsigned long long addr;
    const char *name;
    if (!PyArg_ParseTuple(args, "Ks", &addr, &name)) return NULL;
    if (addr == 0) {
        ext_crc = NULL;
        ext_crc_name[0] = 0;
        Py_RETURN_NONE;
    }
    crc_fn f = (crc_fn)(uintptr_t)addr;
    /* refuse a function that does not compute zlib's crc32 (a wrong symbol or calling convention) */
    static const unsigned char probe[] = "123456789 the quick brown fox jumps over the lazy dog, 0123456789abcdef"
                                         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
                                         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    size_t n = sizeof(probe) - 1;
    for (size_t k = 0; k <= n; k += 7) {
        if ((uLong)f(0x12345678u, probe, k) != crc32(0x12345678ul, probe, (uInt)k) ||
            (uLong)f(0, probe + 3, k - (k > 3 ? 3 : k)) != crc32(0, probe + 3, (uInt)(k - (k > 3 ? 3 : k)))) {
            PyErr_Format(PyExc_ValueError, "%s does not compute zlib's crc32", name);
            return NULL;
        }
    }
    ext_crc = f;
    snprintf(ext_crc_name, sizeof(ext_crc_name), "%s", name);
    Py_RETURN_NONE;
}

static PyObject *py_crc32_path(PyObject *self, PyObject *noargs) {
    if (ext_crc != NULL) return PyUnicode_FromString(ext_crc_name);
#ifdef HAVE_CRC_FOLD
    if (crc_fold_ok) return PyUnicode_FromString("pclmul");
#endif
    return PyUnicode_FromString("zlib");
}

/* How many records of a run (rows in RECORD_FIELDS order, as scan_messages returns them) hold `needle` inside their
 * properties: summary's count of __CRC32# records, which a Python loop over a million records made a second of a
 * 1.24 GB summary. Same answer as `needle in bytes(buf[pp:pp + pl])` for a non-empty needle. */
#define F_PROPERTIES_POS 13
#define F_PROPERTIES_LEN 14

static PyObject *count_properties_containing(PyObject *self, PyObject *args) {
    Py_buffer buf, rows, needle;
    if (!PyArg_ParseTuple(args, "y*y*y*", &buf, &rows, &needle)) return NULL;
    Py_ssize_t n = rows.len / (Py_ssize_t)(NFIELDS * sizeof(int64_t)), count = 0;
    const int64_t *r = (const int64_t *)rows.buf;
    const unsigned char *b = (const unsigned char *)buf.buf, *nd = (const unsigned char *)needle.buf;
    Py_ssize_t nlen = needle.len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i + PREFETCH_AHEAD < n) prefetch_record(r + (i + PREFETCH_AHEAD) * NFIELDS, b);
        int64_t pp = r[i * NFIELDS + F_PROPERTIES_POS], pl = r[i * NFIELDS + F_PROPERTIES_LEN];
        if (pp < 0 || pp > buf.len) continue;
        if (pl > buf.len - pp) pl = buf.len - pp; /* as a Python slice of the buffer would end */
        if (nlen == 0 || pl < nlen) continue;
        const unsigned char *p = b + pp, *end = b + pp + pl - nlen;
        while (p <= end) {
            p = memchr(p, nd[0], (size_t)(end - p) + 1);
            if (p == NULL) break;
            if (memcmp(p, nd, (size_t)nlen) == 0) {
                count++;
                break;
            }
            p++;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&needle);
    return PyLong_FromSsize_t(count);
}

/* The properties of many records split the broker's way (MessageDecoder.string2messageProperties: pieces on \x02,
 * name and value on the piece's first \x01, both non-empty; a non-empty piece without \x01 makes the string not well
 * formed), for export's columns without a Python loop. pos / len: native int64 arrays, one per record (positions
 * in buf). Returns (flags, pairs, names, values): flags int32 per record, 1 = decode it in Python (a byte >= 0x80,
 * whose replacement-rule decoding the caller owns, a name given twice - later duplicates win in a map -, or a
 * range outside buf), 2 = not well formed; pairs int64 (record, name length, value length) in order; names and
 * values the pairs' bytes one after another (Arrow string data). */
typedef struct {
    char *data;
    size_t len, cap;
} bytevec;

static int bytes_push(bytevec *v, const unsigned char *p, size_t n) {
    if (v->len + n > v->cap) {
        size_t nc = v->cap ? v->cap : 1 << 16;
        while (nc < v->len + n) nc *= 2;
        char *nd = realloc(v->data, nc);
        if (!nd) return -1;
        v->data = nd;
        v->cap = nc;
    }
    memcpy(v->data + v->len, p, n);
    v->len += n;
    return 0;
}

static PyObject *split_properties(PyObject *self, PyObject *args) {
    Py_buffer view, pv, lv;
    if (!PyArg_ParseTuple(args, "y*y*y*", &view, &pv, &lv)) return NULL;
    Py_ssize_t n = pv.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *pos = (const int64_t *)pv.buf, *len = (const int64_t *)lv.buf;
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t blen = view.len;
    PyObject *flags = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    PyObject *result = NULL;
    i64vec pairs = {NULL, 0, 0};
    bytevec names = {NULL, 0, 0}, values = {NULL, 0, 0};
    int nomem = 0;
    if (!flags) goto done;
    int32_t *fl = (int32_t *)PyBytes_AS_STRING(flags);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n && !nomem; r++) {
        if (r + PREFETCH_AHEAD < n) prefetch_at(buf, (uint64_t)pos[r + PREFETCH_AHEAD]);
        int64_t pp = pos[r], pl = len[r];
        fl[r] = 0;
        if (pl <= 0) continue;
        if (pp < 0 || pp > blen || pl > blen - pp) {
            fl[r] = 1;
            continue;
        }
        const unsigned char *b = buf + pp;
        Py_ssize_t first = pairs.len;
        size_t name_first = names.len;
        unsigned char high = 0;
        int64_t i = 0;
        while (i <= pl && !nomem) {
            const unsigned char *e = memchr(b + i, 2, (size_t)(pl - i));
            int64_t j = e ? (int64_t)(e - b) : pl;
            const unsigned char *q = memchr(b + i, 1, (size_t)(j - i));
            for (int64_t k = i; k < j; k++) high |= b[k];
            if (q != NULL) {
                int64_t sep = (int64_t)(q - b);
                if (sep > i && j > sep + 1) {
                    nomem = vec_push(&pairs, r) < 0 || vec_push(&pairs, sep - i) < 0 ||
                            vec_push(&pairs, j - sep - 1) < 0 || bytes_push(&names, b + i, (size_t)(sep - i)) < 0 ||
                            bytes_push(&values, b + sep + 1, (size_t)(j - sep - 1)) < 0;
                }
            } else if (j > i) {
                fl[r] |= 2;
            }
            i = j + 1;
        }
        if (high & 0x80) fl[r] |= 1;
        /* a name given twice: a map keeps the later value at the first one's place */
        Py_ssize_t m = (pairs.len - first) / 3;
        size_t at_a = name_first;
        for (Py_ssize_t a = 0; a < m && !(fl[r] & 1); a++) {
            int64_t la = pairs.data[first + a * 3 + 1];
            size_t at_c = at_a + (size_t)la;
            for (Py_ssize_t c = a + 1; c < m; c++) {
                int64_t lc = pairs.data[first + c * 3 + 1];
                if (la == lc && memcmp(names.data + at_a, names.data + at_c, (size_t)la) == 0) {
                    fl[r] |= 1;
                    break;
                }
                at_c += (size_t)lc;
            }
            at_a += (size_t)la;
        }
    }
    Py_END_ALLOW_THREADS
    if (nomem) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("(Oy#y#y#)", flags, (const char *)pairs.data,
                           (Py_ssize_t)(pairs.len * (Py_ssize_t)sizeof(int64_t)), names.data ? names.data : "",
                           (Py_ssize_t)names.len, values.data ? values.data : "", (Py_ssize_t)values.len);
done:
    Py_XDECREF(flags);
    free(pairs.data);
    free(names.data);
    free(values.data);
    PyBuffer_Release(&view);
    PyBuffer_Release(&pv);
    PyBuffer_Release(&lv);
    return result;
}

/* crc32_many(buf, pos, len) -> uint32 zlib.crc32 of buf[pos[i]:pos[i] + len[i]] for every i (native int64 arrays;
 * a range outside buf is cut at its end, as a slice is) */
static PyObject *crc32_many(PyObject *self, PyObject *args) {
    Py_buffer view, pv, lv;
    if (!PyArg_ParseTuple(args, "y*y*y*", &view, &pv, &lv)) return NULL;
    Py_ssize_t n = pv.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *pos = (const int64_t *)pv.buf, *len = (const int64_t *)lv.buf;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(uint32_t));
    if (out) {
        uint32_t *o = (uint32_t *)PyBytes_AS_STRING(out);
        const unsigned char *b = (const unsigned char *)view.buf;
        Py_ssize_t blen = view.len;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t p = pos[i], l = len[i];
            if (p < 0) p = 0;
            if (p > blen) p = blen;
            if (l < 0) l = 0;
            if (l > blen - p) l = blen - p;
            o[i] = (uint32_t)crc32_of(0L, b + p, (Py_ssize_t)l);
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&pv);
    PyBuffer_Release(&lv);
    return out;
}

/* run_stats(rows, base) -> (first_stale, min_store_timestamp, max_store_timestamp, total_size_sum) of a run's rows
 * (NFIELDS native int64 each, RECORD_FIELDS order), in one pass: the first record whose stored PHYSICALOFFSET is not
 * base + position (-1: none), and what the walk and verify otherwise compute column by column with numpy (each
 * column a strided pass over the rows). int64 arithmetic wraps as numpy's does. */
static PyObject *run_stats(PyObject *self, PyObject *args) {
    Py_buffer rv;
    long long base;
    if (!PyArg_ParseTuple(args, "y*L", &rv, &base)) return NULL;
    Py_ssize_t n = rv.len / (Py_ssize_t)(NFIELDS * sizeof(int64_t));
    const int64_t *r = (const int64_t *)rv.buf;
    Py_ssize_t stale = -1;
    int64_t lo = 0, hi = 0;
    uint64_t sum = 0;
    Py_BEGIN_ALLOW_THREADS
    if (n > 0) lo = hi = r[9];
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t *row = r + i * NFIELDS;
        if (stale < 0 && (uint64_t)row[8] != (uint64_t)row[0] + (uint64_t)base) stale = i;
        int64_t ts = row[9];
        if (ts < lo) lo = ts;
        if (ts > hi) hi = ts;
        sum += (uint64_t)row[1];
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&rv);
    return Py_BuildValue("nLLL", stale, (long long)lo, (long long)hi, (long long)(int64_t)sum);
}

/* trailer_rows(rows, buf, prefix, at) -> native int64 indexes of the rows whose record (position + total_size =
 * its end) holds `prefix` at end + at (at < 0): where the broker writes the __CRC32# property */
static PyObject *trailer_rows(PyObject *self, PyObject *args) {
    Py_buffer rv, view, pv;
    Py_ssize_t at;
    if (!PyArg_ParseTuple(args, "y*y*y*n", &rv, &view, &pv, &at)) return NULL;
    Py_ssize_t n = rv.len / (Py_ssize_t)(NFIELDS * sizeof(int64_t)), m = pv.len, k = 0;
    const int64_t *r = (const int64_t *)rv.buf;
    const unsigned char *b = (const unsigned char *)view.buf, *pre = (const unsigned char *)pv.buf;
    int64_t *idx = (int64_t *)PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (idx == NULL) {
        PyBuffer_Release(&rv);
        PyBuffer_Release(&view);
        PyBuffer_Release(&pv);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && m > 0; i++) {
        const int64_t *row = r + i * NFIELDS;
        int64_t p = row[0] + row[1] + (int64_t)at;
        if (p < 0 || p > (int64_t)view.len - (int64_t)m) continue;
        if (b[p] == pre[0] && memcmp(b + p, pre, (size_t)m) == 0) idx[k++] = i;
    }
    Py_END_ALLOW_THREADS
    PyObject *out = PyBytes_FromStringAndSize((const char *)idx, k * (Py_ssize_t)sizeof(int64_t));
    PyMem_Free(idx);
    PyBuffer_Release(&rv);
    PyBuffer_Release(&view);
    PyBuffer_Release(&pv);
    return out;
}

/* queue_counts(rows, tids, tx_mask, not_in_queue_a, not_in_queue_b, ipv6_mask) -> (groups, size_sum, min_ts, max_ts,
 * not_v1, ipv6) of a run's rows (NFIELDS native int64 each, RECORD_FIELDS order) and its topic ids (native int64,
 * one a row), in one pass: summary's counts of a run, which numpy made a grouping sort and a dozen strided passes.
 * groups: native int64 (first row, messages, bytes, min queue offset, max queue offset, has offsets) per (topic id,
 * queue id), in order of first appearance; the offsets are over the rows whose sys_flag & tx_mask is neither
 * not_in_queue_a nor not_in_queue_b (has offsets 0: none is). int64 sums wrap as numpy's do. */
typedef struct {
    int64_t tid, qid, group; /* group -1: empty slot */
} queue_slot;

static int queue_slots_grow(queue_slot **t, size_t *cap, const int64_t *g, Py_ssize_t ng) {
    size_t nc = *cap ? *cap * 2 : 64;
    queue_slot *nt = (queue_slot *)malloc(nc * sizeof(queue_slot));
    if (nt == NULL) return -1;
    for (size_t i = 0; i < nc; i++) nt[i].group = -1;
    for (Py_ssize_t k = 0; k < ng; k++) { /* g rows: first, tid, qid come from the kept pair of each group */
        int64_t tid = g[k * 8 + 6], qid = g[k * 8 + 7];
        size_t h = (size_t)(((uint64_t)tid * 0x9E3779B97F4A7C15ULL) ^ (uint64_t)qid) & (nc - 1);
        while (nt[h].group >= 0) h = (h + 1) & (nc - 1);
        nt[h].tid = tid;
        nt[h].qid = qid;
        nt[h].group = k;
    }
    free(*t);
    *t = nt;
    *cap = nc;
    return 0;
}

static PyObject *queue_counts(PyObject *self, PyObject *args) {
    Py_buffer rv, tv;
    long long tx_mask, not_a, not_b, v6_mask;
    if (!PyArg_ParseTuple(args, "y*y*LLLL", &rv, &tv, &tx_mask, &not_a, &not_b, &v6_mask)) return NULL;
    Py_ssize_t n = rv.len / (Py_ssize_t)(NFIELDS * sizeof(int64_t));
    if (tv.len / (Py_ssize_t)sizeof(int64_t) < n) n = tv.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *r = (const int64_t *)rv.buf, *tid = (const int64_t *)tv.buf;
    int64_t *g = NULL; /* 8 int64 a group: first, messages, bytes, min, max, has, tid, qid */
    size_t gcap = 0, cap = 0;
    queue_slot *table = NULL;
    Py_ssize_t ng = 0, not_v1 = 0, v6 = 0;
    int64_t lo_ts = 0, hi_ts = 0;
    uint64_t sum = 0;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    if (n > 0) lo_ts = hi_ts = r[9];
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        const int64_t *row = r + i * NFIELDS;
        int64_t t = tid[i], q = row[6], sf = row[5], ts = row[9], size = row[1];
        if (ts < lo_ts) lo_ts = ts;
        if (ts > hi_ts) hi_ts = ts;
        sum += (uint64_t)size;
        not_v1 += row[15] != 1;
        v6 += (sf & v6_mask) != 0;
        if ((size_t)(ng + 1) * 2 > cap && queue_slots_grow(&table, &cap, g, ng) < 0) {
            failed = 1;
            break;
        }
        size_t h = (size_t)(((uint64_t)t * 0x9E3779B97F4A7C15ULL) ^ (uint64_t)q) & (cap - 1);
        while (table[h].group >= 0 && (table[h].tid != t || table[h].qid != q)) h = (h + 1) & (cap - 1);
        int64_t *e;
        if (table[h].group < 0) {
            if ((size_t)ng == gcap) {
                size_t nc = gcap ? gcap * 2 : 16;
                int64_t *ngp = (int64_t *)realloc(g, nc * 8 * sizeof(int64_t));
                if (ngp == NULL) {
                    failed = 1;
                    break;
                }
                g = ngp;
                gcap = nc;
            }
            table[h].tid = t;
            table[h].qid = q;
            table[h].group = ng;
            e = g + ng * 8;
            e[0] = i;
            e[1] = e[2] = e[3] = e[4] = e[5] = 0;
            e[6] = t;
            e[7] = q;
            ng++;
        } else {
            e = g + table[h].group * 8;
        }
        e[1]++;
        e[2] = (int64_t)((uint64_t)e[2] + (uint64_t)size);
        int64_t tx = sf & tx_mask;
        if (tx != not_a && tx != not_b) {
            int64_t qo = row[7];
            if (!e[5] || qo < e[3]) e[3] = qo;
            if (!e[5] || qo > e[4]) e[4] = qo;
            e[5] = 1;
        }
    }
    Py_END_ALLOW_THREADS
    free(table);
    PyBuffer_Release(&rv);
    PyBuffer_Release(&tv);
    if (failed) {
        free(g);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < ng; k++) memmove(g + k * 6, g + k * 8, 6 * sizeof(int64_t)); /* drop tid, qid */
    PyObject *groups = PyBytes_FromStringAndSize((const char *)g, ng * 6 * (Py_ssize_t)sizeof(int64_t));
    free(g);
    if (groups == NULL) return NULL;
    return Py_BuildValue("NLLLnn", groups, (long long)(int64_t)sum, (long long)lo_ts, (long long)hi_ts, not_v1, v6);
}

/* first_invalid_cq_entry(entries, before, has_before) -> index of the first 20-byte ConsumeQueue entry (big-endian
 * commitLogOffset int64, size int32, tagsCode int64) failing the broker's end-of-queue test offset >= 0 && size > 0
 * (has_before: or offset >= before, where truncateDirtyLogicFiles also stops); the entry count when none.
 * store.consumequeue.first_invalid_entry in one pass, where numpy made two strided big-endian passes a block. */
#define CQ_UNIT 20

static PyObject *first_invalid_cq_entry(PyObject *self, PyObject *args) {
    Py_buffer b;
    long long before;
    int has_before;
    if (!PyArg_ParseTuple(args, "y*Lp", &b, &before, &has_before)) return NULL;
    Py_ssize_t n = b.len / CQ_UNIT, i;
    const unsigned char *p = (const unsigned char *)b.buf;
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < n; i++, p += CQ_UNIT) {
        int64_t off = rd64(p);
        if (off < 0 || rd32(p + 8) <= 0 || (has_before && off >= (int64_t)before)) break;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"crc32", py_crc32, METH_VARARGS, "crc32(data, crc=0) -> zlib.crc32(data, crc), computed as the scanner does"},
    {"crc32_path", py_crc32_path, METH_NOARGS,
     "crc32_path() -> 'isal', 'zlib-ng', 'pclmul' or 'zlib': how the scanner's CRC runs"},
    {"split_properties", split_properties, METH_VARARGS,
     "split_properties(buf, pos, len) -> (flags, pairs, names, values): properties split the broker's way"},
    {"crc32_many", crc32_many, METH_VARARGS, "crc32_many(buf, pos, len) -> uint32 crc32 of every range"},
    {"first_invalid_cq_entry", first_invalid_cq_entry, METH_VARARGS,
     "first_invalid_cq_entry(entries, before, has_before) -> index of the first entry failing the end-of-queue test"},
    {"queue_counts", queue_counts, METH_VARARGS,
     "queue_counts(rows, tids, tx_mask, not_in_queue_a, not_in_queue_b, ipv6_mask) -> (groups, size_sum, min_ts, "
     "max_ts, not_v1, ipv6): summary's counts of a run in one pass"},
    {"run_stats", run_stats, METH_VARARGS,
     "run_stats(rows, base) -> (first_stale, min_store_timestamp, max_store_timestamp, total_size_sum)"},
    {"trailer_rows", trailer_rows, METH_VARARGS,
     "trailer_rows(rows, buf, prefix, at) -> int64 indexes of the rows whose record holds prefix at its end + at"},
    {"set_crc32", py_set_crc32, METH_VARARGS,
     "set_crc32(address, name): compute CRCs with the zlib-convention function at address (0: the built-in)"},
    {"scan_messages", scan_messages, METH_VARARGS,
     "scan_messages(buf, start, limit, check_crc, accept_v2, max_records, size_cap) -> (records, count, stop_pos)"},
    {"scan_entries", scan_entries, METH_VARARGS,
     "scan_entries(buf, start, limit, base, check_crc, accept_v2, max_records, size_cap) -> (records, count, "
     "stop_pos): scan_messages over the records inside DLedger entries"},
    {"intern_topics", intern_topics, METH_VARARGS,
     "intern_topics(buf, rows) -> (int64 topic id per row, [topic bytes in order of first appearance])"},
    {"dispatch_fields", dispatch_fields, METH_VARARGS,
     "dispatch_fields(buf, rows, want_keys) -> (fields, key_hashes, topics)"},
    {"count_properties_containing", count_properties_containing, METH_VARARGS,
     "count_properties_containing(buf, rows, needle) -> how many records hold needle inside their properties"},
    {"java_hash_utf8", java_hash_utf8, METH_VARARGS,
     "java_hash_utf8(data) -> Java String.hashCode of the UTF-8 text, or None when it is not strict UTF-8"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastscan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastscan(void) {
#ifdef HAVE_CRC_FOLD
    __builtin_cpu_init();
    crc_fold_ok = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1") &&
                  getenv("RMQINSPECT_CRC_ZLIB") == NULL;
#endif
    PyObject *m = PyModule_Create(&module);
    if (m) {
        PyModule_AddIntConstant(m, "NFIELDS", NFIELDS);
        PyModule_AddIntConstant(m, "DF_NOUT", DF_NOUT);
        PyModule_AddIntConstant(m, "DF_FALLBACK", DF_FALLBACK);
        PyModule_AddIntConstant(m, "DF_MULTI_DISPATCH", DF_MULTI_DISPATCH);
    }
    return m;
}
