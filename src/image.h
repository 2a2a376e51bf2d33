/* Image decoding to 8-bit RGB: PNG (libpng), JPEG (libjpeg-turbo) and WebP (libwebp), the format told by
 * its magic bytes. Libraries rather than our own decoders because image files are hostile input and these
 * three are maintained and fuzzed upstream (OSS-Fuzz) and shipped by every distribution.
 *
 * What comes out is what llama.cpp's mtmd feeds its preprocessor (stb_image asked for 3 channels): alpha
 * dropped (not composited), grayscale and palettes expanded to RGB, 16-bit samples cut to their high
 * byte. One difference on purpose: a JPEG or PNG EXIF orientation (tag 0x0112) is applied, so a phone
 * photo is seen upright (stb_image ignores it).
 *
 * Limits against decompression bombs: each side at most ELI_IMAGE_MAX_SIDE pixels and at most
 * ELI_IMAGE_MAX_PIXELS pixels in all, checked from the header before any pixel is decoded; a JPEG with
 * more than ELI_IMAGE_MAX_SCANS progressive scans is refused. Truncated and corrupt files fail with a
 * message; nothing is printed.
 *
 * Built only with ELI_HAVE_IMAGE_LIBS (CMake option ELI_VISION, on when pkg-config finds the three
 * libraries); without it eli_image_decode fails with ELI_ERR_NOT_IMPLEMENTED. */
#ifndef ELI_IMAGE_H
#define ELI_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define ELI_IMAGE_MAX_SIDE 16384
#define ELI_IMAGE_MAX_PIXELS (64 * 1024 * 1024)
#define ELI_IMAGE_MAX_SCANS 256
#define ELI_IMAGE_MAX_FILE_BYTES ((size_t)256 << 20)

typedef struct eli_image {
    int w, h;
    uint8_t *rgb; /* h rows of w pixels, 3 bytes each (R, G, B) */
} eli_image;

/* 1 when this build decodes images (and so can run the vision tower on image files), else 0. */
int eli_vision_available(void);

/* Decodes n bytes of PNG, JPEG or WebP. On failure out is left empty ({0, 0, NULL}). */
int eli_image_decode(const void *bytes, size_t n, eli_image *out, eli_error *err);
/* Reads a file (at most ELI_IMAGE_MAX_FILE_BYTES) and decodes it. */
int eli_image_load(const char *path, eli_image *out, eli_error *err);
/* An image of w x h pixels with uninitialised pixels (w, h within the limits). */
int eli_image_alloc(eli_image *img, int w, int h, eli_error *err);
void eli_image_free(eli_image *img);

/* The EXIF orientation (1..8) in a TIFF-structured EXIF block (starting at the "II"/"MM" byte-order mark,
 * i.e. after a JPEG APP1's "Exif\0\0"); 1 when the block is malformed or has no orientation. */
int eli_exif_orientation(const uint8_t *tiff, size_t n);
/* Applies an EXIF orientation (2..8; 1 and anything else leave the image as it is). */
int eli_image_orient(eli_image *img, int orientation, eli_error *err);

#endif
