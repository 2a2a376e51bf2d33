#!/usr/bin/python3
"""End-to-end tests of the eliza-infer command line, used the way a person uses it.

    test_cli.py [ELIZA_INFER [SHARED_DIR]]

`chat` runs on a real pseudo-terminal: the test waits for the "> " prompt, types lines, reads the streamed
answer up to the next prompt and presses Ctrl-C by writing ^C (0x03) to the pty master, so the terminal
driver delivers SIGINT exactly as it does for a person. `run` and `tokenize` run through pipes.

The model is the golden random-weight model (SHARED_DIR/golden/models/e2b-mini-f32.gguf, 1024-token
vocab): its text is garbage, but it exercises tokenizer, template, prefill, KV reuse, sampling and
streaming. Every wait has a deadline, so a hang fails the test instead of blocking CI.
Python 3 standard library only.
"""
import errno
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXE = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build", "eliza-infer")
SHARED = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(os.path.dirname(ROOT), "shared")
with open(EXE, "rb") as _f:
    UNDER_ASAN = b"__asan_init" in _f.read()  # the sanitizer build (make asan)
MODEL = os.path.join(SHARED, "golden", "models", "e2b-mini-f32.gguf")
VOCAB = os.path.join(SHARED, "golden", "tokenizer", "gemma4-vocab.gguf")
MM = os.path.join(SHARED, "golden", "mm")
MMPROJ = os.path.join(MM, "mmproj-gemma4-a.gguf")  # both towers, projection_dim 256 = e2b-mini's n_embd
IMG = os.path.join(MM, "inputs", "img1_gradient_200x150.png")    # 48 soft tokens
IMG2 = os.path.join(MM, "inputs", "img2_checker_512x512.png")    # 121
WAV = os.path.join(MM, "inputs", "aud1_chirp_1p5s_16k_mono.wav")  # 38
WAV44 = os.path.join(MM, "inputs", "aud4_44k1_stereo_1p3s.wav")
DATA_MM = os.path.join(ROOT, "tests", "data", "mm")
# Where `cli_default_model` looks in the build tree: <exe dir>/../models/eliza-1-nano/text/eliza-1-nano.gguf.
DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.dirname(EXE)), "models", "eliza-1-nano", "text",
                             "eliza-1-nano.gguf")

STEP = 120  # seconds any single wait may take (generous: ctest runs tests in parallel on small machines)

RUN_STATS = re.compile(rb"\[prompt (\d+) tokens, ([\d.]+) tok/s \| generated (\d+) tokens, ([\d.]+) tok/s"
                       rb" \| time to first token ([\d.]+) ms\]")
CHAT_STATS = re.compile(rb"\[new prompt tokens (\d+) \(kept (\d+)\), ([\d.]+) ms \| (\d+) tokens, ([\d.]+) tok/s\]")
# The end of a finished (or stopped) turn: the stats line on stderr, then the next prompt.
TURN_END = re.compile(CHAT_STATS.pattern + rb"\r\n> ")


def need(path):
    return unittest.skipUnless(os.path.exists(path), "missing " + path)


