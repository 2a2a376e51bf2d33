#!/usr/bin/env python3
"""Writes the GBNF test cases of tests/data/grammar/ (see the README there).

    make_cases.py --classifier PROGRAM [--vocab VOCAB.gguf] OUT_DIR

Each case is a grammar and an input: "text" (UTF-8 text) or "pieces" (a list of text strings and token
ids). PROGRAM is an independent GBNF engine that reads such lines on stdin and prints one word per line
(accept / prefix / reject / error); its answers become the "expect" field. Two files are written:
cases.jsonl (no vocabulary) and cases_vocab.jsonl (the <token-text> references, classified with
--vocab passed to PROGRAM as -m).

Cases are hand-written for every construct and error, plus random grammars with random texts drawn from
them and mutated (fixed seed, so the file is reproducible)."""
import json
import random
import subprocess
import sys

CASES = []


def case(grammar, *texts, pieces=None):
    for t in texts:
        CASES.append({"grammar": grammar, "text": t})
    for p in pieces or []:
        CASES.append({"grammar": grammar, "pieces": p})


# ---- literals and escapes -------------------------------------------------------------------------
case('root ::= "abc"', "abc", "ab", "", "abcd", "abd", "x")
case('root ::= "a" "b" "c"', "abc", "a", "ac")
case('root ::= "\\n\\t\\r"', "\n\t\r", "\n\t", "\n\r")
case('root ::= "\\\\" "\\"" "\\[" "\\]"', '\\"[]', '\\"[', '\\"]')
case('root ::= "\\x41\\x7a"', "Az", "A", "az")
case('root ::= "\\u00e9\\u20AC"', "é€", "é", "e€")
case('root ::= "\\U0001F600!"', "😀!", "😀", "😁!")
case('root ::= "héllo wörld"', "héllo wörld", "héllo", "hello world")
case('root ::= "日本語"', "日本語", "日本", "日本人")
case('root ::= "😀😃"', "😀😃", "😀", "😃")
case('root ::= "a\nb"', "a\nb", "a")
case('root ::= ""', "", "a")
case('root ::= "" "a" ""', "a", "", "aa")
case('root ::= "#not a comment"', "#not a comment", "#not")
case('root ::= "a|b"', "a|b", "a", "b")
case('root ::= "(x)*"', "(x)*", "(x)")
case('root ::= "\\x00" | "z"', "z")
case("root ::= \"'\"", "'", '"')

# ---- character classes ----------------------------------------------------------------------------
case("root ::= [a-z]", "a", "m", "z", "A", "", "ab", "{")
case("root ::= [a-zA-Z0-9_]+", "Hello_42", "_", "", "a b", "é")
case("root ::= [^a-z]", "A", "0", "a", "é", "😀", "")
case("root ::= [^a-z]+", "ABC123", "ABc", "€€")
case("root ::= [abc]+", "abcabc", "abd", "cab")
case("root ::= [a-]+", "a-a-", "b")
case("root ::= [-a]+", "-a", "-b")
case("root ::= [a-c-e]+", "a-eb", "d")
case("root ::= [\\]\\[]+", "][][", "]a")
case("root ::= [\\\\\"]+", '\\"\\', "a")
case("root ::= [\\x00-\\x1F]", "\x01", "\x1f", " ")
case("root ::= [^\\x00-\\x1F\"\\\\]+", "abc é", "ab\"", "a\\b", "a\nb")
case("root ::= [\\u0100-\\u017F]+", "ĀāĿ", "Āz", "ÿ")
case("root ::= [\\U0001F600-\\U0001F64F]+", "😀🙏", "😀🚀")
case("root ::= [é]", "é", "e")
case("root ::= [α-ω]+", "αβγ", "αΩ")
case("root ::= [^é]", "e", "é", "😀")
case("root ::= [a-a]", "a", "b")
case("root ::= [\\t\\n\\r ]*", " \t\n\r", "\n\n", "x")
case("root ::= []", "", "a")
case("root ::= [^]", "", "a")
case('root ::= [] "a"', "a", "")
case("root ::= [a] [^a]", "ab", "aa", "a😀")
case("root ::= [a-z0-9]{3}", "a1z", "a1", "a1z2", "A1z")
case("root ::= [ -~]+", "Hello, World!", "tab\there")
case("root ::= [\\x41-\\x43\\u0061-\\u0063]+", "ABCabc", "ABCd")

