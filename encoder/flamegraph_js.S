/*
 * encoder/flamegraph.js, embedded as the NUL-terminated string
 * flamegraph_script (read by flamegraph.c). The path is the source tree's:
 * the Makefile assembles from the top folder.
 */
    .section .rodata
    .globl flamegraph_script
    .hidden flamegraph_script
    .type flamegraph_script, @object
flamegraph_script:
    .incbin "encoder/flamegraph.js"
    .byte 0
    .size flamegraph_script, . - flamegraph_script
    .section .note.GNU-stack, "", @progbits
