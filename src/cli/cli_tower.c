/* The CLI's multimodal towers (cli.h): a projector file, its bound tower, prepared on the default
 * executor. */
#include <string.h>

#include "cli.h"
#include "os.h"

int cli_tower_open(const char *mmproj, eli_mm_tower kind, int threads, cli_tower *t) {
    memset(t, 0, sizeof *t);
    eli_error err = {0};
    eli_config cfg;
    t->threads = threads > 0 ? threads : eli_os_cpu_count();
    if (eli_config_read(&cfg, &err) || !(t->proj = eli_mmproj_open(mmproj, &err))) return cli_die("%s", err.msg);
    const eli_exec_options o = {cfg.kernels, cfg.repack};
    const eli_exec *exec = eli_exec_default();
    if (kind == ELI_MM_VISION ? !(t->vision = eli_vision_load(t->proj, &err)) ||
                                    !(t->xt = eli_vision_prepare(exec, t->vision, &o, t->threads, &err))
                              : !(t->audio = eli_audio_load(t->proj, &err)) ||
                                    !(t->xt = eli_audio_prepare(exec, t->audio, &o, t->threads, &err))) {
        cli_tower_close(t);
        return cli_die("%s: %s", mmproj, err.msg);
    }
    return 0;
}

void cli_tower_close(cli_tower *t) {
    eli_xtower_release(t->xt);
    eli_vision_free(t->vision);
    eli_audio_free(t->audio);
    eli_mmproj_free(t->proj);
    memset(t, 0, sizeof *t);
}
