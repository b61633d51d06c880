#!/usr/bin/env python3
"""quantize_compare.py — helpers of scripts/quantize-reference.sh.

  quantize_compare.py diff A.gguf B.gguf
      prints where two GGUF files differ: header, metadata keys (order,
      values), tensor infos, then each tensor's data (bytes that differ),
      and the padding; prints "identical" when they are equal.
  quantize_compare.py types FILE.gguf
      prints the tensor names in file order on one line ("tensors ...")
      and their type names on the next.

Pure Python 3, no packages.
"""
import struct
import sys

SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
# ggml type id: (name, block elements, block bytes)
TYPES = {0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20),
         6: ("q5_0", 32, 22), 7: ("q5_1", 32, 24), 8: ("q8_0", 32, 34), 10: ("q2_K", 256, 84),
         11: ("q3_K", 256, 110), 12: ("q4_K", 256, 144), 13: ("q5_K", 256, 176),
         14: ("q6_K", 256, 210), 20: ("iq4_nl", 32, 18), 23: ("iq4_xs", 256, 136),
         26: ("i32", 1, 4), 30: ("bf16", 1, 2)}


class Gguf:
    def __init__(self, path):
        self.path = path
        self.buf = open(path, "rb").read()
        b = self.buf
        self.magic, self.version, n_t, n_kv = struct.unpack_from("<4sIQQ", b, 0)
        pos = 24
        self.kvs = []  # (key, raw bytes of the whole record)
        for _ in range(n_kv):
            start = pos
            key, pos = self._str(pos)
            (t,) = struct.unpack_from("<I", b, pos)
            pos = self._skip(pos + 4, t)
            self.kvs.append((key, b[start:pos]))
        self.alignment = 32
        for key, raw in self.kvs:
            if key == "general.alignment":
                self.alignment = struct.unpack_from("<I", raw, len(raw) - 4)[0]
        self.tensors = []  # (name, ne, type, offset, raw info bytes)
        for _ in range(n_t):
            start = pos
            name, pos = self._str(pos)
            (nd,) = struct.unpack_from("<I", b, pos)
            ne = struct.unpack_from(f"<{nd}Q", b, pos + 4)
            pos += 4 + 8 * nd
            t, off = struct.unpack_from("<IQ", b, pos)
            pos += 12
            self.tensors.append((name, ne, t, off, b[start:pos]))
        self.info_end = pos
        self.data = pos + (-pos) % self.alignment

    def _str(self, pos):
        (n,) = struct.unpack_from("<Q", self.buf, pos)
        return self.buf[pos + 8:pos + 8 + n].decode("utf-8", "replace"), pos + 8 + n

    def _skip(self, pos, t):
        if t in SCALAR:
            return pos + SCALAR[t]
        if t == 8:
            return self._str(pos)[1]
        et, n = struct.unpack_from("<IQ", self.buf, pos)
        pos += 12
        if et in SCALAR:
            return pos + n * SCALAR[et]
        for _ in range(n):
            pos = self._skip(pos, et)
        return pos

    def size_of(self, ne, t):
        _, blk, nbytes = TYPES[t]
        n = 1
        for d in ne[1:]:
            n *= d
        return ne[0] // blk * nbytes * n

    def tensor_bytes(self, i):
        name, ne, t, off, _ = self.tensors[i]
        start = self.data + off
        return self.buf[start:start + self.size_of(ne, t)]


def type_name(t):
    return TYPES.get(t, (f"type{t}",))[0]


def diff(a_path, b_path):
    a, b = Gguf(a_path), Gguf(b_path)
    if a.buf == b.buf:
        print("identical")
        return 0
    out = []
    if (a.magic, a.version) != (b.magic, b.version):
        out.append(f"header: version {a.version} vs {b.version}")
    ka, kb = [k for k, _ in a.kvs], [k for k, _ in b.kvs]
    if set(ka) != set(kb):
        out.append(f"keys only in A: {sorted(set(ka) - set(kb))}; only in B: {sorted(set(kb) - set(ka))}")
    elif ka != kb:
        out.append("metadata keys in another order")
    da, db = dict(a.kvs), dict(b.kvs)
    changed = [k for k in ka if k in db and da[k] != db[k]]
    if changed:
        out.append(f"metadata values differ: {changed}")
    na, nb = [t[0] for t in a.tensors], [t[0] for t in b.tensors]
    if na != nb:
        out.append("tensor order differs" if sorted(na) == sorted(nb) else "tensor sets differ")
    bi = {t[0]: i for i, t in enumerate(b.tensors)}
    for i, (name, ne, t, off, info) in enumerate(a.tensors):
        j = bi.get(name)
        if j is None:
            continue
        _, ne2, t2, off2, _ = b.tensors[j]
        if (ne, t) != (ne2, t2):
            out.append(f"{name}: {type_name(t)} {list(ne)} vs {type_name(t2)} {list(ne2)}")
            continue
        xa, xb = a.tensor_bytes(i), b.tensor_bytes(j)
        if xa != xb:
            _, blk, nbytes = TYPES[t]
            nblk = len(xa) // nbytes
            bad = sum(1 for k in range(nblk) if xa[k * nbytes:(k + 1) * nbytes] != xb[k * nbytes:(k + 1) * nbytes])
            out.append(f"{name} ({type_name(t)}): {bad} of {nblk} blocks differ")
    if not out:
        out.append("padding or offsets differ")
    print("; ".join(out))
    return 1


def types(path):
    g = Gguf(path)
    print("tensors " + " ".join(t[0] for t in g.tensors))
    print(" ".join(type_name(t[2]) for t in g.tensors))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "diff":
        sys.exit(diff(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 3 and sys.argv[1] == "types":
        types(sys.argv[2])
        return
    sys.exit("usage: quantize_compare.py diff A.gguf B.gguf | types FILE.gguf")


if __name__ == "__main__":
    main()
