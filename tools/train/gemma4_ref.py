"""Independent PyTorch implementation of the Gemma 4 text model and of the
gemma4-assistant (MTP drafter), written from ../shared/spec/gemma4.md.

Parameters are kept under their GGUF tensor names, with the PyTorch
[out, in] layout that GGUF's {in, out} shape has in memory, so saving and
loading is a plain copy (see gguf_io.py for the shape convention).

Section references (§) are to the spec.
"""

import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as G  # noqa: E402


# ------------------------------------------------------------------- config

class Config:
    """Hyper-parameters of a Gemma 4 text model (the keys of §1)."""

    def __init__(self, n_vocab, n_embd, swa_pattern, n_head, n_head_kv, head_dim_swa,
                 head_dim_full, n_swa, n_ff, n_shared_kv=0, n_pl=0, context_length=2048,
                 rope_base_full=1e6, rope_base_swa=1e4, partial_rotary_full=0.25,
                 eps=1e-6, softcap=30.0, n_embd_out=None):
        self.n_vocab = n_vocab
        self.n_embd = n_embd
        self.swa_pattern = [bool(x) for x in swa_pattern]
        self.n_layer = len(self.swa_pattern)
        self.n_head = n_head
        self.n_head_kv = list(n_head_kv) if isinstance(n_head_kv, (list, tuple)) else [n_head_kv] * self.n_layer
        self.head_dim_swa = head_dim_swa
        self.head_dim_full = head_dim_full
        self.n_swa = n_swa
        self.n_ff = list(n_ff) if isinstance(n_ff, (list, tuple)) else [n_ff] * self.n_layer
        self.n_shared_kv = n_shared_kv
        self.n_pl = n_pl
        self.context_length = context_length
        self.rope_base_full = rope_base_full
        self.rope_base_swa = rope_base_swa
        self.partial_rotary_full = partial_rotary_full
        self.eps = eps
        self.softcap = softcap
        self.n_embd_out = n_embd_out    # assistant only: the target's n_embd

    def head_dim(self, il):
        return self.head_dim_swa if self.swa_pattern[il] else self.head_dim_full

    @property
    def n_kv_from_start(self):
        return self.n_layer - self.n_shared_kv

    def has_kv(self, il):
        return il < self.n_kv_from_start

    def kv_source(self, il):
        """§5: shared layers read layer n_kv-2 (SWA) or n_kv-1 (full)."""
        if self.has_kv(il):
            return il
        return self.n_kv_from_start - (2 if self.swa_pattern[il] else 1)

    def rope_freqs(self):
        """§2: key_length/2 entries: int(d*0.25/2) ones, then 1e30."""
        n = self.head_dim_full // 2
        n_rot = int(self.head_dim_full * self.partial_rotary_full / 2)
        return np.array([1.0] * n_rot + [1e30] * (n - n_rot), dtype=np.float32)


# ------------------------------------------------------------------ helpers

def rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rmsw(x, w, eps):
    return rms(x, eps) * w


def gelu(x):
    return F.gelu(x, approximate="tanh")


