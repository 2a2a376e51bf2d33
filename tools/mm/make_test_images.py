#!/usr/bin/python3
"""Writes the small image-decoding fixtures of tests/test_vision.c into tests/data/mm/images/ (run from the
checkout root). Each input comes with the RGB pixels it must decode to, as a binary PPM (*.want.ppm).

PNGs are written here by hand (numpy + zlib: 8-bit RGB, 16-bit RGBA, 8-bit gray, 2-bit gray, palette with
tRNS, interlaced, with an eXIf orientation); their expected pixels follow stb_image's rules (what llama.cpp
decodes with): alpha dropped, 16-bit cut to the high byte, gray replicated, 1/2/4-bit gray scaled to 0..255.
JPEGs come from cjpeg and their expected pixels from djpeg (Debian libjpeg-turbo-progs), one with an
APP1 EXIF orientation 6 inserted by hand (expected: djpeg's pixels turned 90 degrees clockwise); WebPs
from cwebp -lossless (Debian webp), expected: the source pixels."""
import os
import struct
import subprocess
import zlib

import numpy as np

OUT = "tests/data/mm/images"
W, H = 13, 7


def ppm(path, rgb):
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (rgb.shape[1], rgb.shape[0]) + rgb.astype(np.uint8).tobytes())


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(path, rows, w, h, depth, ctype, extra=b"", interlace=0):
    """rows: the filtered-free scanlines (filter byte 0 added here), already packed for the depth."""
    raw = b"".join(b"\0" + r for r in rows)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra + chunk(b"IDAT", zlib.compress(raw)) +
                chunk(b"IEND", b""))


def adam7_rows(px, bpp_bytes):
    """Scanlines of an interlaced image: the 7 passes of 8-bit-or-wider pixels px[h][w][c]."""
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    rows = []
    for x0, y0, dx, dy in passes:
        for y in range(y0, px.shape[0], dy):
            sub = px[y, x0::dx]
            if sub.shape[0]:
                rows.append(sub.astype(">u%d" % bpp_bytes).tobytes())
    return rows


def exif_tiff(orientation, big_endian=False):
    e = ">" if big_endian else "<"
    mark = b"MM" if big_endian else b"II"
    return mark + struct.pack(e + "HI", 42, 8) + struct.pack(e + "H", 1) + \
        struct.pack(e + "HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(e + "I", 0)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint16)
    ppm(f"{OUT}/src.want.ppm", rgb)

    png(f"{OUT}/rgb8.png", [r.astype(np.uint8).tobytes() for r in rgb], W, H, 8, 2)
    # 16-bit RGBA: the high byte is the source pixel, the low byte and alpha are noise
    rgba16 = np.concatenate([rgb * 256 + rng.integers(0, 256, (H, W, 3)), rng.integers(0, 65536, (H, W, 1))], axis=2)
    png(f"{OUT}/rgba16.png", [r.astype(">u2").tobytes() for r in rgba16], W, H, 16, 6)
    gray = rgb[:, :, 0]
    png(f"{OUT}/gray8.png", [r.astype(np.uint8).tobytes() for r in gray], W, H, 8, 0)
    ppm(f"{OUT}/gray8.want.ppm", np.repeat(gray[:, :, None], 3, axis=2))
    g2 = gray >> 6  # 2-bit gray, 4 pixels a byte, most significant first
    rows2 = []
    for r in g2:
        padded = np.concatenate([r, np.zeros((-len(r)) % 4, dtype=r.dtype)]).reshape(-1, 4)
        rows2.append(bytes((p[0] << 6 | p[1] << 4 | p[2] << 2 | p[3]) for p in padded))
    png(f"{OUT}/gray2.png", rows2, W, H, 2, 0)
    ppm(f"{OUT}/gray2.want.ppm", np.repeat((g2 * 85)[:, :, None], 3, axis=2))
    # palette of 16 colours with transparency: alpha dropped, the colours kept
    pal = rng.integers(0, 256, (16, 3), dtype=np.uint16)
    idx = rng.integers(0, 16, (H, W))
    extra = chunk(b"PLTE", pal.astype(np.uint8).tobytes()) + chunk(b"tRNS", bytes(range(0, 256, 16)))
    png(f"{OUT}/palette.png", [r.astype(np.uint8).tobytes() for r in idx], W, H, 8, 3, extra)
    ppm(f"{OUT}/palette.want.ppm", pal[idx])
    png(f"{OUT}/interlaced.png", adam7_rows(rgb, 1), W, H, 8, 2, interlace=1)
    # eXIf orientation 8 (turned 90 degrees counter-clockwise to be upright)
    png(f"{OUT}/exif8.png", [r.astype(np.uint8).tobytes() for r in rgb], W, H, 8, 2,
        extra=chunk(b"eXIf", exif_tiff(8, big_endian=True)))
    ppm(f"{OUT}/exif8.want.ppm", np.rot90(rgb, 1))

    # JPEG through the libjpeg-turbo tools; expected pixels from djpeg
    subprocess.run(["cjpeg", "-quality", "95", "-outfile", f"{OUT}/rgb.jpg", f"{OUT}/src.want.ppm"], check=True)
    subprocess.run(["djpeg", "-outfile", f"{OUT}/rgb.jpg.want.ppm", f"{OUT}/rgb.jpg"], check=True)
    subprocess.run(["cjpeg", "-grayscale", "-outfile", f"{OUT}/gray.jpg", f"{OUT}/src.want.ppm"], check=True)
    subprocess.run(["djpeg", "-pnm", "-outfile", f"{OUT}/gray.jpg.pgm", f"{OUT}/gray.jpg"], check=True)
    with open(f"{OUT}/gray.jpg.pgm", "rb") as f:
        g = np.frombuffer(f.read().split(b"\n", 3)[3], dtype=np.uint8).reshape(H, W)
    os.remove(f"{OUT}/gray.jpg.pgm")
    ppm(f"{OUT}/gray.jpg.want.ppm", np.repeat(g[:, :, None], 3, axis=2))
    with open(f"{OUT}/rgb.jpg", "rb") as f:
        jpg = f.read()
    app1 = b"Exif\0\0" + exif_tiff(6)
    with open(f"{OUT}/exif6.jpg", "wb") as f:
        f.write(jpg[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + jpg[2:])
    with open(f"{OUT}/rgb.jpg.want.ppm", "rb") as f:
        d = np.frombuffer(f.read().split(b"\n", 3)[3], dtype=np.uint8).reshape(H, W, 3)
    ppm(f"{OUT}/exif6.want.ppm", np.rot90(d, -1))

    # WebP lossless (exact pixels)
    subprocess.run(["cwebp", "-quiet", "-lossless", f"{OUT}/src.want.ppm", "-o", f"{OUT}/lossless.webp"], check=True)


if __name__ == "__main__":
    main()
