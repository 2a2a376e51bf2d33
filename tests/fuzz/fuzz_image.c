/* Image decoding (image.h: PNG, JPEG, WebP through their libraries) on arbitrary bytes: a decode that
 * succeeds gives an image within the size limits whose every pixel byte can be read (ASan checks the
 * buffer), and applying any EXIF orientation keeps it whole; the EXIF reader answers 1..8 on any block. */
#include <string.h>

#include "fuzz.h"
#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const int o = eli_exif_orientation(data, size);
    FUZZ_ASSERT(o >= 1 && o <= 8, "EXIF orientation %d", o);
    eli_image img;
    eli_error err = {0};
    if (eli_image_decode(data, size, &img, &err)) {
        FUZZ_ASSERT(err.code < 0 && err.msg[0] && !img.rgb && !img.w && !img.h, "a failed decode without a message or with pixels");
        return 0;
    }
    FUZZ_ASSERT(img.rgb && img.w >= 1 && img.h >= 1 && img.w <= ELI_IMAGE_MAX_SIDE && img.h <= ELI_IMAGE_MAX_SIDE &&
                    (int64_t)img.w * img.h <= ELI_IMAGE_MAX_PIXELS,
                "decoded %d x %d", img.w, img.h);
    unsigned sum = 0;
    for (size_t i = 0; i < (size_t)img.w * img.h * 3; i++) sum += img.rgb[i];
    const int w = img.w, h = img.h, turn = 2 + (int)(sum % 7);
    if (eli_image_orient(&img, turn, &err) == ELI_OK)
        FUZZ_ASSERT(img.rgb && (int64_t)img.w * img.h == (int64_t)w * h && (img.w == w || img.w == h),
                    "orientation %d turned %d x %d into %d x %d", turn, w, h, img.w, img.h);
    eli_image_free(&img);
    return 0;
}
