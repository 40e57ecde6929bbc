# The setup of real services that more than one test runs: a free port,
# nginx serving a gzip-compressed page, a PostgreSQL cluster, a python3
# workload. Sourced by integration tests after lib.sh, which sets WORK, and
# by the services bench (test/bench/services_svc.sh), which sets it for
# nginx's functions.

# nginx_site SEED CHARS: document root $WORK/www whose page.txt holds CHARS
# pseudo-random characters drawn with seed SEED (the same page every run),
# readable by nginx's workers; nginx's temp files go to $WORK/ngx-tmp.
nginx_site() {
    mkdir -p "$WORK/www" "$WORK/ngx-tmp"
    chmod 755 "$WORK" "$WORK/www"
    python3 -c "import random; r=random.Random($1); print(''.join(r.choice('abcdefgh \n') for _ in range($2)))" \
        > "$WORK/www/page.txt"
    chmod 644 "$WORK/www/page.txt"
}

# nginx_conf PORT PROCESSES [SERVER_EXTRA]: writes $WORK/nginx.conf, nginx in
# the foreground serving $WORK/www on 127.0.0.1:PORT, gzip-compressing the
# page; PROCESSES are the process directives (master_process ...), SERVER_EXTRA
# more directives of the server block.
nginx_conf() {
    cat > "$WORK/nginx.conf" <<CONF
daemon off;
$2
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $WORK/ngx-tmp/body;
    proxy_temp_path $WORK/ngx-tmp/proxy;
    fastcgi_temp_path $WORK/ngx-tmp/fastcgi;
    uwsgi_temp_path $WORK/ngx-tmp/uwsgi;
    scgi_temp_path $WORK/ngx-tmp/scgi;
    server { listen 127.0.0.1:$1; root $WORK/www; gzip on; gzip_types text/plain; gzip_min_length 0; ${3:-} }
}
CONF
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- PostgreSQL: a cluster of the test's own, run as the postgres user ----

# pg_find: PGBIN, the newest installed PostgreSQL's programs, and PG_AS, the
# words that run a command as the postgres user (PostgreSQL refuses to run
# as root; empty when not root). Fails when PostgreSQL, pgbench or the
# postgres user is missing (scripts/install-deps installs them).
pg_find() {
    PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    PG_AS=""
    [ "$(id -u)" != 0 ] || PG_AS="setpriv --reuid postgres --regid postgres --init-groups"
    [ -n "$PGBIN" ] && command -v pgbench >/dev/null && id postgres >/dev/null 2>&1
}

# pg_initdb DIR: a new cluster in DIR/data, initdb's output in
# DIR/initdb.log. DIR is made and given to the postgres user; the folders
# above it must let that user through.
pg_initdb() {
    mkdir -p "$1"
    [ "$(id -u)" != 0 ] || chown postgres "$1"
    # shellcheck disable=SC2086
    $PG_AS "$PGBIN/initdb" -A trust -U postgres -D "$1/data" >"$1/initdb.log" 2>&1
}

# pg_postmaster RUN DIR PORT ENV [OPTION...]: the cluster in DIR/data served
# on 127.0.0.1:PORT (its socket in DIR) by the postmaster, as the postgres
# user, with the variables ENV (NAME=VALUE words) and postgres's OPTIONs
# (-c NAME=VALUE ...). RUN is the caller's command that starts the
# postmaster's command line in the background and keeps its pid.
pg_postmaster() {
    _run=$1 _dir=$2 _port=$3 _env=$4
    shift 4
    # shellcheck disable=SC2086
    $_run $PG_AS env $_env "$PGBIN/postgres" -D "$_dir/data" -k "$_dir" -p "$_port" \
        -c listen_addresses=127.0.0.1 "$@"
}

# pg_fill PORT LOG: pgbench's tables made in the database postgres of the
# postmaster on PORT (pgbench -i), its output in LOG.
pg_fill() {
    pgbench -i -q -h 127.0.0.1 -p "$1" -U postgres postgres >"$2" 2>&1
}

# py_churn_crunch: prints python3 functions for a workload script (after its
# imports of hashlib and time): churn(n) allocates (dict of lists of strings
# and bytes), crunch(n) computes (integer arithmetic and sha256).
py_churn_crunch() {
    cat <<'PYSRC'
def churn(n):
    d = {}
    for i in range(n):
        d[i % 50000] = [str(i)] * 8 + [bytes(64)]
    return len(d)
def crunch(n):
    h = hashlib.sha256()
    s = 0
    for i in range(n):
        s += (i * i) % 7
        if i % 1000 == 0:
            h.update(str(s).encode())
    return s, h.hexdigest()[:16]
PYSRC
}
