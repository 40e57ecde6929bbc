/*
 * What the unwind tables and the walker know of x86-64 (included through
 * agent/stacks/cfi_arch.h, never directly): the DWARF numbers of the registers
 * the rows describe, where a call leaves the return address, the linkers'
 * PLT expression, where a signal frame keeps the interrupted registers, and
 * how a direct call is encoded. Another architecture is another file like
 * this one (see docs/unwind-tables.md); the parser, the row format and the
 * walker stay as they are.
 */
#ifndef PPROF_CFI_X86_64_H
#define PPROF_CFI_X86_64_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#define CFI_ARCH_NAME "x86-64"

/* DWARF register numbers: stack pointer, frame pointer, return address
 * column. */
#define CFI_DWARF_SP 7
#define CFI_DWARF_FP 6
#define CFI_DWARF_RA 16

/* A call pushes the return address: it is at cfa - 8 in every frame. A
 * frame whose information says otherwise gets no usable row. */
#define CFI_RA_AT_CFA (-8)

/* The GNU linkers' PLT expression for the CFA:
 * rsp + 8 + ((rip & 15) >= N) << 3. Returns N, or -1 for any other
 * expression. */
static inline int cfi_arch_plt_threshold(const uint8_t *e, size_t len)
{
    static const uint8_t head[] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a};
    static const uint8_t tail[] = {0x2a, 0x33, 0x24, 0x22};
    if (len != sizeof head + 1 + sizeof tail ||
        memcmp(e, head, sizeof head) != 0 ||
        memcmp(e + sizeof head + 1, tail, sizeof tail) != 0)
        return -1;
    uint8_t lit = e[sizeof head];
    if (lit < 0x30 || lit > 0x4f)
        return -1;
    return lit - 0x30;
}

/* Where, from the start of a ucontext_t, the interrupted program counter,
 * stack pointer and frame pointer are (a signal trampoline's frame has
 * the ucontext at its stack pointer). */
#define CFI_UC_PC offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP])
#define CFI_UC_SP offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP])
#define CFI_UC_FP offsetof(ucontext_t, uc_mcontext.gregs[REG_RBP])

/* Where in a ucontext_t the general register with DWARF number reg is,
 * or -1 (not one the kernel saves there). */
static inline long cfi_arch_uc_reg(unsigned reg)
{
    static const signed char greg[17] = {
        REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP,
        REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13,
        REG_R14, REG_R15, REG_RIP};
    if (reg >= sizeof greg)
        return -1;
    return (long)(offsetof(ucontext_t, uc_mcontext.gregs) +
                  (size_t)greg[reg] * sizeof(greg_t));
}

/* The direct call that ends just before return address ra, decoded from
 * the call's bytes code[0..CFI_CALL_BYTES) (e8 rel32): 1 with *target, or
 * 0 when it is not one (an indirect call). */
#define CFI_CALL_BYTES 5
static inline int cfi_arch_direct_call(const unsigned char *code, uintptr_t ra,
                                       uintptr_t *target)
{
    if (code[0] != 0xe8)
        return 0;
    int32_t rel;
    memcpy(&rel, code + 1, sizeof rel);
    *target = ra + (uintptr_t)(intptr_t)rel;
    return 1;
}

#endif
