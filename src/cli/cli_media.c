/* Images and audio for run, transcribe and chat (cli.h): files encoded on the towers of one projector
 * (opened when first needed, through cli_tower.c), the media options, and the generation session as the
 * sink of a prompt with media. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "image.h"
#include "resample.h"
#include "wav.h"

void cli_media_item_free(cli_media_item *m) {
    free(m->rows);
    memset(m, 0, sizeof *m);
}

void cli_encoder_close(cli_encoder *e) {
    cli_tower_close(&e->vision);
    cli_tower_close(&e->audio);
}

/* The tower of that kind, opened on first use; NULL after printing why. */
static eli_xtower *tower(cli_encoder *e, eli_mm_tower kind) {
    cli_tower *t = kind == ELI_MM_VISION ? &e->vision : &e->audio;
    if (t->xt) return t->xt;
    if (!e->mmproj) return cli_die("%s input needs --mmproj FILE (the projector)", kind == ELI_MM_VISION ? "image" : "audio"), NULL;
    if (cli_tower_open(e->mmproj, kind, e->threads, t)) return NULL;
    const int w = kind == ELI_MM_VISION ? eli_vision_n_embd(t->vision) : eli_audio_n_embd(t->audio);
    if (w != e->n_embd_text) {
        cli_tower_close(t);
        return cli_die("%s: its embeddings are %d wide (projection_dim), the text model's n_embd is %d: it belongs to another model",
                       e->mmproj, w, e->n_embd_text),
               NULL;
    }
    return t->xt;
}

int cli_encode(cli_encoder *e, eli_media_kind kind, const char *path, cli_media_item *out) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->n_embd = e->n_embd_text;
    eli_xtower *xt = tower(e, kind == ELI_MEDIA_IMAGE ? ELI_MM_VISION : ELI_MM_AUDIO);
    if (!xt) return 1;
    eli_error err = {0};
    if (kind == ELI_MEDIA_IMAGE) {
        eli_image img;
        eli_vision_embd v;
        if (eli_image_load(path, &img, &err)) return cli_die("%s", err.msg);
        const int rc = eli_vision_encode(xt, &img, &v, &err);
        eli_image_free(&img);
        if (rc) return cli_die("%s: %s", path, err.msg);
        out->rows = v.embd;
        out->n = v.n_tokens;
        return 0;
    }
    eli_pcm pcm;
    float *mono = NULL;
    int64_t n = 0;
    if (eli_wav_load(path, &pcm, &err)) return cli_die("%s", err.msg);
    int rc = eli_pcm_to_mono16k(&pcm, &mono, &n, &err);
    eli_pcm_free(&pcm);
    if (!rc) rc = eli_audio_embed(xt, mono, n, &out->rows, &out->n, NULL, &err);
    free(mono);
    return rc ? cli_die("%s: %s", path, err.msg) : 0;
}

int cli_media_option(int argc, char **argv, int *i, const char **mmproj, cli_media_list *list) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    const int image = !strcmp(a, "--image"), audio = !strcmp(a, "--audio");
    if (!image && !audio && strcmp(a, "--mmproj")) return 0;
    if (!v) return cli_die("%s needs a value", a), -1;
    if (image || audio) {
        if (list->n == CLI_MAX_MEDIA) return cli_die("at most %d --image / --audio files", CLI_MAX_MEDIA), -1;
        list->kind[list->n] = image ? ELI_MEDIA_IMAGE : ELI_MEDIA_AUDIO;
        list->path[list->n++] = v;
    } else {
        *mmproj = v;
    }
    (*i)++;
    return 1;
}