def cli(args, stdin=b"", timeout=STEP):
    """Runs eliza-infer with args (str or bytes items); returns (rc, stdout bytes, stderr bytes)."""
    p = subprocess.run([EXE] + list(args), input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def run_stats(stderr):
    m = RUN_STATS.search(stderr)
    if not m:
        raise AssertionError("no stats line on stderr: %r" % stderr[-500:])
    return {"prompt": int(m.group(1)), "prefill_tps": float(m.group(2)), "generated": int(m.group(3)),
            "decode_tps": float(m.group(4)), "ttft_ms": float(m.group(5))}


def chat_stats(m):
    return {"new": int(m.group(1)), "kept": int(m.group(2)), "ms": float(m.group(3)),
            "generated": int(m.group(4)), "tps": float(m.group(5))}


class Pty:
    """eliza-infer on a pseudo-terminal (its stdin, stdout and stderr), read with deadlines."""

    def __init__(self, args):
        argv = [EXE] + list(args)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child: the pty slave is the controlling terminal, stdin/out/err
            try:
                os.execv(EXE, argv)
            finally:
                os._exit(127)
        self.buf = b""  # read but not yet consumed
        self.log = b""  # everything read, for failure messages
        self.status = None

    def _fill(self, deadline):
        """Reads what is available before deadline; False at EOF (the child closed the terminal)."""
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        r, _, _ = select.select([self.fd], [], [], min(left, 0.5))
        if not r:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError as e:  # Linux reports EIO on the master once the slave is closed
            if e.errno != errno.EIO:
                raise
            data = b""
        if not data:
            return False
        self.buf += data
        self.log += data
        return True

    def expect(self, pattern, timeout=STEP):
        """Waits for a regex (bytes) in the unread output; returns the match and consumes up to its end."""
        rx = re.compile(pattern) if isinstance(pattern, bytes) else pattern
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                self.before = self.buf[:m.start()]
                self.buf = self.buf[m.end():]
                return m
            if time.monotonic() >= deadline:
                raise AssertionError("timed out after %ds waiting for %r; last output: %r"
                                     % (timeout, rx.pattern, self.log[-600:]))
            if not self._fill(deadline):
                raise AssertionError("eliza-infer closed the terminal while waiting for %r (status %r); "
                                     "last output: %r" % (rx.pattern, self.wait(5), self.log[-600:]))

    def send(self, data):
        os.write(self.fd, data)

    def type_line(self, text):
        """Types a line and presses Enter (the terminal turns CR into NL); waits for its echo."""
        self.send(text.encode() + b"\r")
        return self.expect(re.escape(text.encode()) + rb"\r\n")

    def alive(self):
        if self.status is None:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = st
        return self.status is None

    def wait(self, timeout=STEP):
        """Exit code (or -signal) of the child; kills it and fails at the deadline."""
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                self.close()
                raise AssertionError("eliza-infer did not exit within %ds; last output: %r"
                                     % (timeout, self.log[-600:]))
            self._fill(min(deadline, time.monotonic() + 0.1))  # keep draining so it never blocks on output
        return os.waitstatus_to_exitcode(self.status)

    def close(self):
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, self.status = os.waitpid(self.pid, 0)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def model_turn_prefix(messages):
    """Tokens of the rendered conversation up to its last "<|turn>model" (what the next turn must keep).

    The generation prompt ends "<|turn>model\n<|channel>thought\n<channel|>" (thinking off), while a
    model turn in the history is "<|turn>model\n" + the answer with its channels stripped, so of a
    turn's prompt the KV cache can keep exactly the tokens before that "\n" on the next turn."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(messages, f)
        f.flush()
        rc, text, err = cli(["chat-template", "--messages", f.name], timeout=30)
    assert rc == 0, err
    text = text[:text.rindex(b"<|turn>model") + len(b"<|turn>model")]
    rc, out, err = cli(["tokenize", "-m", MODEL, "--no-bos", "--parse-special"], text, timeout=30)
    assert rc == 0, err
    return len(out.split())


def chat_session(test, *args):
    p = Pty(["chat", "-m", MODEL] + list(args))
    test.addCleanup(p.close)
    p.expect(rb"^> ")
    return p


def turn(p, text, timeout=STEP):
    """Types a user line and reads the whole answer up to the next prompt; returns (answer bytes, stats)."""
    p.type_line(text)
    m = p.expect(TURN_END, timeout)
    return p.before, chat_stats(m)


@need(MODEL)
class Chat(unittest.TestCase):
    def test_turns_kv_reuse_reset_quit(self):
        p = chat_session(self, "-n", "8", "--temp", "0", "--ctx", "1024")
        _, s1 = turn(p, "Hello there!")
        self.assertEqual(s1["kept"], 0, "first turn has nothing to keep")
        self.assertGreater(s1["new"], 5)
        self.assertLessEqual(s1["generated"], 8)

        # The second turn re-renders the whole conversation; the first turn's prompt up to "<|turn>model"
        # is a prefix of it, so those tokens stay in the KV cache and only the new ones are prefilled.
        _, s2 = turn(p, "How are you?")
        keep = model_turn_prefix([{"role": "user", "content": "Hello there!"}])
        self.assertGreater(keep, 5)
        self.assertGreaterEqual(s2["kept"], keep)
        self.assertLess(s2["kept"], s1["new"] + s1["generated"])
        self.assertGreater(s2["new"], 0)
        self.assertLessEqual(s2["generated"], 8)

        p.type_line("/reset")
        p.expect(rb"^\(conversation reset\)\r\n> ", 30)

        # After /reset the conversation and the cache are empty: the same first turn, prefilled again
        _, s3 = turn(p, "Hello there!")
        self.assertEqual((s3["new"], s3["kept"]), (s1["new"], 0))

        # Ctrl-C at the prompt gives a fresh prompt and keeps the program running
        p.send(b"\x03")
        p.expect(rb"\r?\n> ", 30)
        self.assertTrue(p.alive())
        _, s4 = turn(p, "Still there?")
        self.assertGreater(s4["kept"], 0)

        p.type_line("/quit")
        self.assertEqual(p.wait(), 0)

    def test_ctrl_c_stops_the_answer_not_the_program(self):
        # -n 4000 with a 4096 context: the answer cannot end before Ctrl-C (greedy on this model does not
        # produce an end-of-generation token).
        p = chat_session(self, "-n", "4000", "--ctx", "4096", "--temp", "0")
        p.type_line("Tell me a very long story.")
        p.expect(rb"\S", STEP)  # the answer is streaming
        time.sleep(0.2)
        self.assertIsNone(CHAT_STATS.search(p.buf), "the answer ended before Ctrl-C: %r" % p.buf[-300:])
        p.send(b"\x03")
        m = p.expect(rb"\(stopped\)\r\n" + TURN_END.pattern, 60)
        s1 = chat_stats(re.compile(CHAT_STATS.pattern).search(m.group(0)))
        self.assertEqual(s1["kept"], 0)
        self.assertGreater(s1["generated"], 0)
        self.assertLess(s1["generated"], 4000)
        self.assertTrue(p.alive(), "Ctrl-C ended the program")

        # The next turn is answered; the conversation so far (with the partial answer) stays cached
        p.type_line("Go on.")
        p.expect(rb"\S", STEP)  # answer streaming again (after the prefill of the new tokens)
        p.send(b"\x03")
        m = p.expect(rb"\(stopped\)\r\n" + TURN_END.pattern, 60)
        s2 = chat_stats(re.compile(CHAT_STATS.pattern).search(m.group(0)))
        self.assertGreater(s2["kept"], 0, "second turn prefilled everything again")
        self.assertGreaterEqual(s2["kept"], model_turn_prefix([{"role": "user", "content": "Tell me a very long story."}]))
        self.assertGreater(s2["generated"], 0)
        self.assertLess(s2["generated"], 4000)

        # End of input (Ctrl-D on an empty line) exits with status 0
        p.send(b"\x04")
        self.assertEqual(p.wait(), 0)

    def test_system_prompt_and_reset_keeps_it(self):
        p = chat_session(self, "--system", "You are terse.", "-n", "4", "--temp", "0")
        _, s1 = turn(p, "Hi")
        p.type_line("/reset")
        p.expect(rb"^\(conversation reset\)\r\n> ", 30)
        _, s2 = turn(p, "Hi")
        self.assertEqual((s2["new"], s2["kept"]), (s1["new"], 0), "/reset must keep the system prompt")
        p.send(b"\x04")
        self.assertEqual(p.wait(), 0)

    def test_piped_stdin(self):
        rc, out, err = cli(["chat", "-m", MODEL, "-n", "4", "--temp", "0"], b"hello\n\n/reset\nhello\n")
        self.assertEqual(rc, 0, err)
        self.assertIn(b"(conversation reset)", out)
        self.assertEqual(len(CHAT_STATS.findall(err)), 2, err)

    def test_bad_usage(self):
        for args in (["--bogus"], ["-n", "x"], ["--temp"], ["--kv", "q9"], ["-m"]):
            rc, out, err = cli(["chat", "-m", MODEL] + args, timeout=30)
            self.assertEqual(rc, 2, (args, err))
            self.assertEqual(len(err.strip().splitlines()), 1, (args, err))
        missing = "/nonexistent/dir/model.gguf"
        rc, _, err = cli(["chat", "-m", missing], timeout=30)
        self.assertEqual(rc, 1)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(missing.encode(), err)


@need(MODEL)
class Run(unittest.TestCase):
    def gen(self, *args, prompt="Hello", n=24):
        rc, out, err = cli(["run", "-m", MODEL, "-p", prompt, "-n", str(n)] + list(args))
        self.assertEqual(rc, 0, err)
        return out, run_stats(err)

    def test_streams_text_to_stdout(self):
        p = subprocess.Popen([EXE, "run", "-m", MODEL, "-p", "Hello", "--chat", "-n", "4000", "--temp", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            r, _, _ = select.select([p.stdout], [], [], STEP)
            self.assertTrue(r, "no output within %ds" % STEP)
            first = os.read(p.stdout.fileno(), 4096)
            self.assertTrue(first)
            self.assertIsNone(p.poll(), "text arrived only at the end, not streamed")
        finally:
            p.kill()
            p.communicate(timeout=30)

    def test_stats_line(self):
        out, s = self.gen("--temp", "0", n=16)
        self.assertEqual(s["prompt"], 6)  # <bos> + "Hello" in the 1024-token test vocab
        self.assertEqual(s["generated"], 16)
        self.assertGreater(s["prefill_tps"], 0)
        self.assertGreater(s["decode_tps"], 0)
        self.assertGreater(s["ttft_ms"], 0)
        self.assertTrue(out)

    def test_greedy_is_deterministic(self):
        a, sa = self.gen("--temp", "0")
        b, sb = self.gen("--temp", "0")
        self.assertEqual(a, b)
        self.assertEqual(sa["generated"], sb["generated"])

    def test_seed(self):
        # same seed, same text; also with another thread count
        a, _ = self.gen("--temp", "1", "--seed", "42")
        b, _ = self.gen("--temp", "1", "--seed", "42")
        c, _ = self.gen("--temp", "1", "--seed", "42", "-t", "1")
        self.assertEqual(a, b)
        self.assertEqual(a, c)
        # Different seeds: on a flattened distribution (temperature 50, no truncation) 48 tokens drawn
        # from ~1024 nearly equally likely ones; five seeds giving one text would be a broken seed.
        flat = ["--temp", "50", "--top-k", "0", "--top-p", "1", "--min-p", "0"]
        texts = {self.gen(*flat, "--seed", str(s), n=48)[0] for s in range(1, 6)}
        self.assertGreater(len(texts), 1, "the seed does not change sampling")

    def test_empty_prompt(self):
        out, s = self.gen("--temp", "0", prompt="", n=4)
        self.assertEqual(s["prompt"], 1)  # just <bos>
        self.assertLessEqual(s["generated"], 4)

    def test_n_bounds_generation(self):
        for n in (1, 5, 33):
            _, s = self.gen("--temp", "0.8", "--seed", "7", n=n)
            self.assertLessEqual(s["generated"], n)
            self.assertGreaterEqual(s["generated"], 1)
        _, s = self.gen("--temp", "0", n=5)
        self.assertEqual(s["generated"], 5)  # greedy on this model never stops early
        # -n 0 = until the end of generation or a full context
        _, s = self.gen("--temp", "0", "--ctx", "48", n=0)
        self.assertLessEqual(s["prompt"] + s["generated"], 48 + 1)  # the last token is not decoded
        self.assertGreater(s["generated"], 0)

    def test_chat_flag(self):
        _, plain = self.gen("--temp", "0", n=2)
        out, s = self.gen("--temp", "0", "--chat", "--system", "Be brief.", n=2)
        self.assertGreater(s["prompt"], plain["prompt"] + 10)

    def test_bad_options_exit_2_with_one_line(self):
        bad = (["--temp", "abc"], ["-n", "-1"], ["-n", "x"], ["--top-k", "-3"], ["--top-p", "zz"],
               ["--seed", "nan"], ["--kv", "q9"], ["-t", "0"], ["--ctx", "0"], ["--bogus"], ["-p"], ["-m"])
        for args in bad:
            rc, out, err = cli(["run", "-m", MODEL, "-p", "x"] + args, timeout=30)
            self.assertEqual(rc, 2, (args, err))
            lines = err.strip().splitlines()
            self.assertEqual(len(lines), 1, (args, err))
            self.assertTrue(lines[0].startswith(b"eliza-infer: "), (args, err))
            self.assertEqual(out, b"")
        rc, _, err = cli(["run", "-m", MODEL], timeout=30)  # no -p
        self.assertEqual(rc, 2, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        rc, out, _ = cli(["run", "--help"], timeout=30)
        self.assertEqual(rc, 0)
        self.assertIn(b"usage", out)

    def test_missing_or_bad_model_exits_1_naming_the_file(self):
        notgguf = os.path.join(HERE, "test_cli.py")
        for path in ("/nonexistent/dir/model.gguf", notgguf, VOCAB if os.path.exists(VOCAB) else notgguf):
            rc, out, err = cli(["run", "-m", path, "-p", "x"], timeout=60)
            self.assertEqual(rc, 1, (path, err))
            lines = err.strip().splitlines()
            self.assertEqual(len(lines), 1, (path, err))
            self.assertIn(os.path.basename(path).encode(), lines[0])
            self.assertEqual(out, b"")

    def test_no_model_option(self):
        rc, out, err = cli(["run", "-p", "Hello", "-n", "8"])
        if os.path.exists(DEFAULT_MODEL):  # the embedded model is installed: it generates
            self.assertEqual(rc, 0, err)
            run_stats(err)
        else:
            self.assertEqual(rc, 1, err)
            lines = err.strip().splitlines()
            self.assertEqual(len(lines), 1, err)
            self.assertIn(b"-m", lines[0])
            self.assertIn(b"eliza-1-nano", lines[0])


@need(MODEL)
@need(MMPROJ)
class Media(unittest.TestCase):
    """Images and audio in run, transcribe and chat: one user turn of the chat template holding the media, in
    the order given, then the text. The random-weight projector makes nonsense; the assertions are on what
    the prompt holds (its size), determinism, order and the errors."""

    def media_run(self, *args, prompt="What is it?", n=12):
        rc, out, err = cli(["run", "-m", MODEL, "--mmproj", MMPROJ, "-p", prompt, "-n", str(n), "--temp", "0"] + list(args))
        self.assertEqual(rc, 0, err)
        return out, run_stats(err)

    def test_run_image_and_audio(self):
        rc, _, err = cli(["run", "-m", MODEL, "--chat", "-p", "What is it?", "-n", "1"])
        self.assertEqual(rc, 0, err)
        text = run_stats(err)
        out1, s1 = self.media_run("--image", IMG)
        self.assertEqual(self.media_run("--image", IMG)[0], out1, "greedy with an image is deterministic")
        # the image's 48 soft tokens and its two markers (spelled out in this small vocabulary) join the prompt
        self.assertGreater(s1["prompt"], text["prompt"] + 48)
        _, s2 = self.media_run("--image", IMG2)
        self.assertEqual(s2["prompt"] - s1["prompt"], 121 - 48, "another image size, another number of soft tokens")
        out_ia, s_ia = self.media_run("--image", IMG, "--audio", WAV)
        out_ai, s_ai = self.media_run("--audio", WAV, "--image", IMG)
        self.assertEqual(s_ia["prompt"], s_ai["prompt"])
        self.assertGreaterEqual(s_ia["prompt"] - s1["prompt"], 38)

    @need(DEFAULT_MODEL)
    def test_order_matters(self):
        # eliza-1-nano (n_embd 256 too): its text depends on the media; this small model's greedy text does not
        outs = []
        for media in (["--image", IMG, "--audio", WAV], ["--audio", WAV, "--image", IMG]):
            rc, out, err = cli(["run", "--mmproj", MMPROJ, "-p", "What is it?", "-n", "16", "--temp", "0"] + media)
            self.assertEqual(rc, 0, err)
            outs.append(out)
        self.assertNotEqual(outs[0], outs[1], "the media keep the order given")

    def test_transcribe(self):
        rc, out, err = cli(["transcribe", "-m", MODEL, "--mmproj", MMPROJ, "-n", "12", WAV])
        self.assertEqual(rc, 0, err)
        run_stats(err)
        self.assertTrue(out.endswith(b"\n") and len(out) > 1, out)
        # the same as run with the audio and the default instruction
        rc, out2, err = cli(["run", "-m", MODEL, "--mmproj", MMPROJ, "--audio", WAV, "-p", "Transcribe this audio.", "-n", "12",
                             "--temp", "0"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, out2 + b"\n")
        # 44.1 kHz stereo goes through the resampler
        rc, out, err = cli(["transcribe", "-m", MODEL, "--mmproj", MMPROJ, "-n", "4", WAV44])
        self.assertEqual(rc, 0, err)
        rc, _, err2 = cli(["transcribe", "-m", MODEL, "--mmproj", MMPROJ, "-n", "1", "-p", "Hear?", WAV])
        self.assertEqual(rc, 0, err2)
        self.assertLess(run_stats(err2)["prompt"], run_stats(err)["prompt"] - 10, "-p replaces the instruction")

    def test_errors_exit_with_one_line(self):
        usage = (["run", "-m", MODEL, "-p", "x", "--image", IMG],  # no --mmproj
                 ["run", "-m", MODEL, "-p", "x", "--mmproj", MMPROJ, "--image"],
                 ["transcribe", "-m", MODEL, "--mmproj", MMPROJ],  # no WAV
                 ["transcribe", "-m", MODEL, WAV],                   # no projector
                 ["transcribe", "-m", MODEL, "--mmproj", MMPROJ, WAV, "extra"])
        for args in usage:
            rc, out, err = cli(args, timeout=30)
            self.assertEqual(rc, 2, (args, err))
            self.assertEqual(out, b"")
        runtime = ((["run", "-p", "x", "--mmproj", MMPROJ, "--image", "/nonexistent/x.png"], b"/nonexistent/x.png"),
                   (["run", "-p", "x", "--mmproj", MMPROJ, "--image", os.path.join(HERE, "test_cli.py")], b"image format"),
                   (["run", "-p", "x", "--mmproj", os.path.join(HERE, "test_cli.py"), "--image", IMG], b"test_cli.py"),
                   (["run", "-p", "x", "--mmproj", os.path.join(DATA_MM, "a-f16.gguf"), "--image", IMG], b"no vision"),
                   (["transcribe", "--mmproj", os.path.join(DATA_MM, "mmproj-b-f16.gguf"), WAV], b"no audio"),
                   (["transcribe", "--mmproj", os.path.join(DATA_MM, "a-q8.gguf"), WAV], b"another model"),
                   (["transcribe", "--mmproj", MMPROJ, IMG], IMG.encode()))
        for args, word in runtime:
            rc, out, err = cli([args[0], "-m", MODEL] + args[1:], timeout=60)
            self.assertEqual(rc, 1, (args, err))
            lines = err.strip().splitlines()
            self.assertEqual(len(lines), 1, (args, err))
            self.assertTrue(lines[0].startswith(b"eliza-infer: ") and word in lines[0], (args, err))

    def test_chat_image_and_audio(self):
        lines = ["hello", "/image " + IMG, "what is this?", "/audio " + WAV, "and this?", "/image /nonexistent.png", "thanks"]
        rc, out, err = cli(["chat", "-m", MODEL, "--mmproj", MMPROJ, "-n", "6", "--temp", "0"],
                           ("\n".join(lines) + "\n").encode())
        self.assertEqual(rc, 0, err)
        self.assertIn(b"(image " + IMG.encode() + b": 48 tokens, in the next turn)", out)
        self.assertIn(b"(audio " + WAV.encode() + b": 38 tokens, in the next turn)", out)
        self.assertIn(b"/nonexistent.png", err)
        stats = [chat_stats(m) for m in CHAT_STATS.finditer(err)]
        self.assertEqual(len(stats), 4, err)
        # each turn keeps the conversation so far, media included, and prefills what is new
        self.assertGreater(stats[1]["new"], 48)
        self.assertGreater(stats[2]["kept"], stats[1]["kept"] + 48)
        self.assertGreater(stats[3]["kept"], stats[2]["kept"] + 38)
        rc, out, err = cli(["chat", "-m", MODEL, "-n", "2"], b"/image " + IMG.encode() + b"\nhi\n")
        self.assertEqual(rc, 0, err)
        self.assertIn(b"--mmproj", err)
        self.assertEqual(len(CHAT_STATS.findall(err)), 1, err)


class Tokenize(unittest.TestCase):
    @need(MODEL)
    def test_invalid_utf8_on_stdin_small_vocab(self):
        rc, out, err = cli(["tokenize", "-m", MODEL], b"\xff\xfe abc \xc3\x28 \xe2\x82 \x80 tail \xf0")
        self.assertEqual(rc, 0, err)
        ids = [int(x) for x in out.split()]
        self.assertEqual(ids[0], 2)
        self.assertTrue(all(0 <= i < 1024 for i in ids), ids)

    @need(VOCAB)
    def test_invalid_utf8_on_stdin_gemma4_vocab(self):
        def ids(data, *opts):
            rc, out, err = cli(["tokenize", "-m", VOCAB, "--no-bos"] + list(opts), data, timeout=60)
            self.assertEqual(rc, 0, err)
            return [int(x) for x in out.split()]

        # A malformed byte reads as U+FFFD, one per byte (as llama.cpp reads it); nothing crashes
        self.assertEqual(ids(b"\xff\xfe"), ids("\ufffd\ufffd".encode()))
        self.assertEqual(ids(b"x\xc3"), ids("x\ufffd".encode()))
        mixed = ids(b"\xff\xfe abc \xc3\x28 \xe2\x82 \x80 tail \xf0")
        self.assertTrue(mixed and all(0 <= i < 262144 for i in mixed))
        # A character without a token falls back to its UTF-8 bytes: <0x00>..<0xFF> are ids 238..493
        self.assertEqual(ids("\U0010FFFF".encode()), [238 + b for b in "\U0010FFFF".encode()])
        self.assertEqual(ids(b""), [])

    @need(VOCAB)
    def test_bench_tokenizer(self):
        text = os.path.join(HERE, "test_cli.py")
        rc, out, err = cli(["bench-tokenizer", "-m", VOCAB, "--repeat", "2", text, text], timeout=60)
        self.assertEqual(rc, 0, err)
        lines = out.decode().splitlines()
        self.assertEqual(len(lines), 4, out)  # header, two files, overall
        with open(text, "rb") as f:
            n = len(cli(["tokenize", "-m", VOCAB], f.read(), timeout=60)[1].split())
        for line in lines[1:3]:
            f = line.split()
            self.assertEqual(f[0], text)
            self.assertEqual((int(f[1]), int(f[2])), (os.path.getsize(text), n))
            self.assertGreater(float(f[-1]), 0)
        self.assertEqual(lines[3].split()[0], "overall")
        self.assertEqual(cli(["bench-tokenizer", "-m", VOCAB], timeout=60)[0], 2)  # no FILE
        self.assertEqual(cli(["bench-tokenizer", "-m", VOCAB, "/nonexistent"], timeout=60)[0], 1)


class Grammar(unittest.TestCase):
    """`grammar` (the checker and the schema printer) and `bench-grammar` as a person uses them: the
    words printed, exit codes, one-line errors. What the words should be is tests/test_grammar.c's job."""

    def write(self, text):
        fd, path = tempfile.mkstemp(suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        self.addCleanup(os.unlink, path)
        return path

    def test_check_jsonl(self):
        lines = [{"grammar": 'root ::= "a"+', "text": "aa"}, {"grammar": 'root ::= "ab"', "text": "a"},
                 {"grammar": 'root ::= "ab"', "text": "b"}, {"grammar": 'root ::= "ab', "text": ""},
                 {"grammar": "root ::= <[5]> <[6]>", "pieces": [5]}]
        path = self.write("\n".join(json.dumps(x) for x in lines) + "\n\n")
        rc, out, err = cli(["grammar", "--check-jsonl", path])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.decode().splitlines(),
                         ["accept", "prefix", "reject", "error: grammar line 1, column 10: unterminated string", "prefix"])

    def test_bad_input_and_usage(self):
        rc, out, err = cli(["grammar", "--check-jsonl", self.write('{"grammar": "root ::= \\"a\\""}\n')])
        self.assertEqual(rc, 1)
        self.assertIn(b":1: expected", err)
        self.assertEqual(cli(["grammar", "--check-jsonl", self.write("not json\n")])[0], 1)
        self.assertEqual(cli(["grammar", "--check-jsonl", "/nonexistent"])[0], 1)
        self.assertEqual(cli(["grammar"])[0], 2)
        self.assertEqual(cli(["grammar", "--bogus", "x"])[0], 2)
        self.assertEqual(cli(["bench-grammar", "--json"])[0], 2)  # no -m

    def test_json_schema(self):
        path = self.write('{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}')
        rc, out, err = cli(["grammar", "--json-schema", path])
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith(b"root ::= "), out)
        case = self.write(json.dumps({"grammar": out.decode(), "text": '{"n": 12}'}) + "\n")
        self.assertEqual(cli(["grammar", "--check-jsonl", case])[1], b"accept\n")
        rc, out, err = cli(["grammar", "--json-schema", self.write('{"type": "integer", "minimum": 1}')])
        self.assertEqual(rc, 1)
        self.assertIn(b"unsupported keyword 'minimum'", err)

    def test_run_constrained(self):
        """`run` with a grammar: the answer is in the grammar's (finite) language and ends by itself; sampled
        and with the drafter too; --json gives text json.loads reads; conflicting options are usage errors."""
        path = self.write('root ::= ("yes" | "no") ", " [a-z]{1,5} "."\n')
        for extra in ([], ["--temp", "1.3", "--seed", "7"], ["--draft", NANO_DRAFTER]):
            rc, out, err = cli(["run", "-p", "Is it so?", "--grammar", path, "-n", "40"] + extra)
            self.assertEqual(rc, 0, err)
            self.assertRegex(out.decode(), r"^(yes|no), [a-z]{1,5}\.$", extra)
        schema = self.write('{"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}')
        rc, out, err = cli(["run", "-p", "Data:", "--json-schema", schema, "-n", "200", "--temp", "0"])
        self.assertEqual(rc, 0, err)
        self.assertIn(json.loads(out.decode())["a"], (True, False))
        self.assertEqual(cli(["run", "-p", "x", "--json", "--grammar", path])[0], 2)
        rc, out, err = cli(["run", "-p", "x", "--grammar", self.write('root ::= ("a"\n')])
        self.assertEqual(rc, 1)
        self.assertIn(b"line 1", err)

    @need(VOCAB)
    def test_bench_grammar(self):
        rc, out, err = cli(["bench-grammar", "-m", VOCAB, "--json", "--tokens", "12"], timeout=120)
        self.assertEqual(rc, 0, err)
        rows = [line.split()[0] for line in out.decode().splitlines()[3:-1]]
        self.assertEqual(rows, ["apply+accept", "apply+accept", "uncached", "uncached", "allows+accept", "allows+accept"])


