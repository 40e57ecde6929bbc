/*
 * Profiler labels (agent/core/labels.h) in the encoder's two forms: as
 * profile.proto string labels of a sample, and as Go's text form
 * {"key":"value", ...} used by the debug=1 and debug=2 listings. Runs on
 * the agent's server threads only.
 */
#include "encoder/encoder.h"

#include "agent/core/labels.h"

size_t labels_to_profile(uint32_t id, struct profile_label *out)
{
    const struct pprof_label_set *set = labels_by_id(id);
    size_t n = 0;
    for (uint32_t k = 0; set && k < set->n; k++)
        out[n++] = (struct profile_label){.key = set->pairs[k].key,
                                          .str = set->pairs[k].value};
    return n;
}

void labels_put_quoted(struct pbuf *out, const char *s)
{
    pbuf_puts(out, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            pbuf_append(out, "\\", 1);
        if ((unsigned char)*s < 0x20)
            pbuf_printf(out, "\\x%02x", (unsigned char)*s);
        else
            pbuf_append(out, s, 1);
    }
    pbuf_puts(out, "\"");
}

int labels_put_text(struct pbuf *out, const char *prefix, uint32_t id)
{
    const struct pprof_label_set *set = labels_by_id(id);
    if (!set)
        return 0;
    pbuf_puts(out, prefix);
    pbuf_puts(out, "{");
    for (uint32_t k = 0; k < set->n; k++) {
        if (k)
            pbuf_puts(out, ", ");
        labels_put_quoted(out, set->pairs[k].key);
        pbuf_puts(out, ":");
        labels_put_quoted(out, set->pairs[k].value);
    }
    pbuf_puts(out, "}\n");
    return 1;
}

