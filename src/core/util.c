/* Small shared helpers; see include/spotdrain/util.h. */
#include "spotdrain/util.h"

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void strv_free(char **v)
{
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

bool strv_contains(char *const *v, const char *s)
{
        for (; v && *v; v++)
                if (streq(*v, s))
                        return true;
        return false;
}

void free_secret(char *s)
{
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

int free_and_strdup(char **dst, const char *src)
{
        char *c = NULL;
        if (src) {
                c = strdup(src);
                if (!c)
                        return -ENOMEM;
        }
        free(*dst);
        *dst = c;
        return 0;
}

char *strprintf(const char *fmt, ...)
{
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

int read_file_full(const char *path, size_t max, char **ret, size_t *ret_len)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct buf b = { 0 };
        char chunk[16384];
        for (;;) {
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = -errno;
                        close(fd);
                        buf_free(&b);
                        return r;
                }
                if (n == 0)
                        break;
                if (b.len + (size_t)n > max) {
                        close(fd);
                        buf_free(&b);
                        return -EFBIG;
                }
                if (buf_append(&b, chunk, (size_t)n) < 0) {
                        close(fd);
                        buf_free(&b);
                        return -ENOMEM;
                }
        }
        close(fd);
        if (buf_append(&b, "", 1) < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        if (ret_len)
                *ret_len = b.len - 1;
        *ret = b.data;
        return 0;
}

int write_file_atomic(const char *path, const void *data, size_t len, unsigned mode)
{
        _cleanup_free_ char *tmp = strprintf("%s.tmp.%ld", path, (long)getpid());
        if (!tmp)
                return -ENOMEM;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0)
                return -errno;
        const char *p = data;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = -errno;
                        close(fd);
                        unlink(tmp);
                        return r;
                }
                p += n;
                len -= (size_t)n;
        }
        if (fchmod(fd, mode) < 0 || close(fd) < 0) {
                int r = -errno;
                unlink(tmp);
                return r;
        }
        if (rename(tmp, path) < 0) {
                int r = -errno;
                unlink(tmp);
                return r;
        }
        return 0;
}

uint64_t now_realtime_usec(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

uint64_t now_monotonic_usec(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

int parse_rfc3339(const char *s, uint64_t *ret_usec)
{
        if (!s)
                return -EINVAL;
        struct tm tm = { 0 };
        const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!p)
                return -EINVAL;
        uint64_t frac = 0;
        if (*p == '.') {
                p++;
                uint64_t scale = 100000;
                if (!isdigit((unsigned char)*p))
                        return -EINVAL;
                while (isdigit((unsigned char)*p)) {
                        frac += (uint64_t)(*p - '0') * scale;
                        scale /= 10;
                        p++;
                }
        }
        long off = 0;
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                int sign = *p == '-' ? -1 : 1;
                /* Exactly "+HH:MM": check every character before reading past it. */
                if (!isdigit((unsigned char)p[1]) || !isdigit((unsigned char)p[2]) || p[3] != ':' ||
                    !isdigit((unsigned char)p[4]) || !isdigit((unsigned char)p[5]))
                        return -EINVAL;
                int hh = (p[1] - '0') * 10 + (p[2] - '0'), mm = (p[4] - '0') * 10 + (p[5] - '0');
                if (hh > 23 || mm > 59)
                        return -EINVAL;
                off = sign * (hh * 3600L + mm * 60L);
                p += 6;
        } else {
                return -EINVAL;
        }
        if (*p)
                return -EINVAL;
        time_t t = timegm(&tm);
        if (t == (time_t)-1 || t - off < 0)
                return -EINVAL;
        *ret_usec = (uint64_t)(t - off) * 1000000ULL + frac;
        return 0;
}

