# Reads `go tool pprof -raw` of a heap profile and prints, per leaf
# function, "FUNC INUSE_OBJECTS INUSE_BYTES ALLOC_OBJECTS ALLOC_BYTES"
# (summed over its samples). Used by the heap_*.sh integration tests.
/^Samples:/ { section = "samples"; next }
/^Locations/ { section = "locations"; next }
/^Mappings/ { section = "" ; next }
section == "samples" && /^ *-?[0-9]+ +-?[0-9]+ +-?[0-9]+ +-?[0-9]+: [0-9]/ {
    split($0, halves, ":")
    n = split(halves[1], v, " ")
    split(halves[2], ids, " ")
    leaf = ids[1]
    ao[leaf] += v[1]; ab[leaf] += v[2]; io[leaf] += v[3]; ib[leaf] += v[4]
    next
}
section == "locations" && /^ +[0-9]+: 0x/ {
    id = $1; sub(":", "", id)
    name[id] = $4
}
END {
    for (l in ao) {
        f = (l in name) ? name[l] : "?"
        tio[f] += io[l]; tib[f] += ib[l]; tao[f] += ao[l]; tab[f] += ab[l]
    }
    for (f in tao)
        printf "%s %d %d %d %d\n", f, tio[f], tib[f], tao[f], tab[f]
}
