/* Image decoding (see image.h): the format by its magic bytes, each library's errors turned into messages
 * (libpng and libjpeg report through callbacks that must not return: they jump back here), the limits
 * checked from the header, then the EXIF orientation. */
#include "image.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int eli_image_alloc(eli_image *img, int w, int h, eli_error *err) {
    img->w = img->h = 0;
    img->rgb = NULL;
    if (w < 1 || h < 1 || w > ELI_IMAGE_MAX_SIDE || h > ELI_IMAGE_MAX_SIDE || (int64_t)w * h > ELI_IMAGE_MAX_PIXELS)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "image of %d x %d pixels is outside the limits (sides 1..%d, at most %d pixels)",
                        w, h, ELI_IMAGE_MAX_SIDE, ELI_IMAGE_MAX_PIXELS);
    img->rgb = malloc((size_t)w * (size_t)h * 3);
    if (!img->rgb) return eli_fail(err, ELI_ERR_OOM, "out of memory for a %d x %d image", w, h);
    img->w = w;
    img->h = h;
    return ELI_OK;
}

void eli_image_free(eli_image *img) {
    free(img->rgb);
    img->rgb = NULL;
    img->w = img->h = 0;
}

/* ---- EXIF orientation ---- */

static uint32_t tiff_u16(const uint8_t *p, int be) { return be ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0]; }
static uint32_t tiff_u32(const uint8_t *p, int be) {
    return be ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
              : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

int eli_exif_orientation(const uint8_t *tiff, size_t n) {
    if (!tiff || n < 8) return 1;
    int be;
    if (tiff[0] == 'I' && tiff[1] == 'I') be = 0;
    else if (tiff[0] == 'M' && tiff[1] == 'M') be = 1;
    else return 1;
    if (tiff_u16(tiff + 2, be) != 42) return 1;
    const uint32_t ifd = tiff_u32(tiff + 4, be);
    if (ifd > n || n - ifd < 2) return 1;
    const uint32_t count = tiff_u16(tiff + ifd, be);
    for (uint32_t i = 0; i < count; i++) {
        const size_t at = (size_t)ifd + 2 + (size_t)i * 12;
        if (at > n || n - at < 12) return 1;
        const uint8_t *e = tiff + at;
        if (tiff_u16(e, be) != 0x0112) continue;
        /* SHORT (type 3), one value, stored in the first two bytes of the value field */
        if (tiff_u16(e + 2, be) != 3 || tiff_u32(e + 4, be) != 1) return 1;
        const uint32_t o = tiff_u16(e + 8, be);
        return o >= 1 && o <= 8 ? (int)o : 1;
    }
    return 1;
}

int eli_image_orient(eli_image *img, int o, eli_error *err) {
    if (o < 2 || o > 8) return ELI_OK;
    const int W = img->w, H = img->h, swap = o >= 5; /* 5..8 exchange the sides */
    eli_image out;
    int rc = eli_image_alloc(&out, swap ? H : W, swap ? W : H, err);
    if (rc) return rc;
    for (int y = 0; y < out.h; y++)
        for (int x = 0; x < out.w; x++) {
            int sx, sy; /* the stored pixel shown at (x, y) */
            switch (o) {
            case 2: sx = W - 1 - x, sy = y; break;
            case 3: sx = W - 1 - x, sy = H - 1 - y; break;
            case 4: sx = x, sy = H - 1 - y; break;
            case 5: sx = y, sy = x; break;
            case 6: sx = y, sy = H - 1 - x; break;
            case 7: sx = W - 1 - y, sy = H - 1 - x; break;
            default: sx = W - 1 - y, sy = x; break;
            }
            memcpy(out.rgb + ((size_t)y * out.w + x) * 3, img->rgb + ((size_t)sy * W + sx) * 3, 3);
        }
    eli_image_free(img);
    *img = out;
    return ELI_OK;
}

#ifdef ELI_HAVE_IMAGE_LIBS

#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <webp/decode.h>

int eli_vision_available(void) { return 1; }

/* ---- PNG ---- */

typedef struct {
    const uint8_t *p;
    size_t n, pos;
    jmp_buf jb;
    char msg[160], warning[160]; /* the first warning explains some errors (a size over the limits) */
    png_bytep *rows;
    eli_image img;
} png_job;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_job *j = png_get_error_ptr(png);
    snprintf(j->msg, sizeof j->msg, "%s", msg);
    longjmp(j->jb, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
    png_job *j = png_get_error_ptr(png);
    if (!j->warning[0]) snprintf(j->warning, sizeof j->warning, "%s", msg);
}

static void png_on_read(png_structp png, png_bytep dst, size_t len) {
    png_job *j = png_get_io_ptr(png);
    if (len > j->n - j->pos) png_error(png, "truncated file");
    memcpy(dst, j->p + j->pos, len);
    j->pos += len;
}

static int decode_png(const uint8_t *p, size_t n, eli_image *out, eli_error *err) {
    png_job *j = calloc(1, sizeof *j);
    if (!j) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    j->p = p;
    j->n = n;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, j, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    int rc = ELI_OK;
    if (!info) {
        rc = eli_fail(err, ELI_ERR_OOM, "out of memory");
        goto done;
    }
    if (setjmp(j->jb)) {
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "corrupt PNG: %s%s%s%s", j->msg, j->warning[0] ? " (" : "", j->warning,
                      j->warning[0] ? ")" : "");
        eli_image_free(&j->img);
        goto done;
    }
    png_set_read_fn(png, j, png_on_read);
    png_set_user_limits(png, ELI_IMAGE_MAX_SIDE, ELI_IMAGE_MAX_SIDE);
    png_read_info(png, info);
    const int w = (int)png_get_image_width(png, info), h = (int)png_get_image_height(png, info);
    const int ct = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if ((rc = eli_image_alloc(&j->img, w, h, err))) goto done;
    if (depth == 16) png_set_strip_16(png); /* the high byte, as stb_image */
    if (ct == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (!(ct & PNG_COLOR_MASK_COLOR)) {
        if (depth < 8) png_set_expand_gray_1_2_4_to_8(png);
        png_set_gray_to_rgb(png);
    }
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 3 || png_get_channels(png, info) != 3)
        png_error(png, "unexpected row layout after the RGB conversion");
    j->rows = malloc((size_t)h * sizeof *j->rows);
    if (!j->rows) png_error(png, "out of memory");
    for (int y = 0; y < h; y++) j->rows[y] = j->img.rgb + (size_t)y * w * 3;
    png_read_image(png, j->rows);
    png_read_end(png, info);
    png_bytep exif = NULL;
    png_uint_32 n_exif = 0;
    int orientation = 1;
#ifdef PNG_eXIf_SUPPORTED
    if (png_get_eXIf_1(png, info, &n_exif, &exif) && exif) orientation = eli_exif_orientation(exif, n_exif);
#endif
    *out = j->img;
    j->img.rgb = NULL;
    rc = eli_image_orient(out, orientation, err);
    if (rc) eli_image_free(out);
done:
    png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    free(j->rows);
    free(j);
    return rc;
}