# ---- any character --------------------------------------------------------------------------------
case("root ::= .", "a", "é", "😀", "\n", "", "ab")
case('root ::= . "x"', "ax", "😀x", "x", "xx", "xxx")
case('root ::= .* "end"', "the end", "end", "endend", "en", "the enx")
case('root ::= "<" .{2,3} ">"', "<ab>", "<abc>", "<a>", "<abcd>", "<>>>")

# ---- alternation and groups -----------------------------------------------------------------------
case('root ::= "a" | "b" | "c"', "a", "b", "c", "d", "ab", "")
case('root ::= "ab" | "ac"', "ab", "ac", "a", "ad")
case('root ::= "a" | "ab" | "abc"', "a", "ab", "abc", "abcd")
case('root ::= ("a" | "b") "c"', "ac", "bc", "cc", "a")
case('root ::= "x" ("a" | "b" ("c" | "d")) "y"', "xay", "xbcy", "xbdy", "xby", "xb")
case('root ::= ("a" | )  "b"', "ab", "b", "a")
case('root ::= ( "a" "b" | "c" ) ( "d" | "e" "f" )', "abd", "cef", "abe", "ce")
case('root ::= (((("a"))))', "a", "aa")
case('root ::= ("a" | ("b" | ("c" | "d")))+', "abcd", "dcba", "abe")
case('root ::= "a" |\n  "b" |\n  "c"', "a", "b", "c", "d")
case('root ::= (\n  "a"\n  | "b"\n)', "a", "b", "ab")
case('root ::= (\n  "a" # comment in a group\n  "b"\n)', "ab", "a")

# ---- repetition -----------------------------------------------------------------------------------
case('root ::= "a"*', "", "a", "aaaa", "b", "aab")
case('root ::= "a"+', "", "a", "aaaa", "ab")
case('root ::= "a"?', "", "a", "aa")
case('root ::= "ab"*', "", "ab", "abab", "aba", "abb")
case('root ::= "ab"+ "c"', "abc", "ababc", "c", "abab")
case('root ::= [0-9]{3}', "123", "12", "1234", "")
case('root ::= [0-9]{2,}', "1", "12", "123456789")
case('root ::= [0-9]{2,4}', "1", "12", "123", "1234", "12345")
case('root ::= [0-9]{0,2}', "", "1", "12", "123")
case('root ::= [0-9]{0}', "", "1")
case('root ::= "a" [0-9]{0} "b"', "ab", "a1b")
case('root ::= "a"{0,0} "b"', "b", "ab")
case('root ::= "a"{1}', "a", "aa", "")
case('root ::= "a"{ 2 , 3 }', "a", "aa", "aaa", "aaaa")
case('root ::= ( "a" "b" ){2}', "abab", "ab", "ababab")
case('root ::= ( "a" | "bc" ){1,3}', "a", "bcabc", "abcbc", "abca", "aaaa")
case('root ::= ("a"?){3}', "", "a", "aaa", "aaaa")
case('root ::= ("a"*)*', "", "aaa")
case('root ::= ("a"+)+ "b"', "ab", "aaab", "b")
case('root ::= "a"*?', "", "a", "aa")
case('root ::= "a"+*', "", "a", "aaa")
case('root ::= ([a-c]{2}){2,3}', "abcabc", "abca", "abcab", "ab", "aaaaaaaa")
case('root ::= [a-z]{1,5} ("-" [a-z]{1,5})*', "abc-de-f", "abcdef", "abc--de", "a-")
case('root ::= "x"{20}', "x" * 20, "x" * 19, "x" * 21)
case('root ::= "x"{0,50}', "x" * 50, "x" * 51, "")
case('root ::= [0-9]{100}', "7" * 100, "7" * 99, "7" * 101)
case('root ::= "y"{3,}', "yy", "yyy", "y" * 40)

# ---- rules and recursion --------------------------------------------------------------------------
case('root ::= a b\na ::= "x"\nb ::= "y"', "xy", "x", "yx")
case('root ::= item ("," item)*\nitem ::= [a-z]+', "a,bc,d", "a,", "a,,b", ",a")
case('root ::= p\np ::= "(" p ")" | ""', "", "()", "(())", "((()))", "(()", "())", ")(")
case('root ::= p+\np ::= "(" p* ")" | "[" p* "]"', "()[]", "([])", "([)]", "(((", "")
case('root ::= e\ne ::= t ("+" t)*\nt ::= f ("*" f)*\nf ::= [0-9]+ | "(" e ")"',
     "1+2*3", "(1+2)*3", "((4))", "1+", "1+*2", "(1", "12*(3+4)*5")
