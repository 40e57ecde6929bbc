/*
 * The report a test asks a program for with SIGUSR1: the handler only
 * raises a flag (printing is not async-signal-safe); the program's main
 * loop prints its figures when report_asked() finds the flag raised.
 */
#ifndef REPORT_H
#define REPORT_H

#include <signal.h>

/* Written by the handler, read and cleared by the main loop. */
static volatile sig_atomic_t report_flag;

/* Async-signal-safe. */
static void report_on_usr1(int sig)
{
    (void)sig;
    report_flag = 1;
}

/* From now on SIGUSR1 asks for a report. */
static inline void report_listen(void)
{
    signal(SIGUSR1, report_on_usr1);
}

/* 1 when a report was asked since the last call (several SIGUSR1 meanwhile
 * ask once), else 0. */
static inline int report_asked(void)
{
    if (!report_flag)
        return 0;
    report_flag = 0;
    return 1;
}

#endif