/* ---- JPEG ---- */

typedef struct {
    struct jpeg_error_mgr mgr;
    struct jpeg_progress_mgr progress;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    int too_many_scans;
    eli_image img;
    uint8_t *row; /* one CMYK row */
} jpeg_job;

static void jpeg_on_error(j_common_ptr c) {
    jpeg_job *j = (jpeg_job *)c->err;
    c->err->format_message(c, j->msg);
    longjmp(j->jb, 1);
}

/* Warnings (corrupt data, premature end of the data) are errors here: libjpeg would fill the rest of the
 * image with gray and carry on. Trace messages (level > 0) are dropped. */
static void jpeg_on_message(j_common_ptr c, int level) {
    if (level < 0) jpeg_on_error(c);
}

static void jpeg_on_progress(j_common_ptr c) {
    jpeg_job *j = (jpeg_job *)c->err;
    if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > ELI_IMAGE_MAX_SCANS) {
        j->too_many_scans = 1;
        longjmp(j->jb, 1);
    }
}

/* The EXIF orientation from the saved APP1 markers. */
static int jpeg_orientation(j_decompress_ptr c) {
    for (jpeg_saved_marker_ptr m = c->marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length > 6 && !memcmp(m->data, "Exif\0\0", 6))
            return eli_exif_orientation(m->data + 6, m->data_length - 6);
    return 1;
}

