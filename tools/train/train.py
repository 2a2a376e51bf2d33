"""Train eliza-1-nano: BPE vocab, a small Gemma 4 E-style target and its MTP
drafter, then write the GGUF bundle, manifest and reference test data.

    /usr/bin/python3 tools/train/train.py --out models/eliza-1-nano

Stages (each skipped when its output already exists in --work, unless
--force): vocab -> tokens -> target -> drafter -> export. Everything is
seeded; see README.md for the measured wall time.
"""

import argparse
import glob
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import gguf_io as G  # noqa: E402
from gemma4_ref import Config, Gemma4, Gemma4Assistant, draft, round_to_stored  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CORPUS = os.path.abspath(os.path.join(ROOT, "..", "shared", "data", "corpus"))

# sampling weights of the training files (by file name); the rest get 0.05
MIX = {"austen5.txt": 0.34, "foldoc.txt": 0.24, "web_bible.txt": 0.10, "fortunes.txt": 0.10,
       "jargon.txt": 0.14, "devil.txt": 0.08}

TARGET_SEED, DRAFTER_SEED, DATA_SEED = 1234, 4321, 99


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def target_config(n_vocab):
    # s s s f | s s s f ; layers 4..7 share KV of layer 2 (SWA) / 3 (full)
    return Config(n_vocab=n_vocab, n_embd=256, swa_pattern=[1, 1, 1, 0, 1, 1, 1, 0], n_head=4,
                  n_head_kv=[2, 2, 2, 1, 2, 2, 2, 1], head_dim_swa=64, head_dim_full=128,
                  n_swa=128, n_ff=[512] * 4 + [1024] * 4, n_shared_kv=4, n_pl=32,
                  context_length=2048)


def drafter_config(tcfg):
    ls = tcfg.kv_source(tcfg.n_layer - 2)
    lf = tcfg.kv_source(tcfg.n_layer - 1)
    return Config(n_vocab=tcfg.n_vocab, n_embd=128, swa_pattern=[1, 0], n_head=4,
                  n_head_kv=[tcfg.n_head_kv[ls], tcfg.n_head_kv[lf]],
                  head_dim_swa=tcfg.head_dim_swa, head_dim_full=tcfg.head_dim_full,
                  n_swa=tcfg.n_swa, n_ff=512, n_shared_kv=2, n_pl=0,
                  context_length=tcfg.context_length, n_embd_out=tcfg.n_embd)


# ---------------------------------------------------------------- data

def load_tokens(vocab, work):
    out = {}
    for p in sorted(glob.glob(os.path.join(CORPUS, "train", "*.txt"))):
        name = os.path.basename(p)
        cache = os.path.join(work, "tok_" + name + ".npy")
        if not os.path.exists(cache):
            with open(p, encoding="utf-8") as f:
                ids = vocab.encode(f.read())
            np.save(cache, np.array(ids, dtype=np.int16))
        out[name] = np.load(cache).astype(np.int64)
    return out


class Sampler:
    """BOS + T-1 tokens from a random offset of a file chosen by MIX."""

    def __init__(self, toks, T, seed):
        self.names = sorted(toks)
        self.toks = toks
        w = np.array([MIX.get(n, 0.05) for n in self.names])
        self.p = w / w.sum()
        self.T = T
        self.rng = np.random.default_rng(seed)

    def batch(self, B):
        rows = []
        for _ in range(B):
            a = self.toks[self.names[self.rng.choice(len(self.names), p=self.p)]]
            o = int(self.rng.integers(0, len(a) - self.T))
            rows.append(np.concatenate([[bpe.BOS_ID], a[o:o + self.T]]))
        return torch.tensor(np.stack(rows))     # [B, T+1]


