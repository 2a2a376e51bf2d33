#!/usr/bin/env python3
"""Writes tests/data/grammar/schema_cases.jsonl (see the README there).

    make_schema_cases.py --classifier PROGRAM OUT_DIR

Each case is a JSON schema and a text; PROGRAM (an independent JSON-schema-to-grammar converter and
grammar engine) reads {"schema", "text"} lines on stdin and prints accept / prefix / reject / error per
line; its answer becomes "expect". The texts avoid what the two converters are free to differ in
(whitespace beyond one space, the order of optional properties, number lengths, \\/ and DEL in strings)."""
import json
import subprocess
import sys

CASES = []


def case(schema, *texts):
    for t in texts:
        CASES.append({"schema": schema, "text": t})


ENVELOPE = {"type": "object",
            "properties": {"thought": {"type": "string"}, "replyText": {"type": "string"},
                           "actions": {"type": "array", "items": {"type": "string"}}},
            "required": ["thought", "replyText", "actions"], "additionalProperties": False}
case(ENVELOPE,
     '{"thought":"hm","replyText":"Hi!","actions":["REPLY"]}',
     '{"thought": "hm", "replyText": "Hi \\"there\\"\\n", "actions": ["REPLY", "WAIT"]}',
     '{"thought":"","replyText":"","actions":[]}',
     '{"thought":"x","replyText":"y"}',
     '{"thought":"x","replyText":"y","actions":["a"],"extra":1}',
     '{"replyText":"y","thought":"x","actions":[]}',
     '{"thought":"x","replyText":"y","actions":"a"}',
     '{"thought":"unterminated',
     '{"thought":"x","replyText":"y","actions":["a",]}',
     '{"thought":"x","replyText":"y","actions":["é😀"]}')

case({"type": "string"}, '"abc"', '""', '"a\\u00e9b"', 'abc', '"abc', '"a"b"', '"tab\\t"')
case({"type": "string", "minLength": 2, "maxLength": 4}, '"a"', '"ab"', '"abcd"', '"abcde"', '"é😀"', '"\\n\\n"')
case({"type": "string", "maxLength": 0}, '""', '"a"')
case({"type": "integer"}, "0", "-7", "42", "1234567890", "01", "1.5", "-", "1e3", "-0")
case({"type": "number"}, "0", "-1.25", "3e10", "2.5E-3", "1.", ".5", "+1", "--1", "12.0")
case({"type": "boolean"}, "true", "false", "True", "tru", "null")
case({"type": "null"}, "null", "nul", "0")
case({"type": ["string", "null"]}, '"x"', "null", "1")
case({"type": ["integer", "boolean"]}, "5", "true", '"5"')
case({"enum": ["red", "green", 3, None, True]}, '"red"', '"green"', "3", "null", "true", '"blue"', '"re', "false")
case({"const": "fixed"}, '"fixed"', '"fix"', '"fixed2"')
case({"const": {"a": [1, 2, {"b": None}]}}, '{"a":[1,2,{"b":null}]}', '{"a":[1,2]}')
case({"type": "array", "items": {"type": "integer"}}, "[]", "[1]", "[1,2,3]", "[1, 2, 3]", "[1,]", '["a"]', "[")
case({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3},
     "[1]", "[1,2]", "[1,2,3]", "[1,2,3,4]", "[]")
case({"type": "array", "items": {"type": "boolean"}, "minItems": 1}, "[]", "[true]", "[true,false,true]")
case({"type": "array", "maxItems": 0}, "[]", "[1]")
case({"type": "array", "items": {"type": "string", "maxLength": 1}}, '["a","b"]', '["ab"]')
case({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]},
     '{"a":1}', '{"a":1,"b":"x"}', '{"b":"x"}', '{}', '{"a":1,"c":2}', '{"a":"1"}')
