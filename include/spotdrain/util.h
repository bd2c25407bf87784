/* Small shared helpers: cleanup attributes, ownership hand-off, string and time utilities. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define _cleanup_(f)  __attribute__((cleanup(f)))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* A macro's value as a string literal (a default written once, as a number and in a settings table). */
#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)

/* Hands ownership of a pointer over: returns it and sets the variable to NULL. */
#define TAKE_PTR(p)                            \
        ({                                     \
                __typeof__(p) _take_tmp = (p); \
                (p) = NULL;                    \
                _take_tmp;                     \
        })

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
        static inline void func##p(type *p)     \
        {                                       \
                if (*p)                         \
                        func(*p);               \
        }

static inline void freep(void *p)
{
        free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline bool streq(const char *a, const char *b)
{
        return a && b && strcmp(a, b) == 0;
}

static inline bool streq_ptr(const char *a, const char *b)
{
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}

static inline bool startswith(const char *s, const char *prefix)
{
        return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

static inline bool isempty(const char *s)
{
        return !s || !*s;
}

/* Frees a NULL-terminated vector of strings and its array (NULL allowed). */
void strv_free(char **v);
/* True when the NULL-terminated v (NULL-safe) holds a string equal to s. */
bool strv_contains(char *const *v, const char *s);
static inline bool strv_isempty(char *const *v)
{
        return !v || !*v;
}

/* Frees a string holding a secret (token, key, password) after wiping it (NULL allowed). */
void free_secret(char *s);

/* Replaces *dst with a copy of src (NULL allowed). Returns 0 or -ENOMEM. */
int free_and_strdup(char **dst, const char *src);

/* printf into a new string; NULL on ENOMEM. */
char *strprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Reads a whole file (at most max bytes; -EFBIG beyond). NUL-terminated. */
int read_file_full(const char *path, size_t max, char **ret, size_t *ret_len);

/* Writes a file atomically (temp file + rename) with the given mode. */
int write_file_atomic(const char *path, const void *data, size_t len, unsigned mode);

/* Wall clock in microseconds since the epoch, and monotonic microseconds. */
uint64_t now_realtime_usec(void);
uint64_t now_monotonic_usec(void);

/* RFC 3339 UTC ("2026-11-30T06:00:00Z", fraction optional on input). */
int parse_rfc3339(const char *s, uint64_t *ret_usec);
int format_rfc3339(uint64_t usec, char *buf, size_t len);
/* With milliseconds: "2026-11-30T06:00:00.123Z". */
int format_rfc3339_msec(uint64_t usec, char *buf, size_t len);

/* Kubernetes quantities: CPU in millicores ("250m", "2", "1.5"), bytes ("64Gi", "512M", "1e3"). */
int parse_cpu_millis(const char *s, int64_t *ret);
int parse_bytes(const char *s, int64_t *ret);
/* The other way, as Kubernetes writes them: "2", "500m"; "512Mi", "1536" (binary units where exact). */
void format_cpu_millis(int64_t millis, char *buf, size_t len);
void format_bytes(int64_t bytes, char *buf, size_t len);

/* Base64 (standard alphabet, padding). Returns malloc'ed buffer. */
int base64_decode(const char *in, size_t in_len, unsigned char **ret, size_t *ret_len);
char *base64_encode(const unsigned char *in, size_t len);

/* Growable byte buffer. */
struct buf {
        char *data;
        size_t len, cap;
};
int buf_append(struct buf *b, const void *data, size_t len);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(struct buf *b);
