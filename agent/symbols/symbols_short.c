/*
 * Short function names (PPROF_SYMBOLS=short): a demangled C++ name without
 * its parameter lists, template arguments and return type, as pprof shows
 * names it demangles itself, so that
 *
 *     std::vector<std::pair<int, long>, std::allocator<...> >::push_back(
 *         std::pair<int, long> const&)
 *
 * reads "std::vector::push_back". The full name stays in the profile, as
 * the function's system_name. Operator names keep their symbols
 * ("operator<<", "operator()", "operator new"), "(anonymous namespace)"
 * and lambda names ("{lambda(int)#1}") are kept whole, and what follows
 * the function's own parameter list (" const", " [clone .cold]") goes.
 *
 * Entered from the agent's threads while symbols are resolved (under the
 * symbolizer's lock, or from a unit test); pure string work.
 */
#include "agent/symbols/symbols.h"
#include "agent/config.h"

#include "agent/log.h"

#include <stdlib.h>
#include <string.h>

int opt_symbols_short;

void symbols_short_init(void)
{
    const char *s = config_env("PPROF_SYMBOLS");
    if (!s || strcmp(s, "full") == 0)
        return;
    if (strcmp(s, "short") == 0)
        opt_symbols_short = 1;
    else
        log_info("PPROF_SYMBOLS=\"%s\" is not short or full; using full", s);
}

static int ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '$';
}

/* Index just past the group opened at s[i] ('(', '<', '{' or '['), nested
 * groups of any kind included; the string's end when it is not closed. */
static size_t group_end(const char *s, size_t i)
{
    int depth = 0;
    for (; s[i]; i++) {
        char c = s[i];
        if (c == '(' || c == '<' || c == '{' || c == '[')
            depth++;
        else if (c == ')' || c == '>' || c == '}' || c == ']')
            if (--depth == 0)
                return i + 1;
    }
    return i;
}

/* Length of the operator's symbol after "operator" at s (one space and an
 * identifier for "operator new", a conversion operator's type, "()" and
 * "[]", or a run of operator characters). */
static size_t operator_len(const char *s)
{
    if (s[0] == '(' && s[1] == ')')
        return 2;
    if (s[0] == '[' && s[1] == ']')
        return 2;
    size_t n = 0;
    if (s[0] == ' ' && ident(s[1])) {
        n = 1;
        while (ident(s[n]) || s[n] == ' ' || s[n] == '*' || s[n] == '&' ||
               s[n] == ':')
            if (s[n] == ' ' && !ident(s[n + 1]))
                break;
            else
                n++;
        if (s[n] == '[' && s[n + 1] == ']') /* operator new[] */
            n += 2;
        return n;
    }
    while (s[n] && strchr("+-*/%^&|~!=<>,", s[n]))
        n++;
    return n;
}

size_t symbols_short_name(const char *full, char *out, size_t size)
{
    size_t o = 0, i = 0;
    int named = 0; /* an operator's name is out: no return type follows */
    if (size == 0)
        return 0;
#define PUT(c)                                                                 \
    do {                                                                       \
        if (o + 1 < size)                                                      \
            out[o++] = (c);                                                    \
    } while (0)
    while (full[i]) {
        char c = full[i];
        if (ident(c) && (i == 0 || !ident(full[i - 1])) &&
            strncmp(full + i, "operator", 8) == 0 && !ident(full[i + 8])) {
            size_t n = 8 + operator_len(full + i + 8);
            for (size_t k = 0; k < n; k++)
                PUT(full[i + k]);
            i += n;
            named = 1;
            continue;
        }
        if (c == '<') {
            /* Template arguments. */
            i = group_end(full, i);
            continue;
        }
        if (c == '{' || (c == '(' && (o == 0 || out[o - 1] == ':'))) {
            /* A lambda's or block's name, "(anonymous namespace)": kept. */
            size_t e = group_end(full, i);
            for (; i < e; i++)
                PUT(full[i]);
            continue;
        }
        if (c == '(') {
            /* A parameter list: an enclosing function's (followed by
             * "::") or the function's own, after which nothing counts. */
            i = group_end(full, i);
            if (strncmp(full + i, "::", 2) != 0)
                break;
            continue;
        }
        if (c == ' ') {
            /* A return type before the name ("int foo<int>(long)"). */
            if (!named)
                o = 0;
            i++;
            continue;
        }
        PUT(c);
        i++;
    }
#undef PUT
    out[o] = '\0';
    return o;
}
