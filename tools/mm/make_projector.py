#!/usr/bin/python3
"""Writes a random-weight Gemma 4 vision projector GGUF (clip.vision.projector_type gemma4v) for tests and
benchmarks. The GGUF is written by hand (numpy only): v3, alignment 32, F32 / F16 / Q8_0 tensors.

  make_projector.py --out FILE [--embd 96] [--heads 3] [--heads-kv N] [--ffn 192] [--layers 2] [--patch 16]
                    [--merge 3] [--proj 256] [--pos 128] [--type f32|f16|q8_0] [--gelu true|false|absent] [--silu] [--no-gate]
                    [--mean 0.5 --std 0.5] [--clamps shared|outputs|none] [--std-bias] [--out-scale]
                    [--qk-norm 1.0] [--seed 0]

--clamps shared puts input clamps on q, k, v and on ffn_gate, ffn_up (inputs that feed several linears,
where llama.cpp's in-place clamp order matters) plus output clamps on attn_out and the projection.
The real Gemma 4 E2B / E4B tower is --embd 768 --heads 12 --ffn 3072 --layers 16 --pos 10240 --proj 1536
(the 12B / 31B / 26B-A4B one --embd 1152 --heads 16 --ffn 4304 --layers 27 --std-bias)."""
import argparse
import struct

import numpy as np

GGUF_U32, GGUF_F32, GGUF_BOOL, GGUF_STR, GGUF_ARR = 4, 6, 7, 8, 9
T_F32, T_F16, T_Q8_0 = 0, 1, 8


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv_bytes(key, value):
    out = gguf_str(key)
    if isinstance(value, bool):
        return out + struct.pack("<IB", GGUF_BOOL, value)
    if isinstance(value, int):
        return out + struct.pack("<II", GGUF_U32, value)
    if isinstance(value, float):
        return out + struct.pack("<If", GGUF_F32, value)
    if isinstance(value, str):
        return out + struct.pack("<I", GGUF_STR) + gguf_str(value)
    if isinstance(value, list):  # float arrays
        return out + struct.pack("<IIQ", GGUF_ARR, GGUF_F32, len(value)) + struct.pack("<%df" % len(value), *value)
    raise TypeError(key)


