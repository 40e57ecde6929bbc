/*
 * The architecture the unwind tables are compiled for and walked on: one
 * header per architecture, chosen here. Each defines the same names (see
 * agent/stacks/cfi_x86_64.h): CFI_DWARF_SP, CFI_DWARF_FP, CFI_DWARF_RA,
 * CFI_RA_AT_CFA, cfi_arch_plt_threshold, CFI_UC_PC, CFI_UC_SP, CFI_UC_FP,
 * cfi_arch_uc_reg, CFI_CALL_BYTES and cfi_arch_direct_call. docs/unwind-tables.md says
 * what an AArch64 file would hold.
 */
#ifndef PPROF_CFI_ARCH_H
#define PPROF_CFI_ARCH_H

#if defined(__x86_64__)
#include "agent/stacks/cfi_x86_64.h"
#else
#error "unwind tables: no architecture file for this target (agent/stacks/cfi_arch.h)"
#endif

#endif
