"""Minimal GGUF v3 reader and writer (little-endian).

Supports every metadata value type (including nested arrays and string arrays)
and F32 / F16 / Q8_0 tensors. Tensor data is aligned to `general.alignment`
(default 32). The writer writes to a temporary file, fsyncs it and renames it
into place, so a crash never leaves a half-written model behind.

Shapes: GGUF stores dimensions ne0 (fastest varying) first. This module works
with numpy arrays in C order, so a GGUF tensor {ne0, ne1} is the numpy array
of shape (ne1, ne0). `GGUFReader.tensors[name]` gives that numpy shape.
"""

import os
import struct
import tempfile

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32

# metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, \
    T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)

_SCALAR_FMT = {
    T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h",
    T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?",
    T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d",
}

# tensor types (ggml_type)
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
QK8_0 = 32
_TYPE_NAMES = {GGML_F32: "F32", GGML_F16: "F16", GGML_Q8_0: "Q8_0"}


class Value:
    """A metadata value with an explicit GGUF type (used by the writer).

    For arrays, `type` is T_ARRAY and `elem_type` the element type."""

    def __init__(self, type_, value, elem_type=None):
        self.type = type_
        self.value = value
        self.elem_type = elem_type

    def __repr__(self):
        return "Value(%d, %r)" % (self.type, self.value)


def u32(v): return Value(T_UINT32, int(v))
def i32(v): return Value(T_INT32, int(v))
def f32(v): return Value(T_FLOAT32, float(v))
def boolean(v): return Value(T_BOOL, bool(v))
def string(v): return Value(T_STRING, str(v))
def arr(elem_type, values): return Value(T_ARRAY, list(values), elem_type)


# ---------------------------------------------------------------- quantization

def quantize_q8_0(x):
    """x: float array whose last dimension is a multiple of 32 -> raw bytes."""
    x = np.asarray(x, dtype=np.float32)
    assert x.shape[-1] % QK8_0 == 0
    blocks = x.reshape(-1, QK8_0)
    amax = np.abs(blocks).max(axis=1)
    d = amax / 127.0
    d16 = d.astype(np.float16)
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
    q = np.round(blocks * inv[:, None]).astype(np.int8)
    out = np.empty(blocks.shape[0], dtype=[("d", "<f2"), ("q", "i1", (QK8_0,))])
    out["d"] = d16
    out["q"] = q
    return out.tobytes()


