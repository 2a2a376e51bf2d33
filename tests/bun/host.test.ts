// The desktop host's way in: bun:ffi `dlopen` with ONE table holding every symbol of the host surface
// (../shared/spec/ffi.md); a single missing symbol and dlopen throws, as it does for the eliza desktop app.
// Then the host protocol through it: the 88-byte config marshalled by hand, the pull loop with step sizes
// 32 and 8, cancel, reset_keep against a fresh prefill, tokenize / detokenize / embed / eot_score, the
// verifier callback, and the families this build answers with NOT_IMPLEMENTED.
// Environment: ELI_LIB (the library), ELI_BUNDLE (the eliza-1-nano bundle), ELI_CLI (eliza-infer, the
// independent reference for the generated text).
import { expect, test } from "bun:test";
import { CString, JSCallback, dlopen, ptr, read } from "bun:ffi";
import { execFileSync } from "node:child_process";

const LIB = process.env.ELI_LIB!;
const BUNDLE = process.env.ELI_BUNDLE!;
const CLI = process.env.ELI_CLI!;

const OK = 0, NOT_IMPLEMENTED = -1, INVALID_ARG = -2, CANCELLED = -7;

// Every symbol, with its C signature (size_t = u64, pointers = ptr).
const P = "ptr", I = "i32", U = "u64", F = "f32", V = "void", C = "cstring";
const fn = (args: string[], returns: string) => ({ args, returns }) as const;
const table = {
  eliza_inference_abi_version: fn([], C),
  eliza_inference_create: fn([P, P], P),
  eliza_inference_destroy: fn([P], V),
  eliza_inference_mmap_acquire: fn([P, P, P], I),
  eliza_inference_mmap_evict: fn([P, P, P], I),
  eliza_inference_llm_stream_open: fn([P, P, P], P),
  eliza_inference_llm_stream_prefill: fn([P, P, U, P], I),
  eliza_inference_llm_stream_next: fn([P, P, U, P, P, U, P, P, P], I),
  eliza_inference_llm_stream_cancel: fn([P], I),
  eliza_inference_llm_stream_reset: fn([P], I),
  eliza_inference_llm_stream_reset_keep: fn([P, I], I),
  eliza_inference_llm_stream_save_slot: fn([P, P, P], I),
  eliza_inference_llm_stream_restore_slot: fn([P, P, P], I),
  eliza_inference_llm_stream_close: fn([P], V),
  eliza_inference_llm_stream_supported: fn([], I),
  eliza_inference_llm_mtp_supported: fn([], I),
  eliza_inference_llm_kv_quant_supported: fn([], I),
  eliza_inference_tokenize: fn([P, P, U, I, I, P, P, P], I),
  eliza_inference_detokenize: fn([P, P, U, I, I, P, U, P], I),
  eliza_inference_embed: fn([P, P, U, I, P, U, P, P], I),
  eliza_inference_llm_eot_score: fn([P, P, U, I, P, P, P, P], I),
  eliza_inference_tokenize_supported: fn([], I),
  eliza_inference_embed_supported: fn([], I),
  eliza_inference_llm_eot_supported: fn([], I),
  eliza_inference_free_string: fn([P], V),
  eliza_inference_free_tokens: fn([P], V),
  eliza_inference_vision_supported: fn([], I),
  eliza_inference_vision_stream_supported: fn([], I),
  eliza_inference_describe_image: fn([P, P, U, P, P, P, U, P], I),
  eliza_inference_describe_image_stream_open: fn([P, P, U, P, P, P], P),
  eliza_inference_asr_transcribe: fn([P, P, U, I, P, U, P], I),
  eliza_inference_asr_stream_supported: fn([], I),
  eliza_inference_asr_stream_open: fn([P, I, P], P),
  eliza_inference_asr_stream_feed: fn([P, P, U, P], I),
  eliza_inference_asr_stream_partial: fn([P, P, U, P, P, P], I),
  eliza_inference_asr_stream_finish: fn([P, P, U, P, P, P], I),
  eliza_inference_asr_stream_close: fn([P], V),
  eliza_inference_tts_synthesize: fn([P, P, U, P, P, U, P], I),
  eliza_inference_tts_stream_supported: fn([], I),
  eliza_inference_tts_synthesize_stream: fn([P, P, U, P, P, P, P], I),
  eliza_inference_cancel_tts: fn([P, P], I),
  eliza_inference_encode_reference: fn([P, P, U, I, P, P, P, P], I),
  eliza_inference_kokoro_load: fn([P, P, P, I, P], I),
  eliza_inference_kokoro_synthesize: fn([P, P, U, F, P, U, P], I),
  eliza_inference_kokoro_sample_rate: fn([P], I),
  eliza_inference_vad_supported: fn([], I),
  eliza_inference_vad_open: fn([P, I, P], P),
  eliza_inference_vad_process: fn([P, P, U, P, P], I),
  eliza_inference_vad_reset: fn([P, P], I),
  eliza_inference_vad_close: fn([P], V),
  eliza_inference_wakeword_supported: fn([], I),
  eliza_inference_wakeword_open: fn([P, I, P, P], P),
  eliza_inference_wakeword_score: fn([P, P, U, P, P], I),
  eliza_inference_wakeword_reset: fn([P, P], I),
  eliza_inference_wakeword_close: fn([P], V),
  eliza_inference_speaker_supported: fn([], I),
  eliza_inference_speaker_open: fn([P, P, P], P),
  eliza_inference_speaker_embed: fn([P, P, U, P, P], I),
  eliza_inference_speaker_free: fn([P], V),
  eliza_inference_speaker_close: fn([P], V),
  eliza_inference_diariz_supported: fn([], I),
  eliza_inference_diariz_open: fn([P, P, P], P),
  eliza_inference_diariz_segment: fn([P, P, U, P, P, P], I),
  eliza_inference_diariz_close: fn([P], V),
  eliza_inference_set_verifier_callback: fn([P, P, P, P], I),
} as const;