static int decode_jpeg(const uint8_t *p, size_t n, eli_image *out, eli_error *err) {
    jpeg_job *j = calloc(1, sizeof *j);
    struct jpeg_decompress_struct *c = calloc(1, sizeof *c);
    int rc = ELI_OK;
    if (!j || !c) {
        free(j), free(c);
        return eli_fail(err, ELI_ERR_OOM, "out of memory");
    }
    c->err = jpeg_std_error(&j->mgr);
    j->mgr.error_exit = jpeg_on_error;
    j->mgr.emit_message = jpeg_on_message;
    j->progress.progress_monitor = jpeg_on_progress;
    if (setjmp(j->jb)) {
        if (j->too_many_scans)
            rc = eli_fail(err, ELI_ERR_INVALID_ARG, "JPEG has more than %d progressive scans", ELI_IMAGE_MAX_SCANS);
        else
            rc = eli_fail(err, ELI_ERR_INVALID_ARG, "corrupt JPEG: %s", j->msg);
        eli_image_free(&j->img);
        goto done;
    }
    jpeg_create_decompress(c);
    c->progress = &j->progress;
    jpeg_mem_src(c, p, (unsigned long)n);
    jpeg_save_markers(c, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(c, TRUE);
    const int cmyk = c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK;
    c->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    if ((rc = eli_image_alloc(&j->img, (int)c->image_width, (int)c->image_height, err))) goto done;
    jpeg_start_decompress(c);
    if ((int)c->output_width != j->img.w || (int)c->output_height != j->img.h || c->output_components != (cmyk ? 4 : 3)) {
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "corrupt JPEG: unexpected output layout");
        eli_image_free(&j->img);
        goto done;
    }
    if (cmyk && !(j->row = malloc((size_t)j->img.w * 4))) {
        rc = eli_fail(err, ELI_ERR_OOM, "out of memory");
        eli_image_free(&j->img);
        goto done;
    }
    while (c->output_scanline < c->output_height) {
        uint8_t *dst = j->img.rgb + (size_t)c->output_scanline * j->img.w * 3;
        JSAMPROW row = cmyk ? j->row : dst;
        jpeg_read_scanlines(c, &row, 1);
        /* Adobe files store CMYK inverted; either way the ink is taken off white */
        for (int x = 0; cmyk && x < j->img.w; x++) {
            const uint8_t *q = j->row + 4 * x;
            for (int ch = 0; ch < 3; ch++) {
                const int ink = c->saw_Adobe_marker ? q[ch] : 255 - q[ch], k = c->saw_Adobe_marker ? q[3] : 255 - q[3];
                dst[3 * x + ch] = (uint8_t)((ink * k + 127) / 255);
            }
        }
    }
    const int orientation = jpeg_orientation(c);
    jpeg_finish_decompress(c);
    *out = j->img;
    j->img.rgb = NULL;
    rc = eli_image_orient(out, orientation, err);
    if (rc) eli_image_free(out);
done:
    jpeg_destroy_decompress(c);
    free(j->row);
    free(j);
    free(c);
    return rc;
}

/* ---- WebP ---- */

static int decode_webp(const uint8_t *p, size_t n, eli_image *out, eli_error *err) {
    int w, h;
    if (!WebPGetInfo(p, n, &w, &h)) return eli_fail(err, ELI_ERR_INVALID_ARG, "corrupt or unsupported WebP header");
    int rc = eli_image_alloc(out, w, h, err);
    if (rc) return rc;
    if (!WebPDecodeRGBInto(p, n, out->rgb, (size_t)w * h * 3, w * 3)) {
        eli_image_free(out);
        return eli_fail(err, ELI_ERR_INVALID_ARG, "corrupt, truncated or animated WebP (%d x %d)", w, h);
    }
    return ELI_OK;
}

int eli_image_decode(const void *bytes, size_t n, eli_image *out, eli_error *err) {
    const uint8_t *p = bytes;
    out->w = out->h = 0;
    out->rgb = NULL;
    if (!p || n < 12) return eli_fail(err, ELI_ERR_INVALID_ARG, "image data too short (%zu bytes)", n);
    if (!memcmp(p, "\x89PNG\r\n\x1a\n", 8)) return decode_png(p, n, out, err);
    if (p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return decode_jpeg(p, n, out, err);
    if (!memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4)) return decode_webp(p, n, out, err);
    const char *what = !memcmp(p, "GIF8", 4) ? "GIF" : (p[0] == 'B' && p[1] == 'M') ? "BMP"
                     : (!memcmp(p, "II*\0", 4) || !memcmp(p, "MM\0*", 4)) ? "TIFF" : "unrecognised";
    return eli_fail(err, ELI_ERR_INVALID_ARG, "%s image format: PNG, JPEG and WebP are supported", what);
}

#else

int eli_vision_available(void) { return 0; }

int eli_image_decode(const void *bytes, size_t n, eli_image *out, eli_error *err) {
    (void)bytes, (void)n;
    out->w = out->h = 0;
    out->rgb = NULL;
    return eli_fail(err, ELI_ERR_NOT_IMPLEMENTED, "this build has no image decoding (configured with ELI_VISION=OFF "
                                                  "or without libpng / libjpeg / libwebp)");
}

#endif

int eli_image_load(const char *path, eli_image *out, eli_error *err) {
    out->w = out->h = 0;
    out->rgb = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = ELI_OK;
    for (;;) {
        if (n == cap) {
            if (cap >= ELI_IMAGE_MAX_FILE_BYTES) {
                rc = eli_fail(err, ELI_ERR_INVALID_ARG, "%s: larger than %zu bytes", path, ELI_IMAGE_MAX_FILE_BYTES);
                break;
            }
            cap = cap ? cap * 2 : (size_t)1 << 16;
            uint8_t *grown = realloc(buf, cap);
            if (!grown) {
                rc = eli_fail(err, ELI_ERR_OOM, "%s: out of memory", path);
                break;
            }
            buf = grown;
        }
        const size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) rc = eli_fail(err, ELI_ERR_INVALID_ARG, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (!rc) {
        rc = eli_image_decode(buf, n, out, err);
        if (rc) eli_error_prefix(err, "%s", path);
    }
    free(buf);
    return rc;
}
