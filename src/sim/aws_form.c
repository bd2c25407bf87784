/* The form body of the simulator's AWS query-protocol surfaces (sim/aws_request.h): on its own, so that the
 * STS surface, which aws_request.c asks about session tokens, reads forms without calling back into it. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "sim/aws_request.h"
#include "spotdrain/util.h"

/* application/x-www-form-urlencoded: '+' is a space, %XX a byte (a stray '%' stays). */
static char *sim_aws_form_decode(const char *s, size_t n)
{
        char *d = malloc(n + 1), *o = d;

        if (!d)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '+')
                        *o++ = ' ';
                else if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
                         isxdigit((unsigned char)s[i + 2])) {
                        char hexs[3] = { s[i + 1], s[i + 2], 0 };
                        *o++ = (char)strtol(hexs, NULL, 16);
                        i += 2;
                } else
                        *o++ = s[i];
        }
        *o = '\0';
        return d;
}

int sim_aws_form_parse(const char *body, size_t len, sim_aws_form_field_fn field, void *userdata)
{
        for (size_t i = 0; i < len;) {
                size_t j = i, eq;
                while (j < len && body[j] != '&')
                        j++;
                for (eq = i; eq < j && body[eq] != '='; eq++)
                        ;
                if (j > i) {
                        _cleanup_free_ char *k = sim_aws_form_decode(body + i, eq - i);
                        _cleanup_free_ char *v =
                            sim_aws_form_decode(body + eq + (eq < j), j - eq - (eq < j));
                        int r;
                        if (!k || !v)
                                return -ENOMEM;
                        r = field(userdata, k, v);
                        if (r < 0)
                                return r;
                }
                i = j + 1;
        }
        return 0;
}