const lib = dlopen(LIB, table as any);
const L: any = lib.symbols;

// NUL-terminated UTF-8 bytes; the caller keeps the buffer alive while the pointer is in use.
const cstr = (s: string) => Buffer.from(s + "\0", "utf8");

// An out_error slot: pass .p, then .take() returns the message (freed) or "".
function outError() {
  const slot = new BigUint64Array(1);
  return {
    p: ptr(slot),
    take(): string {
      if (!slot[0]) return "";
      const msg = new CString(Number(slot[0]) as any).toString();
      L.eliza_inference_free_string(Number(slot[0]));
      slot[0] = 0n;
      return msg;
    },
  };
}

// The 88-byte eliza_llm_stream_config_t, laid out by hand as the desktop host does.
function config(o: { maxTokens: number; contextSize?: number; draftMax?: number; cacheK?: string; cacheV?: string }) {
  const b = Buffer.alloc(88);
  const keep: Buffer[] = [];
  const str = (off: number, s?: string) => {
    if (!s) return;
    const c = cstr(s);
    keep.push(c);
    b.writeBigUInt64LE(BigInt(ptr(c)), off);
  };
  b.writeInt32LE(o.maxTokens, 0); // max_tokens
  b.writeFloatLE(0, 4); // temperature: greedy
  b.writeFloatLE(1, 8); // top_p
  b.writeInt32LE(0, 12); // top_k
  b.writeFloatLE(1, 16); // repeat_penalty
  b.writeInt32LE(-1, 20); // slot_id
  b.writeInt32LE(o.draftMax ? 1 : 0, 32); // draft_min
  b.writeInt32LE(o.draftMax ?? 0, 36); // draft_max
  b.writeInt32LE(1, 56); // disable_thinking
  b.writeInt32LE(-1, 60); // n_gpu_layers
  str(64, o.cacheK); // cache_type_k
  str(72, o.cacheV); // cache_type_v
  b.writeInt32LE(o.contextSize ?? 0, 80); // context_size
  return { buf: b, keep };
}

