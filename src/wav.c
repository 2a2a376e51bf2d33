#include "wav.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WAVE_FORMAT_PCM 0x0001
#define WAVE_FORMAT_IEEE_FLOAT 0x0003
#define WAVE_FORMAT_EXTENSIBLE 0xFFFE

/* The RIFF limit: a chunk size is 32 bits. */
#define MAX_WAV_BYTES ((uint64_t)UINT32_MAX + 8)

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* A chunk id for messages: printable characters as they are, others as '?'. */
static void chunk_name(const uint8_t *id, char out[5]) {
    for (int i = 0; i < 4; i++) out[i] = id[i] >= 0x20 && id[i] < 0x7f ? (char)id[i] : '?';
    out[4] = '\0';
}

typedef struct {
    int format; /* WAVE_FORMAT_PCM or WAVE_FORMAT_IEEE_FLOAT (an extensible header's subformat) */
    int channels, rate, bits, block_align;
} wav_fmt;

/* The tail the KSDATAFORMAT_SUBTYPE GUIDs share; their first two bytes are the format tag. */
static const uint8_t guid_tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

static int parse_fmt(const uint8_t *p, uint32_t size, wav_fmt *f, eli_error *err) {
    if (size < 16) return eli_fail(err, ELI_ERR_INVALID_ARG, "fmt chunk of %u bytes is shorter than 16", size);
    int tag = le16(p);
    f->channels = le16(p + 2);
    const uint32_t rate = le32(p + 4);
    f->block_align = le16(p + 12);
    f->bits = le16(p + 14);
    if (tag == WAVE_FORMAT_EXTENSIBLE) {
        if (size < 40 || le16(p + 16) < 22)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "WAVE_FORMAT_EXTENSIBLE fmt chunk of %u bytes lacks its 22-byte extension",
                            size);
        const int valid_bits = le16(p + 18);
        if (valid_bits > f->bits)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "%d valid bits in a %d-bit container", valid_bits, f->bits);
        if (memcmp(p + 26, guid_tail, sizeof guid_tail))
            return eli_fail(err, ELI_ERR_INVALID_ARG, "WAVE_FORMAT_EXTENSIBLE subformat is not a PCM or IEEE float GUID");
        tag = le16(p + 24);
    }
    if (tag != WAVE_FORMAT_PCM && tag != WAVE_FORMAT_IEEE_FLOAT)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV format tag 0x%04x is not supported (only PCM and IEEE float)", tag);
    f->format = tag;
    if (f->channels < 1) return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV header has 0 channels");
    if (f->channels > 2)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV has %d channels: only mono and stereo are supported", f->channels);
    if (rate < ELI_PCM_MIN_RATE || rate > ELI_PCM_MAX_RATE)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV sample rate %u Hz is outside [%d, %d]", rate, ELI_PCM_MIN_RATE,
                        ELI_PCM_MAX_RATE);
    f->rate = (int)rate;
    if (tag == WAVE_FORMAT_PCM && f->bits != 16 && f->bits != 24 && f->bits != 32)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%d-bit integer PCM is not supported (16, 24 or 32 bits)", f->bits);
    if (tag == WAVE_FORMAT_IEEE_FLOAT && f->bits != 32)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%d-bit float PCM is not supported (32 bits)", f->bits);
    if (f->block_align != f->channels * f->bits / 8)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV block align %d != %d channels x %d bytes", f->block_align, f->channels,
                        f->bits / 8);
    return ELI_OK;
}

/* Sample i of the data as float. */
static float sample_at(const wav_fmt *f, const uint8_t *p) {
    if (f->format == WAVE_FORMAT_IEEE_FLOAT) {
        float v;
        uint32_t u = le32(p);
        memcpy(&v, &u, sizeof v);
        return v;
    }
    switch (f->bits) {
    case 16: return (float)(int16_t)le16(p) * (1.0f / 32768.0f);
    case 24: {
        /* the 24 bits at the top of an int32, then an arithmetic view of it: no shift of a negative value */
        const int32_t v = (int32_t)((uint32_t)p[0] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 24);
        return (float)(v / 256) * (1.0f / 8388608.0f);
    }
    default: return (float)(int32_t)le32(p) * (1.0f / 2147483648.0f);
    }
}

