"""Writes a deterministic test WAV: a sawtooth plus pseudo-random noise, or a sine.

The "sawnoise" signal is integer arithmetic only, so tests/test_audio.c synthesizes the same 16-bit
samples in memory (saw_noise_sample) instead of keeping long WAV files in the repository:
    s[i] = (i * 97) % 4001 - 2000 + ((x >> 16) % 1001) - 500,   x = x * 1103515245 + 12345 (mod 2^32), x0 = seed
with channel c (stereo) taking i + 1000 c and its own noise draw.

    /usr/bin/python3 tools/mm/make_test_wav.py --out A.wav --rate 16000 --seconds 31
"""

import argparse
import struct

import numpy as np


def saw_noise(n, channels, seed=1):
    out = np.empty((n, channels), dtype=np.int64)
    x = seed
    for i in range(n):
        for c in range(channels):
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF
            out[i, c] = ((i + 1000 * c) * 97) % 4001 - 2000 + ((x >> 16) % 1001) - 500
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--rate", type=int, default=16000)
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--frames", type=int, default=0, help="length in frames (overrides --seconds)")
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--sine", type=float, default=0.0, help="a sine of this frequency (Hz) at amplitude 0.5 instead")
    p.add_argument("--format", choices=["s16", "s24", "s32", "f32"], default="s16")
    a = p.parse_args()
    n = a.frames or int(round(a.seconds * a.rate))
    if a.sine:
        t = np.arange(n) / a.rate
        v = np.repeat((0.5 * np.sin(2 * np.pi * a.sine * t + 0.3))[:, None], a.channels, axis=1)
    else:
        v = saw_noise(n, a.channels) / 32768.0
    if a.format == "f32":
        data, tag, bits = v.astype("<f4").tobytes(), 3, 32
    else:
        bits = {"s16": 16, "s24": 24, "s32": 32}[a.format]
        q = np.clip(np.round(v * 2 ** (bits - 1)), -2 ** (bits - 1), 2 ** (bits - 1) - 1).astype("<i4")
        raw = q.astype("<i4").tobytes()
        if bits == 16:
            data = q.astype("<i2").tobytes()
        elif bits == 24:
            data = b"".join(raw[i:i + 3] for i in range(0, len(raw), 4))
        else:
            data = raw
        tag = 1
    block = a.channels * bits // 8
    fmt = struct.pack("<HHIIHH", tag, a.channels, a.rate, a.rate * block, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    with open(a.out, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", len(body)) + body)


if __name__ == "__main__":
    main()
