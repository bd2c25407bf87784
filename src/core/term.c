/* The terminal's one owner: a live status block at the bottom, log records above it (term.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "spotdrain/core.h"
#include "spotdrain/term.h"

/* Records come from the loop's thread, and from the simulator's threads in the processes that have them. */
static pthread_mutex_t term_lock = PTHREAD_MUTEX_INITIALIZER;
static int term_fd = -1; /* the live block's terminal; -1 when none */
static char **term_lines;
static size_t term_n;     /* lines of the block */
static size_t term_drawn; /* lines on the screen now (the cursor is at the end of the last) */

static bool term_capable(int fd)
{
        const char *t = getenv("TERM");
        return isatty(fd) && !isempty(t) && !streq(t, "dumb");
}

bool term_color(int fd)
{
        const char *no = getenv("NO_COLOR");
        return term_capable(fd) && isempty(no);
}

static void term_size(int fd, unsigned *ret_cols, unsigned *ret_rows)
{
        struct winsize ws = { 0 };
        const char *c = getenv("COLUMNS");
        *ret_cols = 80;
        *ret_rows = 24;
        if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
                *ret_cols = ws.ws_col;
                if (ws.ws_row > 0)
                        *ret_rows = ws.ws_row;
        } else if (c && atoi(c) > 0)
                *ret_cols = (unsigned)atoi(c);
}

unsigned term_columns(int fd)
{
        unsigned cols, rows;
        term_size(fd, &cols, &rows);
        return cols;
}

/* The length of the escape sequence at s (ESC [ parameters final-byte), 0 when s starts none. */
static size_t escape_len(const char *s)
{
        size_t i = 2;
        if (s[0] != '\033' || s[1] != '[')
                return 0;
        while (s[i] && !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e))
                i++;
        return s[i] ? i + 1 : i;
}

size_t term_cut(const char *s, unsigned cols)
{
        size_t i = 0, used = 0;
        while (s[i]) {
                size_t e = escape_len(s + i);
                if (e > 0) {
                        i += e;
                        continue;
                }
                if (((unsigned char)s[i] & 0xc0) != 0x80) {
                        if (used == cols)
                                break;
                        used++;
                }
                i++;
        }
        return i;
}

size_t term_text_columns(const char *s)
{
        size_t used = 0;
        for (size_t i = 0; s[i];) {
                size_t e = escape_len(s + i);
                if (e > 0) {
                        i += e;
                        continue;
                }
                used += ((unsigned char)s[i] & 0xc0) != 0x80;
                i++;
        }
        return used;
}

/* Everything to the terminal in one write: the screen never shows half of a redraw. */
static void write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return;
                p += k;
                n -= (size_t)k;
        }
}

/* Back to the first line of the block, and everything from there down cleared. */
static int append_erase(struct buf *b)
{
        int r = 0;
        if (term_drawn == 0)
                return 0;
        r = buf_append(b, "\r", 1);
        if (r >= 0 && term_drawn > 1)
                r = buf_printf(b, "\033[%zuA", term_drawn - 1);
        if (r >= 0)
                r = buf_append(b, "\033[J", 3);
        return r;
}

/* The block, each line cut one column short of the width (a line that fills the last column would wrap on
 * some terminals), no more lines than the screen has rows less one; the cursor stays at the end. */
static int append_draw(struct buf *b, size_t *ret_drawn)
{
        unsigned cols, rows;
        int r = 0;
        size_t n = term_n;

        term_size(term_fd, &cols, &rows);
        if (n > rows - 1)
                n = rows > 1 ? rows - 1 : 1;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                const char *line = term_lines[i];
                size_t len = term_cut(line, cols > 1 ? cols - 1 : 1);
                if (i > 0)
                        r = buf_append(b, "\n", 1);
                if (r >= 0)
                        r = buf_append(b, line, len);
                if (r >= 0 && strchr(line, '\033'))
                        r = buf_append(b, "\033[0m", 4);
        }
        *ret_drawn = n;
        return r;
}

static void lines_free(void)
{
        for (size_t i = 0; i < term_n; i++)
                free(term_lines[i]);
        free(term_lines);
        term_lines = NULL;
        term_n = 0;
}

bool term_status_start(int fd)
{
        if (!term_capable(fd))
                return false;
        pthread_mutex_lock(&term_lock);
        term_fd = fd;
        term_drawn = 0;
        pthread_mutex_unlock(&term_lock);
        return true;
}

void term_status_set(const char *const *lines, size_t n)
{
        _cleanup_(buf_free) struct buf b = { 0 };
        char **copy = calloc(n + 1, sizeof(*copy));
        size_t drawn = 0;

        if (!copy)
                return;
        for (size_t i = 0; i < n; i++)
                if (!(copy[i] = strdup(lines[i] ? lines[i] : ""))) {
                        for (size_t j = 0; j < i; j++)
                                free(copy[j]);
                        free(copy);
                        return;
                }
        pthread_mutex_lock(&term_lock);
        if (term_fd < 0) {
                pthread_mutex_unlock(&term_lock);
                for (size_t i = 0; i < n; i++)
                        free(copy[i]);
                free(copy);
                return;
        }
        lines_free();
        term_lines = copy;
        term_n = n;
        if (append_erase(&b) >= 0 && append_draw(&b, &drawn) >= 0) {
                write_all(term_fd, b.data, b.len);
                term_drawn = drawn;
        }
        pthread_mutex_unlock(&term_lock);
}

void term_status_stop(void)
{
        _cleanup_(buf_free) struct buf b = { 0 };
        pthread_mutex_lock(&term_lock);
        if (term_fd >= 0 && append_erase(&b) >= 0 && b.len > 0)
                write_all(term_fd, b.data, b.len);
        term_drawn = 0;
        term_fd = -1;
        lines_free();
        pthread_mutex_unlock(&term_lock);
}

void term_write(FILE *f, const char *text)
{
        _cleanup_(buf_free) struct buf b = { 0 };
        size_t drawn = 0;

        pthread_mutex_lock(&term_lock);
        if (term_fd < 0 || fileno(f) != term_fd) {
                pthread_mutex_unlock(&term_lock);
                fputs(text, f);
                fflush(f);
                return;
        }
        /* What f holds still goes first (stderr holds nothing: it is unbuffered). */
        fflush(f);
        if (append_erase(&b) >= 0 && buf_append(&b, text, strlen(text)) >= 0 &&
            append_draw(&b, &drawn) >= 0) {
                write_all(term_fd, b.data, b.len);
                term_drawn = drawn;
        } else {
                /* Out of memory: the record still goes out, below the block. */
                write_all(term_fd, "\n", 1);
                write_all(term_fd, text, strlen(text));
                term_drawn = 0;
        }
        pthread_mutex_unlock(&term_lock);
}