NANO = os.path.join(ROOT, "models", "eliza-1-nano", "text", "eliza-1-nano.gguf")
NANO_DRAFTER = os.path.join(ROOT, "models", "eliza-1-nano", "mtp", "drafter-nano.gguf")


@need(NANO)
class BenchMTP(unittest.TestCase):
    """`bench --draft`: plain and MTP generation alternated, and the ceiling (verify batches of the plain
    run's own tokens, which exits 1 if a batch chooses another token than plain steps did). The assertions
    are on what the runs did and on the report's consistency, never on timing."""

    def test_json(self):
        rc, out, err = cli(["bench", "-m", NANO, "-p", "0", "-n", "40", "-t", "2", "--draft", NANO_DRAFTER,
                            "--draft-max", "4", "--mtp-reps", "2", "--json"])
        self.assertEqual(rc, 0, err)
        mtp = json.loads(out)["mtp"]
        self.assertEqual((mtp["runs"], mtp["identical"], len(mtp["ceiling"])), (2, True, 4))
        self.assertGreater(mtp["plain_tok_s"], 0)
        self.assertGreater(mtp["mtp_tok_s"], 0)
        self.assertLessEqual(mtp["speedup_min"], mtp["speedup"])
        self.assertLessEqual(mtp["speedup"], mtp["speedup_max"])
        self.assertTrue(all(c > 0 for c in mtp["ceiling"]), mtp["ceiling"])
        # nano's drafter agrees with its target on most tokens of the default English paragraph
        self.assertGreater(mtp["drafted"], 0)
        self.assertGreater(mtp["accepted"], mtp["drafted"] // 3)
        self.assertLessEqual(mtp["accepted"], mtp["drafted"])
        self.assertGreaterEqual(mtp["tokens_per_round"], 1)
        self.assertIn(mtp["window"], range(1, 5))

    def test_ceiling_without_drafter(self):
        rc, out, err = cli(["bench", "-m", NANO, "-p", "0", "-n", "24", "--mtp-ceiling", "--draft-max", "3",
                            "--mtp-reps", "1", "--json"])
        self.assertEqual(rc, 0, err)
        mtp = json.loads(out)["mtp"]
        self.assertNotIn("drafter", mtp)
        self.assertEqual((mtp["runs"], len(mtp["ceiling"])), (1, 3))
        self.assertGreater(mtp["plain_tok_s"], 0)
        self.assertTrue(all(c > 0 for c in mtp["ceiling"]), mtp["ceiling"])
        # one generated token leaves nothing to verify in batches: no ceiling rather than a made-up one
        rc, out, err = cli(["bench", "-m", NANO, "-p", "0", "-n", "1", "--mtp-ceiling", "--mtp-reps", "1", "--json"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["mtp"]["ceiling"], [])
        rc, out, err = cli(["bench", "-m", NANO, "-p", "0", "-n", "1", "--mtp-ceiling", "--mtp-reps", "1"])
        self.assertEqual(rc, 0, err)
        self.assertIn(b"MTP ceiling      not measured", out)

    def test_text_and_bad_arguments(self):
        rc, out, err = cli(["bench", "-m", NANO, "-p", "0", "-n", "16", "--draft", NANO_DRAFTER, "--draft-max", "2",
                            "--mtp-reps", "1"])
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, rb"median of 1 alternated runs")
        self.assertRegex(out, rb"output identical")
        self.assertRegex(out, rb"MTP ceiling +drafts always right and free, window 1..2: [\d.]+x [\d.]+x\n")
        for bad in (["--mtp-reps", "0"], ["--mtp-reps", "100"], ["--mtp-reps", "x"], ["--draft-max", "0"]):
            rc, _, err = cli(["bench", "-m", NANO, "-p", "0", "-n", "4", "--draft", NANO_DRAFTER] + bad)
            self.assertEqual(rc, 2, bad)
            self.assertIn(bad[0].encode(), err)
        rc, _, err = cli(["bench", "-m", NANO, "-p", "0", "-n", "4", "--draft", "/nonexistent.gguf"])
        self.assertEqual(rc, 1)
        self.assertIn(b"/nonexistent.gguf", err)


@need(MODEL)
class BenchCompareKV(unittest.TestCase):
    """`bench --compare-kv T`: a second cache of type T filled with the same tokens, the decode steps alternated
    between the two; the report's consistency, never timing."""

    def test_json_text_and_bad_types(self):
        rc, out, err = cli(["bench", "-m", MODEL, "-p", "0", "-n", "10", "--depth", "40", "-t", "2", "--kv", "f16",
                            "--compare-kv", "tbq4_0", "--json"])
        self.assertEqual(rc, 0, err)
        r = json.loads(out)
        cmp = r["compare_kv"]
        self.assertEqual((r["kv_type"], cmp["kv_type"], r["depth"], r["n_gen"]), ("f16", "tbq4_0", 40, 10))
        self.assertGreater(cmp["decode_tok_s"], 0)
        # the ratio is the two caches' times per step, 10 steps each (blocks of 4, 4 and 2)
        self.assertAlmostEqual(cmp["speed_ratio"], r["decode_ms_per_tok"] / cmp["decode_ms_per_tok"], delta=1e-2 * cmp["speed_ratio"])  # ms printed to 3 decimals
        self.assertAlmostEqual(cmp["decode_tok_s"] * cmp["decode_ms_per_tok"], 1000.0, delta=10.0)
        rc, out, err = cli(["bench", "-m", MODEL, "-p", "0", "-n", "4", "--compare-kv", "q4_polar"])
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, rb"decode  q4_polar +[\d.]+ tok/s +\([\d.]+ ms/tok, alternated with the above in blocks of 4: [\d.]+x its speed\)")
        rc, out, _ = cli(["bench", "-m", MODEL, "-p", "0", "-n", "4", "--json"])
        self.assertNotIn("compare_kv", json.loads(out))
        for bad, why in (("qjl1_256", b"keys only"), ("q3_x", b"not a cache type"), ("", b"not a cache type")):
            rc, _, err = cli(["bench", "-m", MODEL, "-p", "0", "-n", "4", "--compare-kv", bad])
            self.assertEqual(rc, 2, bad)
            self.assertIn(why, err)
        rc, _, err = cli(["bench", "-m", MODEL, "-p", "0", "-n", "4", "--compare-kv"])
        self.assertEqual(rc, 2)


