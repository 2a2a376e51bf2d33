/* Tests of the Gemma 4 chat template (src/chat.c) and the chat-template CLI.
 *
 * Template revision followed: llama.cpp models/templates/google-gemma-4-31B-it.jinja at commit 3fc65063d
 * (PR #21704, "better align to the updated official gemma4 template"; identical at [LC] HEAD 3f545becc),
 * with Python Jinja2 semantics. Every expected string below was derived by hand from that template
 * (the rule it exercises is named next to it) and cross-checked once against Jinja2 3.1.6 rendering the
 * template with trim_blocks/lstrip_blocks, as Hugging Face does. */
#include <stdint.h>
#include <unistd.h>

#include "chat.h"
#include "json.h"
#include "test.h"

#define GEN "<|turn>model\n<|channel>thought\n<channel|>" /* generation prompt, thinking off */
#define Q "<|\"|>"

enum { THINK = 1, NO_GEN = 2 };

/* Renders a JSON document (messages array or {messages, tools}) with flags; returns malloc'ed text or
 * NULL with the error in *err. */
static char *render(const char *json, int flags, eli_error *err) {
    eli_error_clear(err);
    eli_json *doc = eli_json_parse(json, strlen(json), err);
    if (!doc) return NULL;
    const eli_json *messages, *tools;
    char *out = NULL;
    if (!eli_chat_split_document(doc, &messages, &tools, err)) {
        eli_chat_options o = eli_chat_default_options();
        o.enable_thinking = !!(flags & THINK);
        o.add_generation_prompt = !(flags & NO_GEN);
        o.tools = tools;
        size_t len = 0;
        if (!eli_chat_render(messages, &o, &out, &len, err) && strlen(out) != len) {
            free(out);
            out = NULL;
        }
    }
    eli_json_free(doc);
    return out;
}

static void expect(const char *json, int flags, const char *want, int line) {
    eli_error err;
    char *got = render(json, flags, &err);
    CHECK(got && !strcmp(got, want), "line %d:\n--- got ---\n%s\n--- want ---\n%s\n--- error: %s", line,
          got ? got : "(null)", want, got ? "" : err.msg);
    free(got);
}
#define EXPECT(json, flags, want) expect(json, flags, want, __LINE__)

static void expect_error(const char *json, int flags, const char *needle, int line) {
    eli_error err;
    char *got = render(json, flags, &err);
    CHECK(!got && err.code == ELI_ERR_INVALID_ARG && strstr(err.msg, needle), "line %d: got %s, error '%s'",
          line, got ? got : "(null)", err.msg);
    free(got);
}
#define EXPECT_ERROR(json, flags, needle) expect_error(json, flags, needle, __LINE__)

