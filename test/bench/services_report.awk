# services.sh's table. Input: the failed rows ("SERVICE CONFIG: why", the
# first file), then the rounds ("SERVICE CONFIG ROUND CPU_NS REQUESTS
# AGENT_NS"). Variables: order (the configurations), svcs (the services).
# A round's ratio is its CPU per request over the no-agent run's of the
# same round; the verdict says "not met" only when the median misses the
# goal by more than the spread of the no-agent rounds.

# sort_list S: S's numbers (space-separated), sorted, into x[1..n]; n.
function sort_list(s,    a, b, t, n) {
    n = split(s, x, " ")
    for (a = 2; a <= n; a++)             # insertion sort (mawk has no asort)
        for (b = a; b > 1 && x[b - 1] + 0 > x[b] + 0; b--) { t = x[b]; x[b] = x[b - 1]; x[b - 1] = t }
    return n
}
function med(s,    n) {
    n = sort_list(s)
    return (n % 2) ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
}
function lo(s) { sort_list(s); return x[1] }
function hi(s,    n) { n = sort_list(s); return x[n] }

BEGIN {
    goal["defaults"] = 1.01; goal["push15"] = 1.01; goal["cpu"] = 1.01
    goal["wall"] = 1.02; goal["flight"] = 1.02; goal["trace"] = 1.05
    name["none"] = "no agent"; name["defaults"] = "agent, defaults"
    name["push15"] = "push every 15 s"; name["push5"] = "push every 5 s"
    name["cpu"] = "CPU profile running"; name["wall"] = "wall profile running"
    name["trace"] = "trace running"; name["flight"] = "flight recorder on"
}
FILENAME == ARGV[1] { sub(":.*", ""); bad[$0] = 1; next }
{
    if (($1 " " $2) in bad || $5 <= 0) next
    per = $4 / $5
    cpu[$1, $2] = cpu[$1, $2] " " per
    share[$1, $2] = share[$1, $2] " " ($4 > 0 ? $6 / $4 : 0)
    round[$1, $2, $3] = per
    rounds[$1, $2] = rounds[$1, $2] " " $3
}
END {
    ns = split(svcs, sv, " "); nc = split(order, cf, " ")
    for (i = 1; i <= ns; i++) {
        s = sv[i]
        if (cpu[s, "none"] == "") continue
        base = med(cpu[s, "none"])
        noise = (hi(cpu[s, "none"]) - lo(cpu[s, "none"])) / base
        for (j = 1; j <= nc; j++) {
            c = cf[j]
            if (cpu[s, c] == "") continue
            r = ""
            k = split(rounds[s, c], rr, " ")
            for (m = 1; m <= k; m++)
                if ((s, "none", rr[m]) in round)
                    r = r " " round[s, c, rr[m]] / round[s, "none", rr[m]]
            if (r == "") continue
            mr = med(r)
            v = "no goal"
            if (c in goal)
                v = (mr <= goal[c]) ? "met" : (mr - goal[c] > noise) ? "not met" : "inside the noise"
            if (c == "none") v = sprintf("spread %.1f%% over %d rounds", noise * 100, k)
            printf "| %s | %s | %.2f | %.3f (%.3f..%.3f) | %s | %s | %s |\n", s, name[c],
                med(cpu[s, c]) * 1e6 / 1e9, mr, lo(r), hi(r),
                (c in goal) ? sprintf("<= %.2f", goal[c]) : "-", v,
                (c == "none") ? "-" : sprintf("%.2f%%", med(share[s, c]) * 100)
        }
    }
}