function tokenize(ctx: number, text: string): Int32Array {
  const bytes = Buffer.from(text, "utf8");
  const ids = new BigUint64Array(1), n = new BigUint64Array(1), err = outError();
  const rc = L.eliza_inference_tokenize(ctx, bytes.length ? ptr(bytes) : null, bytes.length, 1, 0, ptr(ids), ptr(n), err.p);
  expect(rc, err.take()).toBe(OK);
  const count = Number(n[0]);
  const out = new Int32Array(count);
  for (let i = 0; i < count; i++) out[i] = read.i32(Number(ids[0]) as any, 4 * i);
  L.eliza_inference_free_tokens(Number(ids[0]));
  return out;
}

function open(ctx: number, o: Parameters<typeof config>[0]): number {
  const cfg = config(o), err = outError();
  const s = L.eliza_inference_llm_stream_open(ctx, ptr(cfg.buf), err.p);
  expect(s, err.take()).toBeTruthy();
  return s;
}

function prefill(s: number, ids: Int32Array) {
  const err = outError();
  expect(L.eliza_inference_llm_stream_prefill(s, ids.length ? ptr(ids) : null, ids.length, err.p), err.take()).toBe(OK);
}

// The pull loop: next() with `step` tokens and a 1024-byte text buffer until it returns 1.
function drain(s: number, step: number) {
  const ids: number[] = [];
  let text = "", calls = 0, drafted = 0, accepted = 0;
  const toks = new Int32Array(step), n = new BigUint64Array(1), buf = Buffer.alloc(1024);
  const d = new Int32Array(1), a = new Int32Array(1);
  for (;;) {
    const err = outError();
    const rc = L.eliza_inference_llm_stream_next(s, ptr(toks), step, ptr(n), ptr(buf), 1024, ptr(d), ptr(a), err.p);
    calls++;
    expect(rc, err.take()).toBeGreaterThanOrEqual(0);
    ids.push(...toks.subarray(0, Number(n[0])));
    text += buf.toString("utf8", 0, buf.indexOf(0));
    drafted += d[0];
    accepted += a[0];
    if (rc === 1) return { ids, text, calls, drafted, accepted };
    if (calls > 10000) throw new Error("next never returned 1");
  }
}

const PROMPT = "It is a truth universally acknowledged, that a single man";
const N = 24;

test("one dlopen table binds every symbol of the host surface", () => {
  expect(Object.keys(table).length).toBe(65);
  for (const name of Object.keys(table)) expect(typeof L[name]).toBe("function");
  expect(L.eliza_inference_abi_version().toString()).toBe("13");
  for (const probe of ["llm_stream", "llm_mtp", "llm_kv_quant", "tokenize"])
    expect(L[`eliza_inference_${probe}_supported`]()).toBe(1);
});

test("the host protocol: steps of 32 and 8, cancel, reset_keep, slots", () => {
  const err = outError();
  const ctx = L.eliza_inference_create(ptr(cstr(BUNDLE)), err.p);
  expect(ctx, err.take()).toBeTruthy();
  const ids = tokenize(ctx, PROMPT);
  const want = execFileSync(CLI, ["run", "-m", `${BUNDLE}/text/eliza-1-nano.gguf`, "-p", PROMPT, "-n", String(N), "--temp", "0"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });

  // the same tokens and text whatever the step size; the step that reaches max_tokens returns 1
  const runs = [32, 8].map((step) => {
    const s = open(ctx, { maxTokens: N, contextSize: 512, cacheK: "f16", cacheV: "q8_0" });
    prefill(s, ids);
    const r = drain(s, step);
    L.eliza_inference_llm_stream_close(s);
    expect(r.ids.length).toBe(N);
    expect(r.calls).toBe(Math.ceil(N / step));
    return r;
  });
  expect(runs[1].ids).toEqual(runs[0].ids);
  expect(runs[1].text).toBe(runs[0].text);
  const plain = open(ctx, { maxTokens: N, contextSize: 512 });
  prefill(plain, ids);
  const p = drain(plain, 32);
  expect(p.text).toBe(want); // eliza-infer run --temp 0: the same text

  // second turn: reset_keep(prompt) equals a fresh prefill
  expect(L.eliza_inference_llm_stream_reset_keep(plain, ids.length)).toBe(ids.length);
  expect(drain(plain, 8).ids).toEqual(p.ids);

  // a slot saved and restored into a new stream continues exactly
  const slot = cstr(`/tmp/eli-bun-${process.pid}.slot`);
  expect(L.eliza_inference_llm_stream_reset_keep(plain, ids.length + 10)).toBe(ids.length + 10);
  expect(L.eliza_inference_llm_stream_save_slot(plain, ptr(slot), null)).toBe(OK);
  const rest = drain(plain, 32);
  const r = open(ctx, { maxTokens: N, contextSize: 512 });
  expect(L.eliza_inference_llm_stream_restore_slot(r, ptr(slot), null)).toBe(OK);
  expect(drain(r, 8).ids).toEqual(rest.ids);
  L.eliza_inference_llm_stream_close(r);

  // cancel holds until reset, and next reports it
  expect(L.eliza_inference_llm_stream_reset(plain)).toBe(OK);
  prefill(plain, ids);
  expect(L.eliza_inference_llm_stream_cancel(plain)).toBe(OK);
  const toks = new Int32Array(8), n = new BigUint64Array(1);
  expect(L.eliza_inference_llm_stream_next(plain, ptr(toks), 8, ptr(n), null, 0, null, null, null)).toBe(CANCELLED);
  expect(L.eliza_inference_llm_stream_reset(plain)).toBe(OK);
  prefill(plain, ids);
  expect(drain(plain, 32).ids).toEqual(p.ids);
  L.eliza_inference_llm_stream_close(plain);
  expect(L.eliza_inference_llm_stream_cancel(plain)).toBe(INVALID_ARG); // closed
  L.eliza_inference_destroy(ctx);
  L.eliza_inference_destroy(ctx); // a second destroy is refused, not run
});

