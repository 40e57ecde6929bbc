/*
 * flamegraph.c draws a decoded profile as a flame graph: the samples'
 * stacks are folded root first into a tree (one node per distinct path,
 * valued by the sum of its samples), siblings are sorted by name, and each
 * node becomes a rectangle whose width is its share of the total, the root
 * at the bottom, as Brendan Gregg's flame graphs are drawn.
 *
 * The output is one self-contained SVG document: no external script, style
 * sheet or font (system fonts by family name only), so it can be saved,
 * mailed and opened offline. An inline script adds what a person expects:
 * details on hover, click to zoom, a search that highlights matches and
 * reports their share. Without the script (an <img> tag, a viewer that
 * runs none) the picture and its tooltips still work.
 *
 * Entered only from HTTP threads, never from a signal handler. Its memory
 * is bounded by the profile's size: one node per distinct path, and
 * stacks deeper than FLAME_MAX_DEPTH frames are cut at the leaf side.
 */
#include "encoder/flamegraph.h"
#include "agent/core/array.h"
#include "agent/core/real.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLAME_MAX_DEPTH 1024
#define FRAME_HEIGHT 16
#define FONT_SIZE 12
#define FONT_WIDTH 0.59 /* average glyph width per point of font size */
#define XPAD 10
#define YPAD_TOP 64    /* title, subtitle, controls */
#define YPAD_BOTTOM 34 /* details line */
#define MIN_WIDTH_PX 0.1
/* Past this many frames a browser slows down noticeably (each is a few
 * hundred bytes of SVG); the narrowest are then left out, by doubling the
 * minimum width until the rest fits. */
#define FLAME_MAX_FRAMES 30000

/* The name of a node: a string index, or an unsymbolized address. */
struct frame_key {
    int64_t name;     /* >= 0: string index */
    uint64_t address; /* used when name < 0 */
    uint64_t mapping; /* the address's mapping id, 0 when none */
};

/* Longest name of a frame without a function name: "[object]+0xoffset". */
#define ADDR_NAME_MAX 300

struct node {
    struct frame_key key;
    uint32_t parent;
    uint32_t first_child;  /* 0: none (node 0 is the root, never a child) */
    uint32_t next_sibling; /* 0: none */
    int64_t value;
};

struct tree {
    const struct decoded_profile *p;
    struct node *nodes;
    size_t n, cap;
    struct htab index; /* (parent, key) -> node */
    int max_depth;
};

static uint64_t hash_child(uint32_t parent, const struct frame_key *k)
{
    /* The address names a frame only when it has no function name. */
    uint64_t a = k->name < 0 ? k->address : 0;
    return hash_splitmix64(((uint64_t)parent << 32) ^ (uint64_t)k->name ^
                    hash_splitmix64(a + HASH_GOLDEN));
}

static int same_key(const struct frame_key *a, const struct frame_key *b)
{
    return a->name == b->name && (a->name >= 0 || a->address == b->address);
}

struct child_key {
    uint32_t parent;
    const struct frame_key *k;
};

static int child_eq(const void *ctx, size_t idx, const void *key)
{
    const struct node *c = &((const struct tree *)ctx)->nodes[idx];
    const struct child_key *ck = key;
    return c->parent == ck->parent && same_key(&c->key, ck->k);
}

/* The child of parent with this key, added when new. 0 on failure. */
static uint32_t child(struct tree *t, uint32_t parent,
                      const struct frame_key *k)
{
    uint64_t h = hash_child(parent, k);
    struct child_key ck = {parent, k};
    struct htab_slot *sl = htab_find_for_insert(&t->index, h, child_eq, t, &ck);
    if (!sl)
        return 0;
    if (sl->idx1)
        return (uint32_t)(sl->idx1 - 1);
    if (t->n >= UINT32_MAX - 1)
        return 0;
    if (ARRAY_RESERVE(t->nodes, t->cap, t->n + 1, 1024) != 0)
        return 0;
    uint32_t i = (uint32_t)t->n++;
    struct node *c = &t->nodes[i];
    memset(c, 0, sizeof *c);
    c->key = *k;
    c->parent = parent;
    c->next_sibling = t->nodes[parent].first_child;
    t->nodes[parent].first_child = i;
    htab_set(&t->index, sl, h, i);
    return i;
}

