# The house's layers hold (docs/layout.md): agent/ includes and calls
# nothing of encoder/, http/ or process/; encoder/ nothing of http/ or
# process/; http/ nothing of process/; no include cycle. Checked from the
# #include lines and, for calls, from the objects' symbols (nm); the
# figures (files, depth, arrows, cycles) are in the log.
. "$TOP/test/integration/lib.sh"

python3 "$TOP/test/integration/layers.py" "$TOP" "$BUILD" ||
    fail "an include or a call runs the wrong way, or includes form a cycle (above)"
echo ok
