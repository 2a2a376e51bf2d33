"""Check gemma4_ref.py against llama.cpp's logits on the golden test models
(../shared/golden/models): prints mean/max KLD per file.

    /usr/bin/python3 tools/train/check_golden.py
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_logits import compare  # noqa: E402
from gemma4_ref import Gemma4  # noqa: E402

GOLDEN = os.path.join(HERE, "..", "..", "..", "shared", "golden", "models")
CASES = [("e2b-mini", ["e2b-mini-f32", "e2b-mini-f16", "e2b-mini-q8_0"]),
         ("dense-kv-mini", ["dense-kv-mini-f32"])]


def main():
    torch.set_num_threads(2)
    out = "/tmp/gemma4_ref_golden.f32"
    for base, models in CASES:
        with open(os.path.join(GOLDEN, base + ".tokens.txt")) as f:
            toks = [int(t) for t in f.read().split()]
        for m in models:
            model = Gemma4.from_gguf(os.path.join(GOLDEN, m + ".gguf"))
            with torch.no_grad():
                logits, _ = model(torch.tensor([toks]))
            logits[0].numpy().astype("<f4").tofile(out)
            r = compare(os.path.join(GOLDEN, m + ".logits.f32"), out, logits.shape[-1])
            print("%-20s mean KLD %.3g  max KLD %.3g  argmax %.3f" % (m, r["mean_kld"], r["max_kld"], r["argmax_agree"]))


if __name__ == "__main__":
    main()