static void test_basic_turns(void) {
    const char *hello = "[{\"role\":\"user\",\"content\":\"Hello\"}]";
    /* No system turn without system message, tools or thinking; empty thought channel in the prompt. */
    EXPECT(hello, 0, "<bos><|turn>user\nHello<turn|>\n" GEN);
    /* Thinking: a system turn holding only <|think|>, and the prompt opens the model turn bare. */
    EXPECT(hello, THINK, "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHello<turn|>\n<|turn>model\n");
    EXPECT(hello, NO_GEN, "<bos><|turn>user\nHello<turn|>\n");
    EXPECT(hello, THINK | NO_GEN, "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHello<turn|>\n");

    /* System message: consumed into the system turn, trimmed (Python str.strip: also U+00A0, U+3000). */
    EXPECT("[{\"role\":\"system\",\"content\":\" \\u00a0Be brief.\\n\\u3000\"},{\"role\":\"user\",\"content\":\"\\tHi \\n\"}]",
           0, "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n" GEN);
    EXPECT("[{\"role\":\"developer\",\"content\":\"Rules\"},{\"role\":\"user\",\"content\":\"Hi\"}]", THINK,
           "<bos><|turn>system\n<|think|>\nRules<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
    /* A system message alone: the turn, then the generation prompt. */
    EXPECT("[{\"role\":\"system\",\"content\":\"S\"}]", 0, "<bos><|turn>system\nS<turn|>\n" GEN);
    /* First system message as text parts: concatenated, then trimmed (our deviation from repr()). */
    EXPECT("[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\" A\"},{\"type\":\"text\",\"text\":\"B \"}]},"
           "{\"role\":\"user\",\"content\":\"u\"}]",
           NO_GEN, "<bos><|turn>system\nAB<turn|>\n<|turn>user\nu<turn|>\n");

    /* Multi-turn: assistant is rendered as model; its content loses <|channel>...<channel|> spans and is
     * trimmed; reasoning_content of a turn without tool calls is dropped. */
    EXPECT("[{\"role\":\"user\",\"content\":\"Q1\"},"
           "{\"role\":\"assistant\",\"reasoning_content\":\"secret\",\"content\":\"<|channel>thought\\nhmm<channel|> A1 \"},"
           "{\"role\":\"user\",\"content\":\"Q2\"}]",
           0, "<bos><|turn>user\nQ1<turn|>\n<|turn>model\nA1<turn|>\n<|turn>user\nQ2<turn|>\n" GEN);
    /* strip_thinking: text after an unclosed <|channel> is dropped; text after <channel|> is kept. */
    EXPECT("[{\"role\":\"assistant\",\"content\":\"a<|channel>x<channel|>b<channel|>c<|channel>tail\"}]", NO_GEN,
           "<bos><|turn>model\nabc<turn|>\n");
    /* A system message later in the conversation is an ordinary turn; a second assistant message in a row
     * continues the model's turn without a new header. */
    EXPECT("[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"system\",\"content\":\" s \"},"
           "{\"role\":\"assistant\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}]",
           NO_GEN, "<bos><|turn>user\nu<turn|>\n<|turn>system\ns<turn|>\n<|turn>model\na<turn|>\nb<turn|>\n");
    /* An empty assistant content still closes its turn. */
    EXPECT("[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"assistant\",\"content\":\"\"}]", 0,
           "<bos><|turn>user\nu<turn|>\n<|turn>model\n<turn|>\n" GEN);
}

static void test_content_parts(void) {
    /* Each text part trimmed on its own, media placeholders in place, parts joined with nothing. */
    EXPECT("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\" Look at \"},{\"type\":\"image\"},"
           "{\"type\":\"text\",\"text\":\"\\nand hear \"},{\"type\":\"audio\"},{\"type\":\"video\"}]}]",
           0, "<bos><|turn>user\nLook at<|image|>and hear<|audio|><|video|><turn|>\n" GEN);
    /* Model parts go through strip_thinking each. */
    EXPECT("[{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\" x <|channel>t<channel|>y \"},"
           "{\"type\":\"image\"}]}]",
           NO_GEN, "<bos><|turn>model\nx y<|image|><turn|>\n");
    EXPECT("[{\"role\":\"user\",\"content\":[]}]", NO_GEN, "<bos><|turn>user\n<turn|>\n");
}

static const char *weather_tool =
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get the weather\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"location\":{\"type\":\"string\",\"description\":\"City\"},"
    "\"unit\":{\"type\":\"string\",\"enum\":[\"c\",\"f\"]},"
    "\"Days\":{\"type\":\"integer\",\"nullable\":true}},"
    "\"required\":[\"location\"]}}}";

static void test_tool_declarations(void) {
    char doc[4096];
    /* Properties in dictsort order (case-insensitive: Days < location < unit); description, enum,
     * nullable, type in the template's order; required and type of the parameters object. */
    snprintf(doc, sizeof doc, "{\"tools\":[%s],\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]}",
             weather_tool);
    EXPECT(doc, 0,
           "<bos><|turn>system\n<|tool>declaration:get_weather{description:" Q "Get the weather" Q
           ",parameters:{properties:{Days:{nullable:true,type:" Q "INTEGER" Q "},location:{description:" Q "City" Q
           ",type:" Q "STRING" Q "},unit:{enum:[" Q "c" Q "," Q "f" Q "],type:" Q "STRING" Q "}},required:[" Q
           "location" Q "],type:" Q "OBJECT" Q "}}<tool|><turn|>\n<|turn>user\nWeather?<turn|>\n" GEN);

    /* With a system message and thinking: <|think|>, the text, then the tools, in one system turn.
     * A function without parameters has just name and description. */
    EXPECT("{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"ping\",\"description\":\"Ping\"}}],"
           "\"messages\":[{\"role\":\"system\",\"content\":\"Sys\"},{\"role\":\"user\",\"content\":\"u\"}]}",
           THINK | NO_GEN,
           "<bos><|turn>system\n<|think|>\nSys<|tool>declaration:ping{description:" Q "Ping" Q
           "}<tool|><turn|>\n<|turn>user\nu<turn|>\n");

    /* Nested schemas: array items (keys sorted, type upper-cased, other keys through format_argument with
     * quoted keys), object properties and required, an object without properties (its own non-standard
     * keys), a list type (printed as Python's str of the list, upper-cased). */
    EXPECT("{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":"
           "{\"type\":\"object\",\"properties\":{"
           "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":5,\"meta\":{\"k\":1}}},"
           "\"opts\":{\"type\":\"object\",\"properties\":{\"on\":{\"type\":\"boolean\"}},\"required\":[\"on\"]},"
           "\"free\":{\"type\":\"object\"},"
           "\"multi\":{\"type\":[\"string\",\"null\"]},"
           "\"rows\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}},"
           "\"required\":[\"x\"]}},"
           "\"type\":{\"type\":\"string\"}}}}}],"
           "\"messages\":[{\"role\":\"user\",\"content\":\"u\"}]}",
           NO_GEN,
           "<bos><|turn>system\n<|tool>declaration:f{description:" Q "d" Q ",parameters:{properties:{"
           "free:{properties:{},type:" Q "OBJECT" Q "},"
           "multi:{type:" Q "['STRING', 'NULL']" Q "},"
           "opts:{properties:{on:{type:" Q "BOOLEAN" Q "}},required:[" Q "on" Q "],type:" Q "OBJECT" Q "},"
           "rows:{items:{properties:{x:{type:" Q "NUMBER" Q "}},required:[" Q "x" Q "],type:" Q "OBJECT" Q "},type:" Q
           "ARRAY" Q "},"
           "tags:{items:{maxLength:5,meta:{" Q "k" Q ":1},type:" Q "STRING" Q "},type:" Q "ARRAY" Q "}"
           "},type:" Q "OBJECT" Q "}}<tool|><turn|>\n<|turn>user\nu<turn|>\n");

    /* Template quirks kept: a parameters object without "type" never closes its brace; a "response"
     * declaration adds its description and, for OBJECT, its type. */
    EXPECT("{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"g\",\"description\":\"d\","
           "\"parameters\":{\"properties\":{\"q\":{\"type\":\"string\"}}},"
           "\"response\":{\"description\":\"r\",\"type\":\"object\"}}}],"
           "\"messages\":[{\"role\":\"user\",\"content\":\"u\"}]}",
           NO_GEN,
           "<bos><|turn>system\n<|tool>declaration:g{description:" Q "d" Q ",parameters:{properties:{q:{type:" Q
           "STRING" Q "}},,response:{description:" Q "r" Q ",type:" Q "OBJECT" Q "}}<tool|><turn|>\n"
           "<|turn>user\nu<turn|>\n");

    /* An empty tools list is the same as none. */
    EXPECT("{\"tools\":[],\"messages\":[{\"role\":\"user\",\"content\":\"u\"}]}", 0,
           "<bos><|turn>user\nu<turn|>\n" GEN);
}

static void test_tool_calls(void) {
    /* Full OpenAI round trip: arguments as a JSON string are rendered as the object (keys sorted,
     * unquoted; strings in <|"|>; ints as written, floats as Python repr, bools lower case, null as None,
     * nested mapping keys unquoted); the tool messages that follow become tool responses named through
     * tool_call_id; the final assistant message continues the same model turn. Reasoning of a turn
     * before the last user message is dropped. */
    EXPECT("[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
           "{\"role\":\"assistant\",\"reasoning_content\":\"call it\",\"content\":null,\"tool_calls\":["
           "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
           "\"{\\\"location\\\":\\\"Paris\\\",\\\"days\\\":3,\\\"ratio\\\":1.0,\\\"eps\\\":1e-7,\\\"big\\\":1e16,"
           "\\\"ok\\\":true,\\\"none\\\":null,\\\"list\\\":[1,\\\"a\\\",{\\\"Z\\\":1,\\\"a\\\":2}]}\"}},"
           "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":{}}}]},"
           "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"noon\"},"
           "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"sunny \"},"
           "{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"20C\"}]},"
           "{\"role\":\"assistant\",\"content\":\"Sunny, 20C.\"},"
           "{\"role\":\"user\",\"content\":\"Thanks\"}]",
           0,
           "<bos><|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n"
           "<|tool_call>call:get_weather{big:1e+16,days:3,eps:1e-07,list:[1," Q "a" Q ",{a:2,Z:1}],location:" Q "Paris" Q
           ",none:None,ok:true,ratio:1.0}<tool_call|>"
           "<|tool_call>call:get_time{}<tool_call|>"
           "<|tool_response>response:get_time{value:" Q "noon" Q "}<tool_response|>"
           "<|tool_response>response:get_weather{value:" Q "sunny 20C" Q "}<tool_response|>"
           "Sunny, 20C.<turn|>\n<|turn>user\nThanks<turn|>\n" GEN);

    /* After the last user message, the reasoning of a tool-call turn is kept in a thought channel; the
     * turn stays open after the tool results and no generation prompt follows (the model goes on). */
    EXPECT("[{\"role\":\"user\",\"content\":\"Q\"},"
           "{\"role\":\"assistant\",\"reasoning\":\"plan\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
           "\"arguments\":{\"x\":-2.5}}}]},"
           "{\"role\":\"tool\",\"content\":\"r\"}]",
           0,
           "<bos><|turn>user\nQ<turn|>\n<|turn>model\n<|channel>thought\nplan\n<channel|>"
           "<|tool_call>call:f{x:-2.5}<tool_call|><|tool_response>response:f{value:" Q "r" Q "}<tool_response|>");

    /* A tool call with no result yet: the turn ends with <|tool_response> and no generation prompt.
     * Arguments that are not a JSON object are emitted raw. */
    EXPECT("[{\"role\":\"user\",\"content\":\"Q\"},"
           "{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"a=1\"}}]}]",
           THINK,
           "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nQ<turn|>\n<|turn>model\n"
           "<|tool_call>call:f{a=1}<tool_call|><|tool_response>");

    /* Tool call plus content: the content follows the calls, and with no result it still ends with
     * <|tool_response>. */
    EXPECT("[{\"role\":\"assistant\",\"content\":\" Checking. \",\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]}]", 0,
           "<bos><|turn>model\n<|tool_call>call:f{}<tool_call|>Checking.<|tool_response>");

    /* Names: without ids on either side every result matches (None == None), so the last call's name
     * wins; a result whose id matches nothing uses its own "name". Non-string results print via str(). */
    EXPECT("[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"a\"}},{\"function\":{\"name\":\"b\"}}]},"
           "{\"role\":\"tool\",\"content\":7},"
           "{\"role\":\"tool\",\"tool_call_id\":\"zz\",\"name\":\"named\",\"content\":true},"
           "{\"role\":\"assistant\",\"content\":\"done\"}]",
           0,
           "<bos><|turn>model\n<|tool_call>call:a{}<tool_call|><|tool_call>call:b{}<tool_call|>"
           "<|tool_response>response:b{value:7}<tool_response|>"
           "<|tool_response>response:named{value:true}<tool_response|>done<turn|>\n" GEN);

    /* An object result renders as key:value pairs (deviation: Jinja2 fails on it, see chat.c). */
    EXPECT("[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"1\",\"function\":{\"name\":\"f\"}}]},"
           "{\"role\":\"tool\",\"tool_call_id\":\"1\",\"content\":{\"temp\":20,\"sky\":\"clear\"}}]",
           0, "<bos><|turn>model\n<|tool_call>call:f{}<tool_call|>"
              "<|tool_response>response:f{sky:" Q "clear" Q ",temp:20}<tool_response|>");

    /* Gemma-native tool_responses on the assistant message: mapping as pairs, other values as value:,
     * missing name "unknown"; with content the turn closes, and the generation prompt is still
     * suppressed (the last thing was a tool response). */
    EXPECT("[{\"role\":\"user\",\"content\":\"Q\"},"
           "{\"role\":\"assistant\",\"content\":\"ok\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"k\":[true,null]}}}],"
           "\"tool_responses\":[{\"name\":\"f\",\"response\":{\"b\":1.5,\"A\":\"x\"}},{\"response\":[1,2]}]}]",
           0,
           "<bos><|turn>user\nQ<turn|>\n<|turn>model\n<|tool_call>call:f{k:[true,None]}<tool_call|>"
           "<|tool_response>response:f{A:" Q "x" Q ",b:1.5}<tool_response|>"
           "<|tool_response>response:unknown{value:[1,2]}<tool_response|>ok<turn|>\n");
}