case('root ::= a\na ::= "x" a | "y"', "y", "xy", "xxxxy", "xxxx", "yx")
case('root ::= a\na ::= "x" b\nb ::= "y" a | ""', "x", "xyx", "xyxyx", "xy", "xx")
case('root ::= s\ns ::= "a" s "b" | "ab"', "ab", "aabb", "aaabbb", "aab", "abab")
case('root ::= r\nr ::= "a" | "b"\nr ::= "c"', "c", "a", "b")
case('root ::= "a"\nroot ::= "b"', "b", "a")
case('b ::= "b"\nroot ::= b b\n', "bb", "b")
case('root ::= x-1 y_2\nx-1 ::= "1"\ny_2 ::= "2"', "12")
case('root ::= 123abc\n123abc ::= "z"', "z", "a")

# ---- layout: comments, blank lines, line ends, spaces ---------------------------------------------
case('# leading comment\nroot ::= "a" # trailing\n\n# another\n', "a", "b")
case('root ::= "a"\r\nb ::= "b"\r\n', "a", "b")
case('root ::= "a" b\rb ::= "b"\r', "ab", "a")
case('\n\n   root ::= "a"\n\n\n', "a")
case('root::="a"', "a")
case('root ::=\n  "a"', "a")
case('root ::= "a"\t"b"', "ab")
case('  root   ::=   "a"   |   "b"   ', "a", "b")
case('root ::= "a" ## # #\n#', "a")

# ---- a JSON grammar (ours) and texts --------------------------------------------------------------
JSON = r'''root ::= ws value ws
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n\r]*
'''
case(JSON, '{"a": 1, "b": [true, false, null], "c": {"d": "e\\n\\u00e9"}}', "[]", "{}", '"x"', "-0.5e+10", "12",
     '{"a": 1,}', "[1 2]", "01", '{"a"', "[[[[", '"\\x"', "tru", "true false", '{"é": "😀"}', "  [ 1 , 2 ]  ")

# ---- token references (pieces: strings are text, integers token ids) -------------------------------
case('root ::= <[5]>', pieces=[[5], [6], [], [5, 5]])
case('root ::= "a" <[7]> "b"', pieces=[["a", 7, "b"], ["a", 7], ["a", 8, "b"], ["a"]])
case('root ::= <[3]>+', pieces=[[3, 3, 3], [3, 4], []])
case('root ::= !<[9]>', pieces=[[1], [9], [8, 8]])
case('root ::= !<[9]>* <[9]>', pieces=[[1, 2, 3, 9], [9], [9, 9], [1, 2]])
case('root ::= ( <[1]> | <[2]> <[3]> ){2}', pieces=[[1, 1], [2, 3, 1], [2, 1], [1, 2, 3]])
case('root ::= "x" ( <[10]> | "y" )', pieces=[["x", 10], ["x", "y"], ["x", 11]])
case('root ::= <[ 5]>', pieces=[[5]])
case('root ::= <[]>', pieces=[[5]])
case('root ::= <[5>', pieces=[[5]])
case('root ::= <[5]', pieces=[[5]])
case('root ::= !"a"', "a")
case('root ::= <abc>', "abc")

# ---- errors ---------------------------------------------------------------------------------------
for g in ['root ::= "abc', 'root ::= [abc', 'root ::= ("a"', 'root ::= "a")', 'root ::= x', 'foo ::= "a"', '',
          '# only a comment', 'root ::= "\\q"', 'root ::= "\\x4"', 'root ::= "\\u12G4"', 'root ::= "\\U0001F60"',
          'root := "a"', 'root "a"', 'root ::= "a" | ', 'root ::= *', 'root ::= "a" | +', 'root ::= ("a" | *)',
          'root ::= "a"{', 'root ::= "a"{x}', 'root ::= "a"{1', 'root ::= "a"{1,', 'root ::= "a"{1,2',
          'root ::= "a"{,2}', 'root ::= "a"{1 2}', 'root ::= []*', 'root ::= ""+', 'root ::= "a"\n| "b"',
          'root ::= a\na ::= a "x"', 'root ::= a\na ::= b\nb ::= a', 'root ::= a\na ::= "" | a "x"',
          'root ::= ("")*', 'root ::= ("" | "a")+', 'root ::= a\na ::= b a\nb ::= "" | "q"',
          'root ::= "a" b\nb ::= c\n', '  root ::= "a" ::= "b"', 'root ::= "a" "b" )',
          'root ::= [a-z', 'root ::= [\\', 'root ::= "\\', 'root ::= [a-', '1root ::= root',
          'root ::= (((("a"))))))', 'root ::= ."', 'root ::= "a" @', 'root ::= a\n a ::= "x"\nroot ::= b']:
    case(g, "a")

