# The agent's own code never calls through its own doors: no object of
# the library outside the files that define the interposed names
# (agent/exports.map) references one of those names; it calls
# agent/core/real.h instead (docs/doors.md). Read from the objects'
# undefined symbols (nm -u, versions stripped): agent/, encoder/, http/,
# process/, civetweb's linked copy and the members of libiberty the
# library holds. Each offender is printed with the names it calls.
. "$TOP/test/integration/lib.sh"

sed -n 's/^ *\([A-Za-z_][A-Za-z0-9_]*\);$/\1/p' "$TOP/agent/exports.map" |
    grep -v '^pprof_' | sort -u > "$WORK/doors"
[ "$(wc -l < "$WORK/doors")" -gt 50 ] || fail "too few names read from agent/exports.map"

# Exceptions, by name, for every object: the descriptor calls. Their doors
# (agent/host/fds.c) tell the agent's calls apart by the caller's address
# and keep its descriptors its own (moved high, registered; a host's
# close of one answers EBADF): for the agent and civetweb, the door is the
# interface. Nothing else is exempt.
printf '%s\n' socket accept accept4 close send recv shutdown pipe2 |
    sort > "$WORK/exempt"

objs=$(find "$BUILD/agent" "$BUILD/encoder" "$BUILD/http" "$BUILD/process" \
    -name '*.o' | sort)
[ -n "$objs" ] || fail "no objects under $BUILD"
civetweb="$BUILD/civetweb/civetweb-weak.o"
[ -f "$civetweb" ] && objs="$objs $civetweb"

# Two nm runs over every object and libiberty's members ("file:member:"),
# then awk: an object defining a door is a door file; a member of
# libiberty counts when the library holds one of its functions.
lib="$BUILD/libiberty-weak.a"
[ -f "$lib" ] || lib=
nm "$AGENT" | awk '{print $NF}' | sort -u > "$WORK/lib_syms"
nm -A --defined-only $objs $lib 2>/dev/null > "$WORK/defined"
nm -A -u $objs $lib 2>/dev/null > "$WORK/undefined"
awk -v build="$BUILD/" -v lib="$lib" '
    # The object of a line of nm -A: "file:" or "archive:member:".
    function object(line,    f) {
        f = substr(line, 1, index(line, " ") - 1)
        sub(/:[^:]*$/, "", f)          # nm -A ends the name with ":addr"
        return f
    }
    FILENAME == ARGV[1] { door[$1] = 1; next }
    FILENAME == ARGV[2] { exempt[$1] = 1; next }
    FILENAME == ARGV[3] { held[$1] = 1; next }
    FILENAME == ARGV[4] {
        o = object($0); seen[o] = 1; n = $NF; sub(/@.*/, "", n)
        if (($2 == "T" || $2 == "W") && (n in door)) isdoor[o] = 1
        if ((held[n]) && ($2 == "T" || $2 == "t")) holds[o] = 1
        next
    }
    {
        o = $1; sub(/:$/, "", o); n = $NF; sub(/@.*/, "", n); seen[o] = 1
        if ((n in door) && !(n in exempt) && index(calls[o], " " n " ") == 0)
            calls[o] = calls[o] " " n " "
    }
    END {
        for (o in seen) {
            member = lib != "" && index(o, lib ":") == 1
            if (isdoor[o]) { doors++; continue }
            if (member && !holds[o]) continue
            checked++
            if (calls[o] == "") continue
            name = member ? "libiberty/" substr(o, length(lib) + 2) : substr(o, length(build) + 1)
            c = calls[o]; gsub(/  +/, " ", c)
            print name ":" c | "sort"
            bad++
        }
        close("sort")
        printf "%d %d %d\n", doors, checked, bad > "/dev/stderr"
    }' "$WORK/doors" "$WORK/exempt" "$WORK/lib_syms" "$WORK/defined" \
    "$WORK/undefined" 2> "$WORK/counts"
read doors checked bad < "$WORK/counts"

note "door files: $doors; objects checked: $checked; calling a door: $bad"
[ "$doors" -ge 10 ] || fail "only $doors objects define a door: wrong build tree?"
[ "$bad" -eq 0 ] ||
    fail "$bad objects call a name the agent interposes (above); call agent/core/real.h"
echo ok
