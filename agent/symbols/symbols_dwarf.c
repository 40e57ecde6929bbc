/*
 * symbols_dwarf.c owns file:line and inlined-call lookup through elfutils
 * libdw: the compile unit covering an address, its line table, and the
 * chain of DW_TAG_inlined_subroutine scopes that turns one address into
 * several frames. DWARF comes from the object itself or from the separate
 * debug file symbols_elf.c found.
 *
 * Entered only from the agent's own threads under the symbolizer lock;
 * never from a signal handler. libdw allocates (and decompresses
 * compressed sections) on first use of each unit, which is why this runs
 * lazily and only for addresses that appear in a profile.
 */
#include "agent/symbols/symbols.h"
#include "agent/core/libs.h"

#include <dwarf.h>
#include <elfutils/libdw.h>

void symbols_dwarf_load(struct sym_object *o)
{
    if (o->dwarf)
        return;
    Elf *elf = o->debug_elf ? o->debug_elf : o->elf;
    if (!elf)
        return;
    o->dwarf = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
}

/* The mangled name when the DIE (or the declaration it refines) has one, so
 * the caller can demangle it into a qualified C++ name; else the plain
 * name. */
static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *s = NULL;
    if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
        dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
        s = dwarf_formstring(&attr);
    if (!s)
        s = dwarf_diename(die);
    return s;
}

/* Where an inlined call was made from: DW_AT_call_file is an index into
 * the unit's file table. */
static void call_site(Dwarf_Die *cu, Dwarf_Die *inlined, const char **file,
                      int *line)
{
    Dwarf_Attribute attr;
    Dwarf_Word v;
    *file = NULL;
    *line = 0;
    if (dwarf_attr(inlined, DW_AT_call_line, &attr) &&
        dwarf_formudata(&attr, &v) == 0)
        *line = (int)v;
    Dwarf_Files *files;
    size_t nfiles;
    if (dwarf_attr(inlined, DW_AT_call_file, &attr) &&
        dwarf_formudata(&attr, &v) == 0 &&
        dwarf_getsrcfiles(cu, &files, &nfiles) == 0 && v < nfiles)
        *file = dwarf_filesrc(files, v, NULL, NULL);
}

/* Nesting deeper than this (inlines within inlines within blocks) is cut:
 * the innermost frames are the ones that matter, and corrupt DWARF must
 * not recurse without bound. */
#define MAX_DEPTH 64

/*
 * Fills chain[depth..] with the code scopes (subprogram, inlined
 * subroutine, lexical block) under parent that contain addr, outermost
 * first, and returns the new depth. dwarf_getscopes() is not used: for an
 * inlined subroutine it continues with the scopes of the abstract
 * definition, not with the function the code was inlined into.
 */
static int find_chain(Dwarf_Die *parent, Dwarf_Addr addr, Dwarf_Die *chain,
                      int depth)
{
    Dwarf_Die child;
    if (depth >= MAX_DEPTH || dwarf_child(parent, &child) != 0)
        return depth;
    do {
        switch (dwarf_tag(&child)) {
        case DW_TAG_subprogram:
        case DW_TAG_inlined_subroutine:
        case DW_TAG_lexical_block:
            if (dwarf_haspc(&child, addr) == 1) {
                chain[depth] = child;
                return find_chain(&chain[depth], addr, chain, depth + 1);
            }
            break;
        case DW_TAG_namespace:
        case DW_TAG_class_type:
        case DW_TAG_structure_type:
        case DW_TAG_union_type:
        case DW_TAG_module: {
            /* C++ and Fortran can nest concrete functions in these. */
            int d = find_chain(&child, addr, chain, depth);
            if (d > depth)
                return d;
            break;
        }
        default:
            break;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return depth;
}

int symbols_dwarf_frames(struct sym_object *o, uint64_t addr,
                         struct dwarf_frame *out, int max)
{
    if (!o->dwarf || max <= 0)
        return 0;
    Dwarf_Die cu;
    if (!dwarf_addrdie(o->dwarf, addr, &cu))
        return 0;
    const char *file = NULL;
    int line = 0;
    Dwarf_Line *dl = dwarf_getsrc_die(&cu, addr);
    if (dl) {
        file = dwarf_linesrc(dl, NULL, NULL);
        if (dwarf_lineno(dl, &line) != 0)
            line = 0;
    }

    Dwarf_Die chain[MAX_DEPTH];
    int depth = find_chain(&cu, addr, chain, 0);
    int n = 0;
    for (int i = depth - 1; i >= 0 && n < max; i--) {
        Dwarf_Die *s = &chain[i];
        int tag = dwarf_tag(s);
        if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
            continue;
        int decl = 0;
        if (dwarf_decl_line(s, &decl) != 0)
            decl = 0;
        out[n++] = (struct dwarf_frame){
            .name = die_name(s),
            .file = file,
            .line = line,
            .decl_line = decl,
            .inlined = tag == DW_TAG_inlined_subroutine,
        };
        /* The next frame outwards is at the call site of this inlined
         * copy; a subprogram is the physical function and ends the chain. */
        if (tag == DW_TAG_subprogram)
            break;
        call_site(&cu, s, &file, &line);
    }

    /* A unit with a line table but no subprogram at addr (assembly) still
     * gives a file and line for the symbol table's name. */
    if (n == 0 && file)
        out[n++] = (struct dwarf_frame){.file = file, .line = line};
    return n;
}

void symbols_dwarf_close(struct sym_object *o)
{
    if (o->dwarf)
        dwarf_end(o->dwarf);
    o->dwarf = NULL;
}
