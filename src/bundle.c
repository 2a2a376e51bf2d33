#include "bundle.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"

#define MANIFEST_NAME "eliza-1.manifest.json"
#define MANIFEST_MAX_BYTES (16u << 20) /* a manifest lists a handful of files; anything larger is not one */

static int is_regular(const char *p, off_t *size) {
    struct stat st;
    if (stat(p, &st) || !S_ISREG(st.st_mode)) return 0;
    if (size) *size = st.st_size;
    return 1;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Whether the lowercase name contains any of the words (NULL-terminated list; NULL list: none). */
static int names_any(const char *name, const char *const *words) {
    char low[512];
    size_t i;
    for (i = 0; name[i] && i < sizeof low - 1; i++)
        low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    low[i] = '\0';
    for (const char *const *w = words; w && *w; w++)
        if (strstr(low, *w)) return 1;
    return 0;
}

/* The first regular .gguf file in dir (sorted by name) whose name contains none of exclude and, when
 * require is set, one of require; NULL when none (or dir is absent). *oom is set on allocation failure. */
static char *find_gguf(const char *dir, const char *const *exclude, const char *const *require, int *oom) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) && !*oom) {
        if (!ends_with(e->d_name, ".gguf") || names_any(e->d_name, exclude)) continue;
        if (require && !names_any(e->d_name, require)) continue;
        if (n == cap) {
            char **g = realloc(names, (cap = cap ? 2 * cap : 8) * sizeof *g);
            if (!g) {
                *oom = 1;
                break;
            }
            names = g;
        }
        if (!(names[n] = strdup(e->d_name))) *oom = 1;
        else n++;
    }
    closedir(d);
    char *best = NULL;
    if (n && !*oom) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && !best && !*oom; i++) {
        char *p = join(dir, names[i]);
        if (!p) *oom = 1;
        else if (is_regular(p, NULL)) best = p;
        else free(p);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return best;
}

/* A manifest path stays inside the bundle: relative, no empty, "." or ".." component. */
static int safe_relative(const char *p) {
    if (!*p || *p == '/') return 0;
    for (const char *c = p; *c;) {
        const char *slash = strchr(c, '/');
        const size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (!len || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) return 0;
        c += len + (slash != NULL);
        if (slash && !*c) return 0; /* a trailing slash */
    }
    return 1;
}

static int check_entry(const char *dir, const eli_json *e, const char *where, eli_error *err) {
    if (!e || e->type != ELI_JSON_OBJECT) return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "manifest %s is not an object", where);
    const char *path = eli_json_get_str(e, "path");
    if (!path) return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "manifest %s has no \"path\" string", where);
    if (!safe_relative(path))
        return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "manifest %s: path '%s' is not a relative path inside the bundle",
                        where, path);
    const eli_json *size = eli_json_get(e, "size");
    if (!size) size = eli_json_get(e, "sizeBytes");
    if (size && (size->type != ELI_JSON_NUMBER || !(size->number >= 0) || size->number > 9.0e15 ||
                 floor(size->number) != size->number))
        return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "manifest %s: size of '%s' is not a byte count", where, path);
    char *full = join(dir, path);
    if (!full) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    off_t have = 0;
    const int present = is_regular(full, &have);
    free(full);
    if (!present)
        return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "manifest lists '%s', which is not a file in the bundle", path);
    if (size && (double)have != size->number)
        return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "manifest says '%s' has %.0f bytes, the file has %lld", path,
                        size->number, (long long)have);
    return ELI_OK;
}

static int check_list(const char *dir, const eli_json *list, const char *role, eli_error *err) {
    if (list->type != ELI_JSON_ARRAY)
        return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "manifest \"files\"%s%s is not an array", role ? " entry " : "",
                        role ? role : "");
    for (size_t i = 0; i < list->n; i++) {
        char where[160];
        snprintf(where, sizeof where, "file %zu%s%s", i, role ? " of " : "", role ? role : "");
        int rc = check_entry(dir, &list->items[i], where, err);
        if (rc) return rc;
    }
    return ELI_OK;
}

