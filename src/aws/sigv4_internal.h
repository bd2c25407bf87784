/* Internals of the signing of AWS Signature Version 4 (sigv4.c). Not part of the public interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "spotdrain/sigv4.h"
#include "spotdrain/util.h"

#define SIGV4_ALGORITHM "AWS4-HMAC-SHA256"

static inline void strv_freep(char ***v)
{
        sigv4_strv_free(*v);
}
#define _cleanup_strv_ _cleanup_(strv_freep)

struct url_parts {
        const char *scheme;
        size_t scheme_len;
        const char *host; /* without userinfo, with port */
        size_t host_len;
        const char *path;
        size_t path_len;
        const char *query; /* NULL when there is no '?' */
        size_t query_len;
};

/* What goes into the canonical request, beyond the request itself. */
struct canon_in {
        const struct sigv4_request *r;
        const char *const *drop;       /* lowercase header names of the request left out */
        char *const *only;             /* when set: only these lowercase names are signed (verification) */
        const char *const *add;        /* "Name: value" headers added after the request's own */
        bool add_date;                 /* x-amz-date from time_usec unless the request has one */
        const char *extra_query;       /* encoded "a=b&c=d" added to the URL's query (presigning) */
        const char *const *drop_query; /* query parameters left out (X-Amz-Signature when verifying) */
        const char *payload_hash;      /* instead of hashing the body */
};

static inline bool is_ws(char c)
{
        return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Splits an absolute URL into its pieces (pointers into url). */
int sv4_url_split(const char *url, struct url_parts *ret);
/* Percent-decodes n bytes of s ('+' stays '+'). NULL on ENOMEM. */
char *sv4_uri_decode(const char *s, size_t n);
/* name is one of the NULL-terminated list (NULL allowed). */
bool sv4_name_in(const char *name, const char *const *list);
/* The canonical request of in, and the signed header names (';'-joined). */
int sv4_canon_build(const struct canon_in *in, char **ret_creq, char **ret_signed);
