#!/usr/bin/env python3
"""Reads what the test Collector recorded (one ExportProfilesServiceRequest
a line, pdata's OTLP JSON) and prints it in lines a shell test can grep:

  request N resource KEY=VALUE
  profile N TYPE/UNIT samples=S total=T time=NS duration=NS period=P
  function N TYPE NAME VALUE TIME DURATION   (the value of samples with
                                  NAME anywhere on their stack, each sample
                                  once; the profile's window)
  mapping N FILE build_id=HEX
  attr N TYPE KEY=VALUE           (sample attributes seen)

Usage: otlp_read.py FILE [PID]   (PID: only requests of that process.pid)
"""
import json
import sys


def value_of(v, strings):
    if "stringValue" in v:
        return v["stringValue"]
    if "stringValueStrindex" in v:
        return strings[v["stringValueStrindex"]]
    if "intValue" in v:
        return str(int(v["intValue"]))
    return ""


def main():
    path = sys.argv[1]
    want_pid = sys.argv[2] if len(sys.argv) > 2 else None
    n = 0
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        # The resource comes first: other processes' requests are skipped
        # unparsed.
        if want_pid and ('"intValue":"%s"' % want_pid) not in line[:2000]:
            continue
        d = json.loads(line)
        dic = d.get("dictionary", {})
        strings = dic.get("stringTable", [""])
        funcs = dic.get("functionTable", [])
        locs = dic.get("locationTable", [])
        stacks = dic.get("stackTable", [])
        attrs = dic.get("attributeTable", [])
        maps = dic.get("mappingTable", [])
        for rp in d.get("resourceProfiles", []):
            res = {}
            for a in rp.get("resource", {}).get("attributes", []):
                key = a["key"] if "key" in a else strings[a.get("keyStrindex", 0)]
                res[key] = value_of(a.get("value", {}), strings)
            if want_pid and res.get("process.pid") != want_pid:
                continue
            n += 1
            for k, v in sorted(res.items()):
                print("request %d resource %s=%s" % (n, k, v))
            for m in maps[1:]:
                bid = ""
                for i in m.get("attributeIndices", []):
                    a = attrs[i]
                    if strings[a.get("keyStrindex", 0)] == "process.executable.build_id.gnu":
                        bid = value_of(a.get("value", {}), strings)
                print("mapping %d %s build_id=%s" % (n, strings[m.get("filenameStrindex", 0)], bid))
            for sp in rp.get("scopeProfiles", []):
                for p in sp.get("profiles", []):
                    st = p.get("sampleType", {})
                    typ = strings[st.get("typeStrindex", 0)]
                    unit = strings[st.get("unitStrindex", 0)]
                    samples = p.get("samples", [])
                    total = 0
                    byfn = {}
                    seen_attr = set()
                    for s in samples:
                        v = sum(int(x) for x in s.get("values", []))
                        total += v
                        names = set()
                        stack = stacks[s.get("stackIndex", 0)]
                        for li in stack.get("locationIndices", []):
                            for ln in locs[li].get("lines", []):
                                f = funcs[ln.get("functionIndex", 0)]
                                names.add(strings[f.get("nameStrindex", 0)])
                        for name in names:
                            byfn[name] = byfn.get(name, 0) + v
                        for i in s.get("attributeIndices", []):
                            a = attrs[i]
                            seen_attr.add("%s=%s" % (strings[a.get("keyStrindex", 0)],
                                                     value_of(a.get("value", {}), strings)))
                    print("profile %d %s/%s samples=%d total=%d time=%s duration=%s period=%s"
                          % (n, typ, unit, len(samples), total, p.get("timeUnixNano", 0),
                             p.get("durationNano", 0), p.get("period", 0)))
                    for name, v in sorted(byfn.items()):
                        print("function %d %s %s %d %s %s" % (n, typ, name, v,
                              p.get("timeUnixNano", 0), p.get("durationNano", 0)))
                    for a in sorted(seen_attr):
                        print("attr %d %s %s" % (n, typ, a))


main()