int eli_bundle_check_manifest(const char *dir, const char *json, size_t len, eli_error *err) {
    eli_json *doc = eli_json_parse(json, len, err);
    if (!doc) {
        if (err) err->code = ELI_ERR_BUNDLE_INVALID;
        return ELI_ERR_BUNDLE_INVALID;
    }
    int rc = ELI_OK;
    const eli_json *files = eli_json_get(doc, "files");
    if (doc->type != ELI_JSON_OBJECT) rc = eli_fail(err, ELI_ERR_BUNDLE_INVALID, "manifest is not a JSON object");
    else if (!files) rc = ELI_OK; /* nothing listed, nothing to check */
    else if (files->type == ELI_JSON_OBJECT)
        for (size_t i = 0; i < files->n && !rc; i++) rc = check_list(dir, &files->items[i], files->keys[i], err);
    else rc = check_list(dir, files, NULL, err);
    eli_json_free(doc);
    return rc;
}

static int check_manifest_file(const char *dir, eli_error *err) {
    char *path = join(dir, MANIFEST_NAME);
    if (!path) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    FILE *f = fopen(path, "rb");
    free(path);
    if (!f) return errno == ENOENT ? ELI_OK : eli_fail(err, ELI_ERR_BUNDLE_INVALID, "cannot read %s: %s", MANIFEST_NAME, strerror(errno));
    char *text = malloc(MANIFEST_MAX_BYTES + 1);
    size_t n = text ? fread(text, 1, MANIFEST_MAX_BYTES + 1, f) : 0;
    const int read_error = ferror(f);
    fclose(f);
    int rc;
    if (!text) rc = eli_fail(err, ELI_ERR_OOM, "out of memory");
    else if (read_error) rc = eli_fail(err, ELI_ERR_BUNDLE_INVALID, "cannot read %s", MANIFEST_NAME);
    else if (n > MANIFEST_MAX_BYTES) rc = eli_fail(err, ELI_ERR_BUNDLE_INVALID, "%s is larger than %u bytes", MANIFEST_NAME, MANIFEST_MAX_BYTES);
    else rc = eli_bundle_check_manifest(dir, text, n, err);
    free(text);
    if (rc) eli_error_prefix(err, "bundle '%s'", dir);
    return rc;
}

void eli_bundle_free(eli_bundle *b) {
    free(b->dir);
    free(b->text_path);
    free(b->mtp_path);
    free(b->mmproj_path);
    memset(b, 0, sizeof *b);
}

int eli_bundle_open(const char *path, eli_bundle *b, eli_error *err) {
    memset(b, 0, sizeof *b);
    if (!path || !*path) return eli_fail(err, ELI_ERR_INVALID_ARG, "bundle path is NULL or empty");
    struct stat st;
    if (stat(path, &st)) return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "'%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "'%s' is neither a directory nor a file", path);
    int oom = !(b->dir = strdup(path));
    if (!oom && S_ISREG(st.st_mode)) {
        oom = !(b->text_path = strdup(path)); /* a single .gguf file */
    } else if (!oom) {
        static const char *const text_exclude[] = {"mmproj", "tokenizer", "codec", NULL};
        static const char *const mmproj[] = {"mmproj", NULL};
        const char *const sub[] = {"text", "mtp", "vision"};
        char **out[] = {&b->text_path, &b->mtp_path, &b->mmproj_path};
        for (int i = 0; i < 3 && !oom; i++) {
            char *d = join(path, sub[i]);
            if (!d) oom = 1;
            else *out[i] = find_gguf(d, i == 0 ? text_exclude : NULL, i == 2 ? mmproj : NULL, &oom);
            free(d);
        }
    }
    int rc = ELI_OK;
    if (oom) rc = eli_fail(err, ELI_ERR_OOM, "out of memory");
    else if (!b->text_path) rc = eli_fail(err, ELI_ERR_BUNDLE_INVALID, "bundle '%s' has no text/*.gguf model", path);
    else if (S_ISDIR(st.st_mode)) rc = check_manifest_file(path, err);
    if (rc) eli_bundle_free(b);
    return rc;
}
