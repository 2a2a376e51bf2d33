/* WAV decoding (wav.h) and the way to the audio tower's input (resample.h) on arbitrary bytes: a file that
 * decodes has one or two channels, a rate in range and finite samples (float files with NaN are refused),
 * and downmixed and resampled to 16 kHz it gives exactly eli_resample_length samples, all finite. */
#include <math.h>

#include "fuzz.h"
#include "resample.h"
#include "wav.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    eli_pcm pcm;
    eli_error err = {0};
    if (eli_wav_decode(data, size, &pcm, &err)) {
        FUZZ_ASSERT(err.code < 0 && err.msg[0] && !pcm.samples, "a failed decode without a message or with samples");
        return 0;
    }
    FUZZ_ASSERT((pcm.channels == 1 || pcm.channels == 2) && pcm.rate >= ELI_PCM_MIN_RATE && pcm.rate <= ELI_PCM_MAX_RATE &&
                    pcm.n_frames >= 0,
                "decoded %d channels at %d Hz, %lld frames", pcm.channels, pcm.rate, (long long)pcm.n_frames);
    for (int64_t i = 0; i < pcm.n_frames * pcm.channels; i++) FUZZ_ASSERT(isfinite(pcm.samples[i]), "sample %lld", (long long)i);
    /* long inputs at odd rates are the slow path: bounded so that each input stays quick */
    if (pcm.n_frames <= 1 << 16) {
        float *mono = NULL;
        int64_t n = 0;
        if (eli_pcm_to_mono16k(&pcm, &mono, &n, &err) == ELI_OK) {
            FUZZ_ASSERT(n == eli_resample_length(pcm.n_frames, pcm.rate, 16000), "%lld samples out", (long long)n);
            for (int64_t i = 0; i < n; i++) FUZZ_ASSERT(isfinite(mono[i]), "resampled sample %lld", (long long)i);
        }
        free(mono);
    }
    eli_pcm_free(&pcm);
    return 0;
}
