#!/usr/bin/env python3
"""The library's objects must not call into each other in a loop: a format or model layer that needs the
planner, or a device that needs the session, could not be built or tested alone (issue "executor seam").

Reads every object file of the library (the OBJECT_DIRs, searched recursively), asks `nm` what each defines
and what it needs, draws an edge A -> B when A needs a symbol B defines, and fails naming every strongly
connected set of two or more objects. Also fails naming every global symbol outside the library's two
prefixes, eli_ (internal) and eliza_inference_ (the ABI): an app links us beside other code, and a global
named gguf_open or sample_token would collide with theirs. Names starting with two underscores are the
compiler's and the sanitizers' (e.g. ASan's __odr_asan.* markers), which C reserves to them. Usage: check_cycles.py OBJECT_DIR..."""
import os
import re
import subprocess
import sys


def symbols(paths):
    """{path: (defined, needed)} from one nm run (-A: each line starts with "path: ")."""
    table = {p: (set(), set()) for p in paths}
    out = subprocess.run(["nm", "-P", "-A", *paths], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        path, _, rest = line.partition(": ")
        fields = rest.split()
        if path not in table or len(fields) < 2:
            continue
        kind = fields[1]
        if kind == "U":
            table[path][1].add(fields[0])
        elif kind.isupper():  # global definitions only: a static function of one file serves no other
            table[path][0].add(fields[0])
    return table


def sccs(nodes, edges):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main():
    roots = sys.argv[1:]
    objs = sorted(os.path.join(d, f) for r in roots for d, _, fs in os.walk(r) for f in fs if f.endswith(".o"))
    if len(objs) < 10:
        print(f"FAIL only {len(objs)} object files under {' '.join(roots)}")
        return 1
    name = {o: next(os.path.relpath(o, r) for r in roots if o.startswith(r)).replace(".c.o", ".c") for o in objs}
    table = symbols(objs)
    owner = {}
    for o, (defined, _) in table.items():
        for s in defined:
            owner.setdefault(s, o)
    edges = {o: sorted({owner[s] for s in table[o][1] if s in owner and owner[s] != o}) for o in objs}
    n_edges = sum(len(v) for v in edges.values())
    loops = [c for c in sccs(objs, edges) if len(c) > 1]
    print(f"{len(objs)} objects, {n_edges} call edges")
    for c in loops:
        members = set(c)
        print("FAIL a cycle: " + ", ".join(sorted(name[o] for o in c)))
        for o in sorted(c, key=lambda x: name[x]):
            print(f"    {name[o]} -> " + ", ".join(name[w] for w in edges[o] if w in members))
    if not loops:
        print("no cycle: every object's dependencies form a tree of layers")
    stray = sorted((name[o], s) for o, (defined, _) in table.items() for s in defined
                   if not re.match(r"(eli_|eliza_inference_|__)", s))
    for obj, sym in stray:
        print(f"FAIL {obj} defines the global {sym} (not eli_ or eliza_inference_)")
    if not stray:
        print("every global symbol is eli_* or eliza_inference_*")
    return 1 if loops or stray else 0


if __name__ == "__main__":
    sys.exit(main())