test("MTP with the verifier callback", () => {
  const ctx = L.eliza_inference_create(ptr(cstr(BUNDLE)), null);
  const ids = tokenize(ctx, PROMPT);
  const events: { accepted: number[]; from: number; to: number; corrected: number[] }[] = [];
  const cb = new JSCallback(
    (ev: number) => {
      const ints = (p: number, n: number) => Array.from({ length: n }, (_, i) => read.i32(p as any, 4 * i));
      const na = Number(read.u64(ev as any, 8)), nc = Number(read.u64(ev as any, 32));
      events.push({
        accepted: ints(Number(read.ptr(ev as any, 0)), na),
        from: read.i32(ev as any, 16),
        to: read.i32(ev as any, 20),
        corrected: ints(Number(read.ptr(ev as any, 24)), nc),
      });
    },
    { args: ["ptr", "ptr"], returns: "void" },
  );
  expect(L.eliza_inference_set_verifier_callback(ctx, cb.ptr, null, null)).toBe(OK);
  const plain = open(ctx, { maxTokens: 64, contextSize: 512 });
  prefill(plain, ids);
  const want = drain(plain, 32);
  L.eliza_inference_llm_stream_close(plain);
  expect(events.length).toBe(0); // no drafter, no event
  const s = open(ctx, { maxTokens: 64, contextSize: 512, draftMax: 4 });
  prefill(s, ids);
  const got = drain(s, 8);
  L.eliza_inference_llm_stream_close(s);
  expect(got.ids).toEqual(want.ids); // greedy MTP changes nothing
  expect(events.length).toBeGreaterThan(0);
  const acc = events.reduce((k, e) => k + e.accepted.length, 0);
  const rej = events.reduce((k, e) => k + (e.from >= 0 ? e.to - e.from : 0), 0);
  expect(acc).toBe(got.accepted);
  expect(acc + rej).toBe(got.drafted);
  for (const e of events) if (e.from >= 0) expect(got.ids[e.from]).toBe(e.corrected[0]);
  expect(L.eliza_inference_set_verifier_callback(ctx, null, null, null)).toBe(OK);
  cb.close();
  L.eliza_inference_destroy(ctx);
});

