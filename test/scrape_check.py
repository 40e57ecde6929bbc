#!/usr/bin/env python3
"""Checks one scraped profile against what Grafana Alloy (pyroscope.scrape)
and Parca need from a scrape target, and prints a summary that a later
scrape can be compared with.

    scrape_check.py check FILE TYPES MODE OUT.json
        FILE   the response body (gzip-compressed profile.proto)
        TYPES  expected sample types, "type/unit,type/unit,..."
        MODE   "delta" (duration_nanos must be set) or "cumulative" (unset)
        OUT    summary: per-type totals and, per stack (function names from
               leaf to root), its location addresses and values
    scrape_check.py grows EARLIER.json LATER.json TYPE...
        every named type's total and every stack's value in LATER is at
        least EARLIER's (cumulative counters), and every stack present in
        both has the same location addresses (Alloy matches samples across
        scrapes by address)

The protobuf is decoded here by hand (varints and length-delimited fields
only), so the check does not depend on the agent's own encoder or on pprof.
Exits 1 with one line per broken rule.
"""
import gzip
import json
import sys


def varint(buf, i):
    v = 0
    shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7


def fields(buf):
    """Yields (field number, wire type, value) of one message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 2:
            n, i = varint(buf, i)
            v = buf[i:i + n]
            i += n
        elif wt == 1:
            v = buf[i:i + 8]
            i += 8
        elif wt == 5:
            v = buf[i:i + 4]
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def packed(wt, v):
    """A repeated integer field, packed (wt 2) or not (wt 0)."""
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def signed(x):
    return x - (1 << 64) if x >= 1 << 63 else x


def decode(raw):
    p = {"sample_type": [], "sample": [], "mapping": [], "location": [],
         "function": [], "strings": [], "time_nanos": 0,
         "duration_nanos": 0, "period": 0, "period_type": None,
         "time_nanos_count": 0}
    for num, wt, v in fields(raw):
        if num == 1:
            vt = dict((n, x) for n, _, x in fields(v))
            p["sample_type"].append((vt.get(1, 0), vt.get(2, 0)))
        elif num == 2:
            s = {"loc": [], "val": [], "labels": []}
            for n, w, x in fields(v):
                if n == 1:
                    s["loc"] += packed(w, x)
                elif n == 2:
                    s["val"] += [signed(y) for y in packed(w, x)]
                elif n == 3:
                    s["labels"].append(dict((a, b) for a, _, b in fields(x)))
            p["sample"].append(s)
        elif num == 3:
            p["mapping"].append(dict((n, x) for n, _, x in fields(v)))
        elif num == 4:
            f = list(fields(v))
            names = {1: "id", 2: "mapping_id", 3: "address"}
            loc = {"id": 0, "mapping_id": 0, "address": 0}
            loc.update((names[n], x) for n, _, x in f if n in names)
            loc["lines"] = [dict((a, b) for a, _, b in fields(x))
                            for n, _, x in f if n == 4]
            p["location"].append(loc)
        elif num == 5:
            p["function"].append(dict((n, x) for n, _, x in fields(v)))
        elif num == 6:
            p["strings"].append(bytes(v).decode("utf-8", "replace"))
        elif num == 9:
            p["time_nanos"] = v
            p["time_nanos_count"] += 1
        elif num == 10:
            p["duration_nanos"] = signed(v)
        elif num == 11:
            p["period_type"] = dict((n, x) for n, _, x in fields(v))
        elif num == 12:
            p["period"] = v
    return p


def check(path, types, mode, out):
    errors = []
    body = open(path, "rb").read()
    if body[:2] != b"\x1f\x8b":
        errors.append("body does not start with the gzip magic 1f 8b")
        raw = body
    else:
        raw = gzip.decompress(body)
    p = decode(raw)
    st = p["strings"]
    if not st or st[0] != "":
        errors.append('string_table[0] is not ""')

    def s(i):
        if i < 0 or i >= len(st):
            errors.append("string index %d outside the table" % i)
            return "?"
        return st[i]

    got = ["%s/%s" % (s(t), s(u)) for t, u in p["sample_type"]]
    if got != types:
        errors.append("sample types %s, expected %s" % (got, types))
    if p["time_nanos_count"] != 1:
        errors.append("time_nanos appears %d times" % p["time_nanos_count"])
    if mode == "delta" and p["duration_nanos"] <= 0:
        errors.append("duration_nanos unset on a delta profile")
    if mode == "cumulative" and p["duration_nanos"] != 0:
        errors.append("duration_nanos set on a cumulative profile "
                      "(Parca would mark the series delta)")
    # Parca: ids sequential from 1 in emission order.
    for kind in ("mapping", "location", "function"):
        for i, m in enumerate(p[kind]):
            mid = m.get(1, 0) if kind != "location" else m["id"]
            if mid != i + 1:
                errors.append("%s id %d at position %d: not sequential"
                              % (kind, mid, i))
                break
    locs = dict((l["id"], l) for l in p["location"])
    funcs = dict((f.get(1, 0), f) for f in p["function"])
    nmap = len(p["mapping"])
    for l in p["location"]:
        if l["address"] == 0:
            errors.append("location %d has no address" % l["id"])
        if l["mapping_id"] > nmap:
            errors.append("location %d names mapping %d" %
                          (l["id"], l["mapping_id"]))
    stacks = {}
    totals = [0] * len(types)
    for smp in p["sample"]:
        if len(smp["val"]) != len(p["sample_type"]):
            errors.append("sample with %d values for %d types" %
                          (len(smp["val"]), len(p["sample_type"])))
            continue
        for lab in smp["labels"]:
            if lab.get(1, 0) == 0:
                errors.append("label with key 0")
        names, addrs = [], []
        for lid in smp["loc"]:
            if lid == 0 or lid not in locs:
                errors.append("sample names location %d" % lid)
                continue
            l = locs[lid]
            addrs.append(l["address"])
            fn = [s(funcs.get(ln.get(1, 0), {}).get(2, 0))
                  for ln in l["lines"]]
            names.append("+".join(fn) or "0x%x" % l["address"])
        labels = sorted("%s=%s" % (s(lab.get(1, 0)), s(lab.get(2, 0)) if 2 in lab else lab.get(3, 0))
                        for lab in smp["labels"])
        key = ";".join(names) + "|" + ",".join(labels)
        e = stacks.setdefault(key, {"addrs": addrs, "val": [0] * len(types)})
        if e["addrs"] != addrs:
            # Two samples with the same names but different addresses:
            # distinct call sites in one function, keep both.
            key += "|" + ",".join("%x" % a for a in addrs)
            e = stacks.setdefault(key, {"addrs": addrs,
                                        "val": [0] * len(types)})
        for i, v in enumerate(smp["val"][:len(types)]):
            e["val"][i] += v
            totals[i] += v
    summary = {"types": got, "totals": totals, "stacks": stacks,
               "samples": len(p["sample"]), "locations": len(p["location"]),
               "duration_nanos": p["duration_nanos"]}
    json.dump(summary, open(out, "w"))
    for e in errors[:20]:
        print("FAIL %s: %s" % (path, e))
    print("%s: %d samples, %d locations, totals %s, duration_nanos %d" %
          (path, len(p["sample"]), len(p["location"]),
           dict(zip(got, totals)), p["duration_nanos"]))
    return 1 if errors else 0


def grows(a_path, b_path, names):
    a = json.load(open(a_path))
    b = json.load(open(b_path))
    errors = []
    idx = [a["types"].index(n) for n in names]
    for i, n in zip(idx, names):
        if b["totals"][i] < a["totals"][i]:
            errors.append("total %s fell from %d to %d" %
                          (n, a["totals"][i], b["totals"][i]))
    common = 0
    for key, ea in a["stacks"].items():
        eb = b["stacks"].get(key)
        if eb is None:
            # A series with nothing cumulative (the heap's in-use series
            # by age label) may go when its blocks are freed.
            if any(ea["val"][i] for i in idx):
                errors.append("stack %s vanished from the later scrape" % key[:120])
            continue
        common += 1
        if ea["addrs"] != eb["addrs"]:
            errors.append("stack %s changed addresses" % key[:120])
        for i, n in zip(idx, names):
            if eb["val"][i] < ea["val"][i]:
                errors.append("stack %s: %s fell from %d to %d" %
                              (key[:120], n, ea["val"][i], eb["val"][i]))
    for e in errors[:20]:
        print("FAIL %s -> %s: %s" % (a_path, b_path, e))
    print("%s -> %s: %d stacks in both, totals %s -> %s" %
          (a_path, b_path, common, [a["totals"][i] for i in idx],
           [b["totals"][i] for i in idx]))
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3].split(","), sys.argv[4],
                       sys.argv[5]))
    if len(sys.argv) >= 5 and sys.argv[1] == "grows":
        sys.exit(grows(sys.argv[2], sys.argv[3], sys.argv[4:]))
    print(__doc__)
    sys.exit(2)