int eli_pcm_check(const float *s, int64_t n, const char *what, eli_error *err) {
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(s[i])) return eli_fail(err, ELI_ERR_INVALID_ARG, "%s %lld is not a finite number", what, (long long)i);
        if (fabsf(s[i]) > ELI_PCM_MAX_ABS)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "%s %lld (%g) is beyond +-%g, far past full scale (1.0)", what,
                            (long long)i, (double)s[i], (double)ELI_PCM_MAX_ABS);
    }
    return ELI_OK;
}

int eli_wav_decode(const void *buf, size_t len, eli_pcm *out, eli_error *err) {
    memset(out, 0, sizeof *out);
    const uint8_t *b = buf;
    if (len < 12) return eli_fail(err, ELI_ERR_INVALID_ARG, "%zu bytes: too short for a RIFF/WAVE header", len);
    if (!memcmp(b, "RIFX", 4) || !memcmp(b, "RF64", 4))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%.4s files are not supported (only little-endian RIFF WAVE)", (const char *)b);
    if (memcmp(b, "RIFF", 4) || memcmp(b + 8, "WAVE", 4))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "not a WAV file (no RIFF/WAVE header)");
    wav_fmt fmt = {0, 0, 0, 0, 0};
    int have_fmt = 0;
    const uint8_t *data = NULL;
    uint32_t data_size = 0;
    /* chunks after the header; a few stray bytes at the end (shorter than a chunk header) are ignored */
    for (size_t pos = 12; len - pos >= 8;) {
        const uint8_t *id = b + pos;
        const uint32_t size = le32(b + pos + 4);
        const size_t avail = len - pos - 8;
        char name[5];
        chunk_name(id, name);
        if (size > avail)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "truncated WAV: chunk '%s' declares %u bytes but only %zu remain", name, size,
                            avail);
        if (!memcmp(id, "fmt ", 4)) {
            if (have_fmt) return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV has more than one fmt chunk");
            int rc = parse_fmt(id + 8, size, &fmt, err);
            if (rc) return rc;
            have_fmt = 1;
        } else if (!memcmp(id, "data", 4)) {
            if (data) return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV has more than one data chunk");
            data = id + 8;
            data_size = size;
        }
        /* chunks are padded to an even size; the pad byte may be missing after the last one */
        pos += 8 + (size_t)size;
        if (size & 1 && pos < len) pos++;
    }
    if (!have_fmt) return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV has no fmt chunk");
    if (!data) return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV has no data chunk");
    if (data_size % (uint32_t)fmt.block_align)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV data chunk of %u bytes is not a whole number of %d-byte frames", data_size,
                        fmt.block_align);
    const int64_t n_frames = data_size / (uint32_t)fmt.block_align;
    if (n_frames == 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "WAV data chunk holds no samples");
    const int64_t n = n_frames * fmt.channels;
    float *s = malloc((size_t)n * sizeof *s);
    if (!s) return eli_fail(err, ELI_ERR_OOM, "out of memory for %lld WAV samples", (long long)n);
    const int bytes = fmt.bits / 8;
    for (int64_t i = 0; i < n; i++) s[i] = sample_at(&fmt, data + (size_t)i * (size_t)bytes);
    const int rc = eli_pcm_check(s, n, "WAV sample", err);
    if (rc) {
        free(s);
        return rc;
    }
    out->samples = s;
    out->n_frames = n_frames;
    out->channels = fmt.channels;
    out->rate = fmt.rate;
    return ELI_OK;
}

int eli_wav_load(const char *path, eli_pcm *out, eli_error *err) {
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp) return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = ELI_OK;
    uint8_t *buf = NULL;
    if (fstat(fileno(fp), &st) || !S_ISREG(st.st_mode)) {
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "%s: not a regular file", path);
    } else if ((uint64_t)st.st_size > MAX_WAV_BYTES) {
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "%s: %lld bytes is larger than a WAV file can be", path, (long long)st.st_size);
    } else if (!(buf = malloc(st.st_size ? (size_t)st.st_size : 1))) {
        rc = eli_fail(err, ELI_ERR_OOM, "%s: out of memory for %lld bytes", path, (long long)st.st_size);
    } else if (fread(buf, 1, (size_t)st.st_size, fp) != (size_t)st.st_size) {
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "%s: read error", path);
    } else if ((rc = eli_wav_decode(buf, (size_t)st.st_size, out, err))) {
        eli_error_prefix(err, "%s", path);
    }
    free(buf);
    fclose(fp);
    return rc;
}

void eli_pcm_free(eli_pcm *p) {
    if (!p) return;
    free(p->samples);
    memset(p, 0, sizeof *p);
}
