# The setup of real services that more than one integration test runs
# (nginx serving a gzip-compressed page, a python3 workload). Sourced after
# lib.sh, which sets WORK.

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
