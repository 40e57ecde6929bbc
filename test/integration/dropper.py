# Gives up root (groups, gid, uid: the process is then not dumpable, and
# its /proc files are root's), then spins in one thread and naps in
# another for argv[1] seconds. For hostile_credentials.sh.
import os
import sys
import threading
import time

os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)


def spin():
    x = 0
    while True:
        x += 1


def nap():
    while True:
        time.sleep(0.05)


threading.Thread(target=spin, daemon=True).start()
threading.Thread(target=nap, daemon=True).start()
time.sleep(float(sys.argv[1]))