# ---- random grammars ------------------------------------------------------------------------------
rng = random.Random(17)
ALPHABET = ["a", "b", "c", "x", "é", "€", "😀", " ", "-", "0", "1"]


def gen_item(depth, rules_after):
    k = rng.random()
    if k < 0.3:
        s = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3)))
        return '"' + s + '"'
    if k < 0.5:
        chars = rng.sample(["a", "b", "c", "x", "0", "é", "€"], rng.randint(1, 3))
        if rng.random() < 0.3:
            chars.append("a-c")
        return "[" + ("^" if rng.random() < 0.25 else "") + "".join(chars) + "]"
    if k < 0.55:
        return "."
    if k < 0.7 and rules_after:
        return rng.choice(rules_after)
    if depth < 3:
        return "(" + gen_alts(depth + 1, rules_after) + ")"
    return '"' + rng.choice(ALPHABET) + '"'


def gen_seq(depth, rules_after):
    out = []
    for _ in range(rng.randint(1, 3)):
        it = gen_item(depth, rules_after)
        r = rng.random()
        if r < 0.12:
            it += "*"
        elif r < 0.22:
            it += "+"
        elif r < 0.32:
            it += "?"
        elif r < 0.42:
            m = rng.randint(0, 2)
            it += rng.choice(["{%d}" % m, "{%d,}" % m, "{%d,%d}" % (m, m + rng.randint(0, 2))])
        out.append(it)
    return " ".join(out)


def gen_alts(depth, rules_after):
    return " | ".join(gen_seq(depth, rules_after) for _ in range(rng.randint(1, 3)))


def sample(gtext):
    """A few texts: strings made of the grammar's own characters, which often match or nearly match."""
    texts = set()
    chars = [c for c in ALPHABET if c in gtext] or ["a"]
    for _ in range(6):
        texts.add("".join(rng.choice(chars) for _ in range(rng.randint(0, 6))))
    return sorted(texts)


for _ in range(60):
    n_rules = rng.randint(1, 3)
    names = ["r%d" % i for i in range(n_rules)]
    lines = []
    for i in range(n_rules):
        lines.append("%s ::= %s" % ("root" if i == 0 else names[i], gen_alts(0, names[i + 1:])))
    g = "\n".join(lines)
    case(g, *sample(g))


def main():
    args = sys.argv[1:]
    classifier = vocab = None
    while args and args[0].startswith("--"):
        if args[0] == "--classifier":
            classifier = args[1]
        elif args[0] == "--vocab":
            vocab = args[1]
        args = args[2:]
    if not classifier or len(args) != 1:
        sys.exit(__doc__)
    out_dir = args[0]
    vocab_cases = [
        {"grammar": 'root ::= <eos>', "pieces": [1]},
        {"grammar": 'root ::= <|turn>', "pieces": []},
        {"grammar": 'root ::= "a" <|turn> "b"', "pieces": ["a", 105, "b"]},
        {"grammar": 'root ::= <hello>', "pieces": []},
        {"grammar": 'root ::= <turn|>', "pieces": [106]},
        {"grammar": 'root ::= !<eos>', "pieces": [1]},
        {"grammar": 'root ::= !<eos>', "pieces": [2]},
        {"grammar": 'root ::= <[262143]>', "pieces": [262143]},
        {"grammar": 'root ::= <unterminated', "pieces": []},
    ]
    for name, cases, extra in (("cases.jsonl", CASES, []), ("cases_vocab.jsonl", vocab_cases, ["-m", vocab])):
        if extra and not vocab:
            continue
        lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
        got = subprocess.run([classifier] + extra, input=lines.encode(), capture_output=True, check=True).stdout
        words = got.decode().split()
        assert len(words) == len(cases), (len(words), len(cases))
        with open(out_dir + "/" + name, "w", encoding="utf-8") as f:
            for c, w in zip(cases, words):
                c = dict(c, expect=w)
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
        print("%s: %d cases" % (name, len(cases)))


if __name__ == "__main__":
    main()