static void test_errors(void) {
    eli_error err;
    char *out = (char *)1;
    eli_error_clear(&err);
    CHECK(eli_chat_render(NULL, NULL, &out, NULL, &err) == ELI_ERR_INVALID_ARG && out == NULL, "NULL messages");
    EXPECT_ERROR("[]", 0, "messages is empty");
    EXPECT_ERROR("{\"messages\":{}}", 0, "\"messages\" must be an array");
    EXPECT_ERROR("{\"messages\":[],\"tools\":{}}", 0, "\"tools\" must be an array");
    EXPECT_ERROR("\"text\"", 0, "expected a messages array");
    EXPECT_ERROR("[1]", 0, "message 0: not an object");
    EXPECT_ERROR("[{\"content\":\"x\"}]", 0, "message 0: has no \"role\"");
    EXPECT_ERROR("[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"robot\",\"content\":\"x\"}]", 0,
                 "message 1: unknown role 'robot'");
    EXPECT_ERROR("[{\"role\":\"user\"}]", 0, "message 0: missing \"content\"");
    EXPECT_ERROR("[{\"role\":\"user\",\"content\":null}]", 0, "missing \"content\"");
    EXPECT_ERROR("[{\"role\":\"assistant\"}]", 0, "missing \"content\"");
    EXPECT_ERROR("[{\"role\":\"user\",\"content\":{\"a\":1}}]", 0, "must be a string or an array");
    EXPECT_ERROR("[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]", 0,
                 "unsupported content part type 'image_url'");
    EXPECT_ERROR("[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]", 0, "no string \"text\"");
    EXPECT_ERROR("[{\"role\":\"user\",\"content\":[\"x\"]}]", 0, "part is not an object");
    EXPECT_ERROR("[{\"role\":\"system\",\"content\":[{\"type\":\"image\"}]}]", 0, "only have text parts");
    EXPECT_ERROR("[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"tool\",\"content\":\"r\"}]", 0,
                 "message 1: a tool message must follow an assistant message with tool_calls");
    EXPECT_ERROR("[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"1\",\"function\":{\"name\":\"f\"}}]},"
                 "{\"role\":\"tool\",\"tool_call_id\":\"2\",\"content\":\"r\"}]",
                 0, "message 1: tool result has no \"name\"");
    EXPECT_ERROR("[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"1\",\"function\":{\"name\":\"f\"}}]},"
                 "{\"role\":\"tool\",\"tool_call_id\":\"1\"}]",
                 0, "message 1: missing \"content\"");
    EXPECT_ERROR("[{\"role\":\"assistant\",\"tool_calls\":{\"a\":1}}]", 0, "\"tool_calls\" must be an array");
    EXPECT_ERROR("[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{}}]}]", 0, "no string \"function.name\"");
    EXPECT_ERROR("[{\"role\":\"assistant\",\"tool_responses\":[{\"name\":\"f\"}]}]", 0, "has no \"response\"");
    EXPECT_ERROR("[{\"role\":\"assistant\",\"content\":\"x\",\"reasoning\":5}]", 0, "reasoning content must be a string");
    EXPECT_ERROR("{\"tools\":[{\"name\":\"f\"}],\"messages\":[{\"role\":\"user\",\"content\":\"u\"}]}", 0,
                 "tool 0 is not an object with a \"function\" object");
    EXPECT_ERROR("{\"tools\":[{\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":[1]}}}],"
                 "\"messages\":[{\"role\":\"user\",\"content\":\"u\"}]}",
                 0, "tool 0: tool declaration: \"parameters.properties\" must be an object");
}