case({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
     '{}', '{"a":1}', '{"b":2}', '{"a":1,"b":2}', '{"a":1,}', '{,"b":2}')
case({"type": "object", "properties": {"name": {"type": "string"},
                                       "tags": {"type": "array", "items": {"type": "string"}},
                                       "meta": {"type": "object", "properties": {"n": {"type": "number"}},
                                                "required": ["n"]}},
      "required": ["name", "tags", "meta"]},
     '{"name":"x","tags":[],"meta":{"n":1.5}}', '{"name":"x","tags":["a"],"meta":{}}',
     '{"name":"x","tags":["a"],"meta":{"n":1,"m":2}}')
case({"type": "object", "additionalProperties": {"type": "integer"}},
     '{}', '{"a":1}', '{"a":1,"b":2}', '{"a":"x"}')
case({"type": "object"}, '{}', '{"a":[1,{"b":null}]}', '[]')
case({}, '1', '"s"', '{"a":[true]}', 'null', 'nope')
case({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]}, "7", '"ab"', '"abc"', "true")
case({"oneOf": [{"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
                {"type": "array", "items": {"type": "null"}}]},
     '{"k":"a"}', '[null,null]', '{"k":"b"}', '[1]')
case({"$defs": {"pos": {"type": "integer"}}, "type": "object",
      "properties": {"x": {"$ref": "#/$defs/pos"}, "y": {"$ref": "#/$defs/pos"}}, "required": ["x", "y"]},
     '{"x":1,"y":2}', '{"x":1}', '{"x":"1","y":2}')
case({"definitions": {"tree": {"type": "object", "properties": {"v": {"type": "integer"},
                                                                 "kids": {"type": "array", "items": {"$ref": "#/definitions/tree"}}},
                                "required": ["v", "kids"]}},
      "$ref": "#/definitions/tree"},
     '{"v":1,"kids":[]}', '{"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[{"v":4,"kids":[]}]}]}',
     '{"v":1,"kids":[{"v":2}]}')
case({"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}, '"AB-123"', '"AB-12"', '"ab-123"', '"AB-1234"')
case({"type": "string", "pattern": "^(foo|ba[rz])+$"}, '"foo"', '"barbazfoo"', '"fo"', '"qux"', '""')
case({"type": "string", "pattern": "^a.c$"}, '"abc"', '"a c"', '"ac"')
case({"type": "string", "pattern": "^\\d+(\\.\\d{1,2})?$"}, '"12"', '"12.5"', '"12.345"', '"x"')
case({"type": "string", "pattern": "^[^a-c]*x?$"}, '"dex"', '"dax"', '""')
case({"type": "string", "pattern": "^(?:ab){2,3}$"}, '"abab"', '"ababab"', '"ab"', '"abababab"')
case({"type": "object", "properties": {"when": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"},
                                       "n": {"enum": [1, 2]}},
      "required": ["when", "n"], "additionalProperties": False},
     '{"when":"2024-05","n":2}', '{"when":"2024-5","n":2}', '{"when":"2024-05","n":3}')


# Where the reference is wrong by the JSON Schema specification, the case keeps its answer in "expect"
# and ours in "ours", with the reason.
OURS = {
    ('{"type": "array", "maxItems": 0}', "[1]"): ("reject", "maxItems 0 allows only the empty array"),
    ("{}", "1"): ("accept", "the empty schema allows any JSON value"),
    ("{}", '"s"'): ("accept", "the empty schema allows any JSON value"),
    ("{}", "null"): ("accept", "the empty schema allows any JSON value"),
    ('{"type": "string", "pattern": "^\\\\d+(\\\\.\\\\d{1,2})?$"}', '"12.345"'):
        ("reject", "the pattern allows at most two decimals"),
    ('{"type": "string", "pattern": "^\\\\d+(\\\\.\\\\d{1,2})?$"}', '"x"'): ("reject", "the pattern needs digits"),
}


def main():
    args = sys.argv[1:]
    if len(args) != 3 or args[0] != "--classifier":
        sys.exit(__doc__)
    lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in CASES)
    got = subprocess.run([args[1]], input=lines.encode(), capture_output=True, check=True).stdout.decode().split()
    assert len(got) == len(CASES), (len(got), len(CASES))
    with open(args[2] + "/schema_cases.jsonl", "w", encoding="utf-8") as f:
        for c, w in zip(CASES, got):
            c = dict(c, expect=w)
            ours = OURS.get((json.dumps(c["schema"]), c["text"]))
            if ours:
                c["ours"], c["why"] = ours
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    print("schema_cases.jsonl: %d cases" % len(CASES))


if __name__ == "__main__":
    main()
