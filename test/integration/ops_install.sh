# make install / uninstall with PREFIX and DESTDIR: the library, the header,
# the pkg-config file, the scripts and the man page land where they should;
# a program built with pkg-config's flags compiles and runs with and without
# the installed agent; the man page renders; uninstall removes every file.
. "$TOP/test/integration/lib.sh"
dest="$WORK/dest"
prefix=/opt/pprof-test
make -s -C "$TOP" BUILD="$BUILD" install DESTDIR="$dest" PREFIX="$prefix" > "$WORK/install.log" 2>&1 \
    || { cat "$WORK/install.log"; fail "make install failed"; }
root="$dest$prefix"
for f in lib/libpprofagent.so include/pprofagent.h lib/pkgconfig/pprofagent.pc \
    bin/pprof-systemd bin/pprof-snapshot bin/pprof-attach share/man/man7/pprofagent.7; do
    [ -f "$root/$f" ] || { find "$dest" -type f; fail "install lacks $prefix/$f"; }
done
[ -x "$root/bin/pprof-systemd" ] && [ -x "$root/bin/pprof-snapshot" ] &&
    [ -x "$root/bin/pprof-attach" ] || fail "scripts are not executable"
# The installed pprof-attach finds the installed agent (../lib): with no
# such process it says that, not that the library is missing.
"$root/bin/pprof-attach" 999999999 2>"$WORK/attach.err" && fail "pprof-attach of no process succeeded"
grep -q "no such process" "$WORK/attach.err" || { cat "$WORK/attach.err"; fail "installed pprof-attach: $(cat "$WORK/attach.err")"; }
cmp -s "$root/lib/libpprofagent.so" "$AGENT" || fail "installed library differs from the build"
# Nothing outside DESTDIR/PREFIX.
outside=$(find "$dest" -type f | grep -v "^$root/" || true)
[ -z "$outside" ] || fail "files outside PREFIX: $outside"

# pkg-config: the paths are the final ones (PREFIX), the sysroot maps them
# into the staging root.
export PKG_CONFIG_PATH="$root/lib/pkgconfig"
flags=$(pkg-config --cflags --libs pprofagent)
[ "$(echo $flags)" = "-I$prefix/include" ] || fail "pkg-config --cflags --libs: '$flags'"
[ "$(pkg-config --variable=agent pprofagent)" = "$prefix/lib/libpprofagent.so" ] \
    || fail "pkg-config agent variable"
cat > "$WORK/user.c" <<'C'
#include <errno.h>
#include <pprofagent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void)
{
    printf("agent %s\n", pprof_agent_loaded() ? "loaded" : "absent");
    /* As the header says: NULL with errno ENOSYS when the agent is absent
     * or disabled. */
    errno = 0;
    if (getenv("NEW_PROFILE") && !pprof_profile_new("user.things"))
        printf("pprof_profile_new: %s\n", strerror(errno));
    return 0;
}
C
# shellcheck disable=SC2046
cc -o "$WORK/user" "$WORK/user.c" $(PKG_CONFIG_SYSROOT_DIR="$dest" pkg-config --cflags --libs pprofagent) \
    || fail "a program does not build with pkg-config's flags"
[ "$("$WORK/user")" = "agent absent" ] || fail "the program does not run without the agent"
[ "$(LD_PRELOAD="$root/lib/libpprofagent.so" PPROF_ADDR=off "$WORK/user")" = "agent loaded" ] \
    || fail "the program does not see the installed agent"
enosys=$(python3 -c 'import errno, os; print(os.strerror(errno.ENOSYS))')
[ "$(NEW_PROFILE=1 "$WORK/user")" = "$(printf 'agent absent\npprof_profile_new: %s' "$enosys")" ] \
    || fail "pprof_profile_new without the agent: '$(NEW_PROFILE=1 "$WORK/user")', not NULL with ENOSYS"
[ "$(NEW_PROFILE=1 LD_PRELOAD="$root/lib/libpprofagent.so" PPROF_ENABLE=0 "$WORK/user")" = "$(printf 'agent absent\npprof_profile_new: %s' "$enosys")" ] \
    || fail "pprof_profile_new with the agent disabled is not NULL with ENOSYS"

