# Sourced by the benchmarks: the two figures every time table reports.
# Each reads one number per line from FILE, or from standard input.

# median [FILE]: the middle value (the mean of the two middle ones for an
# even count).
median() {
    sort -n "$@" | awk '{v[NR] = $1}
        END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# spread [FILE]: the run's own noise, (max - min) / median in percent, one
# decimal.
spread() {
    sort -n "$@" | awk '{v[NR] = $1}
        END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
             printf "%.1f", (m > 0) ? (v[NR] - v[1]) * 100 / m : 0}'
}
