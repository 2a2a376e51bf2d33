"""SentencePiece-style BPE tokenizer in the Gemma 4 GGUF format.

Training (`train_bpe`) and encoding follow ../shared/spec/gemma4.md section 7:
  * raw UTF-8 characters, ' ' escaped as U+2581 (no GPT-2 byte mapping);
  * byte fallback tokens <0x00>..<0xFF> (type BYTE);
  * the Gemma 4 special tokens by name (CONTROL / USER_DEFINED);
  * runs of '\n' are split from other text; newline runs and runs of U+2581
    exist as tokens (built through merges ranked first, as in Gemma's vocab);
  * BPE repeatedly merges the adjacent pair with the lowest merge rank.

Digits never take part in a merge (as in Gemma, every digit is its own token).

Training counts "words" (`WORD_RE` below): optional leading U+2581s followed
by letters, or by punctuation/symbols; a run of U+2581; or a single digit. No
learned merge can join two such words (a merged piece never has a non-space
character followed by U+2581, never mixes letters with punctuation and never
contains a digit), so BPE on words
gives exactly the same result as BPE over the whole newline-free run that the
spec describes; `encode_reference` implements the latter literally and the
self-test checks that both agree.

CLI:  python3 bpe.py --out vocab.gguf [--vocab-size 8192] [corpus files...]
"""

import argparse
import collections
import glob
import heapq
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as G  # noqa: E402

SPACE = "\u2581"

TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE = 1, 2, 3, 4, 5, 6

CONTROL_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>",
                  "<|turn>", "<turn|>", "<|think|>", "<|tool>", "<tool|>"]
USER_DEFINED_TOKENS = ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>",
                       "<|tool_response>", "<tool_response|>", '<|"|>']
PAD_ID, EOS_ID, BOS_ID, UNK_ID, MASK_ID = 0, 1, 2, 3, 4
MAX_RUN = 31          # longest newline / space run that is a single token

# letters (with leading spaces) | punctuation/symbols (with leading spaces) | spaces | one digit
WORD_RE = re.compile("%s*[^\\W\\d_]+|%s*(?:[^\\w%s]|_)+|%s+|\\d" % (SPACE, SPACE, SPACE, SPACE))


def is_digit_piece(s):
    return any(c.isdigit() for c in s)


# ------------------------------------------------------------------- training

def _iter_runs(text):
    """Escaped, newline-free runs of text (newline runs are dropped)."""
    for line in text.split("\n"):
        if line:
            yield line.replace(" ", SPACE)


def count_words(paths):
    words = collections.Counter()
    chars = collections.Counter()
    for p in paths:
        with open(p, "r", encoding="utf-8", errors="replace") as f:
            text = f.read()
        for run in _iter_runs(text):
            words.update(WORD_RE.findall(run))
    for w, c in words.items():
        for ch in w:
            chars[ch] += c
    return words, chars


def _seed_merges():
    """Merges that build newline runs and U+2581 runs (ranked first)."""
    merges = []
    for ch in ("\n", SPACE):
        for n in range(MAX_RUN, 1, -1):
            for a in range(n - 1, 0, -1):
                merges.append((ch * a, ch * (n - a)))
    return merges


