# Sourced by services.sh: where a service's CPU is read from. A fresh cgroup
# holds the service's processes only (cgroup v1 cpuacct, else cgroup v2);
# where neither can be made, the service's process tree in /proc.
#
# setup_cgroup: sets METHOD (cpuacct, cgroup2 or proc; SERVICES_CPU forces
# one) and CGROOT, the folder new groups are made in.
setup_cgroup() {
    METHOD=${SERVICES_CPU:-}
    for m in cpuacct cgroup2; do
        [ -z "$METHOD" ] || [ "$METHOD" = $m ] || continue
        case $m in
        cpuacct) CGROOT=/sys/fs/cgroup/cpuacct ;;
        cgroup2) CGROOT=/sys/fs/cgroup/unified
            [ -f $CGROOT/cgroup.controllers ] || CGROOT=/sys/fs/cgroup ;;
        esac
        if mkdir "$CGROOT/pprofagent-bench-$$" 2>/dev/null; then
            rmdir "$CGROOT/pprofagent-bench-$$"
            METHOD=$m
            return 0
        fi
    done
    [ -z "$METHOD" ] || [ "$METHOD" = proc ] || {
        echo "services: no $METHOD group can be made here (SERVICES_CPU)"; exit 1; }
    METHOD=proc
}

# new_group: a fresh, empty group for one service run, in GRP (none for the
# proc method).
new_group() {
    GRP=""
    [ "$METHOD" = proc ] && return 0
    GRP="$CGROOT/pprofagent-bench-$$-$(date +%s%N)"
    mkdir "$GRP" || { echo "no group could be made in $CGROOT" >"$work/why"; GRP=""; return 1; }
}

# drop_group: ends whatever is left in GRP and removes it.
drop_group() {
    [ -n "$GRP" ] || return 0
    for i in $(seq 100); do
        [ -s "$GRP/cgroup.procs" ] || break
        [ "$i" -lt 50 ] || kill -9 $(cat "$GRP/cgroup.procs") 2>/dev/null || true
        sleep 0.1
    done
    rmdir "$GRP" 2>/dev/null || true
    GRP=""
}

# launch CMD...: starts CMD in the background inside GRP (the shell joins
# the group, then execs CMD, so every process it forks is in it); SVC is
# its pid.
launch() {
    if [ -n "$GRP" ]; then
        sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$GRP" "$@" >>"$work/svc.log" 2>&1 &
    else
        "$@" >>"$work/svc.log" 2>&1 &
    fi
    SVC=$!
}

# members: the service's processes, one pid a line.
members() {
    if [ -n "$GRP" ]; then cat "$GRP/cgroup.procs"; return; fi
    ps -e -o pid=,ppid= | awk -v root="$SVC" '{ parent[$1] = $2 }
        END { for (p in parent) { q = p
                  while (q != "" && q != root && q > 1) q = parent[q]
                  if (q == root) print p } }'
}

# cpu_ns: the service's CPU time so far, in nanoseconds.
cpu_ns() {
    case $METHOD in
    cpuacct) cat "$GRP/cpuacct.usage" ;;
    cgroup2) awk '$1 == "usage_usec" { printf "%.0f\n", $2 * 1000 }' "$GRP/cpu.stat" ;;
    proc) for p in $(members); do sed 's/.*) //' "/proc/$p/stat" 2>/dev/null || true; done |
        awk -v hz="$(getconf CLK_TCK)" '{ t += $12 + $13 + $14 + $15 }
            END { printf "%.0f\n", t * 1e9 / hz }' ;;
    esac
}

# threads FILE: "tid name run_ns" of every thread of the service's
# processes now (schedstat), into FILE.
threads() {
    for p in $(members); do echo /proc/"$p"/task/*; done | tr ' ' '\n' | awk '{
        name = ""; getline name <($0 "/comm"); close($0 "/comm")
        run = 0; getline run <($0 "/schedstat"); close($0 "/schedstat")
        n = split($0, d, "/"); split(run, f, " "); gsub(" ", "_", name)
        print d[n], name, f[1] + 0 }' >"$1"
}

# agent_ns CPU_NS BEFORE AFTER: of CPU_NS, the service's CPU over a window,
# what the agent's own threads (pprof-watch, pprofagent-*, the server's
# civetweb-*) took: CPU_NS less the host's threads' (their schedstat, a
# thread new in the window counted from 0). Threads of the agent come and
# go (a profile's request runs on a thread of its own); the host's stay.
agent_ns() {
    awk -v cpu="$1" 'FILENAME == ARGV[2] { was[$1] = $3; next }
        $2 !~ /^(pprof-|pprofagent-|civetweb-)/ { host += $3 - was[$1] }
        END { printf "%.0f\n", cpu - host }' /dev/null "$2" "$3"
}