def q8_0(x):
    """ggml's reference Q8_0: per 32 values d = amax / 127 (stored fp16), q = round(x / d)."""
    blocks = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(blocks).max(axis=1)
    d = amax / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = np.round(blocks * inv[:, None]).astype(np.int8)
    out = np.zeros(len(blocks), dtype=[("d", "<f2"), ("q", "i1", 32)])
    out["d"] = d.astype(np.float16)
    out["q"] = q
    return out.tobytes()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--embd", type=int, default=96)
    ap.add_argument("--heads", type=int, default=3)
    ap.add_argument("--heads-kv", type=int, default=0)
    ap.add_argument("--ffn", type=int, default=192)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--patch", type=int, default=16)
    ap.add_argument("--merge", type=int, default=0, help="0: no scale_factor key (gemma4v's default 3)")
    ap.add_argument("--proj", type=int, default=256)
    ap.add_argument("--pos", type=int, default=128)
    ap.add_argument("--type", default="f32", choices=["f32", "f16", "q8_0"])
    ap.add_argument("--gelu", default="absent", choices=["true", "false", "absent"])
    ap.add_argument("--silu", action="store_true", help="clip.use_silu true (SiLU instead of GELU)")
    ap.add_argument("--no-gate", action="store_true", help="no ffn_gate: the FFN is down(act(up))")
    ap.add_argument("--mean", type=float, default=0.0)
    ap.add_argument("--std", type=float, default=1.0)
    ap.add_argument("--clamps", default="none", choices=["shared", "outputs", "none"])
    ap.add_argument("--std-bias", action="store_true")
    ap.add_argument("--out-scale", action="store_true")
    ap.add_argument("--qk-norm", type=float, default=1.0,
                    help="mean of the q/k norm weights: attention logits are not scaled (scale 1), so large head "
                         "sizes give peaked softmaxes that amplify rounding differences; smaller keeps a test stable")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    E, F, H = a.embd, a.ffn, a.heads
    HKV = a.heads_kv or H
    D = E // H
    mtype = {"f32": T_F32, "f16": T_F16, "q8_0": T_Q8_0}[a.type]

    kvs = [("general.architecture", "clip"), ("general.type", "mmproj"), ("general.name", "gemma4v-random"),
           ("clip.has_vision_encoder", True), ("clip.vision.projector_type", "gemma4v"),
           ("clip.vision.image_size", 224), ("clip.vision.patch_size", a.patch),
           ("clip.vision.embedding_length", E), ("clip.vision.feed_forward_length", F),
           ("clip.vision.block_count", a.layers), ("clip.vision.projection_dim", a.proj),
           ("clip.vision.attention.head_count", H), ("clip.vision.attention.layer_norm_epsilon", 1e-6),
           ("clip.vision.image_mean", [a.mean] * 3), ("clip.vision.image_std", [a.std] * 3)]
    if a.heads_kv:
        kvs.append(("clip.vision.attention.head_count_kv", HKV))
    if a.merge:
        kvs.append(("clip.vision.projector.scale_factor", a.merge))
    if a.gelu != "absent":
        kvs.append(("clip.use_gelu", a.gelu == "true"))
    if a.silu:
        kvs.append(("clip.use_silu", True))

    tensors = []  # (name, ggml type, ne list, bytes)

    def add(name, arr, ttype=T_F32):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        ne = list(arr.shape[::-1])
        data = arr.tobytes() if ttype == T_F32 else arr.astype(np.float16).tobytes() if ttype == T_F16 else q8_0(arr)
        tensors.append((name, ttype, ne, data))

    def mat(name, n_in, n_out, scale=None):  # {n_in, n_out}: numpy shape (n_out, n_in)
        s = scale if scale is not None else 1.0 / np.sqrt(n_in)
        add(name, rng.standard_normal((n_out, n_in)) * s, mtype)

    def norm_w(name, n, mean=1.0):
        add(name, mean * (1.0 + 0.1 * rng.standard_normal(n)))

    def scalar(name, v):
        add(name, np.array([v]))

    add("v.patch_embd.weight", rng.standard_normal((E, 3, a.patch, a.patch)) / np.sqrt(3 * a.patch * a.patch),
        T_F32 if a.type == "f32" else T_F16)
    add("v.position_embd.weight", 0.5 * rng.standard_normal((2, a.pos, E)))
    for il in range(a.layers):
        p = "v.blk.%d." % il
        norm_w(p + "ln1.weight", E)
        mat(p + "attn_q.weight", E, H * D)
        mat(p + "attn_k.weight", E, HKV * D)
        mat(p + "attn_v.weight", E, HKV * D)
        norm_w(p + "attn_q_norm.weight", D, a.qk_norm)
        norm_w(p + "attn_k_norm.weight", D, a.qk_norm)
        mat(p + "attn_out.weight", H * D, E)
        norm_w(p + "attn_post_norm.weight", E)
        norm_w(p + "ln2.weight", E)
        if not a.no_gate:
            mat(p + "ffn_gate.weight", E, F)
        mat(p + "ffn_up.weight", E, F)
        mat(p + "ffn_down.weight", F, E)
        norm_w(p + "ffn_post_norm.weight", E)
        if a.out_scale:
            scalar(p + "out_scale.weight", 0.5 + rng.random())
        if a.clamps == "shared":
            # different bounds per linear on the same input: the in-place order decides what each one sees
            for j, lin in enumerate(["attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"]):
                scalar(p + lin + ".input_min", -2.0 + 0.3 * j)
                scalar(p + lin + ".input_max", 2.0 - 0.25 * j)
        if a.clamps in ("shared", "outputs"):
            scalar(p + "attn_out.output_min", -1.5)
            scalar(p + "attn_out.output_max", 1.5)
    if a.std_bias:
        add("v.std_bias", 0.1 * rng.standard_normal(E))
        add("v.std_scale", 1.0 + 0.1 * rng.standard_normal(E))
    mat("mm.input_projection.weight", E, a.proj)
    if a.clamps in ("shared", "outputs"):
        scalar("mm.input_projection.output_min", -2.0)
        scalar("mm.input_projection.output_max", 2.0)

    # assemble: header, kv, tensor infos, padding, data (each tensor 32-aligned)
    info, data = b"", b""
    for name, ttype, ne, blob in tensors:
        data += b"\0" * (-len(data) % 32)
        info += gguf_str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        info += struct.pack("<IQ", ttype, len(data))
        data += blob
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kv_bytes(k, v) for k, v in kvs) + info
    head += b"\0" * (-len(head) % 32)
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head + data)
    import os
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
