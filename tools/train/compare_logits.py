"""Compare two raw f32 logit files [n_tokens][n_vocab] (float64 math).

    python3 compare_logits.py REF.f32 OURS.f32 N_VOCAB
prints mean / max KL(ref || ours), argmax agreement and max |diff|."""
import sys

import numpy as np


def compare(ref, ours, n_vocab):
    a = np.fromfile(ref, dtype="<f4").astype(np.float64).reshape(-1, n_vocab)
    b = np.fromfile(ours, dtype="<f4").astype(np.float64).reshape(-1, n_vocab)
    assert a.shape == b.shape, (a.shape, b.shape)

    def logsm(x):
        x = x - x.max(1, keepdims=True)
        return x - np.log(np.exp(x).sum(1, keepdims=True))
    la, lb = logsm(a), logsm(b)
    kld = (np.exp(la) * (la - lb)).sum(1)
    return {"n": a.shape[0], "mean_kld": float(kld.mean()), "max_kld": float(kld.max()),
            "argmax_agree": float((a.argmax(1) == b.argmax(1)).mean()),
            "max_abs_diff": float(np.abs(a - b).max())}


if __name__ == "__main__":
    r = compare(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    print(" ".join("%s=%.3g" % (k, v) for k, v in r.items()))
