/* Tests of the strict JSON parser and the string quoter (src/json.c). */
#include <math.h>

#include "json.h"
#include "test.h"

static eli_json *parse(const char *s) { return eli_json_parse(s, strlen(s), NULL); }

/* Expects s to be rejected with "at byte <offset>" in the message. */
static void expect_error(const char *s, size_t len, size_t offset, int line) {
    eli_error err;
    eli_error_clear(&err);
    eli_json *v = eli_json_parse(s, len, &err);
    char want[64];
    snprintf(want, sizeof want, "at byte %zu:", offset);
    CHECK(v == NULL, "line %d: accepted invalid input", line);
    CHECK(err.code == ELI_ERR_INVALID_ARG, "line %d: code %d", line, err.code);
    CHECK(strstr(err.msg, want) != NULL, "line %d: message '%s' lacks '%s'", line, err.msg, want);
    eli_json_free(v);
}
#define BAD(s, off) expect_error(s, sizeof(s) - 1, off, __LINE__)

static void test_scalars(void) {
    eli_json *v = parse(" null ");
    CHECK(v && v->type == ELI_JSON_NULL, "null");
    eli_json_free(v);
    v = parse("true");
    CHECK(v && v->type == ELI_JSON_BOOL && v->boolean == 1, "true");
    eli_json_free(v);
    v = parse("\t\r\nfalse\n");
    CHECK(v && v->type == ELI_JSON_BOOL && v->boolean == 0, "false");
    eli_json_free(v);

    struct {
        const char *text;
        double value;
    } nums[] = {{"0", 0},       {"-0", -0.0},      {"42", 42},          {"-17", -17},       {"3.25", 3.25},
                {"1e3", 1000},  {"1E+2", 100},     {"2.5e-3", 0.0025},  {"-0.0e0", -0.0},   {"1e-400", 0},
                {"123456789012345678901234567890", 1.2345678901234568e29}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        v = parse(nums[i].text);
        CHECK(v && v->type == ELI_JSON_NUMBER && v->number == nums[i].value, "number %s", nums[i].text);
        eli_json_free(v);
    }
    v = parse("-0");
    CHECK(v && signbit(v->number), "-0 keeps its sign");
    eli_json_free(v);
    /* Numbers keep their literal text (extension used by the chat template). */
    v = parse(" [1.50, -0, 12345678901234567890123, 2E+3] ");
    CHECK(v && v->n == 4, "number array");
    if (v && v->n == 4) {
        CHECK(!strcmp(v->items[0].str, "1.50") && v->items[0].str_len == 4, "literal 1.50");
        CHECK(!strcmp(v->items[1].str, "-0"), "literal -0");
        CHECK(!strcmp(v->items[2].str, "12345678901234567890123"), "literal big int");
        CHECK(!strcmp(v->items[3].str, "2E+3") && v->items[3].number == 2000, "literal 2E+3");
    }
    eli_json_free(v);

    v = parse("\"\"");
    CHECK(v && v->type == ELI_JSON_STRING && v->str_len == 0 && v->str[0] == '\0', "empty string");
    eli_json_free(v);
}