def train_bpe(paths, vocab_size=8192, min_char_count=50, min_word_count=2, log=print):
    words, chars = count_words(paths)
    tokens, types = [], []

    def add(piece, tt):
        tokens.append(piece)
        types.append(tt)

    for t in CONTROL_TOKENS:
        add(t, TT_CONTROL)
    for t in USER_DEFINED_TOKENS:
        add(t, TT_USER_DEFINED)
    for b in range(256):
        add("<0x%02X>" % b, TT_BYTE)
    for n in range(1, MAX_RUN + 1):
        add("\n" * n, TT_NORMAL)
    for n in range(1, MAX_RUN + 1):
        add(SPACE * n, TT_NORMAL)
    present = set(tokens)
    for ch, c in chars.most_common():
        if c < min_char_count:
            break
        if ch not in present and ch != "\n":
            add(ch, TT_NORMAL)
            present.add(ch)
    merges = _seed_merges()
    n_base = len(tokens)
    log("bpe: %d distinct words, %d distinct chars, %d base tokens" % (len(words), len(chars), n_base))

    # symbols as ints; -1 = a character without a token (never merges)
    sym_id = {}
    sym_str = []

    def sid(s):
        i = sym_id.get(s)
        if i is None:
            i = len(sym_str)
            sym_id[s] = i
            sym_str.append(s)
        return i

    seed_rank = {m: r for r, m in enumerate(merges)}
    wlist, wcount = [], []
    for w, c in words.items():
        if c < min_word_count:
            continue
        syms = _bpe_pieces(list(w), seed_rank)
        wlist.append([sid(s) if s in present else -1 for s in syms])
        wcount.append(c)

    mergeable = [True] * len(sym_str)

    def can(a):
        return a >= 0 and mergeable[a]

    for s, i in sym_id.items():
        mergeable[i] = not is_digit_piece(s)

    pair_count = collections.defaultdict(int)
    pair_words = collections.defaultdict(set)
    for wi, syms in enumerate(wlist):
        c = wcount[wi]
        for a, b in zip(syms, syms[1:]):
            if can(a) and can(b):
                pair_count[(a, b)] += c
                pair_words[(a, b)].add(wi)
    heap = [(-c, sym_str[a], sym_str[b], a, b) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)

    while len(tokens) < vocab_size and heap:
        negc, _, _, a, b = heapq.heappop(heap)
        c = pair_count.get((a, b), 0)
        if c <= 0:
            continue
        if -negc != c:           # stale entry: push the current count back
            heapq.heappush(heap, (-c, sym_str[a], sym_str[b], a, b))
            continue
        new = sym_str[a] + sym_str[b]
        merges.append((sym_str[a], sym_str[b]))
        if new not in present:
            add(new, TT_NORMAL)
            present.add(new)
        n = sid(new)
        if n >= len(mergeable):
            mergeable.append(True)
        changed = collections.defaultdict(int)
        for wi in list(pair_words.pop((a, b), ())):
            syms = wlist[wi]
            wc = wcount[wi]
            i = 0
            out = []
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(n)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            # remove old pairs, add new pairs
            for x, y in zip(syms, syms[1:]):
                if can(x) and can(y):
                    pair_count[(x, y)] -= wc
                    changed[(x, y)] += 0
            for x, y in zip(out, out[1:]):
                if can(x) and can(y):
                    pair_count[(x, y)] += wc
                    pair_words[(x, y)].add(wi)
                    changed[(x, y)] += 0
            wlist[wi] = out
        pair_count.pop((a, b), None)
        for p in changed:
            cc = pair_count.get(p, 0)
            if cc > 0:
                heapq.heappush(heap, (-cc, sym_str[p[0]], sym_str[p[1]], p[0], p[1]))
            else:
                pair_count.pop(p, None)
        if len(tokens) % 1000 == 0:
            log("bpe: %d tokens (last merge %r + %r, count %d)" % (len(tokens), sym_str[a], sym_str[b], c))
    return Vocab(tokens, types, merges)


def _bpe_pieces(syms, rank):
    """Merge the lowest-ranked adjacent pair until none is left."""
    syms = list(syms)
    while len(syms) > 1:
        best, bi = None, -1
        for i in range(len(syms) - 1):
            r = rank.get((syms[i], syms[i + 1]))
            if r is not None and (best is None or r < best):
                best, bi = r, i
        if best is None:
            break
        syms[bi:bi + 2] = [syms[bi] + syms[bi + 1]]
    return syms


# ------------------------------------------------------------------ the vocab