def eval_bpb(model, vocab, path, T=256, max_chunks=None):
    """Bits per byte of a file: non-overlapping chunks of BOS + T-1 tokens."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    ids = vocab.encode(text)
    n_bytes = len(text.encode("utf-8"))
    chunks = [ids[i:i + T - 1] for i in range(0, len(ids), T - 1)]
    if max_chunks:
        chunks = chunks[:max_chunks]
        n_bytes = len(vocab.decode([t for c in chunks for t in c]).encode("utf-8"))
    nll, ntok = 0.0, 0
    model.eval()
    with torch.no_grad():
        for i in range(0, len(chunks), 16):
            group = chunks[i:i + 16]
            L = max(len(c) for c in group)
            x = torch.full((len(group), L + 1), bpe.PAD_ID, dtype=torch.long)
            tgt = torch.full((len(group), L), -100, dtype=torch.long)
            for j, c in enumerate(group):
                x[j, 0] = bpe.BOS_ID
                x[j, 1:len(c) + 1] = torch.tensor(c)
                tgt[j, :len(c)] = torch.tensor(c)
            logits, _ = model(x[:, :-1])
            nll += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                                   ignore_index=-100, reduction="sum").item()
            ntok += int((tgt >= 0).sum())
    model.train()
    return nll / ntok, nll / math.log(2) / n_bytes


def lr_at(step, total, peak, warmup, decay):
    """Warmup, constant, then linear decay to 0.1*peak over the last `decay`
    steps. The learning rate of a step does not depend on `total` until the
    decay starts, so a run can be extended from a checkpoint and still equal
    a fresh run with the final --target-steps."""
    if step < warmup:
        return peak * (step + 1) / warmup
    start = total - decay
    if step < start:
        return peak
    return peak * (1.0 - 0.9 * (step - start + 1) / decay)


def make_optimizer(model, lr):
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.dim() >= 2 else no_decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


# -------------------------------------------------------------- target

def train_target(vocab, toks, a, work):
    ckpt = os.path.join(work, "target.pt")
    total = max(a.target_steps, a.target_steps2)
    cfg = target_config(len(vocab))
    torch.manual_seed(TARGET_SEED)
    model = Gemma4(cfg).init_random(TARGET_SEED)
    opt = make_optimizer(model, a.lr)
    state = {"step": 0, "log": [], "seconds": 0.0}
    if os.path.exists(ckpt):
        s = torch.load(ckpt)
        model.load_state_dict(s["model"])
        opt.load_state_dict(s["opt"])
        state = s["state"]
        if state["step"] >= total:
            log("target: checkpoint complete (%d steps)" % state["step"])
            return model, state
        log("target: resuming at step %d" % state["step"])
    n_params = sum(p.numel() for p in model.parameters())
    log("target: %d parameters" % n_params)
    sampler = Sampler(toks, a.seq, DATA_SEED)
    for _ in range(state["step"]):         # replay the data stream on resume
        sampler.batch(a.batch)
    persuasion = os.path.join(CORPUS, "eval", "austen_persuasion.txt")
    t0 = time.time() - state["seconds"]
    model.train()
    while state["step"] < total:
        step = state["step"]
        for g in opt.param_groups:
            if step < a.target_steps:
                g["lr"] = lr_at(step, a.target_steps, a.lr, a.warmup, a.decay_steps)
            else:      # optional second cycle: re-warm to --lr2, constant, decay
                g["lr"] = lr_at(step - a.target_steps, total - a.target_steps, a.lr2, 10, a.decay_steps)
        x = sampler.batch(a.batch)
        logits, _ = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state["step"] = step + 1
        state["log"].append(round(loss.item(), 4))
        if state["step"] % 25 == 0:
            log("target step %d loss %.3f (avg25 %.3f) %.0fs" % (
                state["step"], loss.item(), np.mean(state["log"][-25:]), time.time() - t0))
        if state["step"] % a.ckpt_every == 0 or state["step"] == total:
            state["seconds"] = time.time() - t0
            if state["step"] % (2 * a.ckpt_every) == 0:
                nll, bpb = eval_bpb(model, vocab, persuasion, max_chunks=24)
                log("target step %d: persuasion (first 24 chunks) nll %.3f bpb %.3f" % (state["step"], nll, bpb))
                t0 -= 0  # eval time counts in the wall time
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
    return model, state


# ------------------------------------------------------------- drafter

def target_outputs(target, x):
    """Frozen target on x [B, T]: soft targets, greedy ids, y, donor KV."""
    with torch.no_grad():
        logits, y, kv = target(x, return_kv=True)
        ls, lf = target.donor_layers()
        return logits, y, kv[ls], kv[lf]


def drafter_loss(target, drafter, x, n_steps, return_acc=False):
    """Train all draft positions of a batch in parallel (§6.5).

    For a query position P (1 <= P < T - n_steps) the target's KV holds
    0..P-1, id_last = x[P] and h = y[P-1]. Step i (0-based) feeds token
    x[P+i] (teacher forcing; step i>0 uses the previous step's h_next), stays
    at position P, and must predict the target's next-token distribution at
    position P+i (its greedy token there is the label for agreement)."""
    B, T = x.shape
    logits_t, y, kv_s, kv_f = target_outputs(target, x)
    N = T - n_steps - 1
    P = torch.arange(1, N + 1)
    qpos = P.view(1, N).expand(B, N)
    h = y[:, 0:N, :]
    temb = target.w["token_embd.weight"]
    loss, accs = 0.0, []
    for i in range(n_steps):
        tok = x[:, 1 + i:N + 1 + i]
        lt = logits_t[:, 1 + i:N + 1 + i, :]
        ld, h = drafter(temb, tok, h, qpos, kv_s, kv_f)
        pt = torch.softmax(lt, dim=-1)
        loss = loss + (-(pt * torch.log_softmax(ld, dim=-1)).sum(-1)).mean()
        accs.append((ld.argmax(-1) == lt.argmax(-1)).float().mean().item())
    loss = loss / n_steps
    return (loss, accs) if return_acc else loss


def train_drafter(target, toks, a, work):
    ckpt = os.path.join(work, "drafter.pt")
    cfg = drafter_config(target.cfg)
    torch.manual_seed(DRAFTER_SEED)
    d = Gemma4Assistant(cfg).init_random(DRAFTER_SEED)
    # start the drafter's tied head from the target's embedding, projected
    with torch.no_grad():
        E = target.w["token_embd.weight"]
        U, S, _ = torch.linalg.svd(E, full_matrices=False)
        W = U[:, :cfg.n_embd] * S[:cfg.n_embd]
        d.w["token_embd.weight"].copy_(W * (0.04 / W.std()))
    for p in target.parameters():
        p.requires_grad_(False)
    opt = make_optimizer(d, a.draft_lr)
    state = {"step": 0, "log": [], "seconds": 0.0}
    if os.path.exists(ckpt):
        s = torch.load(ckpt)
        d.load_state_dict(s["model"])
        opt.load_state_dict(s["opt"])
        state = s["state"]
        if state["step"] >= a.drafter_steps:
            log("drafter: checkpoint complete (%d steps)" % state["step"])
            return d, state
    log("drafter: %d parameters" % sum(p.numel() for p in d.parameters()))
    sampler = Sampler(toks, a.seq, DATA_SEED + 1)
    for _ in range(state["step"]):
        sampler.batch(a.draft_batch)
    t0 = time.time() - state["seconds"]
    target.eval()
    while state["step"] < a.drafter_steps:
        step = state["step"]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.drafter_steps, a.draft_lr, a.draft_warmup, a.draft_decay_steps)
        x = sampler.batch(a.draft_batch)
        loss, accs = drafter_loss(target, d, x, a.draft_steps, return_acc=True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(d.parameters(), 1.0)
        opt.step()
        state["step"] = step + 1
        state["log"].append([round(loss.item(), 4)] + [round(v, 4) for v in accs])
        if state["step"] % 25 == 0:
            log("drafter step %d loss %.3f top1 per step %s %.0fs" % (
                state["step"], loss.item(), ["%.3f" % v for v in accs], time.time() - t0))
        if state["step"] % a.ckpt_every == 0 or state["step"] == a.drafter_steps:
            state["seconds"] = time.time() - t0
            torch.save({"model": d.state_dict(), "opt": opt.state_dict(), "state": state}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
    return d, state


def drafter_eval(target, drafter, vocab, path, n_seq=16, T=256, n_steps=3, seed=7):
    """Top-1 agreement with the target per draft step on held-out text."""
    with open(path, encoding="utf-8") as f:
        ids = vocab.encode(f.read())
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_seq):
        o = int(rng.integers(0, len(ids) - T))
        rows.append([bpe.BOS_ID] + ids[o:o + T - 1])
    x = torch.tensor(rows)
    with torch.no_grad():
        _, accs = drafter_loss(target, drafter, x, n_steps, return_acc=True)
    return accs


def greedy_generate(model, ids, n):
    ids = list(ids)
    with torch.no_grad():
        for _ in range(n):
            logits, _ = model(torch.tensor([ids]))
            ids.append(int(logits[0, -1].argmax()))
    return ids


def speculative_acceptance(target, drafter, vocab, path, n_prompts=4, prompt_len=64, n_gen=48,
                           n_draft=3, seed=11):
    """Greedy speculative decoding (§6.5): fraction of drafted tokens the
    target accepts, and mean tokens per target verification."""
    with open(path, encoding="utf-8") as f:
        ids = vocab.encode(f.read())
    rng = np.random.default_rng(seed)
    drafted = accepted = rounds = produced = 0
    with torch.no_grad():
        for _ in range(n_prompts):
            o = int(rng.integers(0, len(ids) - prompt_len))
            seq = [bpe.BOS_ID] + ids[o:o + prompt_len - 1]
            logits, _ = target(torch.tensor([seq]))
            seq.append(int(logits[0, -1].argmax()))       # id_last
            start = len(seq)
            while len(seq) - start < n_gen:
                d, _ = draft(target, drafter, seq, n_draft)
                logits, _ = target(torch.tensor([seq + d]))
                P = len(seq) - 1
                n_acc = 0
                for i in range(n_draft):
                    if int(logits[0, P + i].argmax()) == d[i]:
                        n_acc += 1
                    else:
                        break
                new = d[:n_acc] + [int(logits[0, P + n_acc].argmax())]
                seq += new
                drafted += n_draft
                accepted += n_acc
                rounds += 1
                produced += len(new)
    return accepted / drafted, produced / rounds


# -------------------------------------------------------------- export

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


REF_SEED = 5


def ref_tokens(vocab, n=64):
    """The fixed reference sequence: <bos> + the first n-1 tokens of a fixed
    sentence block of the held-out Persuasion text (offset chosen by REF_SEED)."""
    with open(os.path.join(CORPUS, "eval", "austen_persuasion.txt"), encoding="utf-8") as f:
        text = f.read()
    off = np.random.default_rng(REF_SEED).integers(0, len(text) - 4000)
    start = text.index("\n", int(off)) + 1
    return [bpe.BOS_ID] + vocab.encode(text[start:start + 2000])[:n - 1]


def write_reference_data(text_path, draft_path, vocab, out_prefix, n_draft=3):
    """Reference logits of the models AS STORED (dequantized), in float32."""
    t = Gemma4.from_gguf(text_path)
    d = Gemma4Assistant.from_gguf(draft_path)
    toks = ref_tokens(vocab)
    os.makedirs(os.path.dirname(os.path.abspath(out_prefix)), exist_ok=True)
    with torch.no_grad():
        logits, _ = t(torch.tensor([toks]))
    with open(out_prefix + ".tokens.txt", "w") as f:
        f.write(" ".join(str(i) for i in toks) + "\n")
    logits[0].numpy().astype("<f4").tofile(out_prefix + ".logits.f32")
    # draft case: the target's KV holds toks[:32] (positions 0..31), id_last =
    # toks[32] at P = 32, h = target y at position 31; n_draft greedy steps.
    case = toks[:33]
    ids, rows = draft(t, d, case, n_draft)
    torch.stack(rows).numpy().astype("<f4").tofile(out_prefix + ".draft.logits.f32")
    with open(out_prefix + ".draft.txt", "w") as f:
        f.write("# target KV: tokens[0:32] of nano_ref.tokens.txt at positions 0..31\n")
        f.write("# id_last = tokens[32] at position P = 32, h_in = target y (post output_norm) at position 31\n")
        f.write("# step i>0 feeds the argmax of step i-1 and h_next of step i-1, position stays 32\n")
        f.write("n_ctx 32\nid_last %d\nn_draft %d\ndrafted %s\n" % (case[-1], n_draft, " ".join(map(str, ids))))
    return toks, ids


def write_model_readme(m, path, tcfg, dcfg):
    tr = m["training"]
    t, d = tr["target"], tr["drafter"]
    ev = t["eval"]
    lines = [
        "# eliza-1-nano",
        "",
        "A tiny Gemma 4 \"E-model\" (every E2B/E4B feature) and its gemma4-assistant MTP drafter, trained",
        "from scratch on CPU by `tools/train/train.py` on the public-domain / free texts of",
        "`../shared/data/corpus/train` (Austen, World English Bible, FOLDOC, Jargon File, Devil's",
        "Dictionary, fortunes). It is a demo model: it writes plausible-looking English, not sense.",
        "",
        "| file | what | size |",
        "|---|---|---|",
    ]
    for f in m["files"]:
        lines.append("| `%s` | %s (%s matrices, F32 norms) | %d B |" % (f["path"], f["role"], f["matrix_type"], f["size"]))
    lines += [
        "",
        "## Geometry",
        "",
        "Target (`general.architecture = gemma4`): vocab %d (gemma4-format BPE, byte fallback), n_embd %d,"
        % (tcfg.n_vocab, tcfg.n_embd),
        "%d layers `%s` (s = sliding window %d, f = full), %d heads, KV heads %s, head dim %d (SWA) / %d (full),"
        % (tcfg.n_layer, "".join("s" if x else "f" for x in tcfg.swa_pattern), tcfg.n_swa, tcfg.n_head,
           tcfg.n_head_kv, tcfg.head_dim_swa, tcfg.head_dim_full),
        "proportional RoPE on full layers (rope_freqs: %d of %d pairs rotate, base 1e6; SWA base 1e4),"
        % (int(tcfg.head_dim_full * tcfg.partial_rotary_full / 2), tcfg.head_dim_full // 2),
        "last %d layers KV-shared (read layer %d / %d), n_ff %s (double-wide on the shared layers),"
        % (tcfg.n_shared_kv, tcfg.kv_source(tcfg.n_layer - 2), tcfg.kv_source(tcfg.n_layer - 1), tcfg.n_ff),
        "per-layer embeddings %d, learned layer_output_scale, tied head, final softcap %g, context %d"
        % (tcfg.n_pl, tcfg.softcap, tcfg.context_length),
        "(trained on %d-token sequences). Parameters: %d." % (t["seq_len"], t["parameters"]),
        "",
        "Drafter (`gemma4-assistant`): %d layers `%s`, n_embd %d, embedding_length_out %d, %d heads, n_ff %d,"
        % (dcfg.n_layer, "".join("s" if x else "f" for x in dcfg.swa_pattern), dcfg.n_embd, dcfg.n_embd_out,
           dcfg.n_head, dcfg.n_ff[0]),
        "Q-only layers over the target's KV of layers %d (SWA) and %d (full), own tied head, no softcap."
        % (tcfg.kv_source(tcfg.n_layer - 2), tcfg.kv_source(tcfg.n_layer - 1)),
        "Parameters: %d." % d["parameters"],
        "",
        "## Training",
        "",
        "`%s` (fixed seeds %s; 2 CPU threads shared with other work)." % (tr["command"], tr["seeds"]),
        "",
        "- target: %d steps x %d sequences x %d tokens = %d tokens seen (sampling weights %s), AdamW,"
        % (t["steps"], t["batch"], t["seq_len"], t["tokens_seen"], tr["sampling_weights"]),
        "  peak lr %g, warmup 40, constant, linear decay over the last steps; wall time %d s." % (t["lr"], t["wall_seconds"]),
        "- drafter: %d steps x %d sequences; %d draft steps per position with teacher forcing, trained on"
        % (d["steps"], d["batch"], d["draft_steps"]),
        "  the frozen target's next-token distributions (soft cross-entropy), its final hidden state and",
        "  its donor KV, position constant across draft steps (spec 6.5); wall time %d s." % d["wall_seconds"],
        "",
        "## Measured (models as stored in the GGUF files)",
        "",
        "| text | loss (nats/token) | bits per byte |",
        "|---|---|---|",
        "| train: last 50 steps, mean training loss | %.3f | |" % t["final_train_loss_avg50"],
        "| train: austen5.txt, first chunks | %.3f | %.3f |" % (t["austen5_train_loss"], t["austen5_train_bits_per_byte"]),
    ]
    for k, v in ev.items():
        lines.append("| held out: eval/%s (%s chunks of 255 tokens) | %.3f | %.3f |" % (
            k, v["chunks_of_255_tokens"], v["loss_nats_per_token"], v["bits_per_byte"]))
    lines += [
        "",
        "Drafter top-1 agreement with the target's greedy token, per draft step (teacher-forced, held out):",
        "Persuasion %s, FOLDOC test %s." % (d["top1_agreement_per_step_persuasion"], d["top1_agreement_per_step_foldoc"]),
        "Greedy speculative decoding with 3 drafted tokens per round on Persuasion prompts: acceptance rate",
        "%.3f of drafted tokens, %.2f tokens per target verification." % (
            d["greedy_speculative_acceptance_persuasion"], d["tokens_per_target_round"]),
        "",
        "Greedy text from this small model quickly falls into loops (see the samples), which inflates the",
        "greedy acceptance rate; the teacher-forced agreement above is the fairer number.",
        "",
        "The C engine reproduces the PyTorch reference (tools/train/gemma4_ref.py) on these files: see",
        "tools/train/README.md and tests/data/nano_ref.*.",
        "",
        "## Greedy samples (target, from `<bos>` + prompt)",
        "",
    ]
    for s in m["samples"]:
        lines.append("- `%s` -> %s" % (s["prompt"], json.dumps(s["greedy"], ensure_ascii=False)))
    lines.append("")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines))
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "eliza-1-nano"))
    ap.add_argument("--work", default=os.path.join("/tmp", "eliza-1-nano-work"))
    ap.add_argument("--stage", default="all", choices=["all", "vocab", "target", "drafter", "export"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--decay-steps", type=int, default=35)
    ap.add_argument("--draft-decay-steps", type=int, default=40)
    ap.add_argument("--draft-warmup", type=int, default=10)
    ap.add_argument("--target-steps", type=int, default=160)
    ap.add_argument("--target-steps2", type=int, default=310, help="total steps incl. a second lr cycle (0 = none)")
    ap.add_argument("--lr2", type=float, default=1.5e-3)
    ap.add_argument("--drafter-steps", type=int, default=190)
    ap.add_argument("--draft-batch", type=int, default=4)
    ap.add_argument("--draft-lr", type=float, default=3e-3)
    ap.add_argument("--draft-steps", type=int, default=3)
    ap.add_argument("--ckpt-every", type=int, default=25)
    ap.add_argument("--matrix-type", default="F16", choices=["F16", "Q8_0"])
    ap.add_argument("--eval-chunks", type=int, default=0, help="eval on the first N chunks of 255 tokens (0 = whole file)")
    ap.add_argument("--testdata", default=os.path.join(ROOT, "tests", "data", "nano_ref"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    os.makedirs(a.work, exist_ok=True)
    t_start = time.time()

    vpath = os.path.join(a.work, "vocab.gguf")
    if not os.path.exists(vpath):
        v = bpe.train_bpe(bpe.train_files(CORPUS), a.vocab_size, log=log)
        v.save(vpath)
    vocab = bpe.Vocab.load(vpath)
    log("vocab: %d tokens, %d merges" % (len(vocab), len(vocab.merges)))
    if a.stage == "vocab":
        return
    toks = load_tokens(vocab, a.work)
    log("tokens: %s" % {k: len(v) for k, v in toks.items()})

    target, tstate = train_target(vocab, toks, a, a.work)
    if a.stage == "target":
        return
    drafter, dstate = train_drafter(target, toks, a, a.work)
    if a.stage == "drafter":
        return

    # ---- export
    mt = {"F16": G.GGML_F16, "Q8_0": G.GGML_Q8_0}[a.matrix_type]
    text_path = os.path.join(a.out, "text", "eliza-1-nano.gguf")
    draft_path = os.path.join(a.out, "mtp", "drafter-nano.gguf")
    target.save_gguf(text_path, vocab, "eliza-1-nano", mt)
    drafter.save_gguf(draft_path, vocab, "eliza-1-nano-drafter", mt)
    log("wrote %s (%d B), %s (%d B)" % (text_path, os.path.getsize(text_path), draft_path, os.path.getsize(draft_path)))

    # evaluate the models as stored
    t_st = Gemma4.from_gguf(text_path)
    d_st = Gemma4Assistant.from_gguf(draft_path)
    evals = {}
    for name in ("austen_persuasion.txt", "foldoc_test.txt"):
        nll, bpb = eval_bpb(t_st, vocab, os.path.join(CORPUS, "eval", name), max_chunks=a.eval_chunks or None)
        evals[name] = {"loss_nats_per_token": round(nll, 4), "bits_per_byte": round(bpb, 4),
                       "chunks_of_255_tokens": a.eval_chunks or "all"}
        log("eval %s: loss %.4f bpb %.4f" % (name, nll, bpb))
    tr_nll, tr_bpb = eval_bpb(t_st, vocab, os.path.join(CORPUS, "train", "austen5.txt"), max_chunks=48)
    agree = drafter_eval(t_st, d_st, vocab, os.path.join(CORPUS, "eval", "austen_persuasion.txt"),
                         n_steps=a.draft_steps)
    agree_f = drafter_eval(t_st, d_st, vocab, os.path.join(CORPUS, "eval", "foldoc_test.txt"),
                           n_steps=a.draft_steps)
    acc_rate, tok_per_round = speculative_acceptance(
        t_st, d_st, vocab, os.path.join(CORPUS, "eval", "austen_persuasion.txt"),
        n_prompts=1 if a.eval_chunks and a.eval_chunks < 10 else 4,
        n_gen=8 if a.eval_chunks and a.eval_chunks < 10 else 48)
    log("drafter top-1 agreement per step: persuasion %s foldoc %s; greedy spec acceptance %.3f (%.2f tok/round)"
        % (agree, agree_f, acc_rate, tok_per_round))
    samples = []
    for prompt in ["It is a truth universally acknowledged", "The computer", "In the beginning"]:
        ids = greedy_generate(t_st, vocab.encode(prompt, add_bos=True), 40)
        samples.append({"prompt": prompt, "greedy": vocab.decode(ids[1:])})

    toks_ref, drafted = write_reference_data(text_path, draft_path, vocab, a.testdata)

    manifest = {
        "name": "eliza-1-nano",
        "tier": "nano",
        "tokenizer": {"family": "gemma4", "n_vocab": len(vocab), "n_merges": len(vocab.merges)},
        "files": [],
        "training": {
            "command": "/usr/bin/python3 tools/train/train.py --out models/eliza-1-nano",
            "corpus_files": [os.path.relpath(p, os.path.join(ROOT, "..")) for p in bpe.train_files(CORPUS)],
            "sampling_weights": MIX,
            "seeds": {"target": TARGET_SEED, "drafter": DRAFTER_SEED, "data": DATA_SEED},
            "target": {"steps": tstate["step"], "batch": a.batch, "seq_len": a.seq, "lr": a.lr,
                       "schedule": {"cycle1_steps": a.target_steps, "warmup": a.warmup, "decay_steps": a.decay_steps,
                                    "cycle2_total_steps": a.target_steps2, "lr2": a.lr2},
                       "tokens_seen": tstate["step"] * a.batch * a.seq,
                       "parameters": int(sum(p.numel() for p in target.parameters())),
                       "wall_seconds": round(tstate["seconds"]),
                       "final_train_loss_avg50": round(float(np.mean(tstate["log"][-50:])), 4),
                       "austen5_train_loss": round(tr_nll, 4),
                       "austen5_train_chunks": 48,
                       "austen5_train_bits_per_byte": round(tr_bpb, 4),
                       "eval": evals},
            "drafter": {"steps": dstate["step"], "batch": a.draft_batch, "draft_steps": a.draft_steps,
                        "parameters": int(sum(p.numel() for p in drafter.parameters())),
                        "wall_seconds": round(dstate["seconds"]),
                        "top1_agreement_per_step_persuasion": [round(v, 4) for v in agree],
                        "top1_agreement_per_step_foldoc": [round(v, 4) for v in agree_f],
                        "greedy_speculative_acceptance_persuasion": round(acc_rate, 4),
                        "tokens_per_target_round": round(tok_per_round, 3)},
            "total_wall_seconds_this_run": round(time.time() - t_start),
        },
        "samples": samples,
    }
    for role, p in (("text", text_path), ("drafter", draft_path)):
        manifest["files"].append({"role": role, "path": os.path.relpath(p, a.out),
                                  "size": os.path.getsize(p), "sha256": sha256(p),
                                  "matrix_type": a.matrix_type})
    mpath = os.path.join(a.out, "eliza-1.manifest.json")
    with open(mpath + ".tmp", "w") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(mpath + ".tmp", mpath)
    log("wrote %s" % mpath)
    write_model_readme(manifest, os.path.join(a.out, "README.md"), target.cfg, drafter.cfg)
    print(json.dumps(manifest["training"], indent=1))


if __name__ == "__main__":
    main()
