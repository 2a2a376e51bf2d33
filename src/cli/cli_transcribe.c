/* eliza-infer transcribe [-m FILE] --mmproj FILE [-p INSTRUCTION] [-n N] [-t N] [--ctx N] WAV
 * Speech recognition as the C ABI's asr_transcribe does it: one user turn of the chat template holding the
 * audio, then the instruction ("Transcribe this audio." by default); greedy. The transcript goes to stdout,
 * a stats line to stderr. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int usage(FILE *out) {
    fprintf(out, "usage: eliza-infer transcribe [-m FILE] --mmproj FILE [-p INSTRUCTION] [-n N] [-t N] [--ctx N] WAV\n"
                 "  -m FILE        text model GGUF (default: the embedded eliza-1-nano)\n"
                 "  --mmproj FILE  the projector with the audio tower\n"
                 "  -p TEXT        the instruction after the audio (default: \"" ELI_ASR_DEFAULT_PROMPT "\")\n"
                 "  -n N           most tokens of transcript (default 512)\n");
    return 2;
}

int cli_transcribe(int argc, char **argv) {
    cli_prompt_args a = {0};
    a.prompt = ELI_ASR_DEFAULT_PROMPT;
    a.chat = 1;
    const char *wav = NULL;
    eli_gen_params p;
    if (cli_gen_params(&p)) return 1;
    p.max_tokens = 512;
    p.seq.n_ctx = 4096;
    p.sampling.temperature = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int r = 0;
        if (strcmp(o, "--temp") && strcmp(o, "--image") && strcmp(o, "--audio")) { /* greedy; the WAV is the argument */
            r = cli_parse_gen_option(argc, argv, &i, &p);
            if (!r) r = cli_media_option(argc, argv, &i, &a.mmproj, &a.media);
        }
        if (r < 0) return 2;
        if (r) continue;
        if ((!strcmp(o, "-m") || !strcmp(o, "--model")) && i + 1 < argc) a.model = argv[++i];
        else if ((!strcmp(o, "-p") || !strcmp(o, "--prompt")) && i + 1 < argc) a.prompt = argv[++i];
        else if (!strcmp(o, "--help")) return usage(stdout), 0;
        else if (o[0] != '-' && !wav) wav = o;
        else return cli_bad_option("transcribe", o, i + 1 < argc);
    }
    if (!wav || !a.mmproj) return usage(stderr);
    a.media.n = 1;
    a.media.kind[0] = ELI_MEDIA_AUDIO;
    a.media.path[0] = wav;
    const int rc = cli_generate(&a, &p);
    if (!rc) printf("\n");
    return rc;
}