# The man page renders.
page=$(MANWIDTH=80 man -l "$root/share/man/man7/pprofagent.7" 2>"$WORK/man.err") \
    || { cat "$WORK/man.err"; fail "man -l failed"; }
! grep -qi 'warning' "$WORK/man.err" || { cat "$WORK/man.err"; fail "man page warnings"; }

# Every setting the agent reads is an entry of the man page's ENVIRONMENT and
# a row of the README's configuration table, and neither lists one the agent
# does not read. The settings are the PPROF_* names the sources pass whole
# as strings (to getenv or to the configuration's loader), in every source
# folder but the tests.
vars=$(grep -rhoE --include='*.c' --include='*.h' --exclude-dir=test --exclude-dir='build*' \
    --exclude-dir=.git '"PPROF_[A-Z0-9_]+"' "$TOP" | tr -d '"' | sort -u)
[ "$(printf '%s\n' "$vars" | wc -l)" -ge 15 ] || fail "could not read the settings from the sources: $vars"
man_vars=$(printf '%s\n' "$page" | sed -n '/^ENVIRONMENT/,/^[A-Z]/p' \
    | sed -n 's/^ \{7\}\(PPROF_[A-Z0-9_]*\)$/\1/p' | sort -u)
readme_vars=$(sed -n '/^## Configuration/,/^## /p' "$TOP/README.md" \
    | sed -n 's/^| `\(PPROF_[A-Z0-9_]*\)` |.*/\1/p' | sort -u)
printf '%s\n' "$vars" > "$WORK/vars"
for where in man README; do
    if [ $where = man ]; then listed=$man_vars; else listed=$readme_vars; fi
    printf '%s\n' "$listed" > "$WORK/listed"
    missing=$(comm -23 "$WORK/vars" "$WORK/listed")
    extra=$(comm -13 "$WORK/vars" "$WORK/listed" | grep . || true)
    [ -z "$missing" ] || fail "the $where configuration lacks: $(echo $missing)"
    [ -z "$extra" ] || fail "the $where configuration lists settings the agent does not read: $(echo $extra)"
done
# The README is a user's guide; the rest lives in docs/ and beside the tests.
lines=$(wc -l < "$TOP/README.md")
[ "$lines" -le 400 ] || fail "README.md has $lines lines, more than 400"
# The man page's ENDPOINTS list every route of the server (the registry in
# http/routes.c, pages beside /debug/pprof/ included), so the two cannot
# drift apart.
endpoints=$(printf '%s\n' "$page" | sed -n '/^ENDPOINTS/,/^FILES/p')
routes=$(sed -n 's/^ *{"\([a-z]*\)", handle_.*/\1/p' "$TOP/http/routes.c")
[ "$(printf '%s\n' "$routes" | wc -l)" -ge 13 ] || fail "could not read the route table: $routes"
for r in $routes; do
    printf '%s\n' "$endpoints" | grep -Eq "^ {7}(/debug/pprof/|/debug/)?$r([?, ]|\$)|^ {7}[a-z, ]*\b$r\b" \
        || fail "the man page's ENDPOINTS lacks '$r'"
done
expect_contains "$endpoints" "custom profile" "man page ENDPOINTS"

# The installed systemd script finds the installed library by itself.
out=$(SYSTEMD_DIR="$WORK/systemd" sh "$root/bin/pprof-systemd" install demo 127.0.0.1:3333)
grep -q "LD_PRELOAD=$root/lib/libpprofagent.so" "$WORK/systemd/demo.service.d/pprofagent.conf" \
    || { cat "$WORK/systemd/demo.service.d/pprofagent.conf"; fail "pprof-systemd did not find the installed library"; }

make -s -C "$TOP" BUILD="$BUILD" uninstall DESTDIR="$dest" PREFIX="$prefix" > "$WORK/uninstall.log" 2>&1 \
    || { cat "$WORK/uninstall.log"; fail "make uninstall failed"; }
left=$(find "$dest" -type f)
[ -z "$left" ] || fail "uninstall left: $left"
echo ok