test("tokenize, detokenize, embed, eot_score", () => {
  const ctx = L.eliza_inference_create(ptr(cstr(BUNDLE)), null);
  const ids = tokenize(ctx, "Hello world");
  const out = Buffer.alloc(64);
  expect(L.eliza_inference_detokenize(ctx, ptr(ids), ids.length, 1, 0, ptr(out), 64, null)).toBe(11);
  expect(out.toString("utf8", 0, 11)).toBe("Hello world");
  expect(L.eliza_inference_detokenize(ctx, ptr(ids), ids.length, 1, 0, ptr(out), 6, null)).toBe(5); // truncated
  const emb = new Float32Array(1024), dim = new Int32Array(1);
  expect(L.eliza_inference_embed(ctx, ptr(cstr("Hello")), 5, 1, ptr(emb), 1024, ptr(dim), null)).toBe(OK);
  const norm = emb.subarray(0, dim[0]).reduce((s, v) => s + v * v, 0);
  expect(Math.abs(norm - 1)).toBeLessThan(1e-4);
  // 2,104 ids in the scoring context of the model (2,048 positions): the tail is scored, no error
  const long = new Int32Array(2104).map((_, i) => ids[1 + (i % (ids.length - 1))]);
  long[0] = ids[0];
  const tp = new Float32Array(1), top = new Int32Array(1), topp = new Float32Array(1);
  const err = outError();
  expect(L.eliza_inference_llm_eot_score(ctx, ptr(long), long.length, 1, ptr(tp), ptr(top), ptr(topp), err.p), err.take()).toBe(OK);
  expect(topp[0]).toBeGreaterThan(0);
  expect(tp[0]).toBeLessThanOrEqual(topp[0]);
  L.eliza_inference_destroy(ctx);
});

test("regions and the families without an engine answer honestly", () => {
  const ctx = L.eliza_inference_create(ptr(cstr(BUNDLE)), null);
  for (const r of ["text", "mtp", "dflash"]) expect(L.eliza_inference_mmap_acquire(ctx, ptr(cstr(r)), null)).toBe(OK);
  for (const r of ["vision", "asr", "tts", "vad", "wakeword"]) {
    const err = outError();
    expect(L.eliza_inference_mmap_acquire(ctx, ptr(cstr(r)), err.p)).toBe(NOT_IMPLEMENTED);
    expect(err.take()).toContain(r);
  }
  expect(L.eliza_inference_mmap_acquire(ctx, ptr(cstr("nonsense")), null)).toBe(INVALID_ARG);
  // image and audio input exist (vision needs a build with image decoding); the bundle has no projector
  expect(L.eliza_inference_asr_stream_supported()).toBe(1);
  expect(L.eliza_inference_vision_stream_supported()).toBe(L.eliza_inference_vision_supported());
  for (const probe of ["tts_stream", "vad", "wakeword", "speaker", "diariz"])
    expect(L[`eliza_inference_${probe}_supported`]()).toBe(0);
  const pcm = new Float32Array(1600), text = Buffer.alloc(64);
  const calls: [string, (e: number) => number, string][] = [
    ["tts", (e) => L.eliza_inference_tts_synthesize(ctx, ptr(cstr("hi")), 2, null, ptr(pcm), 1600, e), "text-to-speech"],
    ["asr", (e) => L.eliza_inference_asr_transcribe(ctx, ptr(pcm), 1600, 16000, ptr(text), 64, e), "speech recognition"],
    ["image", (e) => L.eliza_inference_describe_image(ctx, ptr(text), 8, null, null, ptr(text), 64, e), "image"],
    ["kokoro", (e) => L.eliza_inference_kokoro_synthesize(ctx, ptr(cstr("hi")), 2, 1, ptr(pcm), 1600, e), "Kokoro"],
    ["vad", (e) => L.eliza_inference_vad_process(null, ptr(pcm), 512, ptr(pcm), e), "voice activity"],
    ["wake", (e) => L.eliza_inference_wakeword_score(null, ptr(pcm), 1280, ptr(pcm), e), "wake-word"],
  ];
  for (const [name, call, family] of calls) {
    const err = outError();
    expect(call(err.p), name).toBe(NOT_IMPLEMENTED);
    expect(err.take()).toContain(family);
  }
  expect(L.eliza_inference_vad_open(ctx, 16000, null)).toBeFalsy();
  expect(L.eliza_inference_cancel_tts(ctx, null)).toBe(OK);
  L.eliza_inference_vad_close(null);
  L.eliza_inference_asr_stream_close(null);
  L.eliza_inference_speaker_free(null);
  L.eliza_inference_destroy(ctx);
});
