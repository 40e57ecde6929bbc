# A process that is not dumpable (it gave up root, or said so with
# PR_SET_DUMPABLE) has root's /proc/self/task/TID/syscall files: the agent
# cannot read where a sleeping thread waits. Its hooks note where threads
# enter the calls that block; the wall profile and the threads dump must
# name, for each thread of test/programs/undumpable, the function it says
# it stays in, and say why the one thread that entered its call before the
# drop has no stack. No call of the program may fail (EINTR). Then MariaDB,
# started as root with --user=mysql, under a few clients, when installed.
. "$TOP/test/integration/lib.sh"

prog="$BUILD/test/programs/undumpable"

# block DUMP TID: the threads dump's block of thread TID.
block() {
    printf '%s\n' "$1" | awk -v t="goroutine $2 " 'index($0, t) == 1 {on = 1} on && /^$/ {exit} on'
}

# share PROFILE THREAD FUNCTION: FUNCTION's share (cum, %) of THREAD's
# wall time in PROFILE (every node shown: the flat sum is the thread's).
share() {
    pprof -tagfocus="thread=^$2\$" -top -cum -unit=ms -nodecount=10000 "$1" |
        awk -v f="$3" '
            /accounting for/ { t = $5; sub(/ms,?$/, "", t) }
            { n = $NF } NF > 6 { n = ""; for (i = 6; i <= NF; i++) n = n (i > 6 ? " " : "") $i }
            n == f && t > 0 { v = $4; sub(/ms$/, "", v); printf "%.1f\n", 100 * v / t; found = 1; exit }
            END { if (!found) print 0 }'
}

# dump_names DUMP: 1 when every thread's block names its function.
dump_names() {
    for pair in cond:wait_cond reader:wait_read epoller:wait_epoll \
        locker:wait_lock spinner:spin_work main:nap signals:wait_signal; do
        b=$(block "$1" "$(eval echo "\$tid_${pair%%:*}")")
        case "$b" in *"${pair#*:}("*) ;; *) return 1 ;; esac
    done
    b=$(block "$1" "$tid_early")
    case "$b" in *"not dumpable"*) ;; *) return 1 ;; esac
    return 0
}

check_program() {
    how=$1
    start_agent "undumpable-$how" "$prog" "$how" 120
    wait_until "the program's threads in place" grep -q '^early=' "$WORK/undumpable-$how.out"
    line=$(grep '^early=' "$WORK/undumpable-$how.out")
    note "$how: $line"
    expect_contains "$line" "dumpable=0" "the program after $how"
    for kv in $line; do
        case "$kv" in dumpable=*) ;; *=*) eval "tid_${kv%%=*}=${kv#*=}" ;; esac
    done

    # The dump, until every thread is seen in its place (a thread between
    # two calls, the epoller, moves).
    i=0
    while :; do
        dump=$(fetch "debug/pprof/goroutine?debug=2")
        dump_names "$dump" && break
        i=$((i + 1))
        [ $i -lt 20 ] || { printf '%s\n' "$dump" >&2; fail "$how: the threads dump does not name each thread's function"; }
        sleep 0.2
    done
    expect_contains "$dump" "the process is not dumpable" "$how: the threads dump's note"
    note "$how: threads dump names every thread's function (try $((i + 1)))"

    fetch "debug/pprof/wall?seconds=4" > "$WORK/wall-$how.pb.gz"
    for pair in cond:wait_cond reader:wait_read epoller:wait_epoll \
        locker:wait_lock main:nap spinner:spin_work signals:wait_signal; do
        s=$(share "$WORK/wall-$how.pb.gz" "${pair%%:*}" "${pair#*:}")
        note "$how: ${pair%%:*} in ${pair#*:}: $s% of its wall time"
        # The blocked ones wait in their function from before the profile
        # to after it; the spinner runs there, its first look owed to its
        # first timer stack (docs/wall.md).
        awk -v s="$s" 'BEGIN { exit !(s >= 90) }' ||
            { pprof -tagfocus="thread=^${pair%%:*}\$" -traces "$WORK/wall-$how.pb.gz" | head -40 >&2
              fail "$how: ${pair%%:*} has $s% of its wall time in ${pair#*:}"; }
    done
    s=$(share "$WORK/wall-$how.pb.gz" early "[stack unavailable: not dumpable, waiting in a call the agent does not note]")
    note "$how: early (in read since before the drop) named as such: $s%"
    awk -v s="$s" 'BEGIN { exit !(s >= 90) }' || fail "$how: the early thread's missing stack is not named"
    comments=$(pprof -comments "$WORK/wall-$how.pb.gz")
    expect_contains "$comments" "not dumpable" "$how: the wall profile's comment"
    stop "$PID"
    expect_not_contains "$(cat "$WORK/undumpable-$how.out")" "FAILED" "$how: the program's calls"
}

