#!/usr/bin/env python3
"""The house's layers, checked from the sources and the objects.

  python3 layers.py TOP [BUILD]

Layers, bottom to top: agent/ (recording), encoder/ (bytes), http/
(serving), process/ (the shell: constructor, fork policy, dumps). A file
may include or call only its own layer and the ones below. Prints the
figures (files, include depth, wrong-way arrows, cycles) and one line per
fault; exits 1 on any fault:

- an #include "x/y.h" of a higher layer (wrong way);
- an include cycle between .c/.h files;
- with BUILD: an object that calls a function defined by an object of a
  higher layer (found with nm). Call cycles inside a layer are reported.
  Names the agent interposes (agent/exports.map) are C-library calls,
  not arrows: a call to malloc from agent/ goes to the C library's name.
- with BUILD: an object of agent/core/, the ground floor of agent/, that
  calls one outside agent/core/.
"""
import os
import re
import subprocess
import sys

LAYERS = {"agent": 0, "encoder": 1, "http": 2, "process": 3}
CORE = "agent/core"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer(path):
    return LAYERS.get(path.split("/")[0])


def folder(path):
    """agent/stacks/x.c -> agent/stacks; http/x.c -> http."""
    return os.path.dirname(path)


def sources(top):
    out = []
    for base in LAYERS:
        for d, _, files in os.walk(os.path.join(top, base)):
            for f in files:
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(d, f), top))
    return sorted(out)


def include_graph(top, files):
    graph = {}
    for f in files:
        with open(os.path.join(top, f), errors="replace") as fh:
            text = fh.read()
        graph[f] = [i for i in INCLUDE.findall(text) if layer(i) is not None]
    return graph


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
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
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def depth(graph):
    memo = {}

    def d(v, seen):
        if v in memo:
            return memo[v]
        if v in seen:
            return 0
        seen.add(v)
        best = 1 + max((d(w, seen) for w in graph.get(v, ()) if w in graph), default=0)
        seen.discard(v)
        memo[v] = best
        return best

    return max((d(v, set()) for v in graph), default=0)


def nm(paths, *flags):
    """The symbols nm lists of each object in PATHS (one nm for them all:
    a process each took a second apiece on a loaded machine)."""
    r = subprocess.run(["nm", "-A", *flags, *paths], capture_output=True, text=True, check=True)
    found = {p: [] for p in paths}
    for line in r.stdout.splitlines():
        path, _, rest = line.rpartition(":")
        if rest.split():
            found[path].append(rest.split()[-1])
    return found


def call_graph(top, build, files):
    interposed = set()
    with open(os.path.join(top, "agent/exports.map")) as fh:
        for name in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*;", fh.read()):
            interposed.add(name)
    objects = {}
    for f in files:
        if f.endswith(".c"):
            o = os.path.join(build, f[:-2] + ".o")
            if not os.path.exists(o):
                print("missing object:", o)
                sys.exit(1)
            objects[f] = o
    paths = list(objects.values())
    exported, undefined = nm(paths, "--defined-only", "-g"), nm(paths, "-u")
    defined = {}
    for f, o in objects.items():
        for s in exported[o]:
            if s not in interposed:
                defined.setdefault(s, f)
    graph = {}
    for f, o in objects.items():
        graph[f] = sorted({defined[s] for s in undefined[o] if s in defined and defined[s] != f})
    return graph


def main():
    top = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) > 2 else None
    files = sources(top)
    graph = include_graph(top, files)
    faults = 0

    wrong = [(f, i) for f in files for i in graph[f] if layer(i) > layer(f)]
    inc_cycles = cycles(graph)
    print("include graph: %d files, depth %d, %d arrows, %d wrong-way, %d cycles"
          % (len(files), depth(graph), sum(len(v) for v in graph.values()),
             len(wrong), len(inc_cycles)))
    for f, i in wrong:
        print("wrong-way include: %s includes %s" % (f, i))
        faults += 1
    for c in inc_cycles:
        print("include cycle:", " ".join(c))
        faults += 1

    if build:
        calls = call_graph(top, build, files)
        up = [(f, g) for f in calls for g in calls[f] if layer(g) > layer(f)]
        file_cycles = cycles(calls)
        folders = {}
        for f in calls:
            for g in calls[f]:
                if folder(f) != folder(g):
                    folders.setdefault(folder(f), set()).add(folder(g))
                    folders.setdefault(folder(g), set())
        folder_cycles = cycles({k: sorted(v) for k, v in folders.items()})
        print("call graph: %d objects, depth %d, %d arrows, %d wrong-way, "
              "%d file cycles (%d files), %d folder cycles"
              % (len(calls), depth(calls), sum(len(v) for v in calls.values()),
                 len(up), len(file_cycles), sum(len(c) for c in file_cycles),
                 len(folder_cycles)))
        for c in file_cycles:
            print("  file cycle (reported):", " ".join(c))
        for f, g in up:
            print("wrong-way call: %s calls into %s" % (f, g))
            faults += 1
        for c in folder_cycles:
            print("  folder cycle (reported):", " ".join(c))
        for f in sorted(calls):
            for g in calls[f]:
                if folder(f) != CORE or folder(g) == CORE:
                    continue
                print("core calls up: %s calls into %s" % (f, g))
                faults += 1
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
