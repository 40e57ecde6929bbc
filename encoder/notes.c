/*
 * notes.c keeps the agent's own account of the last profile of each kind
 * (how many samples, the handler's cost, what was lost): Go's profiles
 * carry no such comment, so the writers leave it out of the profile and
 * put it here, and /debug/stats and the index page show it (and
 * PPROF_LOG=debug writes it to standard error, as the writers do).
 *
 * Written by the encoders on HTTP workers and dump threads, read by the
 * pages; a spin lock keeps a reader from seeing half a note. Never used
 * from a signal handler. Not async-signal-safe.
 */
#include "encoder/encoder.h"

#include "agent/log.h"
#include "agent/spinlock.h"

#include <string.h>

#define NOTES_MAX 6
#define NOTE_KIND 16
#define NOTE_TEXT 768

static struct {
    spinlock_t lock;
    char kind[NOTES_MAX][NOTE_KIND];
    char text[NOTES_MAX][NOTE_TEXT];
} notes;

void notes_set(const char *kind, const char *text)
{
    spin_lock(&notes.lock);
    size_t i = 0;
    while (i < NOTES_MAX && notes.kind[i][0] && strcmp(notes.kind[i], kind))
        i++;
    if (i < NOTES_MAX) {
        log_snprintf(notes.kind[i], NOTE_KIND, "%s", kind);
        log_snprintf(notes.text[i], NOTE_TEXT, "%s", text);
    }
    spin_unlock(&notes.lock);
}

size_t notes_each(void (*fn)(void *arg, const char *kind, const char *text),
                  void *arg)
{
    char kind[NOTE_KIND], text[NOTE_TEXT];
    size_t n = 0;
    for (size_t i = 0; i < NOTES_MAX; i++) {
        spin_lock(&notes.lock);
        memcpy(kind, notes.kind[i], sizeof kind);
        memcpy(text, notes.text[i], sizeof text);
        spin_unlock(&notes.lock);
        if (!kind[0])
            break;
        fn(arg, kind, text);
        n++;
    }
    return n;
}
