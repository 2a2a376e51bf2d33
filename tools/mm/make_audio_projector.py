"""Writes a random-weight Gemma 4 audio projector ("gemma4a" mmproj GGUF) of any geometry.

A test fixture, not a working model: the tensors and keys are the ones llama.cpp's converter writes for a
Gemma 4 audio tower (../../shared/spec/gemma4-mm.md "Keys and tensors"), the values random with a fixed
seed, scaled so that activations stay of order one. Options add what real files may carry: biases,
mm.a.soft_emb_norm, clamp scalars (also on the input that q, k and v share, where llama.cpp's in-place
clamp makes the order visible), F16 / Q8_0 matrices, and drop the optional tensors.

    /usr/bin/python3 tools/mm/make_audio_projector.py --out P.gguf --width 64 --heads 4 --type f16 --biases

The real Gemma 4 (E2B/E4B) audio tower: --width 1024 --heads 8 --layers 12 --ffn 4096 --channels 128,32
--pre-out 1536 --n-embd 1536 (the text width of E2B). Needs numpy (Debian's python3-numpy).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import gguf_io as g  # noqa: E402

TYPES = {"f32": g.GGML_F32, "f16": g.GGML_F16, "q8_0": g.GGML_Q8_0}


def build(a):
    rng = np.random.default_rng(a.seed)
    D, H, F, L, E = a.width, a.heads, a.ffn or 4 * a.width, a.layers, a.n_embd
    C0, C1 = (int(x) for x in a.channels.split(","))
    d = D // H
    F1 = (a.mel - 1) // 2 + 1
    F2 = (F1 - 1) // 2 + 1
    G = D  # the conv module's GLU width (pw1 doubles it)
    P = a.pre_out or D
    mt = TYPES[a.type]

    w = g.GGUFWriter()
    w.add("general.architecture", g.string("clip"))
    w.add("general.type", g.string("mmproj"))
    w.add("general.name", g.string("gemma4a-random-%s" % os.path.basename(a.out)))
    w.add("clip.has_vision_encoder", g.boolean(False))
    w.add("clip.has_audio_encoder", g.boolean(True))
    w.add("clip.audio.projector_type", g.string("gemma4a"))
    w.add("clip.audio.num_mel_bins", g.u32(a.mel))
    w.add("clip.audio.embedding_length", g.u32(D))
    w.add("clip.audio.feed_forward_length", g.u32(F))
    w.add("clip.audio.block_count", g.u32(L))
    w.add("clip.audio.projection_dim", g.u32(E))
    w.add("clip.audio.attention.head_count", g.u32(H))
    w.add("clip.audio.attention.layer_norm_epsilon", g.f32(1e-6))

    def mat(rows, cols):  # numpy (rows, cols) = GGUF {cols, rows}
        return rng.standard_normal((rows, cols)).astype(np.float32) / np.sqrt(cols)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    def bias(n):
        return (0.1 * rng.standard_normal(n)).astype(np.float32)

    def scalar(name, v):
        w.add_tensor(name, np.array([v], dtype=np.float32))

    # clamp bounds: narrow enough to bite on unit-scale activations
    def clamps(prefix, inp=None, out=None):
        if inp is not None:
            scalar(prefix + ".input_min", -inp)
            scalar(prefix + ".input_max", inp)
        if out is not None:
            scalar(prefix + ".output_min", -out)
            scalar(prefix + ".output_max", out)

    def linear(prefix, rows, cols, with_bias=False, ttype=mt):
        w.add_tensor(prefix + ".weight", mat(rows, cols), ttype)
        if with_bias:
            w.add_tensor(prefix + ".bias", bias(rows))

    ct = TYPES[a.conv_type]
    for i, (cin, cout) in enumerate(((1, C0), (C0, C1))):
        k = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32) / np.sqrt(9 * cin)
        w.add_tensor("a.conv1d.%d.weight" % i, k, ct)
        if a.biases:
            w.add_tensor("a.conv1d.%d.bias" % i, bias(cout).reshape(cout, 1, 1))
        w.add_tensor("a.conv1d.%d.norm.weight" % i, norm(cout))
    linear("a.input_projection", D, C1 * F2, a.biases)
    if a.clamps != "none":
        clamps("a.input_projection", inp=2.0, out=3.0)

    for il in range(L):
        b = "a.blk.%d." % il
        for sfx in ("", "_1"):
            w.add_tensor(b + "ffn_norm%s.weight" % sfx, norm(D))
            linear(b + "ffn_up" + sfx, F, D)
            linear(b + "ffn_down" + sfx, D, F)
            if not a.minimal:
                w.add_tensor(b + "ffn_post_norm%s.weight" % sfx, norm(D))
        w.add_tensor(b + "attn_pre_norm.weight", norm(D))
        for p in ("attn_q", "attn_k", "attn_v"):
            linear(b + p, D, D)
        linear(b + "attn_out", D, D, a.biases)
        if not a.minimal:
            # stored as softplus(x), as the converter writes them
            w.add_tensor(b + "per_dim_scale.weight", np.log1p(np.exp(rng.standard_normal(d))).astype(np.float32))
            w.add_tensor(b + "per_dim_k_scale.weight", np.log1p(np.exp(rng.standard_normal(d))).astype(np.float32))
            w.add_tensor(b + "attn_post_norm.weight", norm(D))
        # not optional in practice: llama.cpp's encoder aborts without it (its pos_emb input goes unused)
        w.add_tensor(b + "attn_k_rel.weight", mat(D, D), mt)
        w.add_tensor(b + "conv_norm.weight", norm(D))
        linear(b + "conv_pw1", 2 * G, D)
        w.add_tensor(b + "conv_dw.weight", (rng.standard_normal((G, 5)) / np.sqrt(5)).astype(np.float32))
        if a.biases:
            w.add_tensor(b + "conv_dw.bias", bias(G))
        if not a.minimal:
            w.add_tensor(b + "norm_conv.weight", norm(G))
        linear(b + "conv_pw2", D, G)
        w.add_tensor(b + "ln2.weight", norm(D))
        if a.clamps != "none":
            clamps(b + "attn_out", inp=1.5, out=2.0)
            clamps(b + "conv_pw2", inp=1.0)
            clamps(b + "ffn_up", inp=1.5, out=2.5)
            clamps(b + "ffn_down_1", out=1.0)
        if a.clamps == "shared":
            # q, k and v read one buffer; llama.cpp clamps it in place in the order v, k, q, so k sees v's
            # clamp and q sees both (and k's narrower one changes what q gets)
            clamps(b + "attn_v", inp=1.2)
            clamps(b + "attn_k", inp=0.8, out=3.0)
            clamps(b + "attn_q", out=2.0)
            clamps(b + "conv_pw1", inp=1.0, out=2.0)

    if a.pre_out:
        linear("a.pre_encode.out", P, D, True)
    if a.soft_emb_norm:
        w.add_tensor("mm.a.soft_emb_norm.weight", norm(P))
    linear("mm.a.input_projection", E, P)
    if a.clamps != "none":
        clamps("mm.a.input_projection", out=2.0)
    return w


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--width", type=int, default=64, help="clip.audio.embedding_length")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--ffn", type=int, default=0, help="feed-forward width (default 4 x width)")
    p.add_argument("--mel", type=int, default=128, help="mel bins")
    p.add_argument("--channels", default="8,8", help="output channels of the two subsampling convolutions")
    p.add_argument("--pre-out", type=int, default=0, help="a.pre_encode.out width (0: no such tensor)")
    p.add_argument("--n-embd", type=int, default=256, help="the text model's width (projection_dim)")
    p.add_argument("--type", choices=sorted(TYPES), default="f32", help="matrix type")
    p.add_argument("--conv-type", choices=["f32", "f16"], default="f32", help="subsampling kernel type")
    p.add_argument("--biases", action="store_true", help="the biases llama.cpp's graph adds")
    p.add_argument("--soft-emb-norm", action="store_true")
    p.add_argument("--clamps", choices=["none", "separate", "shared"], default="none")
    p.add_argument("--minimal", action="store_true",
                   help="leave out the optional tensors (post norms, per-dim scales, norm_conv)")
    a = p.parse_args()
    if a.width % a.heads:
        p.error("--width must be a multiple of --heads")
    n = build(a).write(a.out)
    print("%s: %d bytes" % (a.out, n))


if __name__ == "__main__":
    main()