# Root can read the files of a process it owns whatever its dumpability:
# as root the program gives up root, otherwise it says PR_SET_DUMPABLE 0.
if [ "$(id -u)" = 0 ]; then
    check_program setuid
else
    check_program prctl
fi

# ---- MariaDB ---------------------------------------------------------------
if ! command -v mariadbd > /dev/null || ! command -v mariadb-install-db > /dev/null ||
    ! command -v mariadb > /dev/null; then
    note "SKIP MariaDB: not installed (apt-get install mariadb-server mariadb-client)"
    echo ok
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! id mysql > /dev/null 2>&1; then
    note "SKIP MariaDB: needs root and the mysql user (it must drop root itself)"
    echo ok
    exit 0
fi
chmod 755 "$WORK"
data="$WORK/mariadb"
mkdir -p "$data" && chown mysql:mysql "$data"
mariadb-install-db --user=mysql --datadir="$data" --auth-root-authentication-method=normal \
    > "$WORK/install-db.out" 2>&1 || { tail -20 "$WORK/install-db.out" >&2; fail "mariadb-install-db"; }
sock="$data/sock"
start_agent mariadbd mariadbd --no-defaults --user=mysql --datadir="$data" --socket="$sock" \
    --skip-networking --pid-file="$data/pid" --innodb-buffer-pool-size=32M
mdb() { mariadb -S "$sock" -uroot "$@"; }
wait_until "MariaDB answers" mdb -e 'select 1' > /dev/null 2>&1
mdb -e "create database t; create table t.k(id int primary key auto_increment, v int, s varchar(64), key(v)) engine=innodb"
# Clients: inserts, lookups and short sleeps, until the stop file exists.
for c in 1 2 3; do
    ( while [ ! -e "$WORK/stop-load" ]; do
        i=0
        while [ $i -lt 100 ]; do
            echo "insert into t.k(v, s) values ($i, repeat('x', 40)); select count(*) from t.k where v = $i; select sleep(0.01);"
            i=$((i + 1))
        done | mdb > /dev/null || true
      done ) &
    PIDS="$PIDS $!"
done

# What root sees of the server's threads: the share of them waiting in a
# call no hook notes (io_uring_enter, which liburing makes itself, and
# anything else made without the C library's interposable functions), sampled while the
# profile runs. The profile may have that much without a stack, and a
# little more (threads looked at between two calls, before their next).
pid=$PID
( for i in $(seq 16); do
      for t in /proc/$pid/task/*; do
          nr=$(cut -d' ' -f1 "$t/syscall" 2>/dev/null) || continue
          comm=$(cat "$t/comm" 2>/dev/null) || continue
          case "$comm" in pprof-*|civetweb-*) continue ;; esac
          case "$nr" in 426) echo unnoted ;; *) echo other ;; esac
      done
      sleep 0.5
  done > "$WORK/root-view" ) &
viewer=$!
fetch "debug/pprof/wall?seconds=8" > "$WORK/wall-mariadb.pb.gz"
wait "$viewer"
dump=$(fetch "debug/pprof/goroutine?debug=2")
touch "$WORK/stop-load"
unnoted=$(awk '$1 == "unnoted" {u++} {n++} END {printf "%.1f", n ? 100 * u / n : 0}' "$WORK/root-view")
top=$(pprof -top -unit=ms "$WORK/wall-mariadb.pb.gz")
missing=$(printf '%s\n' "$top" | awk '/\[stack unavailable/ { v = $2; sub(/%$/, "", v); s += v } END { printf "%.1f", s + 0 }')
note "MariaDB: wall time without a stack ${missing}%; root's /proc sees ${unnoted}% of its threads in calls no hook notes"
awk -v m="$missing" -v u="$unnoted" 'BEGIN { exit !(m <= u + 10) }' ||
    { printf '%s\n' "$top" | head -30 >&2; fail "MariaDB: ${missing}% of the wall time has no stack, root sees ${unnoted}% in unnoted calls"; }
expect_contains "$(pprof -top -cum "$WORK/wall-mariadb.pb.gz")" "do_command" "MariaDB's wall profile"
expect_contains "$dump" "the process is not dumpable" "MariaDB's threads dump"
with=$(printf '%s\n' "$dump" | grep -c '^goroutine' || true)
without=$(printf '%s\n' "$dump" | grep -c '^\[stack unavailable' || true)
note "MariaDB: threads dump: $without of $with threads without a stack"
[ "$without" -lt "$with" ] || fail "MariaDB: no thread of the dump has a stack"
mdb -e shutdown || true
wait_exit "$PID" 60
echo ok
