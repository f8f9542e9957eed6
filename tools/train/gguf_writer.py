"""A minimal GGUF (version 3) writer: metadata key/values and F32/F16 tensors.

Written from the GGUF layout the engine reads (src/gguf/): little-endian header, metadata,
tensor infos with dimensions innermost first, then tensor data aligned to general.alignment.
"""
import struct

import numpy as np

ALIGN = 32
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_F16 = 0, 1


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


class GgufWriter:
    def __init__(self):
        self.kv = []       # (key, bytes of type + value)
        self.tensors = []  # (name, np.ndarray)

    def add_u32(self, key, v):
        self.kv.append((key, struct.pack("<II", T_UINT32, v)))

    def add_f32(self, key, v):
        self.kv.append((key, struct.pack("<If", T_FLOAT32, v)))

    def add_bool(self, key, v):
        self.kv.append((key, struct.pack("<IB", T_BOOL, 1 if v else 0)))

    def add_string(self, key, v):
        self.kv.append((key, struct.pack("<I", T_STRING) + _str(v)))

    def add_string_array(self, key, values):
        body = b"".join(_str(v) for v in values)
        self.kv.append((key, struct.pack("<IIQ", T_ARRAY, T_STRING, len(values)) + body))

    def add_f32_array(self, key, values):
        body = np.asarray(values, dtype="<f4").tobytes()
        self.kv.append((key, struct.pack("<IIQ", T_ARRAY, T_FLOAT32, len(values)) + body))

    def add_i32_array(self, key, values):
        body = np.asarray(values, dtype="<i4").tobytes()
        self.kv.append((key, struct.pack("<IIQ", T_ARRAY, T_INT32, len(values)) + body))

    def add_tensor(self, name, array, f16=False):
        """array: numpy, row-major; GGUF lists dimensions innermost first, so they are reversed."""
        a = np.ascontiguousarray(array, dtype="<f2" if f16 else "<f4")
        self.tensors.append((name, a))

    def write(self, path):
        out = bytearray()
        out += b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv) + 1)
        out += _str("general.alignment") + struct.pack("<II", T_UINT32, ALIGN)
        for key, val in self.kv:
            out += _str(key) + val
        offset = 0
        for name, a in self.tensors:
            dims = list(reversed(a.shape))
            out += _str(name) + struct.pack("<I", len(dims))
            out += b"".join(struct.pack("<Q", d) for d in dims)
            out += struct.pack("<IQ", GGML_F16 if a.dtype == np.float16 else GGML_F32, offset)
            offset += (a.nbytes + ALIGN - 1) // ALIGN * ALIGN
        out += b"\0" * (-len(out) % ALIGN)
        with open(path, "wb") as f:
            f.write(out)
            for _, a in self.tensors:
                f.write(a.tobytes())
                f.write(b"\0" * (-a.nbytes % ALIGN))