def rope(x, pos, base, freq_factors=None):
    """NEOX RoPE over the whole head (§3.6). x: [..., T, d]; pos: [T] or [B, 1, T]."""
    d = x.shape[-1]
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    inv = base ** (-2.0 * i / d)
    if freq_factors is not None:
        inv = inv / freq_factors.double()
    theta = pos.double()[..., None] * inv            # [..., T, half]
    cos = torch.cos(theta).to(x.dtype)
    sin = torch.sin(theta).to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def attention(q, k, v, mask):
    """q [B,H,Tq,d], k/v [B,Hkv,Tk,d], mask [.., Tq, Tk] bool (True = keep).
    Scale 1.0 (§3.3c); GQA groups are contiguous."""
    H, Hkv = q.shape[1], k.shape[1]
    if Hkv != H:
        k = k.repeat_interleave(H // Hkv, dim=1)
        v = v.repeat_interleave(H // Hkv, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2))
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, v)


def causal_mask(T, n_swa=None, device=None):
    p1 = torch.arange(T, device=device)[:, None]
    p0 = torch.arange(T, device=device)[None, :]
    m = p0 <= p1
    if n_swa is not None:
        m = m & ((p1 - p0) < n_swa)
    return m


class Weights(nn.Module):
    """GGUF-named parameters ('.' is not allowed in module names)."""

    def __init__(self):
        super().__init__()
        self.params = nn.ParameterDict()

    def __getitem__(self, name):
        return self.params[name.replace(".", "__")]

    def __contains__(self, name):
        return name.replace(".", "__") in self.params

    def set(self, name, array, trainable=True):
        t = torch.as_tensor(np.asarray(array, dtype=np.float32)).clone()
        self.params[name.replace(".", "__")] = nn.Parameter(t, requires_grad=trainable)

    def names(self):
        return [k.replace("__", ".") for k in self.params.keys()]


# --------------------------------------------------------------- text model

class Gemma4(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.w = Weights()
        self.register_buffer("rope_freqs", torch.tensor(cfg.rope_freqs()))

    # -- initialisation for training
    def init_random(self, seed=0):
        c = self.cfg
        g = np.random.default_rng(seed)
        E, L, npl = c.n_embd, c.n_layer, c.n_pl

        def mat(o, i, std=None):
            return g.standard_normal((o, i)) * (std if std is not None else 1.0 / math.sqrt(i))

        w = self.w
        w.set("token_embd.weight", g.standard_normal((c.n_vocab, E)) * 0.04)
        w.set("output_norm.weight", np.ones(E))
        if npl:
            w.set("per_layer_token_embd.weight", g.standard_normal((c.n_vocab, L * npl)) * 0.04)
            w.set("per_layer_model_proj.weight", mat(L * npl, E))
            w.set("per_layer_proj_norm.weight", np.ones(npl))
        for il in range(L):
            d, H, Hkv, ff = c.head_dim(il), c.n_head, c.n_head_kv[il], c.n_ff[il]
            p = "blk.%d." % il
            w.set(p + "attn_norm.weight", np.ones(E))
            w.set(p + "attn_q.weight", mat(H * d, E))
            w.set(p + "attn_q_norm.weight", np.full(d, d ** -0.25))
            if c.has_kv(il):
                w.set(p + "attn_k.weight", mat(Hkv * d, E))
                w.set(p + "attn_v.weight", mat(Hkv * d, E))
                w.set(p + "attn_k_norm.weight", np.full(d, d ** -0.25))
            w.set(p + "attn_output.weight", mat(E, H * d, 0.5 / math.sqrt(H * d)))
            w.set(p + "post_attention_norm.weight", np.full(E, 0.5))
            w.set(p + "ffn_norm.weight", np.ones(E))
            w.set(p + "ffn_gate.weight", mat(ff, E))
            w.set(p + "ffn_up.weight", mat(ff, E))
            w.set(p + "ffn_down.weight", mat(E, ff, 0.5 / math.sqrt(ff)))
            w.set(p + "post_ffw_norm.weight", np.full(E, 0.5))
            if npl:
                w.set(p + "inp_gate.weight", mat(npl, E))
                w.set(p + "proj.weight", mat(E, npl, 0.5 / math.sqrt(npl)))
                w.set(p + "post_norm.weight", np.full(E, 0.3))
            w.set(p + "layer_output_scale.weight", np.ones(1))
        return self

    # -- forward (§3)
    def embed(self, tokens):
        c = self.cfg
        return F.embedding(tokens, self.w["token_embd.weight"]) * math.sqrt(c.n_embd)

    def per_layer_inputs(self, tokens, x):
        """§3.2: returns [B, T, L, n_pl]."""
        c = self.cfg
        B, T = tokens.shape
        tok = F.embedding(tokens, self.w["per_layer_token_embd.weight"]) * math.sqrt(c.n_pl)
        tok = tok.view(B, T, c.n_layer, c.n_pl)
        proj = F.linear(x, self.w["per_layer_model_proj.weight"]) * (1.0 / math.sqrt(c.n_embd))
        proj = rmsw(proj.view(B, T, c.n_layer, c.n_pl), self.w["per_layer_proj_norm.weight"], c.eps)
        return (proj + tok) * (1.0 / math.sqrt(2.0))

    def forward(self, tokens, return_kv=False):
        """tokens [B, T] at positions 0..T-1. Returns logits [B,T,V], the
        post-norm hidden y [B,T,E] and (optionally) each KV layer's (k, v)."""
        c, w = self.cfg, self.w
        B, T = tokens.shape
        eps = c.eps
        pos = torch.arange(T)
        x = self.embed(tokens)
        ple = self.per_layer_inputs(tokens, x) if c.n_pl else None
        masks = {True: causal_mask(T, c.n_swa), False: causal_mask(T)}
        kv = {}
        h = x
        for il in range(c.n_layer):
            p = "blk.%d." % il
            swa = c.swa_pattern[il]
            d, H = c.head_dim(il), c.n_head
            base = c.rope_base_swa if swa else c.rope_base_full
            ff = None if swa else self.rope_freqs
            a = rmsw(h, w[p + "attn_norm.weight"], eps)
            q = F.linear(a, w[p + "attn_q.weight"]).view(B, T, H, d).transpose(1, 2)
            q = rope(rmsw(q, w[p + "attn_q_norm.weight"], eps), pos, base, ff)
            if c.has_kv(il):
                Hkv = c.n_head_kv[il]
                k = F.linear(a, w[p + "attn_k.weight"]).view(B, T, Hkv, d).transpose(1, 2)
                if p + "attn_v.weight" in w:
                    v = F.linear(a, w[p + "attn_v.weight"]).view(B, T, Hkv, d).transpose(1, 2)
                else:                    # K=V layers: V is the raw K projection (§3.3b)
                    v = k
                k = rope(rmsw(k, w[p + "attn_k_norm.weight"], eps), pos, base, ff)
                v = rms(v, eps)
                kv[il] = (k, v)
            else:
                k, v = kv[c.kv_source(il)]
            o = attention(q, k, v, masks[swa]).transpose(1, 2).reshape(B, T, H * d)
            attn = F.linear(o, w[p + "attn_output.weight"])
            h1 = h + rmsw(attn, w[p + "post_attention_norm.weight"], eps)
            f = rmsw(h1, w[p + "ffn_norm.weight"], eps)
            m = F.linear(gelu(F.linear(f, w[p + "ffn_gate.weight"])) * F.linear(f, w[p + "ffn_up.weight"]),
                         w[p + "ffn_down.weight"])
            h2 = h1 + rmsw(m, w[p + "post_ffw_norm.weight"], eps)
            if ple is not None:
                g = gelu(F.linear(h2, w[p + "inp_gate.weight"])) * ple[:, :, il, :]
                h2 = h2 + rmsw(F.linear(g, w[p + "proj.weight"]), w[p + "post_norm.weight"], eps)
            if p + "layer_output_scale.weight" in w:
                h2 = h2 * w[p + "layer_output_scale.weight"]
            h = h2
        y = rmsw(h, w["output_norm.weight"], eps)
        logits = F.linear(y, w["token_embd.weight"])
        if c.softcap:
            logits = c.softcap * torch.tanh(logits / c.softcap)
        if return_kv:
            return logits, y, kv
        return logits, y

    def donor_layers(self):
        """§6.4: the target layers whose KV the assistant reads (SWA, full)."""
        c = self.cfg
        return c.kv_source(c.n_layer - 2), c.kv_source(c.n_layer - 1)

    # -- GGUF
    def metadata(self, arch="gemma4"):
        c = self.cfg
        P = arch + "."
        md = [
            (P + "block_count", G.u32(c.n_layer)),
            (P + "context_length", G.u32(c.context_length)),
            (P + "embedding_length", G.u32(c.n_embd)),
            (P + "attention.head_count", G.u32(c.n_head)),
            (P + "attention.head_count_kv", G.arr(G.T_INT32, c.n_head_kv)),
            (P + "rope.freq_base", G.f32(c.rope_base_full)),
            (P + "rope.freq_base_swa", G.f32(c.rope_base_swa)),
            (P + "attention.layer_norm_rms_epsilon", G.f32(c.eps)),
            (P + "attention.sliding_window", G.u32(c.n_swa)),
            (P + "attention.sliding_window_pattern", G.arr(G.T_BOOL, c.swa_pattern)),
            (P + "attention.key_length", G.u32(c.head_dim_full)),
            (P + "attention.value_length", G.u32(c.head_dim_full)),
            (P + "attention.key_length_swa", G.u32(c.head_dim_swa)),
            (P + "attention.value_length_swa", G.u32(c.head_dim_swa)),
            (P + "rope.dimension_count", G.u32(c.head_dim_full)),
            (P + "rope.dimension_count_swa", G.u32(c.head_dim_swa)),
        ]
        if len(set(c.n_ff)) > 1:
            md.append((P + "feed_forward_length", G.arr(G.T_INT32, c.n_ff)))
        else:
            md.append((P + "feed_forward_length", G.u32(c.n_ff[0])))
        md += [
            (P + "final_logit_softcapping", G.f32(c.softcap)),
            (P + "attention.shared_kv_layers", G.u32(c.n_shared_kv)),
            (P + "embedding_length_per_layer_input", G.u32(c.n_pl)),
        ]
        return md

    def save_gguf(self, path, vocab, name, matrix_type=G.GGML_F16, extra_kv=()):
        write_gguf(path, "gemma4", name, self.metadata(), vocab, self.w, self.rope_freqs,
                   matrix_type, extra_kv)

    @classmethod
    def from_gguf(cls, path):
        r = G.GGUFReader(path)
        cfg = config_from_metadata(r.metadata, "gemma4")
        m = cls(cfg)
        for n in r.tensor_order:
            if n == "rope_freqs.weight":
                m.rope_freqs.copy_(torch.tensor(r.tensor(n)))
            else:
                m.w.set(n, r.tensor(n), trainable=False)
        return m


def config_from_metadata(md, arch):
    P = arch + "."
    L = md[P + "block_count"]

    def arr_or(key, default=None):
        v = md.get(P + key, default)
        if isinstance(v, list):
            return v
        return [v] * L

    pat = md[P + "attention.sliding_window_pattern"]
    if not isinstance(pat, list):
        pat = [(il + 1) % pat != 0 for il in range(L)]
    n_head = md[P + "attention.head_count"]
    return Config(
        n_vocab=len(md["tokenizer.ggml.tokens"]),
        n_embd=md[P + "embedding_length"],
        swa_pattern=pat,
        n_head=n_head if not isinstance(n_head, list) else n_head[0],
        n_head_kv=arr_or("attention.head_count_kv", n_head),
        head_dim_swa=md[P + "attention.key_length_swa"],
        head_dim_full=md[P + "attention.key_length"],
        n_swa=md[P + "attention.sliding_window"],
        n_ff=arr_or("feed_forward_length"),
        n_shared_kv=md.get(P + "attention.shared_kv_layers", 0),
        n_pl=md.get(P + "embedding_length_per_layer_input", 0),
        context_length=md[P + "context_length"],
        rope_base_full=md.get(P + "rope.freq_base", 1e4),
        rope_base_swa=md.get(P + "rope.freq_base_swa", 1e4),
        eps=md[P + "attention.layer_norm_rms_epsilon"],
        softcap=md.get(P + "final_logit_softcapping", 30.0),
        n_embd_out=md.get(P + "embedding_length_out"),
    )


def write_gguf(path, arch, name, arch_md, vocab, weights, rope_freqs, matrix_type, extra_kv):
    wr = G.GGUFWriter()
    wr.add("general.architecture", G.string(arch))
    wr.add("general.type", G.string("model"))
    wr.add("general.name", G.string(name))
    wr.add("general.file_type", G.u32({G.GGML_F32: 0, G.GGML_F16: 1, G.GGML_Q8_0: 7}[matrix_type]))
    wr.add("general.quantization_version", G.u32(2))
    for k, v in arch_md:
        wr.add(k, v)
    for k, v in extra_kv:
        wr.add(k, v)
    for k, v in vocab.gguf_metadata():
        wr.add(k, v)
    wr.add_tensor("rope_freqs.weight", rope_freqs.cpu().numpy(), G.GGML_F32)
    for n in weights.names():
        a = weights[n].detach().cpu().numpy()
        # matrices in the requested type; norms, scales and the PLE projection in F32
        keep_f32 = a.ndim < 2 or n == "per_layer_model_proj.weight"
        tt = G.GGML_F32 if keep_f32 else matrix_type
        if tt == G.GGML_Q8_0 and a.shape[-1] % 32:
            tt = G.GGML_F16
        wr.add_tensor(n, a, tt)
    return wr.write(path)


def round_to_stored(module, matrix_type=G.GGML_F16):
    """Replace the weights by what the GGUF file will hold (dequantized)."""
    with torch.no_grad():
        for n in module.w.names():
            t = module.w[n]
            if t.dim() < 2 or n == "per_layer_model_proj.weight":
                continue
            if matrix_type == G.GGML_F16:
                t.copy_(t.half().float())
            elif matrix_type == G.GGML_Q8_0 and t.shape[-1] % 32 == 0:
                raw = G.quantize_q8_0(t.numpy())
                t.copy_(torch.tensor(G.dequantize_q8_0(raw, t.numel()).reshape(t.shape)))
            else:
                t.copy_(t.half().float())


# ---------------------------------------------------------- assistant (§6)

class Gemma4Assistant(nn.Module):
    """MTP drafter: Q-only layers over the target's donor-layer KV."""

    def __init__(self, cfg):
        super().__init__()
        assert cfg.n_embd_out and cfg.n_embd_out != cfg.n_embd
        self.cfg = cfg
        self.w = Weights()
        self.register_buffer("rope_freqs", torch.tensor(cfg.rope_freqs()))

    def init_random(self, seed=0):
        c = self.cfg
        g = np.random.default_rng(seed)
        E, B = c.n_embd, c.n_embd_out

        def mat(o, i, std=None):
            return g.standard_normal((o, i)) * (std if std is not None else 1.0 / math.sqrt(i))

        w = self.w
        w.set("token_embd.weight", g.standard_normal((c.n_vocab, E)) * 0.04)
        w.set("output_norm.weight", np.ones(E))
        w.set("nextn.pre_projection.weight", mat(E, 2 * B))
        w.set("nextn.post_projection.weight", mat(B, E))
        for il in range(c.n_layer):
            d, H, ff = c.head_dim(il), c.n_head, c.n_ff[il]
            p = "blk.%d." % il
            w.set(p + "attn_norm.weight", np.ones(E))
            w.set(p + "attn_q.weight", mat(H * d, E))
            w.set(p + "attn_q_norm.weight", np.full(d, d ** -0.25))
            w.set(p + "attn_output.weight", mat(E, H * d, 0.5 / math.sqrt(H * d)))
            w.set(p + "post_attention_norm.weight", np.full(E, 0.5))
            w.set(p + "layer_output_scale.weight", np.ones(1))
            w.set(p + "ffn_norm.weight", np.ones(E))
            w.set(p + "ffn_gate.weight", mat(ff, E))
            w.set(p + "ffn_up.weight", mat(ff, E))
            w.set(p + "ffn_down.weight", mat(E, ff, 0.5 / math.sqrt(ff)))
            w.set(p + "post_ffw_norm.weight", np.full(E, 0.5))
        return self

    def forward(self, target_embd, tokens, h_in, qpos, kv_swa, kv_full, cell_pos=None):
        """One draft step for a set of queries.

        target_embd: the target's token_embd.weight [V, n_backbone]
        tokens [B, N] ids; h_in [B, N, n_backbone]; qpos [B, N] query positions P
        kv_swa / kv_full: the target's (k, v) [B, Hkv, T, d] of its donor layers
        cell_pos: [T] positions of the cache cells (default 0..T-1).
        A query at P sees cells with p0 < P (cells 0..P-1 hold the target's
        KV), and on the SWA layer only P - p0 < n_swa (§6.4).
        Returns logits [B, N, V] (no softcap) and h_next [B, N, n_backbone].
        """
        c, w = self.cfg, self.w
        eps = c.eps
        B, N = tokens.shape
        nb = c.n_embd_out
        x = F.embedding(tokens, target_embd) * math.sqrt(nb)
        h = F.linear(torch.cat([x, h_in], dim=-1), w["nextn.pre_projection.weight"])
        T = kv_full[0].shape[2]
        if cell_pos is None:
            cell_pos = torch.arange(T)
        p0 = cell_pos.view(1, 1, 1, T)
        p1 = qpos.view(B, 1, N, 1)
        m_full = p0 < p1
        m_swa = m_full & ((p1 - p0) < c.n_swa)
        for il in range(c.n_layer):
            p = "blk.%d." % il
            swa = c.swa_pattern[il]
            d, H = c.head_dim(il), c.n_head
            base = c.rope_base_swa if swa else c.rope_base_full
            ff = None if swa else self.rope_freqs
            a = rmsw(h, w[p + "attn_norm.weight"], eps)
            q = F.linear(a, w[p + "attn_q.weight"]).view(B, N, H, d).transpose(1, 2)
            q = rope(rmsw(q, w[p + "attn_q_norm.weight"], eps), qpos.view(B, 1, N), base, ff)
            k, v = kv_swa if swa else kv_full
            o = attention(q, k, v, m_swa if swa else m_full).transpose(1, 2).reshape(B, N, H * d)
            h1 = h + rmsw(F.linear(o, w[p + "attn_output.weight"]), w[p + "post_attention_norm.weight"], eps)
            f = rmsw(h1, w[p + "ffn_norm.weight"], eps)
            mm = F.linear(gelu(F.linear(f, w[p + "ffn_gate.weight"])) * F.linear(f, w[p + "ffn_up.weight"]),
                          w[p + "ffn_down.weight"])
            h2 = h1 + rmsw(mm, w[p + "post_ffw_norm.weight"], eps)
            h = h2 * w[p + "layer_output_scale.weight"]
        y = rmsw(h, w["output_norm.weight"], eps)
        logits = F.linear(y, w["token_embd.weight"])
        h_next = F.linear(y, w["nextn.post_projection.weight"])
        return logits, h_next

    def metadata(self):
        c = self.cfg
        base = Gemma4.metadata(self, arch="gemma4-assistant")
        base = [(k, v) for k, v in base if not k.endswith("embedding_length_per_layer_input")]
        base += [
            ("gemma4-assistant.embedding_length_per_layer_input", G.u32(0)),
            ("gemma4-assistant.embedding_length_out", G.u32(c.n_embd_out)),
            ("gemma4-assistant.nextn_predict_layers", G.u32(c.n_layer)),
        ]
        return base

    def save_gguf(self, path, vocab, name, matrix_type=G.GGML_F16, extra_kv=()):
        write_gguf(path, "gemma4-assistant", name, self.metadata(), vocab, self.w, self.rope_freqs,
                   matrix_type, extra_kv)

    @classmethod
    def from_gguf(cls, path):
        r = G.GGUFReader(path)
        cfg = config_from_metadata(r.metadata, "gemma4-assistant")
        m = cls(cfg)
        for n in r.tensor_order:
            if n == "rope_freqs.weight":
                m.rope_freqs.copy_(torch.tensor(r.tensor(n)))
            else:
                m.w.set(n, r.tensor(n), trainable=False)
        return m


def draft(target, assistant, tokens, n_draft):
    """Reference draft round (§6.5) for one sequence.

    tokens: list of ids; the target's KV holds tokens[:-1] (positions
    0..P-1, P = len(tokens)-1) and id_last = tokens[-1] sits at position P.
    Step 0 uses h = the target's y at position P-1; each later step feeds the
    previous drafted token and the previous step's h_next, position stays P.
    Returns (drafted ids, list of logits rows)."""
    with torch.no_grad():
        ctx = torch.tensor([tokens[:-1]])
        P = ctx.shape[1]
        _, y, kv = target(ctx, return_kv=True)
        ls, lf = target.donor_layers()
        h = y[:, -1:, :]
        tok = tokens[-1]
        out, rows = [], []
        for _ in range(n_draft):
            logits, h = assistant(target.w["token_embd.weight"], torch.tensor([[tok]]), h,
                                  torch.tensor([[P]]), kv[ls], kv[lf])
            rows.append(logits[0, 0])
            tok = int(logits[0, 0].argmax())
            out.append(tok)
        return out, rows