static void test_split_document(void) {
    eli_json *doc = eli_json_parse("[]", 2, NULL);
    const eli_json *m = NULL, *t = (const eli_json *)1;
    CHECK(doc && !eli_chat_split_document(doc, &m, &t, NULL) && m == doc && t == NULL, "array document");
    eli_json_free(doc);
    const char *obj = "{\"messages\":[],\"tools\":null}";
    doc = eli_json_parse(obj, strlen(obj), NULL);
    CHECK(doc && !eli_chat_split_document(doc, &m, &t, NULL) && m == eli_json_get(doc, "messages") && t == NULL,
          "object document, null tools");
    eli_json_free(doc);
}

#ifdef ELI_CLI
/* Runs the CLI on a temporary file and compares its stdout with want. */
static void check_cli(const char *json, const char *flags, const char *want, int want_rc) {
    char path[] = "/tmp/eli_test_chat_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    size_t len = strlen(json);
    CHECK(write(fd, json, len) == (ssize_t)len, "write");
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' chat-template --messages '%s' %s 2>/dev/null", ELI_CLI, path, flags);
    FILE *p = popen(cmd, "r");
    char buf[4096];
    size_t n = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
    buf[n] = '\0';
    int st = p ? pclose(p) : -1;
    int rc = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    CHECK(rc == want_rc && !strcmp(buf, want), "cli %s: rc %d, output '%s'", flags, rc, buf);
    unlink(path);
}

static void test_cli(void) {
    check_cli("[{\"role\":\"user\",\"content\":\"Hi\"}]", "", "<bos><|turn>user\nHi<turn|>\n" GEN, 0);
    check_cli("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":[{\"type\":\"function\","
              "\"function\":{\"name\":\"p\",\"description\":\"d\"}}]}",
              "--thinking --no-generation-prompt",
              "<bos><|turn>system\n<|think|>\n<|tool>declaration:p{description:" Q "d" Q "}<tool|><turn|>\n"
              "<|turn>user\nHi<turn|>\n",
              0);
    check_cli("[{\"role\":\"robot\",\"content\":\"Hi\"}]", "", "", 1);
    check_cli("[{\"role\":", "", "", 1);
    check_cli("[]", "--bogus", "", 2);
}
#endif

int main(void) {
    test_basic_turns();
    test_content_parts();
    test_tool_declarations();
    test_tool_calls();
    test_errors();
    test_split_document();
#ifdef ELI_CLI
    test_cli();
#endif
    TEST_MAIN_END();
}