static void test_strings(void) {
    eli_json *v = parse("\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"");
    CHECK(v && v->type == ELI_JSON_STRING && !strcmp(v->str, "a\"b\\c/d\be\ff\ng\rh\ti"), "short escapes");
    eli_json_free(v);

    /* \u escapes: 1, 2 and 3 byte UTF-8, a surrogate pair (U+1F600) and an embedded NUL. */
    v = parse("\"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\\u0000z\"");
    CHECK(v && v->str_len == 1 + 2 + 3 + 4 + 1 + 1, "escape lengths %zu", v ? v->str_len : 0);
    CHECK(v && !memcmp(v->str, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\0z", 12), "escape bytes");
    CHECK(v && v->str[12] == '\0', "NUL terminated");
    eli_json_free(v);

    /* Raw valid UTF-8 passes through: 2, 3, 4 byte forms and the largest code point U+10FFFF. */
    v = parse("\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF\"");
    CHECK(v && v->str_len == 13 && !memcmp(v->str, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF", 13),
          "raw UTF-8");
    eli_json_free(v);

    /* DEL (0x7F) is not a control character for JSON. */
    v = parse("\"\x7f\"");
    CHECK(v && v->str_len == 1, "DEL allowed");
    eli_json_free(v);
}

static void test_containers(void) {
    eli_json *v = parse("[]");
    CHECK(v && v->type == ELI_JSON_ARRAY && v->n == 0, "empty array");
    eli_json_free(v);
    v = parse("{ }");
    CHECK(v && v->type == ELI_JSON_OBJECT && v->n == 0, "empty object");
    CHECK(eli_json_get(v, "x") == NULL, "get on empty object");
    eli_json_free(v);

    const char *doc = "{\"role\": \"user\", \"n\": 3, \"ok\": true, \"list\": [1, [2, {\"deep\": null}], \"s\"],"
                      " \"obj\": {\"a\": {}}, \"role\": \"dup\"}";
    v = parse(doc);
    CHECK(v && v->type == ELI_JSON_OBJECT && v->n == 6, "object count");
    CHECK(v && !strcmp(eli_json_get_str(v, "role"), "user"), "first duplicate wins");
    CHECK(eli_json_get_str(v, "n") == NULL, "get_str on a number is NULL");
    CHECK(eli_json_get_str(v, "missing") == NULL, "missing key");
    CHECK(eli_json_get_bool(v, "ok", 0) == 1, "bool member");
    CHECK(eli_json_get_bool(v, "n", 7) == 7, "bool default on wrong type");
    CHECK(eli_json_get_bool(v, "none", 5) == 5, "bool default on missing");
    const eli_json *n = eli_json_get(v, "n");
    CHECK(n && n->type == ELI_JSON_NUMBER && n->number == 3, "number member");
    const eli_json *list = eli_json_get(v, "list");
    CHECK(list && list->type == ELI_JSON_ARRAY && list->n == 3, "array member");
    if (list && list->n == 3) {
        CHECK(list->items[0].number == 1, "list[0]");
        const eli_json *inner = &list->items[1];
        CHECK(inner->type == ELI_JSON_ARRAY && inner->n == 2, "nested array");
        if (inner->n == 2) {
            const eli_json *deep = eli_json_get(&inner->items[1], "deep");
            CHECK(deep && deep->type == ELI_JSON_NULL, "deep null");
        }
        CHECK(list->items[2].type == ELI_JSON_STRING && !strcmp(list->items[2].str, "s"), "list[2]");
    }
    const eli_json *obj = eli_json_get(v, "obj");
    CHECK(obj && eli_json_get(obj, "a") && eli_json_get(obj, "a")->type == ELI_JSON_OBJECT, "nested object");
    CHECK(eli_json_get(list, "x") == NULL, "get on array is NULL");
    CHECK(eli_json_get(NULL, "x") == NULL, "get on NULL");
    eli_json_free(v);

    /* A big array exercises growth. */
    char big[4096];
    size_t o = 0;
    big[o++] = '[';
    for (int i = 0; i < 1000; i++) o += (size_t)snprintf(big + o, sizeof big - o, i ? ",%d" : "%d", i % 10);
    big[o++] = ']';
    v = eli_json_parse(big, o, NULL);
    CHECK(v && v->n == 1000 && v->items[999].number == 9, "1000 items");
    eli_json_free(v);

    /* Depth: 128 nested arrays parse, 129 do not. */
    char nest[600];
    for (int d = 128; d <= 129; d++) {
        memset(nest, '[', (size_t)d);
        memset(nest + d, ']', (size_t)d);
        eli_error err;
        eli_error_clear(&err);
        v = eli_json_parse(nest, 2 * (size_t)d, &err);
        if (d == 128) CHECK(v != NULL, "depth 128 accepted: %s", err.msg);
        else CHECK(v == NULL && strstr(err.msg, "at byte 128:") && strstr(err.msg, "deep"), "depth 129: %s", err.msg);
        eli_json_free(v);
    }

    /* Leading BOM is ignored (RFC 8259 8.1). */
    v = parse("\xEF\xBB\xBF{\"a\":1}");
    CHECK(v && v->type == ELI_JSON_OBJECT, "BOM");
    eli_json_free(v);
}

static void test_invalid(void) {
    BAD("", 0);
    BAD("   ", 3);
    BAD("nul", 0);
    BAD("True", 0);
    BAD("nullx", 4);
    BAD("1 2", 2);
    BAD("01", 1);
    BAD("-", 1);
    BAD("+1", 0);
    BAD(".5", 0);
    BAD("1.", 2);
    BAD("1.e3", 2);
    BAD("1e", 2);
    BAD("1e+", 3);
    BAD("0x10", 1);
    BAD("NaN", 0);
    BAD("Infinity", 0);
    BAD("-Infinity", 1);
    BAD("1e400", 0);
    BAD("[1,]", 3);
    BAD("[,1]", 1);
    BAD("[1 2]", 3);
    BAD("[1", 2);
    BAD("{\"a\":1,}", 7);
    BAD("{\"a\" 1}", 5);
    BAD("{a:1}", 1);
    BAD("{\"a\":1", 6);
    BAD("{\"a\":}", 5);
    BAD("{1:2}", 1);
    BAD("[1]]", 3);
    BAD("// c\n1", 0);
    BAD("'a'", 0);
    BAD("\"abc", 0);
    BAD("\"a\\", 0);
    BAD("\"a\nb\"", 2);
    BAD("\"\t\"", 1);
    BAD("\"\\x41\"", 1);
    BAD("\"\\u12\"", 1);
    BAD("\"\\u12G4\"", 1);
    BAD("\"ab\\ud800\"", 3);         /* lone high surrogate */
    BAD("\"\\ud800\\u0041\"", 1);    /* high followed by a non-surrogate */
    BAD("\"\\ud800\\ud800\"", 1);    /* high followed by high */
    BAD("\"\\udc00\"", 1);           /* lone low surrogate */
    BAD("\"\\ud800x\"", 1);
    BAD("\"a\x80\"", 2);             /* stray continuation byte */
    BAD("\"\xC0\xAF\"", 1);          /* overlong '/' */
    BAD("\"\xC1\xBF\"", 1);
    BAD("\"\xE0\x80\xAF\"", 1);      /* overlong 3-byte */
    BAD("\"\xED\xA0\x80\"", 1);      /* UTF-8-encoded surrogate */
    BAD("\"\xF0\x80\x80\xAF\"", 1);  /* overlong 4-byte */
    BAD("\"\xF4\x90\x80\x80\"", 1);  /* above U+10FFFF */
    BAD("\"\xF5\x80\x80\x80\"", 1);
    BAD("\"\xFF\"", 1);
    BAD("\"\xE2\x82\"", 1);          /* truncated sequence */
    BAD("\"\xC3\"", 1);
    BAD("\xC3\xA9", 0);              /* non-ASCII outside a string */
    BAD("[\"a\" \"b\"]", 5);
    BAD("\xEF\xBB\xBF", 3);          /* a BOM alone is no value */
    /* An embedded NUL outside strings is an unexpected character, inside a string a control char. */
    expect_error("[1,\0]", 5, 3, __LINE__);
    expect_error("\"a\0\"", 4, 2, __LINE__);
    /* Length is honoured: the text after len is never read. */
    eli_json *v = eli_json_parse("[1]garbage", 3, NULL);
    CHECK(v && v->n == 1, "len bounds the input");
    eli_json_free(v);
    v = eli_json_parse("\"abc\"", 4, NULL);
    CHECK(v == NULL, "string cut by len");
    eli_json_free(v);
    v = eli_json_parse("123", 2, NULL);
    CHECK(v && v->number == 12, "number cut by len");
    eli_json_free(v);
    v = eli_json_parse("tru", 3, NULL);
    CHECK(v == NULL, "literal cut by len");
    eli_json_free(v);
    eli_json_free(NULL);
}

static void test_quote(void) {
    struct {
        const char *in;
        size_t len;
        const char *out;
    } cases[] = {
        {"", 0, "\"\""},
        {"hello", 5, "\"hello\""},
        {"a\"b\\c/d", 7, "\"a\\\"b\\\\c/d\""},
        {"\n\t\r\b\f\x01\x1f", 7, "\"\\u000a\\u0009\\u000d\\u0008\\u000c\\u0001\\u001f\""},
        {"x\0y", 3, "\"x\\u0000y\""},
        {"\xC3\xA9\xF0\x9F\x98\x80\x7f", 7, "\"\xC3\xA9\xF0\x9F\x98\x80\x7f\""},
        {"a\x80z\xED\xA0\x80", 6, "\"a\\ufffdz\\ufffd\\ufffd\\ufffd\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *q = eli_json_quote(cases[i].in, cases[i].len);
        CHECK(q && !strcmp(q, cases[i].out), "quote case %zu: got %s", i, q ? q : "(null)");
        /* Round trip through the parser gives the input back (for the valid-UTF-8 cases). */
        if (q && i < 6) {
            eli_json *v = parse(q);
            CHECK(v && v->type == ELI_JSON_STRING && v->str_len == cases[i].len &&
                      !memcmp(v->str, cases[i].in, cases[i].len),
                  "round trip %zu", i);
            eli_json_free(v);
        }
        free(q);
    }
    /* Every single byte value round-trips or becomes U+FFFD, and the result always parses. */
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        char *q = eli_json_quote(&c, 1);
        eli_json *v = q ? parse(q) : NULL;
        CHECK(v && v->type == ELI_JSON_STRING, "byte %d quotes to valid JSON", b);
        if (v && b < 0x80) CHECK(v->str_len == 1 && (unsigned char)v->str[0] == b, "byte %d round trip", b);
        if (v && b >= 0x80) CHECK(v->str_len == 3 && !memcmp(v->str, "\xEF\xBF\xBD", 3), "byte %d -> U+FFFD", b);
        eli_json_free(v);
        free(q);
    }
}

int main(void) {
    test_scalars();
    test_strings();
    test_containers();
    test_invalid();
    test_quote();
    TEST_MAIN_END();
}
