# Sourced by benchmarks that start a program under the agent on port 0.

# wait_port PORT_FILE TRIES WHAT: waits, up to TRIES times 50 ms, for the
# agent to write its address to PORT_FILE; ends the benchmark if WHAT did
# not start.
wait_port() {
    i=0
    while [ ! -s "$1" ]; do
        i=$((i + 1)); [ $i -lt "$2" ] || { echo "$3 did not start"; exit 1; }
        sleep 0.05
    done
}
