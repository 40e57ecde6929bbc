# Programs nobody here wrote that make and end processes the hard ways, as
# Debian ships them, each compared with the same run without the agent
# (same output, same exit status, no process left behind), with default
# settings:
# - sshd with its seccomp-sandboxed pre-authentication child, key logins
#   over loopback on a free port (its own config and host keys): each login
#   gives the same output and status (the agent's unlink at the child's exit
#   was killed by the filter, and logins failed or waited for the agent's
#   start delay); login times are printed;
# - tmux: what a pane shows (every shell in a pane printed the agent's
#   "serving" line into it);
# - Chromium headless: the same DOM, and the browser serves profiles while
#   its zygotes keep one thread (the zygote aborts on a second one);
# - Firefox ESR headless: the same screenshot (its sandbox's raw clone
#   child hung in the agent's unshare hook).
. "$TOP/test/integration/lib.sh"

for p in /usr/sbin/sshd ssh ssh-keygen tmux chromium firefox-esr; do
    command -v "$p" >/dev/null 2>&1 || fail "$p is not installed (scripts/install-deps)"
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# $(run HOW [SECS]) CMD...: CMD under test/integration/leftovers.py (which
# lists and fails on what CMD leaves behind, whatever sessions or titles it
# takes; it waits SECS, 10, for them to end), without the agent (HOW
# "plain") or under it ("agent": its default settings, a free port). A
# prefix of words, not a function, so that "$!" of a background run is
# leftovers.py's pid.
run() {
    echo python3 "$TOP/test/integration/leftovers.py" --wait "${2:-10}"
    [ "$1" = plain ] || echo LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0
}

# ---- sshd ---------------------------------------------------------------------
S="$WORK/ssh"
mkdir -p "$S" /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$S/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$S/user_key"
cp "$S/user_key.pub" "$S/authorized_keys"
sport=$(free_port)
cat > "$S/sshd_config" <<EOF
Port $sport
ListenAddress 127.0.0.1
HostKey $S/host_key
AuthorizedKeysFile $S/authorized_keys
PidFile none
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
X11Forwarding no
PrintMotd no
PrintLastLog no
EOF
login() { # the session's output and status on stdout
    if ssh -F /dev/null -i "$S/user_key" -p "$sport" -o StrictHostKeyChecking=no \
        -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR \
        -o ConnectTimeout=30 root@127.0.0.1 'echo "logged in as $(id -un)"; exit 3' 2>&1
    then echo "status 0"; else echo "status $?"; fi
}
sshd_run() { # plain|agent: sshd, 4 logins, their output in $WORK/HOW.logins
    name=$1
    $(run "$1") /usr/sbin/sshd -D -e -f "$S/sshd_config" 2> "$WORK/$name.sshd.err" &
    spid=$!
    for i in $(seq 200); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $sport), 1)" 2>/dev/null && break
        sleep 0.05
    done
    kill -0 "$spid" 2>/dev/null || { cat "$WORK/$name.sshd.err"; fail "sshd $name did not start"; }
    t0=$(date +%s%N)
    for i in 1 2 3 4; do login; done > "$WORK/$name.logins"
    ms=$(( ($(date +%s%N) - t0) / 4000000 ))
    kill "$spid" 2>/dev/null || { cat "$WORK/$name.sshd.err"; fail "sshd $name ended early"; }
    if wait "$spid"; then st=0; else st=$?; fi
    [ "$st" != 125 ] || { grep '^left:' "$WORK/$name.sshd.err"; fail "sshd $name: processes left behind"; }
    note "sshd $name: 4 key logins, $ms ms each (mean, wall clock, this machine's load)"
}
sshd_run plain
sshd_run agent
cat "$WORK/agent.logins"
[ "$(grep -c 'logged in as root' "$WORK/plain.logins")" = 4 ] || { cat "$WORK/plain.logins"; fail "sshd: logins failed without the agent"; }
cmp -s "$WORK/plain.logins" "$WORK/agent.logins" || fail "sshd: the logins differ under the agent"
n=$(grep -c '^pprofagent:' "$WORK/agent.sshd.err" || true)
[ "$n" -le 1 ] || { grep '^pprofagent:' "$WORK/agent.sshd.err"; fail "sshd: $n agent lines, at most the listener's one expected"; }

# ---- tmux ---------------------------------------------------------------------
# pane NAME PREFIX...: a session whose pane runs two shells; what the pane
# shows once the second half printed (1.5 s on: past the start delay).
pane() {
    name=$1
    sock="$WORK/tmux-$name.sock"
    # The server (a daemon) outlives the client: leftovers.py waits for it.
    $(run "$name" 120) tmux -S "$sock" -f /dev/null new-session -d -x 100 -y 12 \
        "sh -c 'echo one; sh -c \"echo two\"; sleep 1.5; echo three; sleep 60'" \
        2> "$WORK/$name.tmux.err" &
    tpid=$!
    for i in $(seq 200); do
        tmux -S "$sock" capture-pane -p 2>/dev/null | grep -q three && break
        sleep 0.05
    done
    tmux -S "$sock" capture-pane -p | grep . > "$WORK/$name.pane" || true
    tmux -S "$sock" kill-server
    if wait "$tpid"; then st=0; else st=$?; fi
    [ "$st" = 0 ] || { cat "$WORK/$name.tmux.err"; fail "tmux $name: status $st (125: processes left behind)"; }
}
pane plain
pane agent
cat "$WORK/agent.pane"
grep -q three "$WORK/plain.pane" || fail "tmux: the pane never showed its output"
cmp -s "$WORK/plain.pane" "$WORK/agent.pane" || fail "tmux: the pane differs under the agent"

