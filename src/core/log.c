/* Logging: text or JSON lines on stderr, or the journal with structured fields. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "spotdrain/core.h"
#include "spotdrain/term.h"

/* Chosen once at start (log_setup) before other threads exist; read-only afterwards. */
static enum log_format log_fmt = LOG_FORMAT_TEXT;
static int log_max_level = LOG_INFO;
static FILE *log_out;

static const char *const level_names[] = {
        [LOG_EMERG] = "emerg",     [LOG_ALERT] = "alert",   [LOG_CRIT] = "crit", [LOG_ERR] = "error",
        [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice", [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

/* journald connects stderr to its stream and says so in $JOURNAL_STREAM ("DEV:INODE"); when stderr was
 * redirected elsewhere the variable is inherited but no longer matches. */
static bool stderr_is_journal(void)
{
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_setup(enum log_format format, int max_level)
{
        if (format == LOG_FORMAT_AUTO)
                format = stderr_is_journal() ? LOG_FORMAT_JOURNAL : LOG_FORMAT_TEXT;
        log_fmt = format;
        log_max_level = max_level;
}

enum log_format log_get_format(void)
{
        return log_fmt;
}

void log_set_output(FILE *f)
{
        log_out = f;
}

int log_parse_level(const char *s)
{
        if (streq(s, "warn"))
                return LOG_WARNING;
        for (int i = LOG_ERR; i <= LOG_DEBUG; i++)
                if (streq(s, level_names[i]))
                        return i;
        return -EINVAL;
}

int log_parse_format(const char *s)
{
        static const char *const names[] = {
                [LOG_FORMAT_AUTO] = "auto",
                [LOG_FORMAT_TEXT] = "text",
                [LOG_FORMAT_JSON] = "json",
                [LOG_FORMAT_JOURNAL] = "journal",
        };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (streq(s, names[i]))
                        return (int)i;
        return -EINVAL;
}

/* One record to its stream, in one write; above a live status block when there is one (term.h). */
static void log_emit(const char *line)
{
        term_write(log_out ? log_out : stderr, line);
}

static const char *level_name(int level)
{
        if (level < LOG_EMERG || level > LOG_DEBUG)
                return "debug";
        return level_names[level];
}

/* Text values are quoted when they would otherwise be ambiguous to a key=value parser; control characters
 * are escaped so that each record stays on one line. */
static bool text_needs_quotes(const char *v)
{
        if (!*v)
                return true;
        for (const char *p = v; *p; p++)
                if (*p == ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p < 0x20)
                        return true;
        return false;
}

static int text_append_escaped(struct buf *b, const char *s, bool quote)
{
        int r;
        if (quote && (r = buf_append(b, "\"", 1)) < 0)
                return r;
        for (const char *p = s; *p; p++) {
                unsigned char c = (unsigned char)*p;
                if (c == '\n')
                        r = buf_append(b, "\\n", 2);
                else if (c == '\t')
                        r = buf_append(b, "\\t", 2);
                else if (c == '\r')
                        r = buf_append(b, "\\r", 2);
                else if (c < 0x20 || c == 0x7f)
                        r = buf_printf(b, "\\x%02x", c);
                else if (quote && (c == '"' || c == '\\'))
                        r = buf_printf(b, "\\%c", c);
                else
                        r = buf_append(b, p, 1);
                if (r < 0)
                        return r;
        }
        if (quote && (r = buf_append(b, "\"", 1)) < 0)
                return r;
        return 0;
}

static char *format_text(const char *ts, int level, const char *msg, const char *const *fields)
{
        struct buf b = { 0 };
        int r = buf_printf(&b, "%s %s ", ts, level_name(level));
        if (r >= 0)
                r = text_append_escaped(&b, msg, false);
        for (size_t i = 0; r >= 0 && fields && fields[i] && fields[i + 1]; i += 2) {
                r = buf_printf(&b, " %s=", fields[i]);
                if (r >= 0)
                        r = text_append_escaped(&b, fields[i + 1], text_needs_quotes(fields[i + 1]));
        }
        if (r >= 0)
                r = buf_append(&b, "\n", 1);
        if (r < 0) {
                buf_free(&b);
                return NULL;
        }
        return b.data;
}

static char *format_json(const char *ts, int level, int error, const char *msg, const char *const *fields)
{
        cJSON *o = cJSON_CreateObject();
        char *s = NULL;

        if (!o)
                return NULL;
        if (!cJSON_AddStringToObject(o, "time", ts) ||
            !cJSON_AddStringToObject(o, "level", level_name(level)) ||
            !cJSON_AddStringToObject(o, "msg", msg))
                goto out;
        if (error != 0 && !cJSON_AddNumberToObject(o, "errno", error))
                goto out;
        for (size_t i = 0; fields && fields[i] && fields[i + 1]; i += 2)
                /* Reserved keys are not overwritten by a field of the same name. */
                if (!cJSON_HasObjectItem(o, fields[i]) &&
                    !cJSON_AddStringToObject(o, fields[i], fields[i + 1]))
                        goto out;
        s = cJSON_PrintUnformatted(o);
        if (s) {
                /* One write per record: the line and its newline together. */
                char *line = strprintf("%s\n", s);
                cJSON_free(s);
                s = line;
        }
out:
        cJSON_Delete(o);
        return s;
}

/* Journal field names are upper-case letters, digits and underscores, not starting with a digit or '_'. */
static char *journal_field(const char *key, const char *value)
{
        struct buf b = { 0 };
        int r = 0;

        if (!isalpha((unsigned char)*key))
                r = buf_append(&b, "F", 1);
        for (const char *p = key; r >= 0 && *p; p++) {
                char c = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
                r = buf_append(&b, &c, 1);
        }
        if (r >= 0)
                r = buf_printf(&b, "=%s", value);
        if (r < 0) {
                buf_free(&b);
                return NULL;
        }
        return b.data;
}

static void log_to_journal(int level, int error, const char *msg, const char *const *fields)
{
        size_t n = 0;
        while (fields && fields[n] && fields[n + 1])
                n += 2;
        n /= 2;

        _cleanup_free_ char *message = strprintf("MESSAGE=%s", msg);
        _cleanup_free_ char *priority = strprintf("PRIORITY=%i", level);
        _cleanup_free_ char *errno_field = error != 0 ? strprintf("ERRNO=%i", error) : NULL;
        _cleanup_free_ struct iovec *iov = calloc(n + 3, sizeof(struct iovec));
        _cleanup_free_ char **strs = calloc(n + 1, sizeof(char *));
        size_t k = 0;

        if (!message || !priority || (error != 0 && !errno_field) || !iov || !strs)
                return;
        iov[k++] = (struct iovec){ message, strlen(message) };
        iov[k++] = (struct iovec){ priority, strlen(priority) };
        if (errno_field)
                iov[k++] = (struct iovec){ errno_field, strlen(errno_field) };
        for (size_t i = 0; i < n; i++) {
                strs[i] = journal_field(fields[2 * i], fields[2 * i + 1]);
                if (strs[i])
                        iov[k++] = (struct iovec){ strs[i], strlen(strs[i]) };
        }
        (void)sd_journal_sendv(iov, (int)k);
        for (size_t i = 0; i < n; i++)
                free(strs[i]);
}

const char *error_reason(int error, const char *reason)
{
        if (!isempty(reason))
                return reason;
        return strerror(error < 0 ? -error : error);
}

static int log_va(int level, int error, const char *reason, const char *const *fields, const char *fmt,
                  va_list ap)
{
        int saved_errno = errno;
        int err = error < 0 ? -error : error;

        if (level > log_max_level) {
                errno = saved_errno;
                return -err;
        }

        _cleanup_free_ char *text = NULL;
        if (vasprintf(&text, fmt, ap) < 0)
                text = NULL;
        if (!text) {
                errno = saved_errno;
                return -err;
        }
        /* One reason per sentence: the caller's own, else the errno's words. */
        if (err != 0 || !isempty(reason)) {
                char *with = strprintf("%s: %s", text, error_reason(err, reason));
                if (with) {
                        free(text);
                        text = with;
                }
        }

        if (log_fmt == LOG_FORMAT_JOURNAL) {
                log_to_journal(level, err, text, fields);
        } else {
                char ts[64];
                if (format_rfc3339_msec(clk_now(), ts, sizeof(ts)) < 0)
                        snprintf(ts, sizeof(ts), "-");
                _cleanup_free_ char *line = log_fmt == LOG_FORMAT_JSON
                                                ? format_json(ts, level, err, text, fields)
                                                : format_text(ts, level, text, fields);
                if (line)
                        log_emit(line);
        }

        errno = saved_errno;
        return -err;
}

int log_full(int level, int error, const char *const *fields, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = log_va(level, error, NULL, fields, fmt, ap);
        va_end(ap);
        return r;
}

int log_full_reason(int level, int error, const char *reason, const char *const *fields, const char *fmt,
                    ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = log_va(level, error, reason, fields, fmt, ap);
        va_end(ap);
        return r;
}