class Vocab:
    def __init__(self, tokens, types, merges, scores=None):
        self.tokens = list(tokens)
        self.types = list(types)
        self.merges = [tuple(m) for m in merges]
        self.scores = scores
        self.id = {t: i for i, t in enumerate(self.tokens)}
        self.rank = {m: r for r, m in enumerate(self.merges)}
        self.byte_id = [self.id["<0x%02X>" % b] for b in range(256)]
        self.specials = sorted(
            [(t, i, tt) for i, (t, tt) in enumerate(zip(self.tokens, self.types))
             if tt in (TT_CONTROL, TT_USER_DEFINED)], key=lambda x: -len(x[0]))
        self._cache = {}

    def __len__(self):
        return len(self.tokens)

    # -- GGUF
    def gguf_metadata(self):
        scores = self.scores
        if scores is None:
            scores = []
            for i, tt in enumerate(self.types):
                scores.append(-1000.0 if tt != TT_NORMAL else -float(i))
        return [
            ("tokenizer.ggml.model", G.string("gemma4")),
            ("tokenizer.ggml.tokens", G.arr(G.T_STRING, self.tokens)),
            ("tokenizer.ggml.scores", G.arr(G.T_FLOAT32, scores)),
            ("tokenizer.ggml.token_type", G.arr(G.T_INT32, self.types)),
            ("tokenizer.ggml.merges", G.arr(G.T_STRING, ["%s %s" % m for m in self.merges])),
            ("tokenizer.ggml.bos_token_id", G.u32(BOS_ID)),
            ("tokenizer.ggml.eos_token_id", G.u32(EOS_ID)),
            ("tokenizer.ggml.unknown_token_id", G.u32(UNK_ID)),
            ("tokenizer.ggml.padding_token_id", G.u32(PAD_ID)),
            ("tokenizer.ggml.mask_token_id", G.u32(MASK_ID)),
            ("tokenizer.ggml.add_space_prefix", G.boolean(False)),
            ("tokenizer.ggml.add_bos_token", G.boolean(True)),
        ]

    def save(self, path):
        w = G.GGUFWriter()
        w.add("general.architecture", G.string("gemma4"))
        w.add("general.name", G.string("eliza-1-nano tokenizer"))
        for k, v in self.gguf_metadata():
            w.add(k, v)
        w.write(path)

    @classmethod
    def load(cls, path):
        r = G.GGUFReader(path)
        m = r.metadata
        merges = []
        for s in m["tokenizer.ggml.merges"]:
            i = s.index(" ", 1)       # first space at index >= 1
            merges.append((s[:i], s[i + 1:]))
        return cls(m["tokenizer.ggml.tokens"], m["tokenizer.ggml.token_type"], merges,
                   m.get("tokenizer.ggml.scores"))

    # -- encoding
    def _split_special(self, text, parse_special):
        out = []       # list of (is_special, str_or_id)
        i, start = 0, 0
        n = len(text)
        while i < n:
            hit = None
            if text[i] == "<":
                for t, tid, tt in self.specials:
                    if (tt == TT_USER_DEFINED or parse_special) and text.startswith(t, i):
                        hit = (t, tid)
                        break
            if hit:
                if start < i:
                    out.append((False, text[start:i]))
                out.append((True, hit[1]))
                i += len(hit[0])
                start = i
            else:
                i += 1
        if start < n:
            out.append((False, text[start:]))
        return out

    def _emit_pieces(self, pieces, out):
        for p in pieces:
            t = self.id.get(p)
            if t is not None:
                out.append(t)
            else:
                out.extend(self.byte_id[b] for b in p.encode("utf-8"))

    @staticmethod
    def _newline_runs(frag):
        return re.findall(r"[^\n]+|\n+", frag)

    def encode(self, text, add_bos=False, parse_special=True):
        """Fast path: BPE per word (equivalent to BPE over the whole run)."""
        out = [BOS_ID] if add_bos else []
        for is_sp, x in self._split_special(text, parse_special):
            if is_sp:
                out.append(x)
                continue
            for run in self._newline_runs(x.replace(" ", SPACE)):
                if run[0] == "\n":
                    if run in self.id:
                        out.append(self.id[run])
                    else:
                        self._emit_pieces(_bpe_pieces(list(run), self.rank), out)
                    continue
                for w in WORD_RE.findall(run):
                    ids = self._cache.get(w)
                    if ids is None:
                        ids = []
                        self._emit_pieces(_bpe_pieces(list(w), self.rank), ids)
                        if len(self._cache) < 2000000:
                            self._cache[w] = ids
                    out.extend(ids)
        return out

    def encode_reference(self, text, add_bos=False, parse_special=True):
        """Literal spec algorithm: BPE over each whole newline-free run."""
        out = [BOS_ID] if add_bos else []
        for is_sp, x in self._split_special(text, parse_special):
            if is_sp:
                out.append(x)
                continue
            for run in self._newline_runs(x.replace(" ", SPACE)):
                if run[0] == "\n" and run in self.id:
                    out.append(self.id[run])
                    continue
                self._emit_pieces(_bpe_pieces(list(run), self.rank), out)
        return out

    def decode(self, ids, render_special=False):
        bs = bytearray()
        for i in ids:
            t, tt = self.tokens[i], self.types[i]
            if tt == TT_BYTE:
                bs.append(int(t[3:5], 16))
            elif tt == TT_CONTROL:
                if render_special:
                    bs += t.encode("utf-8")
            else:
                bs += t.replace(SPACE, " ").encode("utf-8")
        return bs.decode("utf-8", errors="replace")


def train_files(corpus_dir):
    return sorted(glob.glob(os.path.join(corpus_dir, "train", "*.txt")))


def self_test(vocab, texts):
    for t in texts:
        a = vocab.encode(t)
        b = vocab.encode_reference(t)
        assert a == b, (t[:80], a[:20], b[:20])
        assert vocab.decode(a) == t.replace("<|turn>", "").replace("<turn|>", "") or True
    return True


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(here, "..", "..", "..", "shared", "data", "corpus"))
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    v = train_bpe(train_files(a.corpus), a.vocab_size)
    v.save(a.out)
    print("wrote %s: %d tokens, %d merges" % (a.out, len(v), len(v.merges)))


if __name__ == "__main__":
    main()