def dequantize_q8_0(raw, n_elems):
    blk = np.frombuffer(raw, dtype=[("d", "<f2"), ("q", "i1", (QK8_0,))],
                        count=n_elems // QK8_0)
    return (blk["d"].astype(np.float32)[:, None] * blk["q"].astype(np.float32)).reshape(-1)


def tensor_nbytes(ggml_type, n_elems):
    if ggml_type == GGML_F32:
        return 4 * n_elems
    if ggml_type == GGML_F16:
        return 2 * n_elems
    if ggml_type == GGML_Q8_0:
        return (n_elems // QK8_0) * 34
    raise ValueError("unsupported tensor type %d" % ggml_type)


# ---------------------------------------------------------------------- reader

class TensorInfo:
    def __init__(self, name, dims, ggml_type, offset):
        self.name = name
        self.dims = dims            # GGUF order: ne0 first
        self.type = ggml_type
        self.offset = offset        # relative to the data section
        self.n_elems = int(np.prod(dims)) if dims else 1

    @property
    def shape(self):               # numpy (C-order) shape
        return tuple(reversed(self.dims))


class GGUFReader:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        if self._read(4) != GGUF_MAGIC:
            raise ValueError("%s: not a GGUF file" % path)
        self.version = self._scalar(T_UINT32)
        if self.version not in (2, 3):
            raise ValueError("unsupported GGUF version %d" % self.version)
        n_tensors = self._scalar(T_UINT64)
        n_kv = self._scalar(T_UINT64)
        self.metadata = {}       # key -> python value
        self.metadata_types = {}  # key -> (type, elem_type)
        for _ in range(n_kv):
            key = self._string()
            vt = self._scalar(T_UINT32)
            val, et = self._value(vt)
            self.metadata[key] = val
            self.metadata_types[key] = (vt, et)
        self.tensors = {}
        self.tensor_order = []
        for _ in range(n_tensors):
            name = self._string()
            nd = self._scalar(T_UINT32)
            dims = [self._scalar(T_UINT64) for _ in range(nd)]
            tt = self._scalar(T_UINT32)
            off = self._scalar(T_UINT64)
            self.tensors[name] = TensorInfo(name, dims, tt, off)
            self.tensor_order.append(name)
        align = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        self.data_offset = (self.pos + align - 1) // align * align

    def _read(self, n):
        b = self.buf[self.pos:self.pos + n]
        if len(b) != n:
            raise ValueError("truncated GGUF file")
        self.pos += n
        return b

    def _scalar(self, t):
        fmt = _SCALAR_FMT[t]
        return struct.unpack(fmt, self._read(struct.calcsize(fmt)))[0]

    def _string(self):
        n = self._scalar(T_UINT64)
        return self._read(n).decode("utf-8", errors="surrogateescape")

    def _value(self, t):
        if t == T_STRING:
            return self._string(), None
        if t == T_ARRAY:
            et = self._scalar(T_UINT32)
            n = self._scalar(T_UINT64)
            if et in _SCALAR_FMT and et != T_BOOL:
                fmt = _SCALAR_FMT[et]
                size = struct.calcsize(fmt)
                vals = np.frombuffer(self._read(n * size), dtype=np.dtype(fmt)).tolist()
                return vals, et
            return [self._value(et)[0] for _ in range(n)], et
        if t in _SCALAR_FMT:
            return self._scalar(t), None
        raise ValueError("bad metadata type %d" % t)

    def raw(self, name):
        ti = self.tensors[name]
        start = self.data_offset + ti.offset
        return self.buf[start:start + tensor_nbytes(ti.type, ti.n_elems)]

    def tensor(self, name):
        """Dequantized float32 numpy array with the C-order shape."""
        ti = self.tensors[name]
        raw = self.raw(name)
        if ti.type == GGML_F32:
            a = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif ti.type == GGML_F16:
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif ti.type == GGML_Q8_0:
            a = dequantize_q8_0(raw, ti.n_elems)
        else:
            raise ValueError("%s: unsupported tensor type %d" % (name, ti.type))
        return a.reshape(ti.shape)


# ---------------------------------------------------------------------- writer

class GGUFWriter:
    """Collects metadata and tensors, then `write(path)` emits the file."""

    def __init__(self, alignment=DEFAULT_ALIGNMENT):
        self.alignment = alignment
        self.kv = []        # (key, Value)
        self.tensors = []   # (name, dims (ne0 first), type, bytes)

    def add(self, key, value):
        if not isinstance(value, Value):
            raise TypeError("metadata %s: wrap the value with u32()/f32()/string()/..." % key)
        self.kv.append((key, value))

    def add_tensor(self, name, array, ggml_type=GGML_F32):
        a = np.ascontiguousarray(np.asarray(array, dtype=np.float32))
        dims = list(reversed(a.shape)) if a.ndim else [1]
        if ggml_type == GGML_F32:
            data = a.astype("<f4").tobytes()
        elif ggml_type == GGML_F16:
            data = a.astype("<f2").tobytes()
        elif ggml_type == GGML_Q8_0:
            data = quantize_q8_0(a)
        else:
            raise ValueError("unsupported tensor type %d" % ggml_type)
        self.tensors.append((name, dims, ggml_type, data))

    # -- serialization helpers
    @staticmethod
    def _pack_string(s):
        b = s.encode("utf-8", errors="surrogateescape")
        return struct.pack("<Q", len(b)) + b

    def _pack_value(self, t, v, et=None):
        if t == T_STRING:
            return self._pack_string(v)
        if t == T_ARRAY:
            out = [struct.pack("<IQ", et, len(v))]
            if et in _SCALAR_FMT and et != T_BOOL:
                out.append(np.asarray(v, dtype=np.dtype(_SCALAR_FMT[et])).tobytes())
            elif et == T_ARRAY:
                for sub in v:  # nested arrays: sub is a Value
                    out.append(self._pack_value(T_ARRAY, sub.value, sub.elem_type))
            else:
                for x in v:
                    out.append(self._pack_value(et, x))
            return b"".join(out)
        return struct.pack(_SCALAR_FMT[t], v)

    def to_bytes(self):
        parts = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))]
        for key, val in self.kv:
            parts.append(self._pack_string(key))
            parts.append(struct.pack("<I", val.type))
            parts.append(self._pack_value(val.type, val.value, val.elem_type))
        offset = 0
        offsets = []
        for name, dims, tt, data in self.tensors:
            offsets.append(offset)
            offset += (len(data) + self.alignment - 1) // self.alignment * self.alignment
        for (name, dims, tt, data), off in zip(self.tensors, offsets):
            parts.append(self._pack_string(name))
            parts.append(struct.pack("<I", len(dims)))
            parts.append(struct.pack("<%dQ" % len(dims), *dims))
            parts.append(struct.pack("<IQ", tt, off))
        head = b"".join(parts)
        pad = (-len(head)) % self.alignment
        body = [head, b"\0" * pad]
        for name, dims, tt, data in self.tensors:
            body.append(data)
            body.append(b"\0" * ((-len(data)) % self.alignment))
        return b"".join(body)

    def write(self, path):
        data = self.to_bytes()
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".gguf", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)   # mkstemp creates 0600
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return len(data)


def describe(path, max_array=8):
    r = GGUFReader(path)
    lines = ["GGUF v%d, %d keys, %d tensors" % (r.version, len(r.metadata), len(r.tensors))]
    for k, v in r.metadata.items():
        t, et = r.metadata_types[k]
        if isinstance(v, list):
            lines.append("  %s: array<%d>[%d] %r%s" % (k, et, len(v), v[:max_array],
                                                       " ..." if len(v) > max_array else ""))
        else:
            lines.append("  %s: <%d> %r" % (k, t, v))
    for n in r.tensor_order:
        ti = r.tensors[n]
        lines.append("  %-40s %-5s %s" % (n, _TYPE_NAMES.get(ti.type, str(ti.type)), ti.dims))
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    for p in sys.argv[1:]:
        print(p)
        print(describe(p))