# ---- Chromium -----------------------------------------------------------------
printf '%s\n' '<html><body><p id="x">static</p>' \
    '<script>document.getElementById("x").textContent = "from script " + (6 * 7);</script>' \
    '</body></html>' > "$WORK/page.html"
CHROME_FLAGS="--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
--disable-background-networking --disable-component-update --disable-sync"
dom() { # plain|agent
    if $(run "$1") chromium $CHROME_FLAGS --user-data-dir="$WORK/chrome-$1" \
        --dump-dom "file://$WORK/page.html" > "$WORK/$1.dom" 2> "$WORK/$1.chrome.err"
    then echo 0; else echo $?; fi
}
plain=$(dom plain)
agent=$(dom agent)
[ "$plain" = 0 ] && [ "$agent" = 0 ] || { tail -n 5 "$WORK/agent.chrome.err"; fail "chromium: status $agent under the agent, $plain without"; }
grep -q 'from script 42' "$WORK/plain.dom" || fail "chromium: no DOM without the agent"
cmp -s "$WORK/plain.dom" "$WORK/agent.dom" || fail "chromium: the DOM differs under the agent"
note "chromium --dump-dom: the same DOM, status 0"
# The browser serves; its zygotes (exec'd descendants) have one thread.
$(run agent) PPROF_PORT_FILE="$WORK/chrome.port" PPROF_START_DELAY_MS=300 \
    chromium $CHROME_FLAGS --user-data-dir="$WORK/chrome-serve" \
    --remote-debugging-port=0 about:blank > "$WORK/chrome.out" 2> "$WORK/chrome.err" &
LPID=$!
PIDS="$PIDS $LPID"
for i in $(seq 600); do [ -s "$WORK/chrome.port" ] && break; sleep 0.05; done
[ -s "$WORK/chrome.port" ] || { cat "$WORK/chrome.err"; fail "chromium: no port file"; }
# The browser: leftovers.py's first child (the wrapper script exec'd it in
# place); what the browser abandons is re-parented there later.
PID=$(pgrep -o -P "$LPID" || true)
[ -n "$PID" ] || fail "chromium: no browser process"
# The port file may first name the wrapper script (/usr/bin/chromium),
# which served if it lived a start delay before it exec'd the browser in
# place: wait until the browser's own server answers. Between the two the
# file is absent (the browser's image removes the wrapper's).
for i in $(seq 200); do
    ADDR=$(cat "$WORK/chrome.port" 2>/dev/null || true)
    curl -s --max-time 5 "http://$ADDR/debug/pprof/cmdline" | tr '\0' ' ' |
        grep -q '/usr/lib/chromium/chromium' && break
    [ $i -lt 200 ] || fail "chromium: the browser does not serve"
    sleep 0.1
done
zygotes=""
for i in $(seq 200); do
    zygotes=$(pgrep -P "$PID" -f 'type=zygote' || true)
    [ -n "$zygotes" ] && break
    sleep 0.05
done
[ -n "$zygotes" ] || fail "chromium: no zygote"
sleep 0.6 # two start delays: a zygote's starter would have started by now
for z in $zygotes; do
    t=$(sed -n 's/^Threads:\t*//p' "/proc/$z/status")
    [ "$t" = 1 ] || fail "chromium: zygote $z has $t threads"
done
note "chromium serves at $ADDR; zygotes $(echo $zygotes) have one thread each"
kill "$PID"
if wait "$LPID"; then st=0; else st=$?; fi
[ "$st" != 125 ] || { grep '^left:' "$WORK/chrome.err"; fail "chromium: processes left behind"; }

# ---- Firefox ESR ----------------------------------------------------------------
shot() { # plain|agent (120 s at most)
    mkdir -p "$WORK/ff-$1"
    if timeout -k 5 120 $(run "$1") firefox-esr --headless --no-remote --profile "$WORK/ff-$1" \
        --screenshot "$WORK/$1.png" "file://$WORK/page.html" > /dev/null 2> "$WORK/$1.ff.err"
    then echo 0; else echo $?; fi
}
plain=$(shot plain)
agent=$(shot agent)
[ "$plain" = 0 ] && [ "$agent" = 0 ] || { tail -n 5 "$WORK/agent.ff.err"; fail "firefox: status $agent under the agent, $plain without"; }
cmp -s "$WORK/plain.png" "$WORK/agent.png" || fail "firefox: the screenshot differs under the agent"
! grep -q 'Sandbox: seccomp sandbox violation' "$WORK/agent.ff.err" || { cat "$WORK/agent.ff.err"; fail "firefox: a sandbox violation under the agent"; }
note "firefox --screenshot: the same image, status 0"
echo ok
