/* The knobs read from the environment in one place (config.c): defaults, every variable, and every bad
 * value refused naming the variable. */
#include <stdlib.h>

#include "config.h"
#include "test.h"

static const char *const vars[] = {"ELIZA_LLM_N_CTX",  "ELIZA_LLM_SEED",    "ELIZA_LLM_RESERVE", "ELIZA_LLM_KV_CHECKPOINTS",
                                   "ELIZA_LLM_REPACK", "ELIZA_LLM_BACKEND", "ELI_KERNELS"};

static void clear(void) {
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

int main(void) {
    clear();
    eli_config c;
    eli_error err = {0};
    CHECK(!eli_config_read(&c, &err) && c.n_ctx == 0 && c.seed == 0 && c.reserve == 1 && c.n_ckpt == 1 && c.repack == 1 &&
              !c.backend[0] && !c.kernels[0],
          "defaults: %s", err.msg);
    setenv("ELIZA_LLM_N_CTX", "2048", 1);
    setenv("ELIZA_LLM_SEED", "18446744073709551", 1);
    setenv("ELIZA_LLM_RESERVE", "0", 1);
    setenv("ELIZA_LLM_KV_CHECKPOINTS", "3", 1);
    setenv("ELIZA_LLM_REPACK", "0", 1);
    setenv("ELIZA_LLM_BACKEND", "reference", 1);
    setenv("ELI_KERNELS", "avx2", 1);
    CHECK(!eli_config_read(&c, &err) && c.n_ctx == 2048 && c.seed == 18446744073709551ull && c.reserve == 0 && c.n_ckpt == 3 &&
              c.repack == 0 && !strcmp(c.backend, "reference") && !strcmp(c.kernels, "avx2"),
          "every variable read: %s", err.msg);
    static const struct {
        const char *var, *value;
    } bad[] = {{"ELIZA_LLM_N_CTX", "0"},          {"ELIZA_LLM_N_CTX", "-5"},         {"ELIZA_LLM_N_CTX", "12k"},
               {"ELIZA_LLM_N_CTX", "99999999999"}, {"ELIZA_LLM_SEED", "-1"},         {"ELIZA_LLM_RESERVE", "2"},
               {"ELIZA_LLM_RESERVE", "yes"},      {"ELIZA_LLM_KV_CHECKPOINTS", "65"}, {"ELIZA_LLM_KV_CHECKPOINTS", "-1"},
               {"ELIZA_LLM_REPACK", "true"},      {"ELI_KERNELS", "avx2-but-longer-than-thirty-one-bytes"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clear();
        setenv(bad[i].var, bad[i].value, 1);
        err.msg[0] = '\0';
        CHECK(eli_config_read(&c, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, bad[i].var), "%s=%s refused: %s", bad[i].var,
              bad[i].value, err.msg);
    }
    clear();
    setenv("ELIZA_LLM_N_CTX", "", 1); /* empty is unset */
    CHECK(!eli_config_read(&c, &err) && c.n_ctx == 0, "an empty value is unset");
    clear();
    TEST_MAIN_END();
}
