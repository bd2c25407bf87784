/* The terminal's one owner (term.h): on a pseudo-terminal, a record written while a status block is live
 * comes out as erase, record, block again, in one piece; status lines are cut to the width; NO_COLOR and
 * a TERM of "dumb" are honoured; a stream that is not the terminal is written as it is. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "spotdrain/core.h"
#include "spotdrain/term.h"

struct pty {
        int master, slave;
        FILE *f; /* the slave, as log.c holds stderr */
};

static void pty_open(struct pty *p, unsigned short cols)
{
        struct winsize ws = { .ws_row = 24, .ws_col = cols };
        struct termios t;
        assert_int_equal(openpty(&p->master, &p->slave, NULL, NULL, &ws), 0);
        /* Raw output: what the program writes is what the master reads (no "\n" → "\r\n"). */
        assert_int_equal(tcgetattr(p->slave, &t), 0);
        cfmakeraw(&t);
        assert_int_equal(tcsetattr(p->slave, TCSANOW, &t), 0);
        p->f = fdopen(dup(p->slave), "w");
        assert_non_null(p->f);
        setvbuf(p->f, NULL, _IONBF, 0);
}

static void pty_close(struct pty *p)
{
        fclose(p->f);
        close(p->slave);
        close(p->master);
}

/* What the master has to read now (the writes are done: they are synchronous). */
static char *pty_read(struct pty *p)
{
        struct buf b = { 0 };
        char chunk[4096];
        struct pollfd pfd = { .fd = p->master, .events = POLLIN };
        while (poll(&pfd, 1, 0) > 0) {
                ssize_t n = read(p->master, chunk, sizeof(chunk));
                if (n <= 0)
                        break;
                assert_int_equal(buf_append(&b, chunk, (size_t)n), 0);
        }
        if (!b.data)
                return strdup("");
        return b.data;
}

/* The master must have read exactly want. */
static void expect_read(struct pty *p, const char *want)
{
        _cleanup_free_ char *got = pty_read(p);
        assert_string_equal(got, want);
}

static int setup(void **state)
{
        setenv("TERM", "xterm", 1);
        unsetenv("NO_COLOR");
        return 0;
}

static void test_block_and_records(void **state)
{
        struct pty p;
        pty_open(&p, 80);
        /* The stream is the terminal's: fileno(p.f) is another descriptor of the same pty. */
        assert_true(term_status_start(fileno(p.f)));

        term_status_set((const char *const[]){ "node: 9 s", "  PDB a/b: 2 left" }, 2);
        expect_read(&p, "node: 9 s\n  PDB a/b: 2 left");

        term_write(p.f, "a record\n");
        /* Up to the block's first line, cleared to the end, the record, the block again. */
        expect_read(&p, "\r\033[1A\033[Ja record\nnode: 9 s\n  PDB a/b: 2 left");

        term_status_set((const char *const[]){ "node: 8 s" }, 1);
        expect_read(&p, "\r\033[1A\033[Jnode: 8 s");

        term_status_stop();
        expect_read(&p, "\r\033[J");

        /* Plain again: a record is written as it is. */
        term_write(p.f, "after\n");
        expect_read(&p, "after\n");
        pty_close(&p);
}

static void test_width(void **state)
{
        struct pty p;
        pty_open(&p, 12);
        assert_true(term_status_start(p.slave));
        /* Cut one column short of 12; the colour sequence takes no column and is closed. */
        term_status_set((const char *const[]){ "\033[1mabcdefghijklmnop" }, 1);
        expect_read(&p, "\033[1mabcdefghijk\033[0m");
        term_status_stop();
        expect_read(&p, "\r\033[J");
        pty_close(&p);

        assert_int_equal(term_text_columns("\033[1;31mab\033[0mc"), 3);
        assert_int_equal(term_text_columns("d\xc3\xa9j\xc3\xa0"), 4); /* "déjà" */
        /* A multi-byte character is never split. */
        assert_int_equal(term_cut("d\xc3\xa9j\xc3\xa0", 2), 3);
        assert_int_equal(term_cut("abc", 5), 3);
}

static void test_not_a_terminal(void **state)
{
        int fds[2];
        struct pty p;
        assert_int_equal(pipe(fds), 0);
        assert_false(term_status_start(fds[1]));
        assert_false(term_color(fds[1]));
        close(fds[0]);
        close(fds[1]);

        pty_open(&p, 80);
        assert_true(term_color(p.slave));
        setenv("NO_COLOR", "1", 1);
        assert_false(term_color(p.slave));
        setenv("NO_COLOR", "", 1); /* set but empty: no-color.org says colour stays */
        assert_true(term_color(p.slave));
        unsetenv("NO_COLOR");
        setenv("TERM", "dumb", 1);
        assert_false(term_status_start(p.slave));
        assert_false(term_color(p.slave));
        setenv("TERM", "xterm", 1);

        /* A live block on the terminal leaves other streams alone. */
        char *data = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&data, &len);
        assert_non_null(mem);
        assert_true(term_status_start(p.slave));
        term_status_set((const char *const[]){ "status" }, 1);
        term_write(mem, "elsewhere\n");
        fclose(mem);
        assert_string_equal(data, "elsewhere\n");
        free(data);
        term_status_stop();
        expect_read(&p, "status\r\033[J");
        pty_close(&p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_block_and_records),
                cmocka_unit_test(test_width),
                cmocka_unit_test(test_not_a_terminal),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