@need(MODEL)
class BenchChat(unittest.TestCase):
    """`bench-chat` drives a real multi-turn chat: the assertions are on what the cache did, not on timing."""

    ARGS = ["bench-chat", "-m", MODEL, "--turns", "5", "--turn-tokens", "30", "-n", "4", "--ctx", "1024",
            "--warmup", "1", "--prompt-file", os.path.join(HERE, "test_cli.py")]

    def test_prefix_reuse_json(self):
        rc, out, err = cli(self.ARGS + ["--fresh-at", "3,5", "--json", "--lazy"])
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual((doc["ctx"], doc["turn_tokens"], doc["n_gen"], doc["warmup"], doc["reserved"]),
                         (1024, 30, 4, 1, False))
        turns = doc["turns"]
        self.assertEqual([t["turn"] for t in turns], [1, 2, 3, 4, 5])
        # The generation prompt ("<|turn>model" + empty thought channel) is never reused: the history renders
        # the model's turn without it. Its length is the full prompt of one message minus its model-turn prefix.
        one = [{"role": "user", "content": "x"}]
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(one, f)
            f.flush()
            rc, text, err = cli(["chat-template", "--messages", f.name], timeout=30)
        self.assertEqual(rc, 0, err)
        rc, ids, err = cli(["tokenize", "-m", MODEL, "--no-bos", "--parse-special"], text, timeout=30)
        self.assertEqual(rc, 0, err)
        tail = len(ids.split()) - model_turn_prefix(one)
        self.assertGreater(tail, 0)
        for prev, t in zip([None] + turns, turns):
            self.assertEqual(t["kept"] + t["new_tokens"], t["prompt_tokens"], t)
            self.assertEqual(t["evaluated"], t["new_tokens"], "the prefill computed more than the new tokens: %r" % t)
            self.assertEqual(t["generated"], 4)
            self.assertGreaterEqual(t["prompt_tokens"], 30)
            for k in ("rss_kb", "rss_anon_kb", "rss_file_kb"):
                self.assertGreater(t[k], 0, k)
            if prev is None:
                self.assertEqual(t["kept"], 0)
                continue
            # everything of the previous prompt up to its generation prompt stayed in the cache
            self.assertGreaterEqual(t["kept"], prev["prompt_tokens"] - tail, (prev, t))
            self.assertLess(t["kept"], prev["prompt_tokens"], (prev, t))
            self.assertGreater(t["prompt_tokens"], prev["prompt_tokens"] + 30)
            self.assertGreater(t["kv_kb"], prev["kv_kb"])
        # a fresh prefill computes the whole conversation of its turn; only the asked turns have one
        self.assertEqual([t["turn"] for t in turns if "fresh_ttft_ms" in t], [3, 5])
        for t in turns:
            if "fresh_ttft_ms" in t:
                self.assertEqual(t["fresh_evaluated"], t["prompt_tokens"])
                self.assertGreater(t["fresh_ttft_ms"], 0)
        s = doc["summary"]
        for k in ("rss_min_kb", "rss_max_kb", "rss_drift_pct", "anon_net_of_kv_drift_pct", "file_drift_pct",
                  "mean_followup_ttft_ms", "mean_followup_new_tokens", "followup_ms_per_new_token_first_quarter",
                  "followup_ms_per_new_token_last_quarter", "peak_rss_kb"):
            self.assertIn(k, s)
        self.assertLessEqual(s["rss_min_kb"], s["rss_max_kb"])
        self.assertEqual(s["rss_min_kb"], min(t["rss_kb"] for t in turns[1:]))
        self.assertGreaterEqual(s["peak_rss_kb"], s["rss_max_kb"])
        follow = turns[1:]
        self.assertAlmostEqual(s["mean_followup_new_tokens"], sum(t["new_tokens"] for t in follow) / len(follow), 1)

        # deterministic: the same run prefills the same tokens (also with the memory reserved up front)
        rc, again, err = cli(self.ARGS + ["--fresh-at", "3,5", "--json"])
        self.assertEqual(rc, 0, err)
        key = lambda d: [(t["prompt_tokens"], t["kept"], t["new_tokens"]) for t in d["turns"]]
        self.assertEqual(key(json.loads(again)), key(doc))

    def test_rss_flat(self):
        # reserved (the default): the KV cache, its checkpoint and the scratch are resident from the start, and
        # the PLE rows are dropped after use, so RSS stays flat while the conversation grows; with --lazy it
        # grows by the KV pages written (the memory a short chat does not use is never touched)
        args = self.ARGS[:3] + ["--turns", "8", "--turn-tokens", "100", "-n", "4", "--ctx", "1024", "--warmup", "1",
                                "--fresh-at", "8", "--prompt-file", os.path.join(HERE, "test_cli.py"), "--json"]
        rc, out, err = cli(args)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        turns, s = doc["turns"], doc["summary"]
        self.assertTrue(doc["reserved"])
        self.assertEqual(len({t["kv_kb"] for t in turns}), 1, "reserved: the whole cache counts from turn 1")
        self.assertGreater(turns[-1]["prompt_tokens"], 800)
        if not UNDER_ASAN:  # ASan's quarantine keeps freed memory resident: RSS grows with every allocation
            self.assertLessEqual(s["rss_drift_pct"], 2.0, s)
        rc, out, err = cli(args + ["--lazy"])
        self.assertEqual(rc, 0, err)
        lazy = json.loads(out)
        lt = lazy["turns"]
        grew = lt[-1]["kv_kb"] - lt[1]["kv_kb"]
        self.assertGreater(grew, 0.5 * turns[0]["kv_kb"])
        self.assertGreaterEqual(lazy["summary"]["anon_max_kb"] - lazy["summary"]["anon_min_kb"], 0.5 * grew, lazy["summary"])

    def test_table_and_errors(self):
        rc, out, err = cli(self.ARGS[:3] + ["--turns", "3", "--turn-tokens", "20", "-n", "2", "--ctx", "512"])
        self.assertEqual(rc, 0, err)
        lines = out.decode().splitlines()
        self.assertTrue(lines[1].split()[:4] == ["turn", "prompt", "kept", "new"], lines[:2])
        self.assertEqual([int(l.split()[0]) for l in lines[2:5]], [1, 2, 3])
        self.assertIn("fresh prefill of", out.decode())  # the default --fresh-at includes the last turn
        for bad in (["--turns", "0"], ["--fresh-at", "9"], ["--fresh-at", "2,x"], ["--warmup", "5"], ["--bogus"],
                    ["--turn-tokens"]):
            rc, _, err = cli(self.ARGS + bad)
            self.assertEqual(rc, 2, (bad, err))
            self.assertIn(b"eliza-infer:", err)
        rc, _, err = cli(self.ARGS + ["--prompt-file", "/nonexistent"])
        self.assertEqual((rc, b"cannot open" in err), (1, True), err)
        rc, _, err = cli(self.ARGS + ["--ctx", "128"])  # the conversation outgrows the context
        self.assertEqual((rc, b"does not fit" in err), (1, True), err)
        rc, _, err = cli(self.ARGS + ["--ctx", "999999"])
        self.assertEqual((rc, b"exceeds the model's context" in err), (1, True), err)


if __name__ == "__main__":
    if not os.access(EXE, os.X_OK):
        sys.exit("test_cli.py: %s is not an executable" % EXE)
    unittest.main(argv=[sys.argv[0], "-v"])
