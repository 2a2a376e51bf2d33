// A real host: binds the installed libelizainference with koffi and follows the eliza host protocol
// exactly (tokenize, open with the 88-byte config struct, prefill, `next` in 32-token steps with a
// 1024-byte text buffer until it returns 1, then a second turn through reset_keep with the longest common
// prefix). The text must equal `eliza-infer run --temp 0` on the same prompt.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import test from "node:test";
import koffi from "koffi";

const LIB = process.env.ELI_LIB;
const CLI = process.env.ELI_CLI;
const MODEL = process.env.ELI_MODEL;
const N_PREDICT = 24;

const lib = koffi.load(LIB);
const abi_version = lib.func("const char *eliza_inference_abi_version()");
const create = lib.func("void *eliza_inference_create(const char *bundle, _Out_ void **err)");
const destroy = lib.func("void eliza_inference_destroy(void *ctx)");
const tokenize = lib.func(
  "int eliza_inference_tokenize(void *ctx, const char *text, size_t len, int add, int parse, _Out_ void **ids, _Out_ size_t *n, _Out_ void **err)");
const free_tokens = lib.func("void eliza_inference_free_tokens(void *p)");
const free_string = lib.func("void eliza_inference_free_string(void *p)");
const open = lib.func("void *eliza_inference_llm_stream_open(void *ctx, void *cfg, _Out_ void **err)");
const prefill = lib.func("int eliza_inference_llm_stream_prefill(void *s, const int32_t *ids, size_t n, _Out_ void **err)");
const next = lib.func(
  "int eliza_inference_llm_stream_next(void *s, _Out_ int32_t *toks, size_t cap, _Out_ size_t *n, _Out_ uint8_t *text, size_t tcap, _Out_ int32_t *drafted, _Out_ int32_t *accepted, _Out_ void **err)");
const reset_keep = lib.func("int eliza_inference_llm_stream_reset_keep(void *s, int32_t n)");
const close = lib.func("void eliza_inference_llm_stream_close(void *s)");
const probe = (name) => lib.func(`int ${name}()`)();

function errorText(box) {
  if (!box[0]) return "";
  const s = koffi.decode(box[0], "char", -1);
  free_string(box[0]);
  return s;
}

function tok(ctx, text) {
  const ids = [null], n = [0], err = [null];
  const bytes = Buffer.from(text, "utf8");
  const rc = tokenize(ctx, bytes, bytes.length, 1, 0, ids, n, err);
  assert.equal(rc, 0, errorText(err));
  const out = Array.from(koffi.decode(ids[0], "int32_t", Number(n[0])));
  free_tokens(ids[0]);
  return out;
}

// The config exactly as hosts lay it out: 88 bytes, little-endian, NULL pointers.
function config({ maxTokens, contextSize }) {
  const b = Buffer.alloc(88);
  b.writeInt32LE(maxTokens, 0);   // max_tokens
  b.writeFloatLE(0, 4);           // temperature: greedy
  b.writeFloatLE(1, 8);           // top_p
  b.writeInt32LE(0, 12);          // top_k
  b.writeFloatLE(1, 16);          // repeat_penalty
  b.writeInt32LE(-1, 20);         // slot_id
  b.writeInt32LE(0, 32);          // draft_min
  b.writeInt32LE(0, 36);          // draft_max
  b.writeInt32LE(1, 56);          // disable_thinking
  b.writeInt32LE(0, 60);          // n_gpu_layers
  b.writeInt32LE(contextSize, 80);
  return b;
}

function generate(s) {
  let text = "";
  const ids = [];
  for (let guard = 0; guard < 10000; guard++) {
    const toks = new Int32Array(32), n = [0], buf = Buffer.alloc(1024), d = [0], a = [0], err = [null];
    const rc = next(s, toks, 32, n, buf, 1024, d, a, err);
    assert.ok(rc >= 0, errorText(err));
    ids.push(...toks.slice(0, Number(n[0])));
    text += buf.toString("utf8", 0, buf.indexOf(0));
    if (rc === 1) return { text, ids };
  }
  throw new Error("next never returned 1");
}

function cliText(prompt) {
  return execFileSync(CLI, ["run", "-m", MODEL, "-p", prompt, "-n", String(N_PREDICT), "--temp", "0"], {
    encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
}

test("the host protocol through the installed library", () => {
  assert.equal(abi_version(), "13");
  for (const p of ["eliza_inference_llm_stream_supported", "eliza_inference_tokenize_supported",
                   "eliza_inference_llm_kv_quant_supported"]) assert.equal(probe(p), 1, p);
  const err = [null];
  const ctx = create(MODEL, err);
  assert.ok(ctx, errorText(err));

  const prompt1 = "It is a truth universally acknowledged";
  const ids1 = tok(ctx, prompt1);
  const s = open(ctx, config({ maxTokens: N_PREDICT, contextSize: 2048 }), err);
  assert.ok(s, errorText(err));
  assert.equal(prefill(s, Int32Array.from(ids1), ids1.length, err), 0, errorText(err));
  const turn1 = generate(s);
  assert.equal(turn1.text, cliText(prompt1));

  // Second turn: the new prompt extends the first; keep the longest common prefix of the tokens.
  const prompt2 = prompt1 + turn1.text + " And then";
  const ids2 = tok(ctx, prompt2);
  const had = ids1.concat(turn1.ids);
  let lcp = 0;
  while (lcp < had.length && lcp < ids2.length && had[lcp] === ids2[lcp]) lcp++;
  if (lcp === ids2.length) lcp--;
  const kept = reset_keep(s, lcp);
  assert.equal(kept, lcp);
  const rest = ids2.slice(kept);
  assert.equal(prefill(s, Int32Array.from(rest), rest.length, err), 0, errorText(err));
  const turn2 = generate(s);
  assert.equal(turn2.text, cliText(prompt2));

  close(s);
  destroy(ctx);
});
