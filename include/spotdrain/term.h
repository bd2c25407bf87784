/* The terminal's one owner. Log records (log.c) and a block of live status lines (a drain's countdown)
 * share stderr; written each on its own, a record lands in the middle of a status line. While a status
 * block is live, every record goes through here: the block is erased, the record written, the block drawn
 * again below it, in one write. Each status line is cut to the terminal's width, so that none wraps and
 * the block's height stays what was drawn.
 *
 * Only a terminal gets a live block (stderr a TTY, TERM neither unset nor "dumb"); elsewhere the caller
 * prints plain lines. Colour only on a live terminal without NO_COLOR (https://no-color.org). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Starts a status block on fd's terminal. Returns true when live (the block is drawn in place), false
 * when fd is no terminal (nothing changes: the caller prints plain lines). */
bool term_status_start(int fd);
/* Replaces the block with lines (copied) and draws it. No-op unless live. */
void term_status_set(const char *const *lines, size_t n);
/* Erases the block; the terminal is plain again. NULL-safe, idempotent. */
void term_status_stop(void);
/* Writes text (whole records, newline-terminated) to f: above the status block when f is its terminal. */
void term_write(FILE *f, const char *text);

/* Whether output to fd may be coloured: a terminal, TERM not "dumb", NO_COLOR unset or empty. */
bool term_color(int fd);
/* fd's terminal width in columns: the terminal's own, else $COLUMNS, else 80. */
unsigned term_columns(int fd);
/* How many columns s takes on a terminal: SGR sequences (ESC [ ... m) take none, nor do UTF-8
 * continuation bytes. */
size_t term_text_columns(const char *s);
/* The bytes of s that fit in cols columns (escape sequences kept whole). */
size_t term_cut(const char *s, unsigned cols);