int format_rfc3339(uint64_t usec, char *buf, size_t len)
{
        time_t t = (time_t)(usec / 1000000ULL);
        struct tm tm;
        if (!gmtime_r(&t, &tm))
                return -EINVAL;
        if (strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                return -ENOBUFS;
        return 0;
}

/* The same with milliseconds: "2026-11-30T06:00:00.123Z". */
int format_rfc3339_msec(uint64_t usec, char *buf, size_t len)
{
        char sec[32];
        int r = format_rfc3339(usec, sec, sizeof(sec));
        if (r < 0)
                return r;
        sec[strlen(sec) - 1] = 0; /* the "Z" goes after the fraction */
        if ((size_t)snprintf(buf, len, "%s.%03uZ", sec, (unsigned)(usec % 1000000ULL / 1000ULL)) >= len)
                return -ENOBUFS;
        return 0;
}

static int parse_decimal(const char *s, double *ret, const char **end)
{
        char *e = NULL;
        errno = 0;
        double v = strtod(s, &e);
        if (e == s || errno || !isfinite(v) || v < 0)
                return -EINVAL;
        *ret = v;
        *end = e;
        return 0;
}

int parse_cpu_millis(const char *s, int64_t *ret)
{
        double v;
        const char *e;
        if (isempty(s) || parse_decimal(s, &v, &e) < 0)
                return -EINVAL;
        if (streq(e, "m"))
                *ret = (int64_t)ceil(v);
        else if (*e == 0)
                *ret = (int64_t)ceil(v * 1000.0);
        else
                return -EINVAL;
        return 0;
}

int parse_bytes(const char *s, int64_t *ret)
{
        static const struct {
                const char *suffix;
                double mult;
        } units[] = {
                { "Ki", 1024.0 },
                { "Mi", 1048576.0 },
                { "Gi", 1073741824.0 },
                { "Ti", 1099511627776.0 },
                { "Pi", 1125899906842624.0 },
                { "k", 1e3 },
                { "K", 1e3 },
                { "M", 1e6 },
                { "G", 1e9 },
                { "T", 1e12 },
                { "P", 1e15 },
                { "m", 1e-3 },
                { "", 1.0 },
        };
        double v;
        const char *e;
        if (isempty(s) || parse_decimal(s, &v, &e) < 0)
                return -EINVAL;
        for (size_t i = 0; i < ARRAY_SIZE(units); i++)
                if (streq(e, units[i].suffix)) {
                        double r = ceil(v * units[i].mult);
                        if (r > (double)INT64_MAX)
                                return -ERANGE;
                        *ret = (int64_t)r;
                        return 0;
                }
        return -EINVAL;
}

void format_cpu_millis(int64_t millis, char *buf, size_t len)
{
        if (millis % 1000 == 0)
                snprintf(buf, len, "%lld", (long long)(millis / 1000));
        else
                snprintf(buf, len, "%lldm", (long long)millis);
}

void format_bytes(int64_t bytes, char *buf, size_t len)
{
        static const char *const units[] = { "Ki", "Mi", "Gi", "Ti" };
        int u = -1;
        while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
                bytes /= 1024;
                u++;
        }
        snprintf(buf, len, "%lld%s", (long long)bytes, u >= 0 ? units[u] : "");
}

static int b64_value(int c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+' || c == '-')
                return 62;
        if (c == '/' || c == '_')
                return 63;
        return -1;
}

int base64_decode(const char *in, size_t in_len, unsigned char **ret, size_t *ret_len)
{
        unsigned char *out = malloc(in_len / 4 * 3 + 4);
        if (!out)
                return -ENOMEM;
        size_t n = 0;
        uint32_t acc = 0;
        int bits = 0;
        for (size_t i = 0; i < in_len; i++) {
                unsigned char c = (unsigned char)in[i];
                if (c == '=')
                        break;
                if (isspace(c))
                        continue;
                int v = b64_value(c);
                if (v < 0) {
                        free(out);
                        return -EINVAL;
                }
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (unsigned char)((acc >> bits) & 0xff);
                }
        }
        out[n] = 0;
        *ret = out;
        *ret_len = n;
        return 0;
}

char *base64_encode(const unsigned char *in, size_t len)
{
        static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        char *out = malloc((len + 2) / 3 * 4 + 1);
        if (!out)
                return NULL;
        size_t o = 0;
        for (size_t i = 0; i < len; i += 3) {
                uint32_t v = (uint32_t)in[i] << 16;
                if (i + 1 < len)
                        v |= (uint32_t)in[i + 1] << 8;
                if (i + 2 < len)
                        v |= in[i + 2];
                out[o++] = tbl[(v >> 18) & 63];
                out[o++] = tbl[(v >> 12) & 63];
                out[o++] = i + 1 < len ? tbl[(v >> 6) & 63] : '=';
                out[o++] = i + 2 < len ? tbl[v & 63] : '=';
        }
        out[o] = 0;
        return out;
}

int buf_append(struct buf *b, const void *data, size_t len)
{
        if (b->len + len + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 256;
                while (cap < b->len + len + 1)
                        cap *= 2;
                char *n = realloc(b->data, cap);
                if (!n)
                        return -ENOMEM;
                b->data = n;
                b->cap = cap;
        }
        if (len)
                memcpy(b->data + b->len, data, len);
        b->len += len;
        b->data[b->len] = 0;
        return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        int r = buf_append(b, s, (size_t)n);
        free(s);
        return r;
}

void buf_free(struct buf *b)
{
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}
