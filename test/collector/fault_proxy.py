#!/usr/bin/env python3
"""A fault-injecting HTTP proxy in front of the test Collector.

  fault_proxy.py LISTEN_PORT COLLECTOR_PORT MODE_FILE LOG_FILE

Each request reads MODE_FILE: "pass" (or no file) forwards it to the
Collector and relays the answer, closing the client's connection without an
answer when the Collector cannot be reached (as a reset would); "429 N" or
"503 N" answers that status (429 with Retry-After: 1) to the next N requests,
then the file is set back to "pass". Every request is logged as one line,
"<status> <bytes>" (0 for a closed connection), to LOG_FILE.
"""
import http.client
import http.server
import os
import sys
import threading

LISTEN, TARGET, MODE, LOG = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
lock = threading.Lock()


def log(status, n):
    with lock, open(LOG, "a") as f:
        f.write("%d %d\n" % (status, n))


def take_mode():
    """The answer to inject, or None to pass the request on."""
    with lock:
        try:
            words = open(MODE).read().split()
        except OSError:
            return None
        if len(words) != 2:
            return None
        status, left = int(words[0]), int(words[1])
        left -= 1
        tmp = MODE + ".tmp"
        with open(tmp, "w") as f:
            f.write("pass\n" if left <= 0 else "%d %d\n" % (status, left))
        os.replace(tmp, MODE)
        return status


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status = take_mode()
        if status is not None:
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            log(status, len(body))
            return
        try:
            c = http.client.HTTPConnection("127.0.0.1", TARGET, timeout=10)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "connection")}
            c.request("POST", self.path, body, headers)
            r = c.getresponse()
            data = r.read()
        except OSError:
            log(0, len(body))
            self.close_connection = True
            return
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        log(r.status, len(body))


http.server.ThreadingHTTPServer(("127.0.0.1", LISTEN), Proxy).serve_forever()