static const struct decoded_location *find_location(
    const struct decoded_profile *p, uint64_t id)
{
    size_t lo = 0, hi = p->nlocations;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->locations[mid].id == id)
            return &p->locations[mid];
        if (p->locations[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int64_t function_name(const struct decoded_profile *p, uint64_t id)
{
    size_t lo = 0, hi = p->nfunctions;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->functions[mid].id == id)
            return p->functions[mid].name;
        if (p->functions[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* The frames of one sample, root first, inlined functions expanded. */
static size_t sample_frames(const struct decoded_profile *p,
                            const struct decoded_sample *s,
                            struct frame_key *out, size_t max)
{
    size_t n = 0;
    for (size_t i = s->nlocations; i-- > 0 && n < max;) {
        const struct decoded_location *l = find_location(p, s->locations[i]);
        if (!l || l->nfunctions == 0) {
            out[n].name = -1;
            out[n].address = l ? l->address : 0;
            out[n].mapping = l ? l->mapping_id : 0;
            n++;
            continue;
        }
        /* Lines are innermost first: the caller comes last. */
        for (size_t j = l->nfunctions; j-- > 0 && n < max;) {
            int64_t name = function_name(p, l->functions[j]);
            out[n].name = name > 0 ? name : -1;
            out[n].address = l->address;
            out[n].mapping = l->mapping_id;
            n++;
        }
    }
    return n;
}

static int tree_build(struct tree *t, int index, long *dropped)
{
    const struct decoded_profile *p = t->p;
    t->cap = 1024;
    t->nodes = real_malloc(t->cap * sizeof *t->nodes);
    if (!t->nodes)
        return -ENOMEM;
    memset(&t->nodes[0], 0, sizeof t->nodes[0]);
    t->nodes[0].key.name = -2; /* the root, "all" */
    t->n = 1;

    struct frame_key *frames = real_malloc(FLAME_MAX_DEPTH * sizeof *frames);
    if (!frames)
        return -ENOMEM;
    int err = 0;
    for (size_t i = 0; i < p->nsamples && err == 0; i++) {
        const struct decoded_sample *s = &p->samples[i];
        int64_t v = (size_t)index < s->nvalues ? s->values[index] : 0;
        if (v <= 0) {
            if (v < 0)
                (*dropped)++;
            continue;
        }
        size_t n = sample_frames(p, s, frames, FLAME_MAX_DEPTH);
        uint32_t at = 0;
        t->nodes[0].value += v;
        for (size_t f = 0; f < n; f++) {
            at = child(t, at, &frames[f]);
            if (at == 0) {
                err = -ENOMEM;
                break;
            }
            t->nodes[at].value += v;
        }
        if ((int)n > t->max_depth)
            t->max_depth = (int)n;
    }
    real_free(frames);
    return err;
}

/* ---- drawing ------------------------------------------------------------- */

void flamegraph_xml_escape(struct pbuf *out, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        unsigned char c = *u;
        switch (c) {
        case '&': pbuf_puts(out, "&amp;"); u++; continue;
        case '<': pbuf_puts(out, "&lt;"); u++; continue;
        case '>': pbuf_puts(out, "&gt;"); u++; continue;
        case '"': pbuf_puts(out, "&quot;"); u++; continue;
        case '\'': pbuf_puts(out, "&apos;"); u++; continue;
        default: break;
        }
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            pbuf_append(out, "?", 1);
            u++;
            continue;
        }
        if (c < 0x80) {
            pbuf_append(out, u, 1);
            u++;
            continue;
        }
        /* A multi-byte UTF-8 sequence is copied only when it is whole
         * and valid; anything else would make the document unreadable. */
        int len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
        if (c >= 0xf5)
            len = 0;
        int ok = len > 0;
        for (int i = 1; ok && i < len; i++)
            ok = (u[i] & 0xc0) == 0x80;
        if (ok && len == 3 && c == 0xe0 && u[1] < 0xa0)
            ok = 0; /* overlong */
        if (ok && len == 3 && c == 0xed && u[1] >= 0xa0)
            ok = 0; /* surrogate */
        if (ok && len == 4 && ((c == 0xf0 && u[1] < 0x90) ||
                               (c == 0xf4 && u[1] >= 0x90)))
            ok = 0;
        if (ok && len == 3 && c == 0xef && u[1] == 0xbf &&
            (u[2] == 0xbe || u[2] == 0xbf))
            ok = 0; /* U+FFFE, U+FFFF are not XML characters */
        if (ok) {
            pbuf_append(out, u, (size_t)len);
            u += len;
        } else {
            pbuf_append(out, "?", 1);
            u++;
        }
    }
}

static const struct decoded_mapping *find_mapping(
    const struct decoded_profile *p, uint64_t id)
{
    /* Ids are 1..N in order in the agent's profiles (and Go's). */
    if (id > 0 && id <= p->nmappings && p->mappings[id - 1].id == id)
        return &p->mappings[id - 1];
    for (size_t i = 0; id > 0 && i < p->nmappings; i++)
        if (p->mappings[i].id == id)
            return &p->mappings[i];
    return NULL;
}

/* The node's name: the function; for an unsymbolized frame its object and
 * file offset ("[libfoo.so]+0x1a2b", what a person can look up with
 * addr2line), or its address when no mapping holds it; or "all". */
static const char *node_name(const struct tree *t, const struct node *n,
                             char *buf, size_t size)
{
    if (n->key.name == -2)
        return "all";
    if (n->key.name >= 0) {
        const char *name = decoded_string(t->p, n->key.name);
        if (name[0])
            return name;
    }
    const struct decoded_mapping *m = find_mapping(t->p, n->key.mapping);
    uint64_t a = n->key.address;
    if (m && a >= m->start && (a < m->limit || m->limit == 0)) {
        const char *file = decoded_string(t->p, m->filename);
        const char *base = strrchr(file, '/');
        base = base ? base + 1 : file;
        if (base[0]) {
            snprintf(buf, size, "[%s]+0x%llx", base,
                     (unsigned long long)(a - m->start + m->offset));
            return buf;
        }
    }
    snprintf(buf, size, "0x%llx", (unsigned long long)a);
    return buf;
}

/* A value in its unit the way pprof writes it: 1.25s, 3.50MB, 12 samples. */
static void format_value(char *buf, size_t size, int64_t v, const char *type,
                         const char *unit)
{
    double d = (double)v;
    if (strcmp(unit, "nanoseconds") == 0) {
        if (v >= 1000000000)
            snprintf(buf, size, "%.2fs", d / 1e9);
        else if (v >= 1000000)
            snprintf(buf, size, "%.2fms", d / 1e6);
        else if (v >= 1000)
            snprintf(buf, size, "%.2fus", d / 1e3);
        else
            snprintf(buf, size, "%lldns", (long long)v);
    } else if (strcmp(unit, "bytes") == 0) {
        if (v >= (int64_t)1 << 30)
            snprintf(buf, size, "%.2fGB", d / (1 << 30));
        else if (v >= 1 << 20)
            snprintf(buf, size, "%.2fMB", d / (1 << 20));
        else if (v >= 1 << 10)
            snprintf(buf, size, "%.2fkB", d / (1 << 10));
        else
            snprintf(buf, size, "%lldB", (long long)v);
    } else {
        snprintf(buf, size, "%lld %s", (long long)v,
                 strcmp(unit, "count") == 0 || !unit[0] ? type : unit);
    }
}

/* MurmurHash3's finalizer. The colours depend on it: it is not the hash
 * index's mixer, so that a function keeps the colour it always had. */
static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

/* flamegraph.pl's "hot" palette, chosen by the name so that a function
 * keeps its colour from one picture to the next. */
static void node_colour(const char *name, int root, char *buf, size_t size)
{
    if (root) {
        snprintf(buf, size, "rgb(200,200,200)");
        return;
    }
    uint64_t h = 1469598103934665603ULL;
    for (const char *c = name; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    h = mix(h);
    unsigned r = 205 + (unsigned)(h % 51);
    unsigned g = (unsigned)((h >> 8) % 231);
    unsigned b = (unsigned)((h >> 16) % 56);
    snprintf(buf, size, "rgb(%u,%u,%u)", r, g, b);
}

static int by_name(const void *a, const void *b, void *arg)
{
    const struct tree *t = arg;
    const struct node *x = &t->nodes[*(const uint32_t *)a];
    const struct node *y = &t->nodes[*(const uint32_t *)b];
    char bx[ADDR_NAME_MAX], by[ADDR_NAME_MAX];
    int c = strcmp(node_name(t, x, bx, sizeof bx), node_name(t, y, by, sizeof by));
    if (c != 0)
        return c;
    return x->key.address < y->key.address ? -1 : x->key.address > y->key.address;
}

/* Orders every node's children by name, as flamegraph.pl does, so that
 * the same profile always gives the same picture. */
static int sort_children(struct tree *t)
{
    uint32_t *tmp = real_malloc(t->n * sizeof *tmp);
    if (!tmp)
        return -ENOMEM;
    for (size_t i = 0; i < t->n; i++) {
        size_t k = 0;
        for (uint32_t c = t->nodes[i].first_child; c; c = t->nodes[c].next_sibling)
            tmp[k++] = c;
        if (k < 2)
            continue;
        qsort_r(tmp, k, sizeof *tmp, by_name, t);
        t->nodes[i].first_child = tmp[0];
        for (size_t j = 0; j + 1 < k; j++)
            t->nodes[tmp[j]].next_sibling = tmp[j + 1];
        t->nodes[tmp[k - 1]].next_sibling = 0;
    }
    real_free(tmp);
    return 0;
}

/* One step of the depth-first walk: a node, where it starts (in value
 * units from the left edge) and its depth (the root is 0). */
struct visit {
    uint32_t node;
    int depth;
    int64_t offset;
};

struct layout {
    double scale;     /* pixels per value unit */
    double min_width; /* narrower frames (and their children) are left out */
    int top_depth;
    int drawn;
};


static void draw_frame(const struct tree *t, const struct node *n, int depth,
                       double x, double w, const struct layout *lay,
                       struct pbuf *out, const char *type, const char *unit)
{
    char addr[ADDR_NAME_MAX], val[64], fill[32];
    const char *name = node_name(t, n, addr, sizeof addr);
    double pct = t->nodes[0].value ? 100.0 * (double)n->value /
                                         (double)t->nodes[0].value
                                   : 0;
    format_value(val, sizeof val, n->value, type, unit);
    node_colour(name, n == &t->nodes[0], fill, sizeof fill);
    int y = YPAD_TOP + (lay->top_depth - depth) * FRAME_HEIGHT;

    pbuf_puts(out, "<g class=\"f\"><title>");
    flamegraph_xml_escape(out, name);
    pbuf_printf(out, " (%s, %.2f%%)</title><rect x=\"%.2f\" y=\"%d\" "
                     "width=\"%.2f\" height=\"%d\" fill=\"%s\" rx=\"2\"/>"
                     "<text x=\"%.2f\" y=\"%d\">",
                val, pct, x, y, w, FRAME_HEIGHT - 1, fill, x + 3,
                y + FRAME_HEIGHT - 4);
    /* The text that fits; the script redoes this after a zoom. */
    long fits = (long)((w - 6) / (FONT_WIDTH * FONT_SIZE));
    size_t len = strlen(name);
    if (fits >= 3) {
        if (len <= (size_t)fits) {
            flamegraph_xml_escape(out, name);
        } else {
            size_t cut = (size_t)fits - 2;
            while (cut > 0 && ((unsigned char)name[cut] & 0xc0) == 0x80)
                cut--;
            char *s = strndup(name, cut);
            if (s) {
                flamegraph_xml_escape(out, s);
                pbuf_puts(out, "..");
                real_free(s);
            }
        }
    }
    pbuf_puts(out, "</text></g>\n");
}

/* Walks the nodes wide enough to draw, depth first: with out NULL it only
 * finds the deepest one (top_depth) and counts them; with out it draws. */
static int walk(const struct tree *t, struct layout *lay, struct pbuf *out,
                const char *type, const char *unit)
{
    size_t cap = 256;
    struct visit *stack = real_malloc(cap * sizeof *stack);
    if (!stack)
        return -ENOMEM;
    size_t sp = 0;
    stack[sp++] = (struct visit){0, 0, 0};
    lay->drawn = 0;
    while (sp > 0) {
        struct visit v = stack[--sp];
        const struct node *n = &t->nodes[v.node];
        double w = (double)n->value * lay->scale;
        if (w < lay->min_width)
            continue;
        lay->drawn++;
        if (!out && v.depth > lay->top_depth)
            lay->top_depth = v.depth;
        if (out)
            draw_frame(t, n, v.depth, XPAD + (double)v.offset * lay->scale, w,
                       lay, out, type, unit);
        /* Children are pushed in reverse so that they are drawn left to
         * right; the stack holds the pending siblings of one path. */
        size_t k = 0;
        for (uint32_t c = n->first_child; c; c = t->nodes[c].next_sibling)
            k++;
        if (k == 0)
            continue;
        if (ARRAY_RESERVE(stack, cap, sp + k, 64) != 0) {
            real_free(stack);
            return -ENOMEM;
        }
        int64_t off = v.offset;
        sp += k;
        size_t j = sp;
        for (uint32_t c = n->first_child; c; c = t->nodes[c].next_sibling) {
            stack[--j] = (struct visit){c, v.depth + 1, off};
            off += t->nodes[c].value;
        }
    }
    real_free(stack);
    return 0;
}

/*
 * The interactive part, encoder/flamegraph.js, embedded at build time
 * (flamegraph_js.S: the file's bytes and a NUL). It reads everything it
 * needs from the document (each frame's rectangle and title), so the C
 * side writes the picture once and the script only moves it; @XPAD@ and
 * @FW@ in it stand for the layout's padding and glyph width. Kept free of
 * "]]>" so that it can sit in a CDATA section.
 */
extern const char flamegraph_script[];

static void put_script(struct pbuf *out)
{
    const char *s = flamegraph_script;
    const char *at;
    while ((at = strchr(s, '@')) != NULL) {
        pbuf_append(out, s, (size_t)(at - s));
        if (strncmp(at, "@XPAD@", 6) == 0) {
            pbuf_printf(out, "%d", XPAD);
            s = at + 6;
        } else if (strncmp(at, "@FW@", 4) == 0) {
            pbuf_printf(out, "%.3f", FONT_WIDTH * FONT_SIZE);
            s = at + 4;
        } else {
            pbuf_append(out, at, 1);
            s = at + 1;
        }
    }
    pbuf_puts(out, s);
}

int flamegraph_svg(const struct decoded_profile *p, int index,
                   const struct flamegraph_options *opt, struct pbuf *out)
{
    if (index < 0 || (size_t)index >= p->ntypes)
        return -EINVAL;
    const char *type = decoded_string(p, p->types[index].type);
    const char *unit = decoded_string(p, p->types[index].unit);
    int width = opt->width > 0 ? opt->width : 1200;

    struct tree t = {.p = p};
    long dropped = 0;
    int err = tree_build(&t, index, &dropped);
    if (err == 0)
        err = sort_children(&t);
    struct layout lay = {.min_width = MIN_WIDTH_PX};
    int64_t total = t.nodes ? t.nodes[0].value : 0;
    lay.scale = total > 0 ? (double)(width - 2 * XPAD) / (double)total : 0;
    while (err == 0 && total > 0) {
        lay.top_depth = 0;
        err = walk(&t, &lay, NULL, type, unit);
        if (lay.drawn <= FLAME_MAX_FRAMES)
            break;
        lay.min_width *= 2;
    }
    if (err != 0) {
        real_free(t.nodes);
        htab_free(&t.index);
        return err;
    }
    int levels = total > 0 ? lay.top_depth + 1 : 1;
    int height = YPAD_TOP + levels * FRAME_HEIGHT + YPAD_BOTTOM;

    char tot[64];
    format_value(tot, sizeof tot, total, type, unit);
    pbuf_printf(out,
                "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                "<svg version=\"1.1\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\" "
                "data-search=\"",
                width, height, width, height);
    if (opt->search)
        flamegraph_xml_escape(out, opt->search);
    pbuf_puts(out, "\" data-zoom=\"");
    if (opt->zoom)
        flamegraph_xml_escape(out, opt->zoom);
    pbuf_puts(out,
              "\">\n<style type=\"text/css\">\n"
              "text { font-family: Verdana, 'DejaVu Sans', sans-serif; "
              "font-size: 12px; fill: rgb(0,0,0); }\n"
              "#title { font-size: 17px; }\n"
              ".ctl { cursor: pointer; fill: rgb(0,0,160); }\n"
              ".ctl:hover { text-decoration: underline; }\n"
              "g.f { cursor: pointer; }\n"
              "g.f:hover rect { stroke: rgb(0,0,0); stroke-width: 0.5; }\n"
              "</style>\n");
    pbuf_printf(out,
                "<rect id=\"background\" x=\"0\" y=\"0\" width=\"%d\" "
                "height=\"%d\" fill=\"rgb(248,248,240)\"/>\n"
                "<text id=\"title\" x=\"%d\" y=\"24\" "
                "text-anchor=\"middle\">",
                width, height, width / 2);
    flamegraph_xml_escape(out, opt->title ? opt->title : "flame graph");
    pbuf_printf(out, "</text>\n<text id=\"subtitle\" x=\"%d\" y=\"44\" "
                     "text-anchor=\"middle\">",
                width / 2);
    flamegraph_xml_escape(out, type);
    pbuf_puts(out, ", total ");
    flamegraph_xml_escape(out, tot);
    if (opt->subtitle && opt->subtitle[0]) {
        pbuf_puts(out, "; ");
        flamegraph_xml_escape(out, opt->subtitle);
    }
    if (total > 0 && t.n > (size_t)lay.drawn)
        pbuf_printf(out, "; %zu frames narrower than %.1f px not drawn",
                    t.n - (size_t)lay.drawn, lay.min_width);
    if (dropped > 0)
        pbuf_printf(out, "; %ld negative samples left out", dropped);
    pbuf_printf(out,
                "</text>\n"
                "<text id=\"unzoom\" class=\"ctl\" x=\"%d\" y=\"24\" "
                "visibility=\"hidden\">Reset Zoom</text>\n"
                "<text id=\"search\" class=\"ctl\" x=\"%d\" y=\"24\" "
                "text-anchor=\"end\">Search</text>\n"
                "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n"
                "<text id=\"matched\" x=\"%d\" y=\"%d\" "
                "text-anchor=\"end\"> </text>\n",
                XPAD, width - XPAD, XPAD, height - 12, width - XPAD,
                height - 12);
    if (total <= 0)
        pbuf_printf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">"
                         "No samples</text>\n",
                    width / 2, YPAD_TOP + FRAME_HEIGHT - 4);

    pbuf_puts(out, "<g id=\"frames\">\n");
    if (total > 0)
        err = walk(&t, &lay, out, type, unit);
    pbuf_puts(out, "</g>\n<script type=\"text/ecmascript\"><![CDATA[\n");
    put_script(out);
    pbuf_puts(out, "]]></script>\n</svg>\n");

    real_free(t.nodes);
    htab_free(&t.index);
    if (err == 0 && out->oom)
        err = -ENOMEM;
    return err;
}
