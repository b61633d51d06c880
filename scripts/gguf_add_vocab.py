#!/usr/bin/env python3
"""gguf_add_vocab.py IN.gguf OUT.gguf — copy a GGUF file and give it a
placeholder SentencePiece-style vocabulary, so that llama.cpp loads a file
that `backplane run --save` wrote from a built-in model (which has no
tokenizer). Token 0 is <unk>, 1 <s>, 2 </s>, 3..258 the byte tokens <0x00>
.. <0xFF> (llama.cpp looks up the newline byte), the rest "tok<N>"; scores
-N. Token ids mean nothing here: the benchmark feeds ids, never text.

Used by scripts/bench-llamacpp.sh at benchmark set-up; nothing in the build
or the tests reads it. The tensor data is copied unchanged: tensor offsets
in GGUF count from the start of the (aligned) data section, so only the
key/value section grows.
"""
import struct
import sys

# GGUF value types (the GGUF specification).
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_SIZE = {U8: 1, I8: 1, U16: 2, I16: 2, U32: 4, I32: 4, F32: 4, BOOL: 1, U64: 8, I64: 8, F64: 8}


def skip_value(buf, pos, vtype):
    if vtype in SCALAR_SIZE:
        return pos + SCALAR_SIZE[vtype]
    if vtype == STRING:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == ARRAY:
        etype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if etype in SCALAR_SIZE:
            return pos + SCALAR_SIZE[etype] * count
        for _ in range(count):
            pos = skip_value(buf, pos, etype)
        return pos
    raise SystemExit(f"gguf_add_vocab: unknown value type {vtype}")


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


def vocab_kvs(n_vocab):
    names = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    names += [f"tok{i}" for i in range(len(names), n_vocab)]
    names = names[:n_vocab]
    # token types: 1 normal, 2 unknown, 3 control, 6 byte
    types = [2, 3, 3] + [6] * 256 + [1] * max(0, n_vocab - 259)
    out = [
        kv("tokenizer.ggml.model", STRING, gstr("llama")),
        kv("tokenizer.ggml.tokens", ARRAY,
           struct.pack("<IQ", STRING, n_vocab) + b"".join(gstr(n) for n in names)),
        kv("tokenizer.ggml.scores", ARRAY,
           struct.pack("<IQ", F32, n_vocab) + struct.pack(f"<{n_vocab}f", *[-float(i) for i in range(n_vocab)])),
        kv("tokenizer.ggml.token_type", ARRAY,
           struct.pack("<IQ", I32, n_vocab) + struct.pack(f"<{n_vocab}i", *types[:n_vocab])),
        kv("tokenizer.ggml.bos_token_id", U32, struct.pack("<I", 1)),
        kv("tokenizer.ggml.eos_token_id", U32, struct.pack("<I", 2)),
        kv("tokenizer.ggml.unknown_token_id", U32, struct.pack("<I", 0)),
    ]
    return out


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: gguf_add_vocab.py IN.gguf OUT.gguf")
    with open(sys.argv[1], "rb") as f:
        buf = f.read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    if magic != b"GGUF" or version not in (2, 3):
        raise SystemExit(f"gguf_add_vocab: {sys.argv[1]} is not a GGUF v2/v3 file")
    pos = 24
    alignment, n_vocab, keys = 32, None, []
    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + klen].decode()
        (vtype,) = struct.unpack_from("<I", buf, pos + 8 + klen)
        vpos = pos + 12 + klen
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", buf, vpos)
        if key.startswith("tokenizer."):
            raise SystemExit(f"gguf_add_vocab: {sys.argv[1]} already has a tokenizer ({key})")
        keys.append(buf[pos:skip_value(buf, vpos, vtype)])
        pos = skip_value(buf, vpos, vtype)
    info_start = pos
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", buf, pos)
        name = buf[pos + 8:pos + 8 + nlen].decode()
        (n_dims,) = struct.unpack_from("<I", buf, pos + 8 + nlen)
        dims = struct.unpack_from(f"<{n_dims}Q", buf, pos + 12 + nlen)
        if name == "token_embd.weight":
            n_vocab = dims[1]
        pos += 12 + nlen + 8 * n_dims + 4 + 8
    infos = buf[info_start:pos]
    data_start = pos + (-pos) % alignment
    if n_vocab is None:
        raise SystemExit(f"gguf_add_vocab: {sys.argv[1]} has no token_embd.weight")
    new_kvs = vocab_kvs(n_vocab)
    head = struct.pack("<4sIQQ", b"GGUF", version, n_tensors, n_kv + len(new_kvs))
    meta = head + b"".join(keys) + b"".join(new_kvs) + infos
    with open(sys.argv[2], "wb") as f:
        f.write(meta)
        f.write(b"\0" * ((-len(meta)) % alignment))
        f.write(buf[data_start:])


if __name__ == "__main__":
    main()
